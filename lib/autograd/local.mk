# Autograd: nodes, the engine, grad mode, hooks, gradcheck, and the
# Autograd kernels tgen generates from schemas/derivatives.yaml into the
# build tree (lib/autograd/autograd_gen.c, made by lib/ops's rule).
tensorinclude_HEADERS += lib/include/tensor/autograd.h
noinst_HEADERS += lib/autograd/internal.h lib/autograd/formula_table.h
libtensor_la_SOURCES += \
	lib/autograd/node.c \
	lib/autograd/views.c \
	lib/autograd/engine.c \
	lib/autograd/formulas.c \
	lib/autograd/formulas_select.c \
	lib/autograd/formulas_nn.c \
	lib/autograd/gradcheck.c
nodist_libtensor_la_SOURCES += lib/autograd/autograd_gen.c
