#!/bin/sh
# Autograd overhead on small tensors: a chain of eight elementwise ops on a
# 4-element tensor and its backward (bench_autograd --small), where the
# Autograd kernels, nodes and apply functions are the cost, against the
# same loop in PyTorch eager (2.x when `python3` has it, else Debian's
# 1.13), one thread each. Prints microseconds per step, wall and CPU time,
# and the ratios. With TN_BENCH_BASELINE set to another build folder (an
# older tensorkit), its bench_autograd --small runs too, alternating with
# ours three times, and the ratio of the best CPU times is printed.
# Run from the build folder (make bench does).
set -e
. "$(dirname "$0")/../quick.sh"
export TN_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
ours=$(bench/autograd/bench_autograd --small)
quick_done "small autograd step, ours $ours us"
if [ -n "${TN_BENCH_BASELINE:-}" ]; then
    bo=$(echo "$ours" | cut -d' ' -f2) bb=
    for i in 1 2 3; do
        bb="$bb $("$TN_BENCH_BASELINE"/bench/autograd/bench_autograd --small | cut -d' ' -f2)"
        bo="$bo $(bench/autograd/bench_autograd --small | cut -d' ' -f2)"
    done
    echo "$bo|$bb" | awk -F'|' '{ n = split($1, o, " "); m = split($2, b, " ")
        bo = 1e30; for (i = 1; i <= n; i++) if (o[i] < bo) bo = o[i]
        bb = 1e30; for (i = 1; i <= m; i++) if (b[i] < bb) bb = b[i]
        printf "small autograd step (CPU time): ours %.3f us, baseline build %.3f us; %.3fx\n", bo, bb, bb / bo }'
fi
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
theirs=$("$py" - <<'PY'
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(4).requires_grad_()
def step():
    a = torch.exp(x)
    y = (-torch.sin(a * x / (a + 1)) * 3).sum()
    y.backward()
    x.grad = None
best = cpu = 1e9
for _ in range(20):
    t, c = time.perf_counter(), time.process_time()
    for _ in range(200):
        step()
    best = min(best, time.perf_counter() - t)
    cpu = min(cpu, time.process_time() - c)
print("%.3f %.3f %s" % (best / 200 * 1e6, cpu / 200 * 1e6, torch.__version__))
PY
)
set -- $ours $theirs
awk -v o="$1" -v oc="$2" -v t="$3" -v tc="$4" -v v="$5" 'BEGIN {
    printf "small autograd step: ours %.3f us; PyTorch %s eager %.3f us; %.2fx\n", o, v, t, t / o
    printf "small autograd step (CPU time): ours %.3f us; PyTorch %.3f us; %.2fx\n", oc, tc, tc / oc }'
