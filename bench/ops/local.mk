# Operator benchmarks (issue 4's figures).
TN_BENCH_BIN += bench/ops/bench_ops
bench_ops_bench_ops_SOURCES = bench/ops/bench_ops.c bench/bench.h
bench_ops_bench_ops_LDADD = $(TN_LIB) $(OPENBLAS_LIBS)
TN_BENCH_SH += bench/ops/dispatch.sh bench/ops/torch.sh
