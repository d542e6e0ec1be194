#!/bin/sh
# bench/ops/sweep.sh: issue 27's elementwise figures, run from the build
# folder: add, mul, exp (out=), sum (of all) and a broadcast add (N/1024 x
# 1024 plus a row) of float32 at N = 10^3 .. 10^8 (SWEEP_SIZES), ours
# (bench_ops --sweep) and PyTorch's (python3, 2.x when it has it) in the
# same run at TN_NUM_THREADS threads (default 1), each the best of enough
# runs to fill a tenth of a second. Prints GB/s for both (bytes read plus
# written: 3N for add and mul, 2N for exp and badd, N for sum), ours/PyTorch,
# and memcpy's GB/s at that size (2N bytes, measured by bench_ops).
# `make bench-sweep` runs it alone.
set -e
. "$(dirname "$0")/../quick.sh"
cores=$(nproc)
th=${TN_NUM_THREADS:-1}
export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
sizes=${SWEEP_SIZES:-1000 10000 100000 1000000 10000000 100000000}
[ -z "$quick" ] || sizes=1000
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
echo "elementwise float32 sweep, $th thread(s), load $(cut -d' ' -f1 /proc/loadavg) on $cores cores"
printf '%-5s %10s %10s %10s %7s %11s\n' op N ours_GB/s torch_GB/s ratio memcpy_GB/s
for n in $sizes; do
    for op in add mul exp sum badd; do
        set -- $(bench/ops/bench_ops --sweep "$op" "$n")
        ours=$1 cpy=$2
        if [ -n "$quick" ]; then
            echo "$op $n: ours $ours s (quick mode: PyTorch baseline not run)"
            continue
        fi
        theirs=$("$py" - "$op" "$n" "$th" <<'PY'
import sys, time, torch
op, n, th = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(th)
rows = max(n // 1024, 1)
cols = n // rows
a = torch.randn(rows, cols)
b = torch.randn(cols) if op == "badd" else torch.randn(rows, cols)
o = torch.empty(rows, cols)
f = {"add": lambda: torch.add(a, b, out=o), "badd": lambda: torch.add(a, b, out=o),
     "mul": lambda: torch.mul(a, b, out=o), "exp": lambda: torch.exp(a, out=o),
     "sum": lambda: torch.sum(a)}[op]
reps = min(max(int(2e7 / n), 5), 2000)
best = 1e9
for _ in range(reps):
    t = time.perf_counter(); f(); best = min(best, time.perf_counter() - t)
print("%.9f" % best)
PY
)
        awk -v op="$op" -v n="$n" -v o="$ours" -v t="$theirs" -v c="$cpy" 'BEGIN {
            k = (op == "sum") ? 1 : (op == "exp") ? 2 : 3
            if (op == "badd") k = 2   # the row stays in cache
            b = 4 * n * k
            printf "%-5s %10d %10.1f %10.1f %7.2f %11.1f\n", op, n, b / o / 1e9, b / t / 1e9, t / o, 8 * n / c / 1e9 }'
    done
done
