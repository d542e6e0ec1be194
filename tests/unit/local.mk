# C unit tests: one program per module part, cmocka emitting TAP.
if HAVE_CMOCKA
check_LTLIBRARIES = tests/unit/libtntest.la
tests_unit_libtntest_la_SOURCES = tests/unit/tn_test.c tests/unit/tn_test.h
tests_unit_libtntest_la_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) \
	-DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_libtntest_la_LIBADD = $(CMOCKA_LIBS) $(JANSSON_LIBS)

# Unit tests link libtensor statically, so they can reach internal helpers;
# -u tn__builtin_ops carries the built-in ops' table (ops hands it to the
# dispatcher from a constructor) into a test that names ops only by string,
# as tensor.pc's Libs.private does for any static link.
TN_UNIT_CPP = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/tests/unit
TN_UNIT_LIBS = tests/unit/libtntest.la $(TN_LIB) $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm
TN_UNIT_LINK = -static -Wl,-u,tn__builtin_ops

# One fragment per area, so areas can grow their tests independently.
include tests/unit/core.mk
include tests/unit/views.mk
include tests/unit/print.mk
include tests/unit/random.mk
include tests/unit/io.mk
include tests/unit/ops.mk
include tests/unit/autograd.mk
include tests/unit/dist.mk
include tests/unit/nn.mk
include tests/unit/graph.mk
include tests/unit/compile.mk

check_PROGRAMS += $(UNIT_TESTS)
endif
