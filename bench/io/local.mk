# checkpoint benchmarks.
TN_BENCH_BIN += bench/io/bench_ckpt
bench_io_bench_ckpt_SOURCES = bench/io/bench_ckpt.c bench/bench.h
bench_io_bench_ckpt_LDADD = $(TN_LIB)
