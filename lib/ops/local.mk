# Kernels: device-independent halves (meta functions, decompositions) in
# lib/ops, CPU kernels in lib/ops/cpu.
noinst_HEADERS += lib/ops/internal.h lib/ops/nn_internal.h lib/ops/index_internal.h \
	lib/ops/cpu/vmath.h
libtensor_la_SOURCES += \
	lib/ops/binary.c \
	lib/ops/linalg.c \
	lib/ops/unary.c \
	lib/ops/reduce.c \
	lib/ops/softmax.c \
	lib/ops/sort.c \
	lib/ops/nn.c \
	lib/ops/nn2.c \
	lib/ops/shape.c \
	lib/ops/movement.c \
	lib/ops/split.c \
	lib/ops/pad.c \
	lib/ops/index.c \
	lib/ops/conv.c \
	lib/ops/fill.c \
	lib/ops/cpu/binary.c \
	lib/ops/cpu/linalg.c \
	lib/ops/cpu/unary.c \
	lib/ops/cpu/reduce.c \
	lib/ops/cpu/softmax.c \
	lib/ops/cpu/backward.c \
	lib/ops/cpu/sort.c \
	lib/ops/cpu/shape.c \
	lib/ops/cpu/movement.c \
	lib/ops/cpu/index.c \
	lib/ops/cpu/nn_loss.c \
	lib/ops/cpu/nn_norm.c \
	lib/ops/cpu/nn_conv.c \
	lib/ops/cpu/nn_pool.c \
	lib/ops/cpu/nn_dropout.c \
	lib/ops/cpu/nn_more.c \
	lib/ops/cpu/pad.c
