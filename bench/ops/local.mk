# Operator benchmarks (issue 4's figures).
TN_BENCH_BIN += bench/ops/bench_ops
TN_BENCH_RUN += bench/ops/bench_ops
bench_ops_bench_ops_SOURCES = bench/ops/bench_ops.c bench/bench.h
bench_ops_bench_ops_LDADD = $(TN_LIB) $(OPENBLAS_LIBS)
TN_BENCH_SH += bench/ops/dispatch.sh bench/ops/torch.sh

# scaled_dot_product_attention against PyTorch's at L = 128..4096 (time and
# peak memory); `make bench-sdpa` runs it alone.
TN_BENCH_BIN += bench/ops/bench_sdpa
bench_ops_bench_sdpa_SOURCES = bench/ops/bench_sdpa.c bench/bench.h
bench_ops_bench_sdpa_LDADD = $(TN_LIB)
TN_BENCH_SH += bench/ops/sdpa.sh

bench-sdpa: bench/ops/bench_sdpa$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/sdpa.sh
.PHONY: bench-sdpa

# issue 27's elementwise size sweep (add, mul, exp, sum, broadcast add at
# 10^3 .. 10^8 against PyTorch, with memcpy's bandwidth); `make bench-sweep`
# runs it alone.
TN_BENCH_SH += bench/ops/sweep.sh
EXTRA_DIST += bench/ops/expfit.py
bench-sweep: bench/ops/bench_ops$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/sweep.sh
.PHONY: bench-sweep

# issue 27's convolution shapes (resnet18, mobilenet_v3_small,
# efficientnet_b0: depthwise, 1x1, grouped) against PyTorch; `make
# bench-conv` runs it alone.
TN_BENCH_SH += bench/ops/conv.sh
bench-conv: bench/ops/bench_ops$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/conv.sh
.PHONY: bench-conv

# issue 27's matrix products (the squares 128, 256 and 512, 64 x 256 x 256,
# a linear's x @ W^T, one-row linears; 1 and 2 threads) against cblas_sgemm
# and PyTorch; `make bench-mm` runs it alone.
TN_BENCH_SH += bench/ops/mm.sh
bench-mm: bench/ops/bench_ops$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/mm.sh
.PHONY: bench-mm

# the FFTs (lengths 2^10 .. 2^20, a mixed-radix and two prime lengths, a
# batch) against torch.fft; `make bench-fft` runs it alone.
TN_BENCH_BIN += bench/ops/bench_fft
bench_ops_bench_fft_SOURCES = bench/ops/bench_fft.c bench/bench.h
bench_ops_bench_fft_LDADD = $(TN_LIB) -lm
TN_BENCH_SH += bench/ops/fft.sh
bench-fft: bench/ops/bench_fft$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/fft.sh
.PHONY: bench-fft

# issue 27's resnet18 convolutions (every conv2d shape, batch 1 and 8,
# GFLOP/s against PyTorch's); `make bench-resnet18-conv` runs it alone.
TN_BENCH_SH += bench/ops/resnet18_conv.sh
bench-resnet18-conv: bench/ops/bench_ops$(EXEEXT)
	$(SHELL) $(srcdir)/bench/ops/resnet18_conv.sh
.PHONY: bench-resnet18-conv
