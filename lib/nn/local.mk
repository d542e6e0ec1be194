# lib/nn: layers, their initialisation, losses.
tensorinclude_HEADERS += lib/include/tensor/nn.h
noinst_HEADERS += lib/nn/internal.h
libtensor_la_SOURCES += \
	lib/nn/module.c \
	lib/nn/layers.c \
	lib/nn/functional.c \
	lib/nn/loss.c \
	lib/nn/state_dict.c
