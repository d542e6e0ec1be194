# checkpoint benchmarks.
TN_BENCH_BIN += bench/io/bench_ckpt
TN_BENCH_RUN += bench/io/bench_ckpt
bench_io_bench_ckpt_SOURCES = bench/io/bench_ckpt.c bench/bench.h
bench_io_bench_ckpt_LDADD = $(TN_LIB)
# distributed checkpoints (issue 19): bench/io/dcp.sh runs bench_dcp
# against PyTorch's dcp.save/dcp.load; make bench-dcp runs it alone.
TN_BENCH_BIN += bench/io/bench_dcp
bench_io_bench_dcp_SOURCES = bench/io/bench_dcp.c bench/bench.h
bench_io_bench_dcp_LDADD = $(TN_LIB)
TN_BENCH_SH += bench/io/dcp.sh
EXTRA_DIST += bench/io/dcp.py
# tckpt scan against picklescan, modelscan and fickling (run by hand: it
# needs them on PATH).
EXTRA_DIST += bench/io/scan_compare.sh
bench-dcp: bench/io/bench_dcp$(EXEEXT)
	$(SHELL) $(srcdir)/bench/io/dcp.sh
.PHONY: bench-dcp
# `tckpt ls` of a 10,000-key DCP folder against PyTorch's unpickle of its
# .metadata (issue 19); make bench-dcp-ls runs it alone.
TN_BENCH_SH += bench/io/dcp_ls.sh
bench-dcp-ls: bin/tckpt/tckpt$(EXEEXT)
	$(SHELL) $(srcdir)/bench/io/dcp_ls.sh
.PHONY: bench-dcp-ls
