# Graph benchmarks (issue 10's figures): start-up (read + check) and the
# interpreter against PyTorch eager.
TN_BENCH_BIN += bench/graph/bench_graph
bench_graph_bench_graph_SOURCES = bench/graph/bench_graph.c bench/bench.h
bench_graph_bench_graph_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)
bench_graph_bench_graph_LDADD = $(TN_LIB) $(JANSSON_LIBS)
TN_BENCH_SH += bench/graph/graph.sh
EXTRA_DIST += bench/graph/models.py

# Issue 27's whole-process overhead of `tcompile run` at 32 MiB; `make
# bench-overhead` runs it alone.
TN_BENCH_SH += bench/graph/overhead.sh
EXTRA_DIST += bench/graph/overhead.py

bench-overhead: bin/tcompile/tcompile$(EXEEXT)
	$(SHELL) $(srcdir)/bench/graph/overhead.sh
.PHONY: bench-overhead

# Issue 25's OpInfo sweep: a tcompile process per sample against run --batch.
TN_BENCH_SH += bench/graph/opinfo_sweep.sh
