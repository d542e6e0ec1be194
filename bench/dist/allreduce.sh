#!/bin/sh
# Float32 allreduce with 2 ranks on this machine, ours (bench/dist/bench_dist,
# the tcp process group) against PyTorch's Gloo (python3 when it has torch,
# PyTorch 2.x here, else Debian's 1.13): the latency of 4 KiB and the bus
# bandwidth of 64 MiB, with the ratios. Run from the build folder.
set -e
. "$(dirname "$0")/gloo.sh"
ours=$(timeout 60 bench/dist/bench_dist allreduce 4096 2000)
theirs=$(gloo 4096 2000)
set -- $theirs
awk -v o="$ours" -v t="$1" -v v="$2" 'BEGIN {
    printf "allreduce 4 KiB float32, 2 ranks: ours %.1f us, Gloo (PyTorch %s) %.1f us: %.1fx lower latency\n", o, v, t, t / o }'
big=$((64 * 1024 * 1024))
ours=$(timeout 60 bench/dist/bench_dist allreduce $big 10)
theirs=$(gloo $big 10)
set -- $theirs
awk -v o="$ours" -v t="$1" -v v="$2" -v b="$big" 'BEGIN {
    bo = b / (o * 1e-6) / 1e9; bt = b / (t * 1e-6) / 1e9
    printf "allreduce 64 MiB float32, 2 ranks: ours %.1f ms (busbw %.2f GB/s), Gloo (PyTorch %s) %.1f ms (busbw %.2f GB/s): %.2fx Gloo'"'"'s bandwidth\n", o / 1e3, bo, v, t / 1e3, bt, t / o }'
