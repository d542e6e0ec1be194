#!/bin/sh
# bench/ops/mm.sh: issue 27's matrix-product figures, run from the build
# folder: tn_mm_out of float32 (M x K) @ (K x N) at 1 and 2 threads, against
# cblas_sgemm called directly (OpenBLAS at the same thread count) and
# torch.mm(out=) in the same run, best of 200 calls each. Shapes: the square
# 128 and 256 (where one product splits over the pool, or not) and the one
# row linears of a classifier head (1 x 1024 @ (1000 x 1024)^T, the
# weight transposed as linear passes it: shapes marked t). Prints
# microseconds and theirs / ours (above 1: ours is faster). `make bench-mm`
# runs it alone.
set -e
. "$(dirname "$0")/../quick.sh"
cores=$(nproc)
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
shapes='128 128 128
256 256 256
1 1024 1000 t
1 576 1024 t'
[ -z "$quick" ] || shapes='16 16 16'
echo "mm float32, load $(cut -d' ' -f1 /proc/loadavg) on $cores cores (2 threads are noisy on a shared machine)"
printf '%-3s %-16s %10s %10s %10s %10s %10s\n' th shape ours_us blas_us torch_us blas/ours torch/ours
for th in 1 2; do
    export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
    echo "$shapes" | while read -r m k n t; do
        set -- $(bench/ops/bench_ops --mm "$m" "$k" "$n" $t)
        ours=$1 blas=$2
        if [ -n "$quick" ]; then
            echo "$m x $k x $n: ours $ours us (quick mode: PyTorch baseline not run)"
            continue
        fi
        theirs=$("$py" - "$m" "$k" "$n" "$th" $t <<'PY'
import sys, time, torch
m, k, n, th = map(int, sys.argv[1:5])
torch.set_num_threads(th)
a, o = torch.randn(m, k), torch.empty(m, n)
b = torch.randn(n, k).t() if sys.argv[5:] == ["t"] else torch.randn(k, n)
best = 1e9
for _ in range(200):
    t = time.perf_counter(); torch.mm(a, b, out=o); best = min(best, time.perf_counter() - t)
print("%.3f" % (best * 1e6))
PY
)
        awk -v th="$th" -v s="${m}x${k}x${n}$t" -v o="$ours" -v b="$blas" -v t="$theirs" 'BEGIN {
            printf "%-3s %-16s %10.2f %10.2f %10.2f %10.2f %10.2f\n", th, s, o, b, t, b / o, t / o }'
    done
done
