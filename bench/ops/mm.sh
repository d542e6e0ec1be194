#!/bin/sh
# bench/ops/mm.sh: issue 27's matrix-product figures, run from the build
# folder: tn_mm_out of float32 (M x K) @ (K x N) at 1 and 2 threads, against
# cblas_sgemm called directly (OpenBLAS at the same thread count) and
# torch.mm(out=) (PyTorch 2.x where tests/torch2-python finds it) in the
# same run, best of 200 calls each. Shapes: the squares 128, 256 and 512
# (where one product splits over the pool, or not), 64 x 256 x 256, a
# linear's x @ W^T (256 x 512 by a 2048 x 512 weight) and the one-row
# linears of a classifier head (1 x 1024 @ (1000 x 1024)^T; the weight
# transposed as linear passes it: shapes marked t). Prints microseconds and
# theirs / ours (above 1: ours is faster). `--baseline OTHER/bench_ops`:
# another build's bench_ops run beside ours, shape by shape (base/ours).
# `make bench-mm` runs it alone.
set -e
. "$(dirname "$0")/../quick.sh"
cores=$(nproc)
base=
if [ "$1" = --baseline ]; then
    [ -x "$2" ] || { echo "mm.sh: --baseline $2: not an executable bench_ops" >&2; exit 2; }
    base=$2
elif [ $# -gt 0 ]; then
    echo "mm.sh: unknown argument $1 (--baseline OTHER/bench_ops)" >&2
    exit 2
fi
py=$("$(dirname "$0")/../../tests/torch2-python" 2>/dev/null) || py=python3
shapes='64 256 256
128 128 128
256 256 256
512 512 512
256 512 2048 t
1 1024 1000 t
1 576 1024 t'
[ -z "$quick" ] || shapes='16 16 16'
echo "mm float32, load $(cut -d' ' -f1 /proc/loadavg) on $cores cores (2 threads are noisy on a shared machine)"
printf '%-3s %-16s %9s %9s %9s %9s %9s %9s %9s\n' th shape ours_us blas_us torch_us base_us \
    blas/ours torch/ours base/ours
for th in 1 2; do
    export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
    echo "$shapes" | while read -r m k n t; do
        old=-
        [ -z "$base" ] || old=$("$base" --mm "$m" "$k" "$n" $t | cut -d' ' -f1)
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
        awk -v th="$th" -v s="${m}x${k}x${n}$t" -v o="$ours" -v b="$blas" -v t="$theirs" \
            -v p="$old" 'BEGIN {
            printf "%-3s %-16s %9.2f %9.2f %9.2f %9s %9.2f %9.2f %9s\n", th, s, o, b, t,
                p == "-" ? "-" : sprintf("%.2f", p), b / o, t / o,
                p == "-" ? "-" : sprintf("%.2f", p / o) }'
    done
done
