# Tests: C unit tests (TAP from cmocka) and Bats tests of the tools, both
# through Automake's TAP driver.
TEST_EXTENSIONS = .bats
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
BATS_LOG_DRIVER = $(LOG_DRIVER)
BATS_LOG_COMPILER = $(BATS) --tap
AM_TESTS_ENVIRONMENT = \
	TN_SRCDIR='$(abs_top_srcdir)'; TN_BUILDDIR='$(abs_top_builddir)'; \
	TN_CUDA_BACKEND='$(abs_top_builddir)/lib/ops/cuda/libtensor-cuda.so'; \
	export TN_SRCDIR TN_BUILDDIR TN_CUDA_BACKEND;

EXTRA_DIST += tests/torch2-python tests/fixtures
UNIT_TESTS =
CLI_TESTS =

include tests/unit/local.mk
include tests/cli/local.mk

TESTS += $(UNIT_TESTS) $(CLI_TESTS)

# Only the unit tests (CI runs them again under the sanitizers).
check-unit:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(UNIT_TESTS)'

# Regenerates the committed fixtures with Debian's PyTorch 1.13.
fixtures:
	cd $(srcdir)/tests/fixtures && for g in core_*.py; do /usr/bin/python3 $$g || exit 1; done

.PHONY: check-unit fixtures
