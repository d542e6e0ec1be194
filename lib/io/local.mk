# lib/io: zip, pickle, torch checkpoints, safetensors, npy/npz.
tensorinclude_HEADERS += lib/include/tensor/io.h lib/include/tensor/dcp.h
noinst_HEADERS += lib/io/internal.h lib/io/scan_internal.h
libtensor_la_SOURCES += \
	lib/io/util.c \
	lib/io/zip.c \
	lib/io/pickle.c \
	lib/io/unpickle.c \
	lib/io/ckpt.c \
	lib/io/safetensors.c \
	lib/io/npy.c \
	lib/io/load.c \
	lib/io/legacy.c \
	lib/io/scan.c \
	lib/io/scan_archive.c \
	lib/io/scan_graph.c \
	lib/io/scan_npy.c \
	lib/io/scan_pickle.c \
	lib/io/scan_policy.c \
	lib/io/dcp.c \
	lib/io/scan_dcp.c \
	lib/io/dcp_write.c
EXTRA_DIST += lib/io/allowlist.inc
