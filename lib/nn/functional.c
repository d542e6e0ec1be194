/*
 * nn/functional.c: the layers' forwards that need operators of lib/ops
 * beyond the elementwise and matrix ones (conv2d, embedding, layer_norm,
 * batch_norm).  Until those operators are declared in
 * schemas/native_functions.yaml the layers build, initialise and save, and
 * their forward says which operator it lacks.
 */
#include "core/internal.h"
#include "nn/internal.h"
#include <tensor/ops.h>

static struct tn_tensor *lacks(const char *layer, const char *op)
{
    tn_set_error(TN_ERUNTIME, "%s forward needs the %s operator, which this build lacks",
                 layer, op);
    return NULL;
}

struct tn_tensor *tn__nn_conv2d(const struct tn_tensor *x, const struct tn_tensor *w,
                                const struct tn_tensor *b, const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2],
                                int64_t groups)
{
    return lacks("Conv2d", "conv2d");
}

struct tn_tensor *tn__nn_embedding(const struct tn_tensor *w, const struct tn_tensor *idx,
                                   int64_t padding_idx)
{
    return lacks("Embedding", "embedding");
}

struct tn_tensor *tn__nn_layer_norm(const struct tn_tensor *x, const int64_t *shape, int ndim,
                                    const struct tn_tensor *w, const struct tn_tensor *b,
                                    double eps)
{
    return lacks("LayerNorm", "layer_norm");
}

struct tn_tensor *tn__nn_batch_norm(const struct tn_tensor *x, const struct tn_tensor *w,
                                    const struct tn_tensor *b, struct tn_tensor *running_mean,
                                    struct tn_tensor *running_var, bool training,
                                    double momentum, double eps)
{
    return lacks("BatchNorm2d", "batch_norm");
}
