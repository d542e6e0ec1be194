# The training demo: an MLP on the handwritten digits (make demo).
noinst_PROGRAMS += share/examples/digits/train
share_examples_digits_train_SOURCES = share/examples/digits/train.c
share_examples_digits_train_LDADD = $(TN_LIB) $(ZLIB_LIBS)

# Everything is built first (the README's promise), then the MLP trains.
demo: all
	./share/examples/digits/train$(EXEEXT) --data $(srcdir)/share/datasets/digits.csv.gz \
		--output digits_mlp.pt
CLEANFILES += digits_mlp.pt
