/*
 * autograd/formulas_nn.c: the helpers of the formulas of the nn backward
 * ops themselves (mse_loss_backward, smooth_l1_loss_backward,
 * binary_cross_entropy_backward, _adaptive_avg_pool2d_backward,
 * max_pool2d_with_indices_backward), whose gradients are the second
 * derivatives of the losses and pools, as PyTorch's derivatives.yaml gives
 * them; binary_cross_entropy's target gradient; native_group_norm's
 * gradients, mean's and rstd's included. Written with the public ops like
 * those of formulas.c; arguments are borrowed, the result is new or NULL.
 */
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
    return tn_underscore_adaptive_avg_pool2d(grad, sizes + ndim - 2, 2);
}

/* d(max_pool2d_with_indices_backward)/d(grad_output) and the gradient of
 * max_unpool2d/3d: grad picked at the indices of each plane of `dims`
 * dims (PyTorch's max_pool_double_backward) */
static struct tn_tensor *max_pool_double_bw(const struct tn_tensor *grad,
                                            const struct tn_tensor *indices, int dims)
{
    int64_t shape[TN_MAX_DIMS];
    int n = indices->ndim - dims;
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

struct tn_tensor *tn__max_pool_double_bw(const struct tn_tensor *grad,
                                         const struct tn_tensor *indices)
{
    return max_pool_double_bw(grad, indices, 2);
}

struct tn_tensor *tn__max_pool_double_bw3(const struct tn_tensor *grad,
                                          const struct tn_tensor *indices)
{
    return max_pool_double_bw(grad, indices, 3);
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

/* r (taken) times weight where one is given, over n for the mean: the tail
 * of every binary_cross_entropy formula */
static struct tn_tensor *bce_scale(struct tn_tensor *r, const struct tn_tensor *weight,
                                   int64_t reduction, int64_t n)
{
    if (r && weight)
        STEP(r, tn_mul(r, weight));
    if (r && reduction == TN_REDUCTION_MEAN)
        STEP(r, tn_div_scalar(r, tn_int(n)));
    return r;
fail:
    return NULL;
}

/* 1 - x + eps */
static struct tn_tensor *one_minus(const struct tn_tensor *x, double eps)
{
    struct tn_tensor *r = tn_neg(x);
    if (r)
        STEP(r, tn_add_scalar(r, tn_float(1 + eps), tn_int(1)));
    return r;
fail:
    return NULL;
}

/* num * grad / ((x + eps) (1 - x + eps))^power, eps 1e-12, power 1 or 2;
 * takes num */
static struct tn_tensor *bce_over(struct tn_tensor *num, const struct tn_tensor *grad,
                                  const struct tn_tensor *x, int power)
{
    struct tn_tensor *a = NULL, *b = NULL, *r = num;
    if (!r)
        return NULL;
    STEP(a, tn_add_scalar(x, tn_float(1e-12), tn_int(1)));
    STEP(b, one_minus(x, 1e-12));
    STEP(a, tn_mul(a, b));
    if (power == 2)
        STEP(a, tn_mul(a, a));
    STEP(r, tn_div(r, a));
    STEP(r, tn_mul(r, grad));
    tn_release(a);
    tn_release(b);
    return r;
fail:
    tn_release(a);
    tn_release(b);
    tn_release(r);
    return NULL;
}

/* d(binary_cross_entropy)/d(target): -logit(self) grad (PyTorch's
 * binary_cross_entropy_target_backward) */
struct tn_tensor *tn__bce_target_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    const struct tn_tensor *target,
                                    const struct tn_tensor *weight, int64_t reduction)
{
    struct tn_tensor *r = tn_logit(self, NULL);
    if (r)
        STEP(r, tn_mul(r, grad));
    if (r)
        STEP(r, tn_neg(r));
    return bce_scale(r, weight, reduction, tn_numel(target));
fail:
    return NULL;
}

/* d(binary_cross_entropy_backward)/d(self) for g = grad * grad_output:
 * g (x^2 - 2 x t + t) / ((x + eps)^2 (1 - x + eps)^2) (PyTorch's
 * binary_cross_entropy_double_backward) */
struct tn_tensor *tn__bce_double_bw(const struct tn_tensor *g, const struct tn_tensor *self,
                                    const struct tn_tensor *target,
                                    const struct tn_tensor *weight, int64_t reduction)
{
    struct tn_tensor *a = NULL, *b = NULL, *r = NULL;
    STEP(a, tn_mul(self, self));
    STEP(b, tn_mul(self, target));
    STEP(r, tn_sub(a, b, tn_int(2)));
    STEP(r, tn_add(r, target, tn_int(1)));
    tn_release(a);
    tn_release(b);
    return bce_scale(bce_over(r, g, self, 2), weight, reduction, tn_numel(self));
fail:
    tn_release(a);
    tn_release(b);
    tn_release(r);
    return NULL;
}

/* d(binary_cross_entropy_backward)/d(grad_output): grad (x - t) / ((x +
 * eps) (1 - x + eps)), summed to grad_output's shape by the engine
 * (PyTorch's binary_cross_entropy_double_backward_grad_output) */
struct tn_tensor *tn__bce_double_bw_grad_output(const struct tn_tensor *grad,
                                                const struct tn_tensor *self,
                                                const struct tn_tensor *target,
                                                const struct tn_tensor *weight,
                                                int64_t reduction)
{
    return bce_scale(bce_over(tn_sub(self, target, tn_int(1)), grad, self, 1), weight, reduction,
                     tn_numel(self));
}

/* d(binary_cross_entropy_backward)/d(target) for g = grad * grad_output:
 * -g / max((1 - x) x, 1e-12) (PyTorch's
 * binary_cross_entropy_double_backward_target) */
struct tn_tensor *tn__bce_double_bw_target(const struct tn_tensor *g,
                                           const struct tn_tensor *self,
                                           const struct tn_tensor *target,
                                           const struct tn_tensor *weight, int64_t reduction)
{
    struct tn_scalar eps = tn_float(1e-12);
    struct tn_tensor *a = NULL, *r = NULL;
    STEP(a, one_minus(self, 0));
    STEP(a, tn_mul(a, self));
    STEP(a, tn_clamp(a, &eps, NULL));
    STEP(r, tn_div(g, a));
    STEP(r, tn_neg(r));
    tn_release(a);
    return bce_scale(r, weight, reduction, tn_numel(target));
fail:
    tn_release(a);
    tn_release(r);
    return NULL;
}

/* native_group_norm's gradients as PyTorch's derivatives.yaml gives them
 * (its mean and rstd results are differentiable too): which 1 and 2 are
 * weight's and bias's, from native_group_norm_backward of g0; which 0 is
 * input's, that plus what mean (g1) and rstd (g2) pass back: mean is the
 * average of a group's m elements and rstd = (var + eps)^-1/2 of their
 * biased variance, so each element takes (g1 - g2 rstd^3 (x - mean)) / m. */
struct tn_tensor *tn__group_norm_bw(const struct tn_tensor *g0, const struct tn_tensor *g1,
                                    const struct tn_tensor *g2, const struct tn_tensor *input,
                                    const struct tn_tensor *mean, const struct tn_tensor *rstd,
                                    const struct tn_tensor *weight, int64_t N, int64_t C,
                                    int64_t HxW, int64_t group, int which)
{
    bool mask[3] = {which == 0, which == 1, which == 2};
    struct tn_tensor *r[3] = {NULL, NULL, NULL};
    if (tn_native_group_norm_backward(g0, input, mean, rstd, weight, N, C, HxW, group, mask, 3,
                                      &r[0], &r[1], &r[2]) < 0)
        return NULL;
    if (which != 0 || tn_numel(input) == 0)
        return r[which];
    int64_t m = tn_numel(input) / (N * group);
    const int64_t blocks[3] = {N, group, m}, stats[3] = {N, group, 1};
    struct tn_tensor *x = NULL, *mu = NULL, *rs = NULL, *t = NULL, *a = NULL, *dx = r[0];
    STEP(x, tn_reshape(input, blocks, 3));
    STEP(mu, tn_reshape(mean, stats, 3));
    STEP(rs, tn_reshape(rstd, stats, 3));
    STEP(t, tn_sub(x, mu, tn_int(1)));             /* x - mean */
    STEP(a, tn_pow_scalar(rs, tn_int(3)));
    STEP(a, tn_mul(a, t));
    STEP(t, tn_reshape(g2, stats, 3));
    STEP(a, tn_mul(a, t));                         /* g2 rstd^3 (x - mean) */
    STEP(t, tn_reshape(g1, stats, 3));
    STEP(a, tn_sub(t, a, tn_int(1)));
    STEP(a, tn_div_scalar(a, tn_int(m)));
    STEP(a, tn_reshape(a, input->sizes, input->ndim));
    STEP(dx, tn_add(dx, a, tn_int(1)));
    tn_release(x);
    tn_release(mu);
    tn_release(rs);
    tn_release(t);
    tn_release(a);
    return dx;
fail:
    tn_release(x);
    tn_release(mu);
    tn_release(rs);
    tn_release(t);
    tn_release(a);
    tn_release(dx);
    return NULL;
}
