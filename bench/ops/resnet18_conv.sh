#!/bin/sh
# bench/ops/resnet18_conv.sh (make bench-resnet18-conv): issue 27's
# resnet18 convolutions, run from the build folder. Every conv2d shape of
# torchvision's resnet18 at 224 x 224 input (the 7x7 stride-2 stem, the
# 3x3 stride-1 and stride-2 layers at 64/128/256/512 channels, the 1x1
# stride-2 downsamples), float32 with a bias, at batch 1 and 8: ours
# (bench_ops --conv, best of 20) against PyTorch's
# torch.nn.functional.conv2d (python3, 2.x when it has it; best of 20) in
# the same run at TN_NUM_THREADS threads (default 1). Prints GFLOP/s for
# both (2 flops a multiply-add) and ours / theirs in
# time (below 1: ours is faster), then each batch's total over the
# network's 20 convolutions (a shape weighted by how often resnet18 runs
# it). BASE_LIB=dir runs a second libtensor (e.g. a copy of main's
# .libs and bench/ops/.libs/bench_ops) beside ours for a before/after
# ratio in the same run. TN_BENCH_CLOCK=thread times both sides by the
# thread's CPU time instead of the wall clock (1 thread on a machine
# loaded by others: a batch-8 run of 10-40 ms is preempted on every try).
set -e
. "$(dirname "$0")/../quick.sh"
th=${TN_NUM_THREADS:-1}
export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
# name C H O K S count (in resnet18)
shapes='stem7x7_s2 3 224 64 7 2 1
c3_64_s1 64 56 64 3 1 4
c3_64_128_s2 64 56 128 3 2 1
c3_128_s1 128 28 128 3 1 3
d1_64_128_s2 64 56 128 1 2 1
c3_128_256_s2 128 28 256 3 2 1
c3_256_s1 256 14 256 3 1 3
d1_128_256_s2 128 28 256 1 2 1
c3_256_512_s2 256 14 512 3 2 1
c3_512_s1 512 7 512 3 1 3
d1_256_512_s2 256 14 512 1 2 1'
batches=${TN_BENCH_BATCHES:-1 8}
if [ -n "$quick" ]; then
    shapes='c3_64_s1 64 8 64 3 1 1'
    batches=1
fi
echo "conv2d float32, $th thread(s), ${TN_BENCH_CLOCK:-wall} clock, load $(cut -d' ' -f1 /proc/loadavg) on $(nproc --all) cores"
for n in $batches; do
    printf '%-16s %2s %9s %9s %9s %9s %8s' shape n ours_ms torch_ms ours_GF torch_GF ours/t
    [ -z "$BASE_LIB" ] || printf ' %9s %8s' base_ms ours/base
    echo
    tot_o=0 tot_t=0 tot_b=0
    echo "$shapes" | {
        while read -r name c h o k s cnt; do
            ours=$(bench/ops/bench_ops --conv "$c" "$h" "$o" "$k" "$s" 1 "$n")
            oh=$(( (h + 2 * (k / 2) - k) / s + 1 ))
            flop=$(( 2 * n * o * oh * oh * c * k * k ))
            if [ -n "$quick" ]; then
                echo "$name: ours $ours s (quick mode: PyTorch baseline not run)"
                continue
            fi
            theirs=$("$py" - "$c" "$h" "$o" "$k" "$s" "$n" "$th" <<'PY'
import os, sys, time, torch
import torch.nn.functional as F
now = time.thread_time if os.environ.get("TN_BENCH_CLOCK") == "thread" else time.perf_counter
c, h, o, k, s, n, th = map(int, sys.argv[1:])
torch.set_num_threads(th)
x, w, b = torch.randn(n, c, h, h), torch.randn(o, c, k, k), torch.randn(o)
best = 1e9
for _ in range(20):
    t = now(); F.conv2d(x, w, b, s, k // 2); best = min(best, now() - t)
print("%.9f" % best)
PY
)
            base=
            [ -z "$BASE_LIB" ] ||
                base=$(LD_LIBRARY_PATH="$BASE_LIB" "$BASE_LIB/bench_ops" --conv "$c" "$h" "$o" "$k" "$s" 1 "$n")
            awk -v nm="$name" -v n="$n" -v o="$ours" -v t="$theirs" -v b="$base" -v f="$flop" 'BEGIN {
                printf "%-16s %2d %9.3f %9.3f %9.1f %9.1f %8.2f", nm, n, o * 1e3, t * 1e3,
                    f / o / 1e9, f / t / 1e9, o / t
                if (b != "") printf " %9.3f %8.2f", b * 1e3, o / b
                printf "\n" }'
            tot_o=$(awk -v a="$tot_o" -v o="$ours" -v c="$cnt" 'BEGIN { print a + o * c }')
            tot_t=$(awk -v a="$tot_t" -v o="$theirs" -v c="$cnt" 'BEGIN { print a + o * c }')
            [ -z "$base" ] || tot_b=$(awk -v a="$tot_b" -v o="$base" -v c="$cnt" 'BEGIN { print a + o * c }')
        done
        [ -n "$quick" ] || awk -v n="$n" -v o="$tot_o" -v t="$tot_t" -v b="$tot_b" 'BEGIN {
            printf "%-16s %2d %9.3f %9.3f %9s %9s %8.2f", "resnet18_total", n, o * 1e3, t * 1e3, "", "", o / t
            if (b > 0) printf " %9.3f %8.2f", b * 1e3, o / b
            printf "\n" }'
    }
done
