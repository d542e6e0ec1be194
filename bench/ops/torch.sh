#!/bin/sh
# softmax over the last dim of 256x4096 float32 and a sum over the last dim
# of 4096x4096 float32, ours against PyTorch (2.x when `python3` has it,
# else Debian's 1.13) with the same thread count (the machine's cores).
# Prints milliseconds and the ratio. Run from the build folder.
set -e
n=$(nproc)
export TN_NUM_THREADS=$n
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
for w in softmax sum; do
    ours=$(bench/ops/bench_ops --ms $w)
    theirs=$("$py" - "$w" "$n" <<'PY'
import sys, time, torch
w, n = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(n)
if w == "softmax":
    x = torch.randn(256, 4096)
    f = lambda: torch.softmax(x, -1)
else:
    x = torch.randn(4096, 4096)
    f = lambda: torch.sum(x, -1)
best = 1e9
for _ in range(5):
    t = time.perf_counter(); f(); best = min(best, time.perf_counter() - t)
print("%.4f %s" % (best * 1e3, torch.__version__))
PY
)
    set -- $theirs
    awk -v w="$w" -v o="$ours" -v t="$1" -v v="$2" -v n="$n" 'BEGIN {
        printf "%s (%d threads): ours %.3f ms, PyTorch %s %.3f ms: %.2fx PyTorch'"'"'s speed\n", w, n, o, v, t, t / o }'
done
