# lib/compile: the graph compiler: lowering to loop-level IR, fusion, C
# code generation, compiling with the system C compiler, loading, the
# on-disk cache, guards.
tensorinclude_HEADERS += lib/include/tensor/compile.h
noinst_HEADERS += lib/compile/internal.h lib/compile/prelude.h
libtensor_la_SOURCES += \
	lib/compile/ir.c \
	lib/compile/lower.c \
	lib/compile/numbers.c \
	lib/compile/decomp.c \
	lib/compile/sched.c \
	lib/compile/codegen.c \
	lib/compile/exec.c \
	lib/compile/skinny.c \
	lib/compile/bmm.c \
	lib/compile/convbw.c \
	lib/compile/explain.c \
	lib/compile/joint.c \
	lib/compile/joint_sdpa.c \
	lib/compile/compile.c \
	lib/compile/sha256.c \
	lib/compile/spawn.c \
	lib/compile/cache.c \
	lib/compile/ccid.c \
	lib/compile/cc.c \
	lib/compile/model.c \
	lib/compile/package.c
