#!/bin/sh
# bench/ops/conv.sh: issue 27's convolution figures, run from the build
# folder: conv2d (float32, padding K/2, with bias) at shapes of
# resnet18 (3x3 and 1x1 downsampling), mobilenet_v3_small and
# efficientnet_b0 (depthwise 3x3 and 5x5, 1x1 expansions and projections),
# densenet121 (a 256-channel 1x1, the small-k GEMM's longest) and a
# grouped 3x3, ours (bench_ops --conv) against PyTorch (python3, 2.x when
# it has it) in the same run at TN_NUM_THREADS threads (default 1),
# best of 20 each, at each batch of TN_BENCH_BATCHES (default 1 and 8). Prints ms for both and PyTorch's time / ours (above 1:
# ours is faster). `make bench-conv` runs it alone. TN_BENCH_CLOCK=thread
# times both sides by the thread's CPU time (1 thread on a loaded machine).
set -e
. "$(dirname "$0")/../quick.sh"
cores=$(nproc)
th=${TN_NUM_THREADS:-1}
export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
# name C H O K S G
shapes='resnet18.conv3x3_64 64 56 64 3 1 1
resnet18.conv3x3_128 128 28 128 3 1 1
resnet18.conv3x3_256 256 14 256 3 1 1
resnet18.conv3x3_512 512 7 512 3 1 1
resnet18.down1x1_128 64 56 128 1 2 1
mbv3s.dw3x3_16 16 56 16 3 2 16
mbv3s.pw1x1_72 16 28 72 1 1 1
mbv3s.dw5x5_96 96 14 96 5 2 96
effb0.dw3x3_96 96 112 96 3 2 96
effb0.pw1x1_96_24 96 56 24 1 1 1
effb0.dw5x5_240 240 28 240 5 1 240
effb0.dw5x5_672 672 14 672 5 2 672
densenet.pw1x1_256_128 256 56 128 1 1 1
grouped3x3_g8 128 28 128 3 1 8'
batches=${TN_BENCH_BATCHES:-1 8}
[ -z "$quick" ] || shapes='mbv3s.dw3x3_16 16 8 16 3 2 16' batches=1
echo "conv2d float32, $th thread(s), ${TN_BENCH_CLOCK:-wall} clock, load $(cut -d' ' -f1 /proc/loadavg) on $cores cores"
printf '%-22s %2s %10s %10s %8s\n' shape n ours_ms torch_ms torch/ours
for n in $batches; do
echo "$shapes" | while read -r name c h o k s g; do
    ours=$(bench/ops/bench_ops --conv "$c" "$h" "$o" "$k" "$s" "$g" "$n")
    if [ -n "$quick" ]; then
        echo "$name: ours $ours s (quick mode: PyTorch baseline not run)"
        continue
    fi
    theirs=$("$py" - "$c" "$h" "$o" "$k" "$s" "$g" "$th" "$n" <<'PY'
import os, sys, time, torch
now = time.thread_time if os.environ.get("TN_BENCH_CLOCK") == "thread" else time.perf_counter
c, h, o, k, s, g, th, n = map(int, sys.argv[1:])
torch.set_num_threads(th)
x, w, b = torch.randn(n, c, h, h), torch.randn(o, c // g, k, k), torch.randn(o)
best = 1e9
for _ in range(20):
    t = now(); torch.conv2d(x, w, b, s, k // 2, 1, g); best = min(best, now() - t)
print("%.9f" % best)
PY
)
    awk -v nm="$name" -v n="$n" -v o="$ours" -v t="$theirs" 'BEGIN {
        printf "%-22s %2d %10.3f %10.3f %8.2f\n", nm, n, o * 1e3, t * 1e3, t / o }'
done
done
