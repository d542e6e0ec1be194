# tcompile: check, show and run JSON graphs (torch.export's format).
bin_PROGRAMS += bin/tcompile/tcompile
bin_tcompile_tcompile_SOURCES = bin/tcompile/main.c bin/tcompile/show.c bin/tcompile/run.c bin/tcompile/cache.c \
	bin/tcompile/missing.c bin/tcompile/package.c bin/tcompile/tcompile.h bin/tcompile/aoti.c bin/tcompile/aoti.h \
	bin/tcompile/elf.c bin/tcompile/grad.c bin/tcompile/train.c bin/tcompile/profile.c
bin_tcompile_tcompile_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
bin_tcompile_tcompile_LDADD = $(TN_LIB) $(JANSSON_LIBS) -lm
dist_man_MANS += man/man1/tcompile.1 man/man5/tensorkit-graph.5
