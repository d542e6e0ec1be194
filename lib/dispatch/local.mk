# The dispatcher: key sets, the op registry, boxed calls, the engines the
# generated op table calls. It knows no op: tgen's table is compiled with
# the ops (lib/ops/local.mk).
tensorinclude_HEADERS += lib/include/tensor/dispatch.h
libtensor_la_SOURCES += lib/dispatch/dispatch.c lib/dispatch/boxed.c
