TN_BENCH_BIN += bench/core/bench_copy
TN_BENCH_RUN += bench/core/bench_copy
bench_core_bench_copy_SOURCES = bench/core/bench_copy.c bench/bench.h
bench_core_bench_copy_LDADD = $(TN_LIB)
TN_BENCH_BIN += bench/core/bench_pool
TN_BENCH_SH += bench/core/pool.sh
bench_core_bench_pool_SOURCES = bench/core/bench_pool.c bench/bench.h
bench_core_bench_pool_LDADD = $(TN_LIB)
