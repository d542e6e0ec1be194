#!/bin/sh
# Float32 allreduce with 2 ranks on this machine, ours (bench/dist/bench_dist,
# the tcp process group) against PyTorch's Gloo (python3 when it has torch,
# PyTorch 2.x here, else Debian's 1.13): the latency of 4 KiB and the bus
# bandwidth of 64 MiB, with the ratios. On a shared machine the load swings
# between runs: each side runs 3 times, in turn, and its best time counts.
# Run from the build folder.
set -e
. "$(dirname "$0")/gloo.sh"
# best_of BYTES ITERS: "ours theirs version", the least microseconds of each
best_of() {
    for i in 1 2 3; do
        echo "o $(timeout 60 bench/dist/bench_dist allreduce "$1" "$2")"
        echo "t $(gloo "$1" "$2")"
    done | awk '$1 == "o" && (o == "" || $2 < o) { o = $2 }
                $1 == "t" && (t == "" || $2 < t) { t = $2; v = $3 }
                END { print o, t, v }'
}
set -- $(best_of 4096 2000)
awk -v o="$1" -v t="$2" -v v="$3" 'BEGIN {
    printf "allreduce 4 KiB float32, 2 ranks: ours %.1f us, Gloo (PyTorch %s) %.1f us: %.1fx lower latency\n", o, v, t, t / o }'
big=$((64 * 1024 * 1024))
set -- $(best_of $big 10)
awk -v o="$1" -v t="$2" -v v="$3" -v b="$big" 'BEGIN {
    bo = b / (o * 1e-6) / 1e9; bt = b / (t * 1e-6) / 1e9
    printf "allreduce 64 MiB float32, 2 ranks: ours %.1f ms (busbw %.2f GB/s), Gloo (PyTorch %s) %.1f ms (busbw %.2f GB/s): %.2fx Gloo'"'"'s bandwidth\n", o / 1e3, bo, v, t / 1e3, bt, t / o }'
