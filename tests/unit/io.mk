# Unit tests of lib/io (zip, pickle, checkpoints, safetensors, npy).
UNIT_TESTS += tests/unit/test_ckpt
tests_unit_test_ckpt_SOURCES = tests/unit/test_ckpt.c
tests_unit_test_ckpt_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_ckpt_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ckpt_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_pickle
tests_unit_test_pickle_SOURCES = tests/unit/test_pickle.c
tests_unit_test_pickle_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_pickle_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_pickle_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_zip
tests_unit_test_zip_SOURCES = tests/unit/test_zip.c
tests_unit_test_zip_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_zip_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_zip_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_tensors
tests_unit_test_tensors_SOURCES = tests/unit/test_tensors.c
tests_unit_test_tensors_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_tensors_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_tensors_LDFLAGS = $(TN_UNIT_LINK)
# The libFuzzer target is built by its own script (clang), not by make.
EXTRA_DIST += tests/fuzz/fuzz_ckpt.c tests/fuzz/fuzz_dcp.c tests/fuzz/run.sh
UNIT_TESTS += tests/unit/test_scan
tests_unit_test_scan_SOURCES = tests/unit/test_scan.c
tests_unit_test_scan_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_scan_LDADD = $(TN_UNIT_LIBS) $(ZLIB_LIBS)
tests_unit_test_scan_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_dtypes_io
tests_unit_test_dtypes_io_SOURCES = tests/unit/test_dtypes_io.c
tests_unit_test_dtypes_io_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_dtypes_io_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_dtypes_io_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_dcp
tests_unit_test_dcp_SOURCES = tests/unit/test_dcp.c
tests_unit_test_dcp_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_dcp_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_dcp_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_opcode_table
tests_unit_test_opcode_table_SOURCES = tests/unit/test_opcode_table.c
tests_unit_test_opcode_table_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_opcode_table_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_opcode_table_LDFLAGS = $(TN_UNIT_LINK)
