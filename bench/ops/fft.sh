#!/bin/sh
# bench/ops/fft.sh: the FFTs (lib/ops/fft.c, our own mixed-radix/Bluestein
# engine) against torch.fft in the same run, one thread each: fft of
# complex64, rfft of float32 and irfft back, at lengths 2^10 .. 2^20, a
# 3*5*7 length (mixed radix) and the primes 4099 and 1048573 (Bluestein
# here, PyTorch's MKL has its own prime path), one signal each, then 2^10
# in a batch of 256. Best of several calls each (the first call plans: not
# counted, as PyTorch's plan cache is warm too). Prints microseconds and
# torch / ours (above 1: ours is faster). `make bench-fft` runs it alone.
set -e
. "$(dirname "$0")/../quick.sh"
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
export TN_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
sizes='1024 1
4096 1
16384 1
65536 1
262144 1
1048576 1
3360 1
4099 1
1048573 1
1024 256'
[ -z "$quick" ] || sizes='64 1
67 1'
echo "FFT, 1 thread, load $(cut -d' ' -f1 /proc/loadavg); torch: $($py -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
printf '%-6s %-12s %12s %12s %10s\n' kind n_x_batch ours_us torch_us torch/ours
for kind in fft rfft irfft; do
    echo "$sizes" | while read -r n b; do
        ours=$(bench/ops/bench_fft "$kind" "$n" "$b")
        if [ -n "$quick" ]; then
            echo "$kind $n x $b: ours $ours us"
            continue
        fi
        theirs=$("$py" - "$kind" "$n" "$b" <<'PY'
import sys, time, torch
kind, n, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
if kind == "rfft":
    x, f = torch.randn(b, n), lambda x: torch.fft.rfft(x, n=n)
elif kind == "irfft":
    x, f = torch.randn(b, n // 2 + 1, dtype=torch.complex64), lambda x: torch.fft.irfft(x, n=n)
else:
    x, f = torch.randn(b, n, dtype=torch.complex64), lambda x: torch.fft.fft(x, n=n)
f(x)
work = 5e-9 * n * b * (n.bit_length() + 1)
reps = 3 if work > 0.1 else min(2000, int(0.3 / work) + 1)
best = 1e9
for _ in range(reps):
    t = time.perf_counter(); f(x); best = min(best, time.perf_counter() - t)
print("%.3f" % (best * 1e6))
PY
)
        awk -v k="$kind" -v n="$n" -v b="$b" -v o="$ours" -v t="$theirs" 'BEGIN {
            printf "%-6s %-12s %12.1f %12.1f %10.3f\n", k, n "x" b, o, t, t / o }'
    done
done
quick_done "bench/ops/fft.sh"
