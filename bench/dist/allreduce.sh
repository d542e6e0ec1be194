#!/bin/sh
# Float32 allreduce with 2 ranks on this machine, ours (bench/dist/bench_dist,
# the tcp process group) against PyTorch's Gloo (python3 when it has torch,
# PyTorch 2.x here, else Debian's 1.13): the latency of 4 KiB and the bus
# bandwidth of 64 MiB, with the ratios. On a shared machine the load swings
# between runs: each side runs $RUNS times (3), in turn, and its best time
# counts; the medians of the single runs follow. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
. "$(dirname "$0")/gloo.sh"
if [ -n "$quick" ]; then
    quick_done "allreduce 4 KiB, 2 ranks, ours $(timeout 60 bench/dist/bench_dist allreduce 4096 10) us"
fi
# best_of BYTES ITERS: "ours theirs version ours-median theirs-median", the
# least microseconds of each, then the medians
best_of() {
    for i in $(seq "${RUNS:-3}"); do
        echo "o $(timeout 60 bench/dist/bench_dist allreduce "$1" "$2")"
        echo "t $(gloo "$1" "$2")"
    done | sort -k1,1 -k2,2n |
        awk '$1 == "o" { o[++no] = $2 } $1 == "t" { t[++nt] = $2; v = $3 }
             function med(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
             END { print o[1], t[1], v, med(o, no), med(t, nt) }'
}
set -- $(best_of 4096 2000)
awk -v o="$1" -v t="$2" -v v="$3" -v om="$4" -v tm="$5" 'BEGIN {
    printf "allreduce 4 KiB float32, 2 ranks: ours %.1f us, Gloo (PyTorch %s) %.1f us: %.1fx lower latency (medians %.1f and %.1f us: %.1fx)\n", o, v, t, t / o, om, tm, tm / om }'
big=$((64 * 1024 * 1024))
set -- $(best_of $big 10)
awk -v o="$1" -v t="$2" -v v="$3" -v om="$4" -v tm="$5" -v b="$big" 'BEGIN {
    bo = b / (o * 1e-6) / 1e9; bt = b / (t * 1e-6) / 1e9
    printf "allreduce 64 MiB float32, 2 ranks: ours %.1f ms (busbw %.2f GB/s), Gloo (PyTorch %s) %.1f ms (busbw %.2f GB/s): %.2fx Gloo'"'"'s bandwidth (medians %.1f and %.1f ms: %.2fx)\n", o / 1e3, bo, v, t / 1e3, bt, t / o, om / 1e3, tm / 1e3, tm / om }'
