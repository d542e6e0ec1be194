# lib/dist and trun benchmarks (issue 8's figures): 2 ranks on this machine
# against PyTorch's Gloo, TCPStore and torchrun in the same run.
TN_BENCH_BIN += bench/dist/bench_dist
TN_BENCH_RUN += bench/dist/bench_dist
bench_dist_bench_dist_SOURCES = bench/dist/bench_dist.c bench/bench.h
bench_dist_bench_dist_LDADD = $(TN_LIB)
TN_BENCH_SH += bench/dist/allreduce.sh bench/dist/store.sh bench/dist/trun.sh bench/dist/mpi.sh bench/dist/hosts.sh bench/dist/elastic.sh
EXTRA_DIST += bench/dist/gloo.py bench/dist/store.py bench/dist/gloo.sh bench/dist/hosts_worker.py
