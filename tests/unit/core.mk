# Unit tests of lib/core.
UNIT_TESTS += tests/unit/test_dtype
tests_unit_test_dtype_SOURCES = tests/unit/test_dtype.c
tests_unit_test_dtype_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_dtype_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_dtype_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_core
tests_unit_test_core_SOURCES = tests/unit/test_core.c
tests_unit_test_core_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_core_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_core_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_cpu_cache
tests_unit_test_cpu_cache_SOURCES = tests/unit/test_cpu_cache.c
tests_unit_test_cpu_cache_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_cpu_cache_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_cpu_cache_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_file
tests_unit_test_file_SOURCES = tests/unit/test_file.c
tests_unit_test_file_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_file_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_file_LDFLAGS = $(TN_UNIT_LINK)
# core's nested values (tensor/value.h, lib/core/value.c)
UNIT_TESTS += tests/unit/test_value
tests_unit_test_value_SOURCES = tests/unit/test_value.c
tests_unit_test_value_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_value_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_value_LDFLAGS = $(TN_UNIT_LINK)
# the thread pool and its wait policy (lib/core/thread.c)
UNIT_TESTS += tests/unit/test_thread
tests_unit_test_thread_SOURCES = tests/unit/test_thread.c
tests_unit_test_thread_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_thread_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_thread_LDFLAGS = $(TN_UNIT_LINK)
