# trun: the distributed launcher.
bin_PROGRAMS += bin/trun/trun
bin_trun_trun_SOURCES = bin/trun/main.c
bin_trun_trun_LDADD = $(TN_LIB)
dist_man_MANS += man/man1/trun.1
