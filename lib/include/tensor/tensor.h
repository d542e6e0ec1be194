/*
 * tensor/tensor.h: everything libtensor offers, one include.
 * Link with `pkg-config --libs tensor`.
 */
#ifndef TENSOR_TENSOR_H
#define TENSOR_TENSOR_H

#include <tensor/core.h>
#include <tensor/value.h>
#include <tensor/dispatch.h>
#include <tensor/ops.h>
#include <tensor/autograd.h>
#include <tensor/nn.h>
#include <tensor/optim.h>
#include <tensor/io.h>
#include <tensor/dcp.h>
#include <tensor/graph.h>
#include <tensor/compile.h>
#include <tensor/dist.h>

#endif
