/*
 * nn/functional.c: the layers' forwards that call operators of lib/ops
 * beyond the elementwise and matrix ones.
 */
#include "core/internal.h"
#include "nn/internal.h"
#include <tensor/ops.h>

struct tn_tensor *tn__nn_conv2d(const struct tn_tensor *x, const struct tn_tensor *w,
                                const struct tn_tensor *b, const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2],
                                int64_t groups)
{
    return tn_conv2d(x, w, b, stride, 2, padding, 2, dilation, 2, groups);
}

struct tn_tensor *tn__nn_embedding(const struct tn_tensor *w, const struct tn_tensor *idx,
                                   int64_t padding_idx)
{
    return tn_embedding(w, idx, padding_idx, false, false);
}

struct tn_tensor *tn__nn_layer_norm(const struct tn_tensor *x, const int64_t *shape, int ndim,
                                    const struct tn_tensor *w, const struct tn_tensor *b,
                                    double eps)
{
    return tn_layer_norm(x, shape, ndim, w, b, eps, true);
}

struct tn_tensor *tn__nn_batch_norm(const struct tn_tensor *x, const struct tn_tensor *w,
                                    const struct tn_tensor *b, struct tn_tensor *running_mean,
                                    struct tn_tensor *running_var, bool training,
                                    double momentum, double eps)
{
    return tn_batch_norm(x, w, b, running_mean, running_var, training, momentum, eps, true);
}
