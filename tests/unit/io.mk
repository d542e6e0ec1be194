# Unit tests of lib/io (zip, pickle, checkpoints, safetensors, npy).
UNIT_TESTS += tests/unit/test_ckpt
tests_unit_test_ckpt_SOURCES = tests/unit/test_ckpt.c
tests_unit_test_ckpt_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_ckpt_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ckpt_LDFLAGS = $(TN_UNIT_LINK)
