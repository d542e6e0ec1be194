# Unit tests of views, constructors and copies (lib/core/view.c, factory.c, copy.c).
UNIT_TESTS += tests/unit/test_views
tests_unit_test_views_SOURCES = tests/unit/test_views.c
tests_unit_test_views_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_views_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_views_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_factory
tests_unit_test_factory_SOURCES = tests/unit/test_factory.c tests/unit/fixture_cases.h
tests_unit_test_factory_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_factory_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_factory_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_copy
tests_unit_test_copy_SOURCES = tests/unit/test_copy.c tests/unit/fixture_cases.h
tests_unit_test_copy_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_copy_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_copy_LDFLAGS = $(TN_UNIT_LINK)
