# Unit tests of printing (lib/core/print.c).
UNIT_TESTS += tests/unit/test_print
tests_unit_test_print_SOURCES = tests/unit/test_print.c
tests_unit_test_print_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_print_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_print_LDFLAGS = $(TN_UNIT_LINK)
