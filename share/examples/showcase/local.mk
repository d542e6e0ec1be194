# The showcase of the tensor core (make showcase; make demo trains the
# digits MLP).
noinst_PROGRAMS += share/examples/showcase/showcase
share_examples_showcase_showcase_SOURCES = share/examples/showcase/showcase.c
share_examples_showcase_showcase_LDADD = $(TN_LIB)

showcase: all
	./share/examples/showcase/showcase$(EXEEXT)
.PHONY: showcase
