# lib/graph: the JSON graph (torch.export's serialized ExportedProgram
# subset): read, check, write, the .pt2 archive, the interpreter.
tensorinclude_HEADERS += lib/include/tensor/graph.h
noinst_HEADERS += lib/graph/internal.h
libtensor_la_SOURCES += \
	lib/graph/read.c \
	lib/graph/arena.c \
	lib/graph/json.c \
	lib/graph/check.c \
	lib/graph/functionalize.c \
	lib/graph/builtin.c \
	lib/graph/symbolic.c \
	lib/graph/factory.c \
	lib/graph/random.c \
	lib/graph/exec.c \
	lib/graph/run.c \
	lib/graph/archive.c \
	lib/graph/write.c
