# Unit tests of lib/dist: stores, the TCPStore server, rendezvous, and the
# wire protocol against real PyTorch (2.x and Debian's 1.13) when installed.
UNIT_TESTS += tests/unit/test_store
tests_unit_test_store_SOURCES = tests/unit/test_store.c
tests_unit_test_store_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_store_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_store_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_store_torch
tests_unit_test_store_torch_SOURCES = tests/unit/test_store_torch.c
tests_unit_test_store_torch_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_store_torch_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_store_torch_LDFLAGS = $(TN_UNIT_LINK)
EXTRA_DIST += tests/fixtures/dist/store_client.py tests/fixtures/dist/store_server.py

UNIT_TESTS += tests/unit/test_pg
tests_unit_test_pg_SOURCES = tests/unit/test_pg.c
tests_unit_test_pg_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_pg_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_pg_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ddp
tests_unit_test_ddp_SOURCES = tests/unit/test_ddp.c
tests_unit_test_ddp_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ddp_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ddp_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_pg_backends
tests_unit_test_pg_backends_SOURCES = tests/unit/test_pg_backends.c
tests_unit_test_pg_backends_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_pg_backends_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_pg_backends_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_dcp_save
tests_unit_test_dcp_save_SOURCES = tests/unit/test_dcp_save.c
tests_unit_test_dcp_save_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_dcp_save_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_dcp_save_LDFLAGS = $(TN_UNIT_LINK)
