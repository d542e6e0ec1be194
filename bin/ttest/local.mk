# ttest: the sharded test runner.
bin_PROGRAMS += bin/ttest/ttest
bin_ttest_ttest_SOURCES = bin/ttest/main.c bin/ttest/ttest.h bin/ttest/util.c \
	bin/ttest/tap.c bin/ttest/discover.c bin/ttest/manifest.c bin/ttest/plan.c \
	bin/ttest/run.c bin/ttest/report.c bin/ttest/select.c bin/ttest/pytest.c
bin_ttest_ttest_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
bin_ttest_ttest_LDADD = $(TN_LIB) $(JANSSON_LIBS)
dist_man_MANS += man/man1/ttest.1
