# lib/dist: stores (TCP server and client, file, hash, prefix), rendezvous.
tensorinclude_HEADERS += lib/include/tensor/dist.h
noinst_HEADERS += lib/dist/internal.h
libtensor_la_SOURCES += \
	lib/dist/util.c \
	lib/dist/store.c \
	lib/dist/filestore.c \
	lib/dist/tcpserver.c \
	lib/dist/tcpclient.c \
	lib/dist/init.c \
	lib/dist/pg.c \
	lib/dist/pg_tcp.c \
	lib/dist/pg_shm.c \
	lib/dist/pg_async.c \
	lib/dist/pg_mpi.c \
	lib/dist/pg_nccl.c \
	lib/dist/ddp.c \
	lib/dist/dcp.c
