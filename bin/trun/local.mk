# trun: the distributed launcher.
bin_PROGRAMS += bin/trun/trun
bin_trun_trun_SOURCES = bin/trun/main.c bin/trun/trun.h bin/trun/options.c \
	bin/trun/output.c bin/trun/workers.c bin/trun/rendezvous.c bin/trun/mixed.c
# jansson reads the error files PyTorch's @record writes.
bin_trun_trun_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
bin_trun_trun_LDADD = $(TN_LIB) $(JANSSON_LIBS)
dist_man_MANS += man/man1/trun.1
