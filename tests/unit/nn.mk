# Unit tests of lib/nn and lib/optim.
UNIT_TESTS += tests/unit/test_nn
tests_unit_test_nn_SOURCES = tests/unit/test_nn.c
tests_unit_test_nn_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_nn_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_nn_LDFLAGS = $(TN_UNIT_LINK)
