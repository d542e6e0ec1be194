#!/bin/sh
# Float32 allreduce with 2 ranks on this machine through the mpi process
# group (bench_dist under Open MPI's mpirun, shared-memory transport) against
# our tcp process group and PyTorch's Gloo in the same run: the latency of
# 4 KiB and the time of 64 MiB, with the ratios. Skips without mpirun or
# without the mpi backend. Run from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
command -v mpirun >/dev/null 2>&1 || { echo "mpi: skipped (no mpirun)"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$(dirname "$0")/gloo.sh"
mpi() {
    timeout 120 mpirun --oversubscribe -np 2 --mca btl self,vader bench/dist/bench_dist mpi "$1" "$2"
}
mpi 4096 10 >/dev/null 2>&1 || { echo "mpi: skipped (no mpi backend)"; exit 0; }
[ -n "$quick" ] && quick_done "mpi allreduce 4 KiB, $(mpi 4096 10)"
for spec in "4096 2000" "67108864 10"; do
    set -- $spec
    m=$(mpi "$1" "$2")
    t=$(timeout 60 bench/dist/bench_dist allreduce "$1" "$2")
    g=$(gloo "$1" "$2" | cut -d" " -f1)
    awk -v b="$1" -v m="$m" -v t="$t" -v g="$g" 'BEGIN {
        printf "allreduce %s float32, 2 ranks: mpi %.1f us, tcp %.1f us, Gloo %.1f us: mpi is %.2fx tcp'"'"'s speed and %.2fx Gloo'"'"'s\n",
            (b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB"), m, t, g, t / m, g / m }'
done
