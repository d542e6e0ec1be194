# Autograd benchmark (issue 5's training-step figure, forward + backward).
TN_BENCH_BIN += bench/autograd/bench_autograd
TN_BENCH_RUN += bench/autograd/bench_autograd
bench_autograd_bench_autograd_SOURCES = bench/autograd/bench_autograd.c bench/bench.h
bench_autograd_bench_autograd_LDADD = $(TN_LIB) $(OPENBLAS_LIBS)
TN_BENCH_SH += bench/autograd/mlp.sh bench/autograd/small.sh
