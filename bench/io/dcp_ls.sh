#!/bin/sh
# bench/io/dcp_ls.sh [KEYS]: issue 19's listing figure, `tckpt ls` of a DCP
# folder of KEYS (default 10,000) small tensors, aim under 0.1 s; against
# PyTorch 2.x unpickling the same folder's .metadata in a running process
# (FileSystemReader.read_metadata: the least any listing does; its import
# is not counted).  The folder is PyTorch's dcp.save of the keys where
# PyTorch 2.x is installed, else `tckpt convert --to dcp` of a safetensors
# file of the keys (no ratio then).  tckpt ls is a whole process (the
# binary itself, not libtool's wrapper): .metadata checked, every key
# listed.  Best of 5 wall times, with the CPU time (user + system) of that
# run, since the machine is shared: the load average is printed.
set -eu
. "$(dirname "$0")/../quick.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
keys=${1:-10000}
build=$PWD # run from the build folder, as make bench does
tckpt=$build/bin/tckpt/tckpt
[ -x "$tckpt" ] || { echo "dcp_ls.sh: build $tckpt first" >&2; exit 1; }
if [ -x "$build/bin/tckpt/.libs/tckpt" ]; then # libtool's wrapper would be timed too
    tckpt=$build/bin/tckpt/.libs/tckpt
    export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tn-bench-dcp-ls.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# best RUNS CMD...: "WALL CPU" of the fastest of RUNS runs, in seconds
best() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
best = None
for _ in range(runs):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    if best is None or wall < best[0]:
        best = (wall, cpu)
print("%.4f %.4f" % best)
PY
}

if [ -n "$quick" ]; then
    set -- $(best 1 "$tckpt" ls "$top/tests/fixtures/dcp/two")
    echo "tckpt ls of tests/fixtures/dcp/two: $1 s"
    quick_done dcp_ls
fi

torch=
python3 -c 'import torch.distributed.checkpoint' 2>/dev/null && torch=1
if [ -n "$torch" ]; then
    python3 - "$tmp/many" "$keys" <<'PY'
import sys, warnings, torch, torch.distributed.checkpoint as dcp
warnings.simplefilter("ignore")
dcp.save({f"layers.{i}.weight": torch.full((4,), float(i)) for i in range(int(sys.argv[2]))},
         checkpoint_id=sys.argv[1])
PY
    who="written by PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
else
    # the same keys as a safetensors file (its format is plain enough for
    # the standard library), converted by tckpt
    python3 - "$tmp/many.safetensors" "$keys" <<'PY'
import json, struct, sys
n = int(sys.argv[2])
head = {f"layers.{i}.weight": {"dtype": "F32", "shape": [4], "data_offsets": [16 * i, 16 * i + 16]}
        for i in range(n)}
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(n):
        f.write(struct.pack("<4f", *([float(i)] * 4)))
PY
    "$tckpt" convert "$tmp/many.safetensors" "$tmp/many" --to dcp
    who="written by tckpt convert; PyTorch 2.x is not installed: no ratio"
fi
"$tckpt" ls "$tmp/many" | tail -1 | grep -q "^$keys tensors" ||
    { echo "dcp_ls.sh: tckpt ls did not list $keys tensors" >&2; exit 1; }
set -- $(best 5 "$tckpt" ls "$tmp/many")
ours_wall=$1 ours_cpu=$2
echo "tckpt ls of a $keys-key DCP folder ($who): $ours_wall s wall, $ours_cpu s CPU" \
    "(best of 5; load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores; aim: under 0.1 s)"
[ -n "$torch" ] || exit 0
set -- $(python3 - "$tmp/many" <<'PY'
import sys, time
from torch.distributed.checkpoint import FileSystemReader
best = None
for _ in range(3):
    t0, c0 = time.perf_counter(), time.process_time()
    m = FileSystemReader(sys.argv[1]).read_metadata()
    n = len(m.state_dict_metadata)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if best is None or wall < best[0]:
        best = (wall, cpu)
print("%.4f %.4f" % best)
PY
)
echo "PyTorch unpickling that .metadata alone (in process, best of 3): $1 s wall, $2 s CPU"
awk -v a="$1" -v b="$ours_wall" -v c="$2" -v d="$ours_cpu" 'BEGIN {
    printf "PyTorch unpickle time / whole tckpt ls time: %.2fx (wall), %.2fx (CPU)\n", a / b, c / d }'
