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

EXTRA_DIST += tests/torch2-python tests/pyfork.py tests/fixtures
UNIT_TESTS =
CLI_TESTS =

include tests/unit/local.mk
include tests/cli/local.mk
if HAVE_BATS
include tests/models/local.mk
endif
include tests/opinfo/local.mk

TESTS += $(UNIT_TESTS) $(CLI_TESTS)

# Only the unit tests (CI runs them again under the sanitizers): their
# programs (with the library and what they link) and ttest, not `make
# check`'s `all` and other check programs (the tools, libtensor-aoti, the
# Bats tests' helpers, man pages, examples), then ttest over them.
check-unit: $(UNIT_TESTS) $(TTEST)
	$(MAKE) $(AM_MAKEFLAGS) check-TESTS TESTS='$(UNIT_TESTS)'

# Rewrites every committed fixture with real PyTorch (1.13 and 2.x).
fixtures:
	$(SHELL) $(srcdir)/tests/fixtures/regenerate.sh

.PHONY: check-unit fixtures

# The suite runs through ttest (bin/ttest), not Automake's harness: every
# test in TESTS, $(TTEST_JOBS) at a time, ordered (and sharded, with
# TTEST_FLAGS='--shard I/N') by the durations recorded in the build folder.
# Those start as a copy of the committed tests/durations; `make
# update-durations` copies them back.  `make check TESTS='...'` still picks
# tests.  Overriding check-TESTS is deliberate, hence -Wno-override.
AUTOMAKE_OPTIONS = -Wno-override
TTEST = bin/ttest/ttest$(EXEEXT)
TTEST_JOBS = 2
TTEST_DURATIONS = tests/ttest-durations
TTEST_FLAGS =
# ttest retries nothing by default; the suite keeps one retry, so a test
# that fails once by chance is reported flaky rather than failing the build
# (TTEST_RETRIES=0 to see every failure).
TTEST_RETRIES = 1
EXTRA_DIST += tests/durations
DISTCLEANFILES += $(TTEST_DURATIONS)
# A test is in the build folder (programs) or the source folder (scripts).
tn_ttest_paths = for t in $(TESTS); do if test -f "$$t"; then echo "$$t"; else echo "$(srcdir)/$$t"; fi; done
tn_ttest_args = --durations '$(TTEST_DURATIONS)' --strip-prefix '$(srcdir)' --bats '$(BATS)' \
	--retries '$(TTEST_RETRIES)'

check-TESTS: $(TTEST)
	@test -f '$(TTEST_DURATIONS)' || { $(MKDIR_P) tests && \
	  cp '$(srcdir)/tests/durations' '$(TTEST_DURATIONS)' && chmod u+w '$(TTEST_DURATIONS)'; }
	@list=`$(tn_ttest_paths)`; \
	if test -z "$$list"; then echo "0 passed, 0 failed"; exit 0; fi; \
	$(AM_TESTS_ENVIRONMENT) $(TESTS_ENVIRONMENT) \
	./$(TTEST) -j$(TTEST_JOBS) $(tn_ttest_args) $(TTEST_FLAGS) $$list

# The plan of the whole suite (shard, expected seconds, kind, name), run nothing.
check-plan: $(TTEST)
	@./$(TTEST) --list $(tn_ttest_args) $(TTEST_FLAGS) `$(tn_ttest_paths)`

update-durations:
	cp '$(TTEST_DURATIONS)' '$(srcdir)/tests/durations'

.PHONY: check-plan update-durations
