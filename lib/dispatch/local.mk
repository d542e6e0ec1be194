# The dispatcher, and the operator API that tgen generates from
# schemas/native_functions.yaml into the build tree (never committed, not
# distributed: every build makes it again from the YAML).
tensorinclude_HEADERS += lib/include/tensor/dispatch.h
nodist_tensorinclude_HEADERS = lib/include/tensor/ops.h
libtensor_la_SOURCES += lib/dispatch/dispatch.c lib/dispatch/boxed.c
nodist_libtensor_la_SOURCES = lib/dispatch/ops_gen.c

TN_OPS_GEN = lib/include/tensor/ops.h lib/dispatch/ops_gen.c lib/autograd/autograd_gen.c
BUILT_SOURCES += $(TN_OPS_GEN)
CLEANFILES += $(TN_OPS_GEN) lib/dispatch/ops-gen.stamp

# One tgen run writes both files; the stamp stands for the pair.
lib/dispatch/ops-gen.stamp: $(srcdir)/schemas/native_functions.yaml \
		$(srcdir)/schemas/derivatives.yaml bin/tgen/tgen$(EXEEXT)
	@$(MKDIR_P) lib/include/tensor lib/dispatch lib/autograd
	$(AM_V_GEN)bin/tgen/tgen$(EXEEXT) --header lib/include/tensor/ops.h \
		--source lib/dispatch/ops_gen.c --derivatives $(srcdir)/schemas/derivatives.yaml \
		--autograd lib/autograd/autograd_gen.c \
		$(srcdir)/schemas/native_functions.yaml && touch $@
$(TN_OPS_GEN): lib/dispatch/ops-gen.stamp
	@test -f $@ || rm -f lib/dispatch/ops-gen.stamp
	@test -f $@ || $(MAKE) $(AM_MAKEFLAGS) lib/dispatch/ops-gen.stamp
