# Unit tests of lib/compile (the graph compiler).
UNIT_TESTS += tests/unit/test_compile
tests_unit_test_compile_SOURCES = tests/unit/test_compile.c
tests_unit_test_compile_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_compile_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_compile_LDFLAGS = $(TN_UNIT_LINK)
