# Unit tests of the dispatcher and the operators (lib/dispatch, lib/ops).
UNIT_TESTS += tests/unit/test_ops_binary
tests_unit_test_ops_binary_SOURCES = tests/unit/test_ops_binary.c
tests_unit_test_ops_binary_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_binary_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_binary_LDFLAGS = $(TN_UNIT_LINK)
