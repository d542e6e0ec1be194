# Benchmarks (make bench): each prints ratios against a baseline measured in
# the same run.
# TN_BENCH_BIN: the benchmark programs (built by make bench only); those of
# them that run alone go in TN_BENCH_RUN too (the others are driven by a
# script, with arguments); TN_BENCH_SH: the scripts.
TN_BENCH_BIN =
TN_BENCH_RUN =
TN_BENCH_SH =
include bench/core/local.mk
include bench/ttest/local.mk
include bench/io/local.mk
include bench/ops/local.mk
include bench/autograd/local.mk
include bench/dist/local.mk
include bench/nn/local.mk
include bench/graph/local.mk
include bench/compile/local.mk
include bench/models/local.mk
# built by make bench only
EXTRA_PROGRAMS = $(TN_BENCH_BIN)
CLEANFILES += $(TN_BENCH_BIN)
EXTRA_DIST += $(TN_BENCH_SH) bench/run.sh bench/quick.sh

# every benchmark to the end, then the list of those that failed (exit 1);
# TN_BENCH_QUICK=1 make bench: tiny sizes, one repeat (tests/cli/bench.bats)
bench: $(TN_BENCH_BIN) $(bin_PROGRAMS)
	@SHELL=$(SHELL) $(SHELL) $(srcdir)/bench/run.sh $(TN_BENCH_RUN) -- $(TN_BENCH_SH)
.PHONY: bench
