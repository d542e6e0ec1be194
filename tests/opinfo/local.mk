# PyTorch's OpInfo database as the oracle (issue 25): the quick subset in
# `make check`, the whole of op_db in `make check-opinfo` (skipped with a
# reason without PyTorch 2.x). OPINFO_FLAGS passes options to sweep.py
# (--ops NAME,..., --update, --json FILE, --shard K/N, --jobs N). core_missing.py
# lists the core ATen overloads libtensor cannot run yet.
CLI_TESTS += tests/opinfo/opinfo.bats
EXTRA_DIST += tests/opinfo/sweep.py tests/opinfo/expected-failures.txt tests/opinfo/fixtures.py \
	tests/opinfo/core_missing.py

check-opinfo: all
	@py=$$($(srcdir)/tests/torch2-python) || \
	  { echo "check-opinfo: skipped: PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)"; exit 0; }; \
	if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then ATEN_CPU_CAPABILITY=avx2; export ATEN_CPU_CAPABILITY; fi; \
	$$py $(srcdir)/tests/opinfo/sweep.py --tcompile $(abs_top_builddir)/bin/tcompile/tcompile \
	  $(OPINFO_FLAGS); rc=$$?; \
	if [ $$rc -eq 77 ]; then exit 0; fi; exit $$rc

.PHONY: check-opinfo
