#!/bin/sh
# softmax over the last dim of 256x4096 float32, a sum over the last dim of
# 4096x4096 float32, layer_norm of 8192x1024 float32, conv2d of 32 28x28
# images through 1->16->32 channels 3x3 (forward, and forward plus
# convolution_backward: conv2d_train) and of 32x64x56x56 to 64 channels,
# x[idx] and an accumulating index_put_ of 10000 rows of 1000x1000 float32,
# F.interpolate(scale_factor=2, bilinear) of 8x16x64x64 float32,
# ours against PyTorch (2.x when `python3` has it,
# else Debian's 1.13) with the same thread count (the machine's cores).
# Prints milliseconds and the ratio. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
n=$(nproc)
export TN_NUM_THREADS=$n
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
for w in softmax sum layer_norm conv2d conv2d_train conv64 index index_put interpolate; do
    ours=$(bench/ops/bench_ops --ms $w)
    quick_done "$w, ours $ours ms"
    theirs=$("$py" - "$w" "$n" <<'PY'
import sys, time, torch
w, n = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(n)
if w == "softmax":
    x = torch.randn(256, 4096)
    f = lambda: torch.softmax(x, -1)
elif w == "sum":
    x = torch.randn(4096, 4096)
    f = lambda: torch.sum(x, -1)
elif w == "layer_norm":
    x, wt, b = torch.randn(8192, 1024), torch.randn(1024), torch.randn(1024)
    f = lambda: torch.nn.functional.layer_norm(x, [1024], wt, b)
elif w in ("index", "index_put"):
    x, i, v = torch.randn(1000, 1000), torch.randint(0, 1000, (10000,)), torch.randn(10000, 1000)
    f = (lambda: x[i]) if w == "index" else (lambda: x.index_put_((i,), v, accumulate=True))
elif w == "interpolate":
    x = torch.randn(8, 16, 64, 64)
    f = lambda: torch.nn.functional.interpolate(x, scale_factor=2.0, mode="bilinear")
elif w == "conv64":
    x, w1, b1 = torch.randn(32, 64, 56, 56), torch.randn(64, 64, 3, 3), torch.randn(64)
    f = lambda: torch.conv2d(x, w1, b1, 1, 1)
else:
    A = torch.ops.aten
    x, w1, b1 = torch.randn(32, 1, 28, 28), torch.randn(16, 1, 3, 3), torch.randn(16)
    w2, b2 = torch.randn(32, 16, 3, 3), torch.randn(32)
    def f():
        h = torch.conv2d(x, w1, b1, 1, 1)
        y = torch.conv2d(h, w2, b2, 1, 1)
        if w == "conv2d_train":
            g = A.convolution_backward(y, h, w2, [32], [1], [1], [1], False, [0, 0], 1, [True] * 3)
            A.convolution_backward(g[0], x, w1, [16], [1], [1], [1], False, [0, 0], 1,
                                   [False, True, True])
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
