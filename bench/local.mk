# Benchmarks (make bench): each prints ratios against a baseline measured in
# the same run.
TN_BENCH_BIN =
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
EXTRA_DIST += $(TN_BENCH_SH)

bench: $(TN_BENCH_BIN)
	@for b in $(TN_BENCH_BIN); do echo "== $$b"; ./$$b || exit 1; done
	@for s in $(TN_BENCH_SH); do echo "== $$s"; $(SHELL) $(srcdir)/$$s || exit 1; done
