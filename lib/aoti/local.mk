# lib/aoti: libtensor-aoti, PyTorch's AOTInductor C shim (aoti_torch_*)
# over libtensor, so that `tcompile run PACKAGE.pt2` runs a package made by
# torch._inductor.aoti_compile_and_package without libtorch; and the
# stand-ins named as the libraries such a package asks for (libtorch.so,
# libtorch_cpu.so, libc10.so), empty but for their dependency on
# libtensor-aoti.  All go in tensorkit's own library folder, never the
# system's library path.
pkglib_LTLIBRARIES = lib/aoti/libtensor-aoti.la lib/aoti/libtorch.la lib/aoti/libtorch_cpu.la \
	lib/aoti/libc10.la
noinst_HEADERS += lib/aoti/internal.h
lib_aoti_libtensor_aoti_la_SOURCES = lib/aoti/types.c lib/aoti/tensor.c lib/aoti/ops.c \
	lib/aoti/sleef.c
lib_aoti_libtensor_aoti_la_LDFLAGS = -avoid-version -shared -no-undefined \
	-export-symbols-regex '^(aoti_torch_|Sleef_)'
lib_aoti_libtensor_aoti_la_LIBADD = $(TN_LIB) -lm
# Shared only (-shared above): --tag=disable-static makes libtool compile
# each source once, position-independent, instead of a second, unused
# non-PIC object for a static library that is never made.
lib_aoti_libtensor_aoti_la_LIBTOOLFLAGS = --tag=disable-static
TN_AOTI_STANDIN_LDFLAGS = -module -avoid-version -shared -no-undefined
lib_aoti_libtorch_la_SOURCES = lib/aoti/standin.c
lib_aoti_libtorch_la_LDFLAGS = $(TN_AOTI_STANDIN_LDFLAGS)
lib_aoti_libtorch_la_LIBADD = lib/aoti/libtensor-aoti.la
lib_aoti_libtorch_cpu_la_SOURCES = lib/aoti/standin.c
lib_aoti_libtorch_cpu_la_LDFLAGS = $(TN_AOTI_STANDIN_LDFLAGS)
lib_aoti_libtorch_cpu_la_LIBADD = lib/aoti/libtensor-aoti.la
lib_aoti_libc10_la_SOURCES = lib/aoti/standin.c
lib_aoti_libc10_la_LDFLAGS = $(TN_AOTI_STANDIN_LDFLAGS)
lib_aoti_libc10_la_LIBADD = lib/aoti/libtensor-aoti.la
# ops.c includes the generated tensor/ops.h
$(lib_aoti_libtensor_aoti_la_OBJECTS): | $(TN_OPS_GEN)
dist_man_MANS += man/man3/libtensor-aoti.3
