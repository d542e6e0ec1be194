/*
 * autograd/formulas_nn.c: the helpers of the formulas of the nn backward
 * ops themselves (mse_loss_backward, smooth_l1_loss_backward,
 * _adaptive_avg_pool2d_backward, max_pool2d_with_indices_backward), whose
 * gradients are the second derivatives of the losses and pools, as
 * PyTorch's derivatives.yaml gives them. Written with the public ops like
 * those of formulas.c; arguments are borrowed, the result is new or NULL.
 */
#include <tensor/nn.h>

#include "autograd/internal.h"

static int64_t numel_of(const int64_t *sizes, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= sizes[d];
    return n;
}

/* d(mse_loss_backward)/d(self): 2 grad, over the element count of a
 * tensor of shape `sizes` for the mean (PyTorch's mse_loss_double_backward) */
struct tn_tensor *tn__mse_loss_double_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                         int ndim, int64_t reduction)
{
    struct tn_tensor *r = tn_mul_scalar(grad, tn_int(2));
    if (r && reduction == TN_REDUCTION_MEAN)
        STEP(r, tn_div_scalar(r, tn_int(numel_of(sizes, ndim))));
    return r;
fail:
    return NULL;
}

/* d(smooth_l1_loss_backward)/d(self): grad / beta where |self - target| <
 * beta, 0 elsewhere (and everywhere for beta 0), over self's element count
 * for the mean (PyTorch's smooth_l1_loss_double_backward) */
struct tn_tensor *tn__smooth_l1_double_bw(const struct tn_tensor *grad,
                                          const struct tn_tensor *self,
                                          const struct tn_tensor *target, int64_t reduction,
                                          double beta)
{
    if (beta == 0)
        return tn_zeros(grad->sizes, grad->ndim, grad->dtype);
    struct tn_tensor *d = NULL, *r = NULL;
    STEP(d, tn_sub(self, target, tn_int(1)));
    STEP(d, tn_abs(d));
    STEP(d, tn_lt_scalar(d, tn_float(beta)));
    STEP(r, tn_mul(grad, d));
    STEP(r, tn_div_scalar(r, tn_float(beta)));
    if (reduction == TN_REDUCTION_MEAN)
        STEP(r, tn_div_scalar(r, tn_int(numel_of(self->sizes, self->ndim))));
    tn_release(d);
    return r;
fail:
    tn_release(d);
    tn_release(r);
    return NULL;
}

/* d(_adaptive_avg_pool2d_backward)/d(grad_output): grad pooled to the
 * last two sizes of grad_output */
struct tn_tensor *tn__adaptive_avg_pool2d_double_bw(const struct tn_tensor *grad,
                                                    const int64_t *sizes, int ndim)
{
    return tn__adaptive_avg_pool2d(grad, sizes + ndim - 2, 2);
}

/* d(max_pool2d_with_indices_backward)/d(grad_output): grad picked at the
 * indices of each plane (PyTorch's max_pool_double_backward, dim 2) */
struct tn_tensor *tn__max_pool_double_bw(const struct tn_tensor *grad,
                                         const struct tn_tensor *indices)
{
    int64_t shape[TN_MAX_DIMS];
    int n = indices->ndim - 2;
    for (int d = 0; d < n; d++)
        shape[d] = indices->sizes[d];
    shape[n] = -1;
    struct tn_tensor *g = NULL, *i = NULL;
    STEP(g, tn_reshape(grad, shape, n + 1));
    STEP(i, tn_reshape(indices, shape, n + 1));
    STEP(g, tn_gather(g, -1, i, false));
    STEP(g, tn_reshape(g, indices->sizes, indices->ndim));
    tn_release(i);
    return g;
fail:
    tn_release(g);
    tn_release(i);
    return NULL;
}

/* d(embedding's weight gradient)/d(grad): the rows of grad at the indices,
 * zeros at padding_idx (PyTorch's embedding_dense_double_backward, which
 * leaves scale_grad_by_freq to the first backward) */
struct tn_tensor *tn__embedding_double_bw(const struct tn_tensor *grad,
                                          const struct tn_tensor *indices, int64_t padding_idx)
{
    int64_t shape[TN_MAX_DIMS + 1];
    for (int d = 0; d < indices->ndim; d++)
        shape[d] = indices->sizes[d];
    shape[indices->ndim] = -1;
    struct tn_tensor *i = NULL, *r = NULL, *m = NULL;
    STEP(i, tn_reshape(indices, (const int64_t[]){-1}, 1));
    STEP(r, tn_index_select(grad, 0, i));
    if (padding_idx >= 0) {
        STEP(i, tn_reshape(i, (const int64_t[]){-1, 1}, 2));
        STEP(m, tn_eq_scalar(i, tn_int(padding_idx)));
        STEP(r, tn_masked_fill_scalar(r, m, tn_int(0)));
    }
    STEP(r, tn_reshape(r, shape, indices->ndim + 1));
    tn_release(i);
    tn_release(m);
    return r;
fail:
    tn_release(i);
    tn_release(m);
    tn_release(r);
    return NULL;
}
