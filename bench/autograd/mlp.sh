#!/bin/sh
# Forward + backward of the demo's MLP (batch 64, 64-128-128-10) per step:
# ours (bench/autograd/bench_autograd) against PyTorch eager (2.x when
# `python3` has it, else Debian's 1.13) with the same thread count. Prints
# milliseconds per step and the ratio. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
n=${TN_NUM_THREADS:-$(nproc)}
export TN_NUM_THREADS=$n OPENBLAS_NUM_THREADS=$n
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
ours=$(bench/autograd/bench_autograd)
quick_done "MLP step, ours $ours ms"
theirs=$("$py" - "$n" <<'PY'
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
ws = [(torch.randn(o, i) * 0.1).requires_grad_() for o, i in ((128, 64), (128, 128), (10, 128))]
bs = [(torch.randn(o) * 0.1).requires_grad_() for o in (128, 128, 10)]
x = torch.randn(64, 64)
oh = torch.nn.functional.one_hot(torch.arange(64) % 10, 10).float()
def step():
    h = x
    for l in range(3):
        h = torch.addmm(bs[l], h, ws[l].t())
        if l < 2:
            h = torch.relu(h)
    loss = (torch.log_softmax(h, 1) * oh).sum() * (-1.0 / 64)
    loss.backward()
    for p in ws + bs:
        p.grad = None
best = 1e9
for _ in range(20):
    t = time.perf_counter()
    for _ in range(50):
        step()
    best = min(best, (time.perf_counter() - t) / 50)
print("%.4f %s" % (best * 1e3, torch.__version__))
PY
)
set -- $theirs
awk -v o="$ours" -v t="$1" -v v="$2" -v n="$n" 'BEGIN {
    printf "MLP step, forward+backward, batch 64 (%d threads): ours %.3f ms, PyTorch %s %.3f ms: %.2fx PyTorch'"'"'s speed\n", n, o, v, t, t / o }'
