#!/bin/sh
# bench/io/dcp.sh [MIB]: issue 19's figures, ratios in one run on this
# machine: tn_dcp_save/tn_dcp_load of a MIB MiB (default 1024) state dict
# sharded over 2 ranks (bench/io/bench_dcp) against PyTorch 2.x's
# dcp.save/dcp.load of the same over 2 gloo ranks (bench/io/dcp.py under
# torch.distributed.run); then `tckpt ls` of a 10,000-key DCP folder that
# PyTorch wrote (a whole process: .metadata checked and every item read),
# against PyTorch only unpickling that folder's metadata in a running
# process (FileSystemReader.read_metadata, the least any listing does).
# Both saves are durable (each file synced once: PyTorch's sync_files),
# and each starts after a sync; the loads find the files in the page
# cache, so they measure parsing and copying, not the disk.  Then the asynchronous saves (tn_dcp_save_async,
# dcp.async_save): how long the caller is held (staging into memory), and
# until the checkpoint is whole.  tckpt ls is timed on the binary itself where libtool left a
# wrapper script.  Skips what needs PyTorch 2.x.
set -eu
. "$(dirname "$0")/../quick.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
mib=${1:-1024}
[ -z "$quick" ] || mib=${1:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tn-bench-dcp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=$PWD/bench/io/bench_dcp # run from the build folder, as make bench does
[ -x "$bin" ] || bin=$top/bench/io/bench_dcp
[ -x "$bin" ] || { echo "dcp.sh: build $bin first (make bench)" >&2; exit 1; }
ours=$("$bin" "$mib" "$tmp/ours")
rm -rf "$tmp/ours"
os=$(echo "$ours" | awk '/^save_s/ {print $2}')
ol=$(echo "$ours" | awk '/^load_s/ {print $2}')
oa=$(echo "$ours" | awk '/^async_s/ {print $2}')
oat=$(echo "$ours" | awk '/^async_total_s/ {print $2}')
echo "DCP state dict of $mib MiB, 2 ranks (shared 2-core machine, under load; both saves durable)"
echo "tensorkit: save $os s, load $ol s, async save held $oa s (done after $oat s)"
quick_done dcp
if ! python3 -c 'import torch.distributed.checkpoint' 2>/dev/null; then
    echo "PyTorch 2.x is not installed: no ratio"
    exit 0
fi
theirs=$(OMP_NUM_THREADS=1 python3 -m torch.distributed.run --standalone --nproc-per-node=2 \
    "$top/bench/io/dcp.py" "$mib" "$tmp/torch" 2>/dev/null | grep '_s ')
rm -rf "$tmp/torch"
ts=$(echo "$theirs" | awk '/^save_s/ {print $2}')
tl=$(echo "$theirs" | awk '/^load_s/ {print $2}')
ta=$(echo "$theirs" | awk '/^async_s/ {print $2}')
tat=$(echo "$theirs" | awk '/^async_total_s/ {print $2}')
echo "PyTorch:   save $ts s, load $tl s, async_save held $ta s (done after $tat s)"
awk -v a="$ts" -v b="$os" -v c="$tl" -v d="$ol" -v e="$ta" -v f="$oa" -v g="$tat" -v h="$oat" \
    'BEGIN {printf "PyTorch time / tensorkit time: save %.2fx, load %.2fx, async held %.2fx, async done %.2fx\n", a / b, c / d, e / f, g / h}'
# 10,000 keys
python3 - "$tmp/many" <<'PY'
import sys, warnings, torch, torch.distributed.checkpoint as dcp
warnings.simplefilter("ignore")
dcp.save({f"layers.{i}.weight": torch.full((4,), float(i)) for i in range(10000)},
         checkpoint_id=sys.argv[1])
PY
build=${bin%/bench/io/bench_dcp}
tckpt=$build/bin/tckpt/tckpt
if [ -x "$build/bin/tckpt/.libs/tckpt" ]; then # libtool's wrapper would be timed too
    tckpt=$build/bin/tckpt/.libs/tckpt
    export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
best() { # best of 3 wall times of the command, in seconds
    b=
    for i in 1 2 3; do
        t0=$(date +%s.%N)
        "$@" >/dev/null
        t1=$(date +%s.%N)
        b=$(awk -v b="$b" -v t="$(echo "$t1 - $t0" | bc)" 'BEGIN {print (b == "" || t < b) ? t : b}')
    done
    echo "$b"
}
tl=$(best "$tckpt" ls "$tmp/many")
# PyTorch's side timed inside the process (best of 3), so its import is
# not counted against it
pm=$(python3 - "$tmp/many" <<'PY'
import sys, time
from torch.distributed.checkpoint import FileSystemReader
best = 1e30
for _ in range(3):
    t0 = time.perf_counter()
    m = FileSystemReader(sys.argv[1]).read_metadata()
    n = len(m.state_dict_metadata)
    best = min(best, time.perf_counter() - t0)
print(best)
PY
)
echo "tckpt ls of a 10,000-key DCP folder: $tl s (process wall time, every item read)"
awk -v a="$pm" -v b="$tl" \
    'BEGIN {printf "PyTorch unpickling its .metadata alone (in process): %.3f s; tckpt ls / that: %.2fx\n", a, b / a}'
