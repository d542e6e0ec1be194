# tckpt: checkpoint inspect, convert, verify, scan.
bin_PROGRAMS += bin/tckpt/tckpt
bin_tckpt_tckpt_SOURCES = bin/tckpt/main.c bin/tckpt/common.c bin/tckpt/ls.c bin/tckpt/show.c \
	bin/tckpt/convert.c bin/tckpt/diff.c bin/tckpt/scan.c bin/tckpt/tckpt.h
bin_tckpt_tckpt_LDADD = $(TN_LIB) -lm
dist_man_MANS += man/man1/tckpt.1 man/man5/tensorkit-checkpoint.5
