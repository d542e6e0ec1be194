#!/bin/sh
# The small conv net of issue 5 (two conv2d + ReLU + max_pool, then a linear
# layer; batch 32 of 28x28) through lib/nn against the same net in PyTorch
# 2.x and 1.13 with the same threads: training steps per second, or the
# forward alone while autograd lacks conv2d's derivative (bench_convnet says
# which, and PyTorch is timed the same way).  Each side runs BENCH_ROUNDS
# times (3), in turn, and its best round counts: the most steps per second
# and, separately, the least process CPU time per step (all threads; the
# steadier figure on a machine others load).  Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
b=bench/nn/bench_convnet
[ -x "$b" ] || make -s "$b" >/dev/null
threads=${TN_NUM_THREADS:-$(nproc)}
rounds=${BENCH_ROUNDS:-3}
steps=30
if [ -n "$quick" ]; then rounds=1 steps=2; fi
export TN_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/net_torch.py" <<'PY'
import sys, time, torch
mode, threads = sys.argv[1], int(sys.argv[2])
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
t, c = time.perf_counter(), time.process_time()
for _ in range(30):
    step()
print(mode, 30 / (time.perf_counter() - t), (time.process_time() - c) * 1e3 / 30)
PY
pys=
[ -n "$quick" ] || for py in "$(command -v python3)" /usr/bin/python3; do
    [ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null && pys="$pys $py"
done
# best FILE: the most steps/s and the least CPU ms of FILE's lines
best() { awk 'NR == 1 || $2 > s { s = $2 } NR == 1 || $3 < c { c = $3 } END { print s, c }' "$1"; }
i=0
while [ $i -lt "$rounds" ]; do
    "$b" "$steps" >> "$tmp/ours"
    mode=$(awk '{ print $1; exit }' "$tmp/ours")
    n=0
    for py in $pys; do
        n=$((n + 1))
        "$py" "$tmp/net_torch.py" "$mode" "$threads" >> "$tmp/py$n"
    done
    i=$((i + 1))
done
set -- $(best "$tmp/ours")
ours=$1 ourcpu=$2
echo "conv net, batch 32, 28x28, $mode, $threads threads, best of $rounds rounds:" \
    "tensorkit $ours steps/s, $ourcpu CPU-ms/step"
n=0
for py in $pys; do
    n=$((n + 1))
    v=$("$py" -c 'import torch; print(torch.__version__)')
    best "$tmp/py$n" | awk -v v="$v" -v s="$ours" -v c="$ourcpu" '{
        printf "  PyTorch %s: %.2f steps/s, %.3f CPU-ms/step; tensorkit %.2fx the steps/s, %.2fx the CPU time\n",
               v, $1, $2, s / $1, c / $2 }'
done
