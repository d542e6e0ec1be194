# The model zoo against PyTorch 2.x eager (issue 23's figures): `make
# bench-zoo` runs it alone.
TN_BENCH_SH += bench/models/zoo.sh

bench-zoo: bin/tcompile/tcompile$(EXEEXT) bin/tckpt/tckpt$(EXEEXT)
	$(SHELL) $(srcdir)/bench/models/zoo.sh
.PHONY: bench-zoo
