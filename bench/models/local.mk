# The model zoo against PyTorch 2.x eager (issue 23's figures): `make
# bench-zoo` runs it alone.
TN_BENCH_SH += bench/models/zoo.sh

bench-zoo: bin/tcompile/tcompile$(EXEEXT) bin/tckpt/tckpt$(EXEEXT)
	$(SHELL) $(srcdir)/bench/models/zoo.sh
.PHONY: bench-zoo

# Issue 27's model figures: torchvision CNNs at 224x224 against PyTorch 2.x
# eager; `make bench-cnn` runs it alone.
TN_BENCH_SH += bench/models/cnn.sh
EXTRA_DIST += bench/models/cnn.py

bench-cnn: bin/tcompile/tcompile$(EXEEXT) bin/tckpt/tckpt$(EXEEXT)
	$(SHELL) $(srcdir)/bench/models/cnn.sh
.PHONY: bench-cnn
