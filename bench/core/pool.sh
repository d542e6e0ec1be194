#!/bin/sh
# bench/core/pool.sh: the thread pool's wait policy (bench/core/bench_pool),
# run from the build folder: at 2 threads, the default (spin, then sleep)
# against OMP_WAIT_POLICY=PASSIVE (sleep at once: the pool before the spin)
# in the same run, alternated, best of 3 runs each. Prints microseconds of
# a job of 2 chunks (5 and 20 us each) at 2 threads and at 1, the 1-thread
# time over the 2-thread one (above 1: 2 threads win), passive / default
# (above 1: spinning is faster), and the CPU time an idle process spends in
# the 300 ms after a burst of jobs.
set -e
. "$(dirname "$0")/../quick.sh"
[ -x bench/core/bench_pool ] || { echo "pool.sh: run it from the build folder (make bench)" >&2; exit 1; }
runs=3
[ -z "$quick" ] || runs=1
best() { # the lowest of each column over the lines read
    awk '{ for (i = 1; i <= NF; i++) if (NR == 1 || $i < b[i]) b[i] = $i }
         END { for (i = 1; i <= NF; i++) printf "%s ", b[i]; print "" }'
}
passive= spin=
i=0
while [ $i -lt $runs ]; do
    passive="$passive$(TN_SPIN_US= OMP_WAIT_POLICY=PASSIVE bench/core/bench_pool)
"
    spin="$spin$(TN_SPIN_US= OMP_WAIT_POLICY= bench/core/bench_pool)
"
    i=$((i + 1))
done
set -- $(printf %s "$passive" | best) $(printf %s "$spin" | best)
echo "thread pool at 2 threads, load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores (best of $runs runs; noisy on a shared machine)"
awk -v p="$1 $2 $3 $4 $5" -v s="$6 $7 $8 $9 ${10}" 'BEGIN {
    printf "%-8s %9s %9s %8s %9s %9s %8s %12s\n", "policy", "2th_5us", "1th_5us", "1th/2th",
        "2th_20us", "1th_20us", "1th/2th", "idle_cpu_ms"
    split(p, a); split(s, b)
    printf "%-8s %9.2f %9.2f %8.2f %9.2f %9.2f %8.2f %12.3f\n", "passive", a[1], a[2], a[2] / a[1], a[3], a[4], a[4] / a[3], a[5]
    printf "%-8s %9.2f %9.2f %8.2f %9.2f %9.2f %8.2f %12.3f\n", "spin", b[1], b[2], b[2] / b[1], b[3], b[4], b[4] / b[3], b[5]
    printf "passive/spin at 2 threads: 5 us chunks %.2f, 20 us chunks %.2f\n", a[1] / b[1], a[3] / b[3] }'
