#!/bin/sh
# TCPStore operations per second (set, get, add; one client, sequential):
# ours (C client, C server) against PyTorch's TCPStore (python3 when it has
# torch, else Debian's 1.13; its Python client and C++ server), with the
# ratios. Run from the build folder.
set -e
src=$(dirname "$0")
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
ops=20000
ours=$(timeout 60 bench/dist/bench_dist store $ops)
theirs=$(timeout 60 "$py" "$src/store.py" $ops)
set -- $ours $theirs
awk -v os="$1" -v og="$2" -v oa="$3" -v ts="$4" -v tg="$5" -v ta="$6" -v v="$7" 'BEGIN {
    printf "store ops/s: set ours %.0f, PyTorch %s %.0f: %.1fx\n", os, v, ts, os / ts
    printf "store ops/s: get ours %.0f, PyTorch %s %.0f: %.1fx\n", og, v, tg, og / tg
    printf "store ops/s: add ours %.0f, PyTorch %s %.0f: %.1fx\n", oa, v, ta, oa / ta }'
