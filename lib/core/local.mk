tensorinclude_HEADERS += lib/include/tensor/core.h lib/include/tensor/value.h
noinst_HEADERS += lib/core/internal.h lib/core/le.h
libtensor_la_SOURCES += \
	lib/core/error.c \
	lib/core/file.c \
	lib/core/dtype.c \
	lib/core/promote.c \
	lib/core/device.c \
	lib/core/cpu_cache.c \
	lib/core/storage.c \
	lib/core/tensor.c \
	lib/core/factory.c \
	lib/core/triangle.c \
	lib/core/view.c \
	lib/core/iter.c \
	lib/core/copy.c \
	lib/core/print.c \
	lib/core/random.c \
	lib/core/thread.c \
	lib/core/bytes.c \
	lib/core/value.c
