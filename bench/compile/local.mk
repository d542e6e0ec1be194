# Compiler benchmarks (issue 16's figures): tcompile against its interpreter,
# PyTorch 2.x eager and torch.compile. `make bench-compile` runs it alone.
TN_BENCH_SH += bench/compile/compile.sh
EXTRA_DIST += bench/compile/compile.py bench/compile/models.py

bench-compile: bin/tcompile/tcompile$(EXEEXT)
	$(SHELL) $(srcdir)/bench/compile/compile.sh
.PHONY: bench-compile
# tcompile build's figures (issue 18): a built library's cold start against
# `import torch`, and what a deployment needs on disk.
TN_BENCH_SH += bench/compile/package.sh
bench-package: bin/tcompile/tcompile$(EXEEXT)
	$(SHELL) $(srcdir)/bench/compile/package.sh
.PHONY: bench-package

# PyTorch's AOTInductor packages under tcompile run (libtensor-aoti) against
# PyTorch's own loader (issue 18). `make bench-aoti` runs it alone.
TN_BENCH_SH += bench/compile/aoti.sh
EXTRA_DIST += bench/compile/aoti.py bench/compile/aoti_loader.cpp

bench-aoti: bin/tcompile/tcompile$(EXEEXT) $(pkglib_LTLIBRARIES)
	$(SHELL) $(srcdir)/bench/compile/aoti.sh
.PHONY: bench-aoti
# tcompile train's figures (issue 17): a training step against PyTorch 2.x
# eager and torch.compile, steps per second and peak RSS.
TN_BENCH_SH += bench/compile/train.sh
EXTRA_DIST += bench/compile/train.py
bench-train: bin/tcompile/tcompile$(EXEEXT)
	$(SHELL) $(srcdir)/bench/compile/train.sh
.PHONY: bench-train
# A compiled program's few-row products (lib/compile/skinny.c) against
# libtensor's OpenBLAS sgemm, weights out of cache.
TN_BENCH_BIN += bench/compile/bench_skinny
TN_BENCH_RUN += bench/compile/bench_skinny
bench_compile_bench_skinny_SOURCES = bench/compile/bench_skinny.c bench/bench.h
bench_compile_bench_skinny_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/lib
bench_compile_bench_skinny_LDADD = $(TN_LIB)
# tn__skinny_mm is internal: libtensor linked statically
bench_compile_bench_skinny_LDFLAGS = -static
