# Bats tests of the tools and scripts.
if HAVE_BATS
CLI_TESTS += tests/cli/bootstrap.bats tests/cli/configure.bats
CLI_TESTS += tests/cli/ops_simd.bats
include tests/cli/dtype.mk
include tests/cli/print.mk
include tests/cli/random.mk
include tests/cli/core.mk
CLI_TESTS += tests/cli/manpages.bats tests/cli/setup.bats tests/cli/abi.bats tests/cli/bench.bats tests/cli/threads.bats tests/cli/layers.bats \
	tests/cli/clang.bats tests/cli/package.bats
include tests/cli/ttest.mk
include tests/cli/tckpt.mk
include tests/cli/dist.mk
include tests/cli/tgen.mk
include tests/cli/autograd.mk
include tests/cli/tcompile.mk
include tests/cli/nn.mk
endif
EXTRA_DIST += tests/cli/helper.bash $(CLI_TESTS)
