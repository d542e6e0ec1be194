# libtensor: one fragment per module, bottom up (DESIGN.md: a module uses
# only those above it in this list).
tensorinclude_HEADERS += lib/include/tensor/tensor.h
include lib/core/local.mk
include lib/dispatch/local.mk
include lib/ops/local.mk
include lib/autograd/local.mk
include lib/nn/local.mk
include lib/optim/local.mk
include lib/io/local.mk
include lib/graph/local.mk
include lib/compile/local.mk
include lib/dist/local.mk
include lib/ops/cuda/local.mk
include lib/aoti/local.mk
