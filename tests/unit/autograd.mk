# Unit tests of lib/autograd.
UNIT_TESTS += tests/unit/test_autograd
tests_unit_test_autograd_SOURCES = tests/unit/test_autograd.c
tests_unit_test_autograd_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_autograd_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_autograd_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_autograd_engine
tests_unit_test_autograd_engine_SOURCES = tests/unit/test_autograd_engine.c
tests_unit_test_autograd_engine_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_autograd_engine_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_autograd_engine_LDFLAGS = $(TN_UNIT_LINK)
