#!/bin/sh
# bench/io/dcp.sh [MIB]: issue 19's figures, ratios in one run on this
# machine: tn_dcp_save/tn_dcp_load of a MIB MiB (default 1024) state dict
# sharded over 2 ranks (bench/io/bench_dcp) against PyTorch 2.x's
# dcp.save/dcp.load of the same over 2 gloo ranks (bench/io/dcp.py under
# torch.distributed.run).  (`tckpt ls` of a 10,000-key folder: dcp_ls.sh.)
# Both saves are durable (each file synced once: PyTorch's sync_files,
# on by default, fsyncs each rank's file and .metadata; it writes with one
# thread per rank, thread_count=1, torch.save per item, CRC-32 included),
# and each starts after a sync; the disk's floor (the same bytes written
# raw and synced, no format) bounds what any durable save can reach, and
# so the ratio against PyTorch's save; the loads find the files in the page
# cache, so they measure parsing and copying, not the disk.  Then the asynchronous saves (tn_dcp_save_async,
# dcp.async_save): how long the caller is held (staging into memory), and
# until the checkpoint is whole.  Skips what needs PyTorch 2.x.
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
of=$(echo "$ours" | awk '/^floor_s/ {print $2}')
orp=$(echo "$ours" | awk '/^save_replace_s/ {print $2}')
echo "DCP state dict of $mib MiB, 2 ranks (shared 2-core machine, under load; both saves durable)"
echo "tensorkit: save $os s, load $ol s, async save held $oa s (done after $oat s)"
echo "tensorkit: a save over an existing folder (the old one removed in the background): $orp s"
echo "disk floor: the same bytes raw, pwrite and fdatasync by 2 writers at once: $of s"
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
awk -v a="$ts" -v b="$os" -v f="$of" 'BEGIN {if (f > 0) printf "save over the disk floor: tensorkit %.2fx, PyTorch %.2fx (no durable save beats PyTorch by more than %.2fx here)\n", b / f, a / f, a / f}'
