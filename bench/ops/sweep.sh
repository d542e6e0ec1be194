#!/bin/sh
# bench/ops/sweep.sh: issue 27's elementwise figures, run from the build
# folder: add, mul, exp (out=), sum (of all), a broadcast add (N/1024 x
# 1024 plus a row), and softmax and log_softmax (lsm) over the rows of that
# N/1024 x 1024 matrix, of float32 at N = 10^3 .. 10^8 (SWEEP_SIZES; ops:
# SWEEP_OPS), ours (bench_ops --sweep) and PyTorch's (python3, 2.x when it
# has it) at TN_NUM_THREADS threads (default 1), each the best of enough
# runs to fill a tenth of a second. The two sides alternate SWEEP_ROUNDS
# times (default 2: ours for every case, then one PyTorch process for every
# case, again) and each keeps its best, so that a burst of load on this
# shared machine does not land on one side only. With TN_BENCH_CLOCK=thread
# both sides time the calling thread's CPU time (time.thread_time), not the
# wall clock: at 1 thread on a loaded machine a call of 10^7 elements and
# more (milliseconds) is otherwise almost always preempted (reading that
# clock is a system call, about a microsecond: the cells below 10^5 then
# mean little). Prints GB/s for
# both, counted the same way on every side: the bytes the op must read plus
# those it writes, once each (3N floats for add and mul, 2N for exp, badd,
# softmax and lsm, N for sum; badd's row is read once), ours/PyTorch, and
# memcpy's GB/s at that size over its 2N (a read and a write of N, by
# bench_ops, into a touched tensor). Neither counts the read of an output's
# lines before a plain store writes them: a kernel that streams a large
# output (non-temporal stores) moves what it is counted for, one that does
# not moves a third more for add, half more for exp. `make bench-sweep` runs
# it alone.
set -e
. "$(dirname "$0")/../quick.sh"
# without the binary every time would be empty and every figure inf GB/s
if [ ! -x bench/ops/bench_ops ]; then
    echo "sweep.sh: bench/ops/bench_ops is not built (make bench/ops/bench_ops; run from the build folder)" >&2
    exit 2
fi
cores=$(nproc)
th=${TN_NUM_THREADS:-1}
export TN_NUM_THREADS=$th OMP_NUM_THREADS=$th
sizes=${SWEEP_SIZES:-1000 10000 100000 1000000 10000000 100000000}
ops=${SWEEP_OPS:-add mul exp sum badd softmax lsm}
rounds=${SWEEP_ROUNDS:-2}
[ -z "$quick" ] || { sizes=1000; rounds=1; }
py=python3
[ -n "$quick" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "elementwise float32 sweep, $th thread(s), $rounds round(s), ${TN_BENCH_CLOCK:-wall} clock, load $(cut -d' ' -f1 /proc/loadavg) on $cores cores"
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    for n in $sizes; do
        for op in $ops; do
            v=$(bench/ops/bench_ops --sweep "$op" "$n") # (set -e: a failure stops here)
            echo "$op $n $v" >>"$tmp/ours"
        done
    done
    if [ -n "$quick" ]; then
        cat "$tmp/ours"
        quick_done sweep
    fi
    "$py" - "$th" "$sizes" "$ops" >>"$tmp/theirs" <<'PY'
import os, sys, time, torch
th, sizes, ops = int(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
clock = time.thread_time if os.environ.get("TN_BENCH_CLOCK") == "thread" else time.perf_counter
torch.set_num_threads(th)
for n in map(int, sizes):
    rows = max(n // 1024, 1)
    cols = n // rows
    for op in ops:
        a = torch.randn(rows, cols)
        b = torch.randn(cols) if op == "badd" else torch.randn(rows, cols)
        o = torch.empty(rows, cols)
        f = {"add": lambda: torch.add(a, b, out=o), "badd": lambda: torch.add(a, b, out=o),
             "mul": lambda: torch.mul(a, b, out=o), "exp": lambda: torch.exp(a, out=o),
             "sum": lambda: torch.sum(a), "softmax": lambda: torch.softmax(a, 1),
             "lsm": lambda: torch.log_softmax(a, 1)}[op]
        reps = min(max(int(2e7 / n), 5), 2000)
        best = 1e9
        for _ in range(reps):
            t = clock(); f(); best = min(best, clock() - t)
        print(op, n, "%.9f" % best)
        del a, b, o
PY
done
printf '%-7s %10s %10s %10s %7s %11s\n' op N ours_GB/s torch_GB/s ratio memcpy_GB/s
# best of the rounds per case, in the order of the first round
awk 'FNR == NR { k = $1 " " $2; if (!(k in o) || $3 < o[k]) o[k] = $3
                 if (!(k in c) || $4 < c[k]) c[k] = $4
                 if (!(k in seen)) { seen[k] = 1; order[++m] = k }; next }
     { k = $1 " " $2; if (!(k in t) || $3 < t[k]) t[k] = $3 }
     END {
        for (i = 1; i <= m; i++) {
            split(order[i], f, " "); op = f[1]; n = f[2]; k = order[i]
            w = (op == "sum") ? 1 : (op == "add" || op == "mul") ? 3 : 2
            b = 4 * n * w
            printf "%-7s %10d %10.1f %10.1f %7.2f %11.1f\n", op, n, b / o[k] / 1e9, b / t[k] / 1e9,
                   t[k] / o[k], 8 * n / c[k] / 1e9
        }
     }' "$tmp/ours" "$tmp/theirs"
