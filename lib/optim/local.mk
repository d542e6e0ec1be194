# lib/optim: SGD, Adam, AdamW, gradient clipping, learning-rate schedules.
tensorinclude_HEADERS += lib/include/tensor/optim.h
noinst_HEADERS += lib/optim/internal.h
libtensor_la_SOURCES += \
	lib/optim/optim.c \
	lib/optim/sched.c \
	lib/optim/state_dict.c
