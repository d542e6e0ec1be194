# tgen: operator codegen from op schema YAML. Needs only libyaml (the build
# runs it before libtensor exists).
bin_PROGRAMS += bin/tgen/tgen
bin_tgen_tgen_SOURCES = bin/tgen/main.c bin/tgen/schema.c bin/tgen/gen.c bin/tgen/tgen.h \
	bin/tgen/derivatives.c bin/tgen/autograd.c lib/core/error.c lib/core/file.c
bin_tgen_tgen_CPPFLAGS = $(AM_CPPFLAGS) $(YAML_CFLAGS)
bin_tgen_tgen_LDADD = $(YAML_LIBS)
dist_man_MANS += man/man1/tgen.1 man/man5/native_functions.yaml.5
