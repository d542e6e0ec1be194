#!/bin/sh
# TCPStore operations per second (set, get, add; one client, sequential):
# ours (C client, C server; on one host the client moves to the server's unix
# socket) against PyTorch's TCPStore (python3 when it has torch, else
# Debian's 1.13; its Python client and C++ server), with the ratios, and ours
# kept on loopback TCP (TN_STORE_NO_UNIX=1) for reference. On a shared
# machine the load swings between runs: each side runs $RUNS times (3), in
# turn, and the best rate of each operation counts; the medians of the
# single runs follow. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
src=$(dirname "$0")
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
ops=20000
if [ -n "$quick" ]; then
    quick_done "store, ours $(timeout 60 bench/dist/bench_dist store 100) ops/s (set get add)"
fi
best() { # the best of "set get add [version]" lines, field by field
    awk '{ for (i = 1; i <= 3; i++) if ($i > b[i]) b[i] = $i; v = $4 }
         END { printf "%.0f %.0f %.0f %s\n", b[1], b[2], b[3], v }'
}
median() { # the median of "set get add ..." lines (stdin), field by field
    lines=$(cat)
    for i in 1 2 3; do
        echo "$lines" | awk -v i=$i '{ print $i }' | sort -n |
            awk '{ v[NR] = $1 } END { printf "%.0f ", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
    done
    echo
}
runs=$(for i in $(seq "${RUNS:-3}"); do
    echo "o $(timeout 60 bench/dist/bench_dist store $ops)"
    echo "c $(TN_STORE_NO_UNIX=1 timeout 60 bench/dist/bench_dist store $ops)"
    echo "t $(timeout 60 "$py" "$src/store.py" $ops)"
done)
ours=$(echo "$runs" | sed -n 's/^o //p' | best)
tcp=$(echo "$runs" | sed -n 's/^c //p' | best)
theirs=$(echo "$runs" | sed -n 's/^t //p' | best)
set -- $ours $theirs $tcp
awk -v os="$1" -v og="$2" -v oa="$3" -v ts="$4" -v tg="$5" -v ta="$6" -v v="$7" \
    -v cs="$8" -v cg="$9" -v ca="${10}" 'BEGIN {
    printf "store ops/s: set ours %.0f, PyTorch %s %.0f: %.1fx\n", os, v, ts, os / ts
    printf "store ops/s: get ours %.0f, PyTorch %s %.0f: %.1fx\n", og, v, tg, og / tg
    printf "store ops/s: add ours %.0f, PyTorch %s %.0f: %.1fx\n", oa, v, ta, oa / ta
    printf "store ops/s over loopback TCP (TN_STORE_NO_UNIX=1): set %.0f (%.1fx), get %.0f (%.1fx), add %.0f (%.1fx)\n",
        cs, cs / ts, cg, cg / tg, ca, ca / ta }'
set -- $(echo "$runs" | sed -n 's/^o //p' | median) $(echo "$runs" | sed -n 's/^t //p' | median)
awk -v os="$1" -v og="$2" -v oa="$3" -v ts="$4" -v tg="$5" -v ta="$6" 'BEGIN {
    printf "store ops/s, medians of the single runs: set %.0f vs %.0f: %.1fx, get %.0f vs %.0f: %.1fx, add %.0f vs %.0f: %.1fx\n",
        os, ts, os / ts, og, tg, og / tg, oa, ta, oa / ta }'
