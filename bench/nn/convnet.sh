#!/bin/sh
# The small conv net of issue 5 (two conv2d + ReLU + max_pool, then a linear
# layer; batch 32 of 28x28) through lib/nn against the same net in PyTorch
# 2.x and 1.13 with the same threads: training steps per second, or the
# forward alone while autograd lacks conv2d's derivative (bench_convnet says
# which, and PyTorch is timed the same way).  Run from the build folder.
set -e
b=bench/nn/bench_convnet
[ -x "$b" ] || make -s "$b" >/dev/null
threads=${TN_NUM_THREADS:-$(nproc)}
export TN_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
set -- $("$b" 30)
mode=$1 ours=$2
echo "conv net, batch 32, 28x28, $mode, $threads threads: tensorkit $ours steps/s"
for py in "$(command -v python3)" /usr/bin/python3; do
    [ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null || continue
    "$py" - "$mode" "$threads" "$ours" <<'PY'
import sys, time, torch
mode, threads, ours = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(threads)
nn = torch.nn
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                  nn.Linear(32 * 7 * 7, 10))
x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, foreach=False)
def step():
    opt.zero_grad()
    if mode == "train":
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    else:
        with torch.no_grad():
            m(x)
step()
t = time.perf_counter()
for _ in range(30):
    step()
sps = 30 / (time.perf_counter() - t)
print(f"  PyTorch {torch.__version__}: {sps:.2f} steps/s; tensorkit {ours / sps:.2f}x")
PY
done
