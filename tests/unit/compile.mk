# Unit tests of lib/compile (the graph compiler, the C compiler and the
# on-disk cache).
UNIT_TESTS += tests/unit/test_compile
tests_unit_test_compile_SOURCES = tests/unit/test_compile.c
tests_unit_test_compile_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_compile_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_compile_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_compile_cc
tests_unit_test_compile_cc_SOURCES = tests/unit/test_compile_cc.c
tests_unit_test_compile_cc_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_compile_cc_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_compile_cc_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_compile_decomp
tests_unit_test_compile_decomp_SOURCES = tests/unit/test_compile_decomp.c
tests_unit_test_compile_decomp_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_compile_decomp_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_compile_decomp_LDFLAGS = $(TN_UNIT_LINK)
# Differential tests on random graphs; randgraph.c is the generator, which
# the fuzz target tests/fuzz/fuzz_compile.c shares.
UNIT_TESTS += tests/unit/test_compile_random
tests_unit_test_compile_random_SOURCES = tests/unit/test_compile_random.c \
	tests/unit/randgraph.c tests/unit/randgraph.h
tests_unit_test_compile_random_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_compile_random_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_compile_random_LDFLAGS = $(TN_UNIT_LINK)
# The libFuzzer target is built by its own script (clang), not by make.
EXTRA_DIST += tests/fuzz/fuzz_compile.c tests/fuzz/compile.sh
# libtensor-aoti (lib/aoti), its sources compiled in beside the static
# libtensor.
UNIT_TESTS += tests/unit/test_aoti
tests_unit_test_aoti_SOURCES = tests/unit/test_aoti.c lib/aoti/types.c lib/aoti/tensor.c \
	lib/aoti/ops.c lib/aoti/sleef.c
tests_unit_test_aoti_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_aoti_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_aoti_LDFLAGS = $(TN_UNIT_LINK)
# derivatives.yaml's formulas in joint graphs: each expressible as ops or
# listed (tests/unit/joint_unexpressed.txt, with its reason).
UNIT_TESTS += tests/unit/test_joint_coverage
tests_unit_test_joint_coverage_SOURCES = tests/unit/test_joint_coverage.c
tests_unit_test_joint_coverage_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_joint_coverage_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_joint_coverage_LDFLAGS = $(TN_UNIT_LINK)
EXTRA_DIST += tests/unit/joint_unexpressed.txt
