# lib/optim: SGD, Adam, AdamW, gradient clipping, learning-rate schedules.
tensorinclude_HEADERS += lib/include/tensor/optim.h
noinst_HEADERS += lib/optim/internal.h
libtensor_la_SOURCES += \
	lib/optim/optim.c \
	lib/optim/sched.c
# Optimizer state as a checkpoint value tree: io sits above optim (DESIGN.md),
# so the conversion lives in lib/io, listed here with the module it serves.
libtensor_la_SOURCES += lib/io/optim_state.c
