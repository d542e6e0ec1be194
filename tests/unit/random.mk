# Unit tests of random numbers (lib/core/random.c).
UNIT_TESTS += tests/unit/test_random
tests_unit_test_random_SOURCES = tests/unit/test_random.c
tests_unit_test_random_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_random_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_random_LDFLAGS = $(TN_UNIT_LINK)
