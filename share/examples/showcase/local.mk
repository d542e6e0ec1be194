# The showcase of the tensor core, run by make demo until the training demo
# takes its place.
noinst_PROGRAMS += share/examples/showcase/showcase
share_examples_showcase_showcase_SOURCES = share/examples/showcase/showcase.c
share_examples_showcase_showcase_LDADD = $(TN_LIB)

demo: share/examples/showcase/showcase$(EXEEXT)
	./share/examples/showcase/showcase$(EXEEXT)
