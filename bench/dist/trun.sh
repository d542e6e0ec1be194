#!/bin/sh
# Launch overhead: `trun --nproc-per-node 2 --no-python true` against torchrun doing the
# same (`torchrun --no-python true`, python3's PyTorch when it has torch, else
# python3 -m torch.distributed.run from Debian's 1.13). Best of 3 each (torchrun takes seconds), with
# the ratio. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
best() {
    "$py" - "$@" <<'PY'
import subprocess, sys, time
best = 1e9
for _ in range(3):
    t = time.perf_counter()
    subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    best = min(best, time.perf_counter() - t)
print("%.4f" % best)
PY
}
[ -n "$quick" ] && quick_done "launch 2 ranks of true: trun $(bin/trun/trun --nproc-per-node 2 --master-port 0 --no-python true && echo ok)"
ours=$(best bin/trun/trun --nproc-per-node 2 --master-port 0 --no-python true)
theirs=$(best "$py" -m torch.distributed.run --nproc-per-node 2 --master-port 0 --no-python true)
v=$("$py" -c 'import torch; print(torch.__version__)')
awk -v o="$ours" -v t="$theirs" -v v="$v" 'BEGIN {
    printf "launch 2 ranks of true: trun %.1f ms, torchrun (PyTorch %s) %.1f ms: %.1fx faster\n", o * 1e3, v, t * 1e3, t / o }'
