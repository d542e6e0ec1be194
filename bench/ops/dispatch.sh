#!/bin/sh
# Dispatch overhead: 1,000,000 add calls on 1-element tensors through the C
# API against the same loop in PyTorch eager (2.x when `python3` has it,
# else Debian's 1.13), one thread each, best of 3 loops each. Prints both
# and the ratio, by wall time and by process CPU time (which the other
# programs on a shared machine do not inflate).
# Run from the build folder (make bench does).
set -e
. "$(dirname "$0")/../quick.sh"
export TN_NUM_THREADS=1 OMP_NUM_THREADS=1
ours=$(bench/ops/bench_ops --dispatch-us)
quick_done "dispatch, ours $ours us"
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
theirs=$("$py" - <<'PY'
import time, torch
torch.set_num_threads(1)
a, b = torch.ones(1), torch.ones(1)
best = cpu = 1e9
for _ in range(3):
    t, c = time.perf_counter(), time.process_time()
    for _ in range(1000000):
        torch.add(a, b)
    best = min(best, time.perf_counter() - t)
    cpu = min(cpu, time.process_time() - c)
print("%.4f %.4f %s" % (best, cpu, torch.__version__))
PY
)
set -- $ours $theirs
awk -v o="$1" -v oc="$2" -v t="$3" -v tc="$4" -v v="$5" 'BEGIN {
    printf "dispatch: tn_add %.3f us/call; PyTorch %s eager torch.add %.3f us/call; %.1fx fewer microseconds\n", o, v, t, t / o
    printf "dispatch (CPU time): tn_add %.3f us/call; PyTorch %.3f us/call; %.1fx\n", oc, tc, tc / oc }'
