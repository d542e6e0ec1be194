# The dispatcher: key sets, the op registry, boxed calls, the engines the
# generated op table calls. It knows no op: tgen's table is compiled with
# the ops (lib/ops/local.mk).
tensorinclude_HEADERS += lib/include/tensor/dispatch.h
libtensor_la_SOURCES += lib/dispatch/keyset.c lib/dispatch/errors.c \
	lib/dispatch/registry.c lib/dispatch/plugin.c lib/dispatch/meta.c \
	lib/dispatch/out.c lib/dispatch/boxed.c
