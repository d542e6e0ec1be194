/*
 * ops/nn.c: the device-independent half of the nn ops: helpers the nn
 * kernels share, and the CompositeImplicitAutograd decompositions PyTorch
 * has for them (nll_loss, cross_entropy_loss, layer_norm, conv2d,
 * max_pool2d, adaptive_avg_pool2d, batch_norm, dropout, embedding).
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"

struct tn_tensor *tn__nn_f64(const struct tn_tensor *t)
{
    if (!t)
        return NULL;
    struct tn_tensor *d = tn_to_dtype(t, TN_FLOAT64);
    if (!d)
        return NULL;
    struct tn_tensor *c = tn_contiguous(d);
    tn_release(d);
    return c;
}

struct tn_tensor *tn__nn_as(const struct tn_tensor *t, enum tn_dtype dtype)
{
    if (!t)
        return NULL;
    if (t->dtype == dtype && tn_is_contiguous(t))
        return tn_retain((struct tn_tensor *)t);
    struct tn_tensor *d = tn_to_dtype(t, dtype), *c = d ? tn_contiguous(d) : NULL;
    tn_release(d);
    return c;
}

struct tn_tensor *tn__nn_to(struct tn_tensor *r, enum tn_dtype dtype)
{
    if (!r || r->dtype == dtype)
        return r;
    struct tn_tensor *o = tn_to_dtype(r, dtype);
    tn_release(r);
    return o;
}

struct tn_tensor *tn__nn_zeros64(const int64_t *sizes, int ndim)
{
    return tn_zeros(sizes, ndim, TN_FLOAT64);
}

static struct tn_tensor *wrapped(double v)
{
    struct tn_tensor *t = tn_scalar_tensor(tn_float(v), TN_FLOAT64);
    if (t)
        t->flags |= TN_TENSOR_WRAPPED_NUMBER;
    return t;
}

struct tn_tensor *tn__nn_scale(const struct tn_tensor *x, double v)
{
    struct tn_tensor *s = wrapped(v), *r = s ? tn_mul(x, s) : NULL;
    tn_release(s);
    return r;
}

struct tn_tensor *tn__nn_plus(const struct tn_tensor *x, double v)
{
    struct tn_tensor *s = wrapped(v), *r = s ? tn_add(x, s, tn_int(1)) : NULL;
    tn_release(s);
    return r;
}

int tn__nn_drop(int rc, struct tn_tensor *a, struct tn_tensor *b, struct tn_tensor *c,
                struct tn_tensor *d)
{
    tn_release(a);
    tn_release(b);
    tn_release(c);
    tn_release(d);
    return rc;
}

int tn__nn_check_float(const char *kernel, const struct tn_tensor *t)
{
    return tn__nn_check_dtype(kernel, t->dtype, tn_dtype_is_floating(t->dtype));
}

int tn__nn_check_dtype(const char *kernel, enum tn_dtype dtype, bool ok)
{
    if (ok)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                        tn_dtype_info(dtype)->c10_name);
}

/* The floating dtype self and target compute in (PyTorch's common dtype of
 * its elementwise losses), or an error naming the kernel. */
int tn__nn_check_loss_dtype(const char *kernel, const struct tn_tensor *self,
                            const struct tn_tensor *target)
{
    const struct tn_tensor *both[2] = {self, target};
    enum tn_dtype dt = tn_result_type(both, 2, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return tn_last_status();
    return tn__nn_check_dtype(kernel, dt, tn_dtype_is_floating(dt));
}

/* ---------------------------------------------------------------- losses */

/* nll_loss_nd: nll_loss over (N, C, d1, ...) too: classes moved last and
 * flattened to (N*d1*..., C), the result of reduction none shaped as the
 * target. */
struct tn_tensor *tn__composite_nll_loss_nd(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *target,
                                         const struct tn_tensor *weight, int64_t reduction,
                                         int64_t ignore_index)
{
    struct tn_keep k = {0};
    struct tn_tensor *x, *t, *out, *tw = NULL, *r;
    if (self->ndim <= 2) {
        x = (struct tn_tensor *)self;
        t = (struct tn_tensor *)target;
    } else {
        int64_t perm[TN_MAX_DIMS];
        perm[0] = 0;
        for (int i = 2; i < self->ndim; i++)
            perm[i - 1] = i;
        perm[self->ndim - 1] = 1;
        if (target->ndim != self->ndim - 1 || target->sizes[0] != self->sizes[0] ||
            memcmp(target->sizes + 1, self->sizes + 2, sizeof(int64_t) * (size_t)(self->ndim - 2))) {
            char a[128], b[128];
            int64_t want[TN_MAX_DIMS];
            want[0] = self->sizes[0];
            memcpy(want + 1, self->sizes + 2, sizeof(int64_t) * (size_t)(self->ndim - 2));
            tn_set_error(TN_ESHAPE, "Expected target size %s, got %s",
                         tn_shape_format(want, self->ndim - 1, a, sizeof a),
                         tn_shape_format(target->sizes, target->ndim, b, sizeof b));
            return NULL;
        }
        struct tn_tensor *p;
        TN_KEEP(&k, p, tn_permute(self, perm, self->ndim));
        TN_KEEP(&k, x, tn_reshape(p, TN_SHAPE(-1, self->sizes[1])));
        TN_KEEP(&k, t, tn_reshape(target, TN_SHAPE(-1)));
    }
    if (tn__redispatch_nll_loss_forward(ks, x, t, weight, reduction, ignore_index, &out, &tw) < 0)
        goto fail;
    tn__keep(&k, out);
    tn__keep(&k, tw);
    r = out;
    if (self->ndim > 2 && reduction == TN_REDUCTION_NONE)
        TN_KEEP(&k, r, tn_reshape(out, target->sizes, target->ndim));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* nll_loss: 1-D or 2-D input only (nll_loss_forward's checks) */
struct tn_tensor *tn__composite_nll_loss(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *target,
                                         const struct tn_tensor *weight, int64_t reduction,
                                         int64_t ignore_index)
{
    struct tn_tensor *out, *tw;
    if (tn__redispatch_nll_loss_forward(ks, self, target, weight, reduction, ignore_index, &out,
                                       &tw) < 0)
        return NULL;
    tn_release(tw);
    return out;
}

/* weight (C) shaped to broadcast along dim 1 of an n-dim input */
static struct tn_tensor *class_view(const struct tn_tensor *w, int ndim)
{
    int64_t s[TN_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        s[i] = 1;
    s[ndim == 1 ? 0 : 1] = tn_numel(w);
    return tn_reshape(w, s, ndim);
}

static struct tn_tensor *reduce(struct tn_keep *k, struct tn_tensor *x, int64_t reduction)
{
    if (reduction == TN_REDUCTION_MEAN)
        return tn__keep(k, tn_mean(x, TN_DTYPE_UNSET));
    if (reduction == TN_REDUCTION_SUM)
        return tn__keep(k, tn_sum(x, TN_DTYPE_UNSET));
    return x;
}

/* cross_entropy with class probabilities as the target */
static struct tn_tensor *ce_probs(struct tn_keep *k, const struct tn_tensor *logp,
                                  const struct tn_tensor *target, const struct tn_tensor *weight,
                                  int64_t reduction, double ls)
{
    int cd = logp->ndim == 1 ? 0 : 1;
    int64_t c = logp->sizes[cd];
    char a[128], b[128];
    if (logp->ndim != target->ndim ||
        memcmp(logp->sizes, target->sizes, sizeof(int64_t) * (size_t)logp->ndim)) {
        tn_set_error(TN_ESHAPE, "Expected input batch_size (%lld) to match target batch_size "
                     "(%lld).", (long long)logp->sizes[0], (long long)target->sizes[0]);
        (void)a, (void)b;
        return NULL;
    }
    struct tn_tensor *t = (struct tn_tensor *)target, *p, *s, *l;
    if (ls > 0) {
        struct tn_tensor *t1;
        TN_KEEP(k, t1, tn__nn_scale(target, (1 - ls)));
        TN_KEEP(k, t, tn__nn_plus(t1, ls / (double)c));
    }
    TN_KEEP(k, p, tn_mul(logp, t));
    if (weight) {
        struct tn_tensor *wv;
        TN_KEEP(k, wv, class_view(weight, logp->ndim));
        TN_KEEP(k, p, tn_mul(p, wv));
    }
    int64_t d = cd;
    TN_KEEP(k, s, tn_sum_dim_intlist(p, &d, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(k, l, tn_neg(s));
    if (reduction == TN_REDUCTION_MEAN) {
        struct tn_tensor *sum;
        TN_KEEP(k, sum, tn_sum(l, TN_DTYPE_UNSET));
        return tn__keep(k, tn__nn_scale(sum, (c / (double)tn_numel(logp))));
    }
    return reduce(k, l, reduction);
fail:
    return NULL;
}

/* PyTorch's label smoothing over class indices: (1 - ls) * nll + ls / C *
 * the mean (or sum) of -sum_c w_c logp_c over the targets not ignored. */
static struct tn_tensor *ce_smooth(tn_keyset ks, struct tn_keep *k, const struct tn_tensor *logp,
                                   const struct tn_tensor *target, const struct tn_tensor *weight,
                                   int64_t reduction, int64_t ignore, double ls)
{
    int cd = logp->ndim == 1 ? 0 : 1;
    int64_t c = logp->sizes[cd], d = cd;
    struct tn_tensor *nll, *p = (struct tn_tensor *)logp, *s, *keep, *keepf, *sm, *ret, *a, *b;
    TN_KEEP(k, nll, tn__redispatch_nll_loss_nd(ks, logp, target, weight, reduction, ignore));
    if (weight) {
        struct tn_tensor *wv;
        TN_KEEP(k, wv, class_view(weight, logp->ndim));
        TN_KEEP(k, p, tn_mul(logp, wv));
    }
    TN_KEEP(k, s, tn_sum_dim_intlist(p, &d, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(k, keep, tn_ne_scalar(target, tn_int(ignore)));
    TN_KEEP(k, keepf, tn_to_dtype(keep, logp->dtype));
    TN_KEEP(k, sm, tn_mul(s, keepf));
    TN_KEEP(k, sm, tn_neg(sm));
    if (reduction == TN_REDUCTION_MEAN) {
        struct tn_tensor *num, *den;
        TN_KEEP(k, num, tn_sum(sm, TN_DTYPE_UNSET));
        if (weight) {
            /* the weights of the targets not ignored */
            struct tn_tensor *zero, *safe, *flat, *wt;
            TN_KEEP(k, zero, tn_zeros_like(target, TN_DTYPE_UNSET));
            TN_KEEP(k, safe, tn_where_self(keep, target, zero));
            TN_KEEP(k, flat, tn_reshape(safe, TN_SHAPE(-1)));
            TN_KEEP(k, wt, tn_index_select(weight, 0, flat));
            TN_KEEP(k, wt, tn_reshape(wt, target->sizes, target->ndim));
            TN_KEEP(k, wt, tn_mul(wt, keepf));
            TN_KEEP(k, den, tn_sum(wt, TN_DTYPE_UNSET));
        } else {
            TN_KEEP(k, den, tn_sum(keepf, TN_DTYPE_UNSET));
        }
        TN_KEEP(k, ret, tn_div(num, den));
    } else {
        ret = reduce(k, sm, reduction);
        if (!ret)
            goto fail;
    }
    TN_KEEP(k, a, tn__nn_scale(nll, (1 - ls)));
    TN_KEEP(k, b, tn__nn_scale(ret, (ls / (double)c)));
    return tn__keep(k, tn_add(a, b, tn_int(1)));
fail:
    return NULL;
}

struct tn_tensor *tn__composite_cross_entropy_loss(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_tensor *target,
                                                   const struct tn_tensor *weight,
                                                   int64_t reduction, int64_t ignore_index,
                                                   double label_smoothing)
{
    struct tn_keep k = {0};
    struct tn_tensor *logp, *r;
    if (label_smoothing < 0 || label_smoothing > 1) {
        tn_set_error(TN_EINVAL, "label_smoothing must be between 0.0 and 1.0. Got: %g",
                     label_smoothing);
        return NULL;
    }
    TN_KEEP(&k, logp, tn_log_softmax_int(self, self->ndim == 1 ? 0 : 1, TN_DTYPE_UNSET));
    if (tn_dtype_is_floating(target->dtype))
        r = ce_probs(&k, logp, target, weight, reduction, label_smoothing);
    else if (label_smoothing > 0)
        r = ce_smooth(ks, &k, logp, target, weight, reduction, ignore_index, label_smoothing);
    else
        r = tn__keep(&k, tn__redispatch_nll_loss_nd(ks, logp, target, weight, reduction,
                                                   ignore_index));
    if (!r)
        goto fail;
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* (1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t:
 * log(1 + e^-x) without overflow for large |x|. */
struct tn_tensor *tn__composite_binary_cross_entropy_with_logits(
    tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *target,
    const struct tn_tensor *weight, const struct tn_tensor *pos_weight, int64_t reduction)
{
    struct tn_keep k = {0};
    struct tn_tensor *omt, *a, *ab, *na, *e, *l1, *nx, *mx, *sp, *loss;
    struct tn_scalar zero = tn_int(0);
    TN_KEEP(&k, omt, tn_neg(target));
    TN_KEEP(&k, omt, tn_add_scalar(omt, tn_int(1), tn_int(1)));
    TN_KEEP(&k, a, tn_mul(omt, self));
    TN_KEEP(&k, ab, tn_abs(self));
    TN_KEEP(&k, na, tn_neg(ab));
    TN_KEEP(&k, e, tn_exp(na));
    TN_KEEP(&k, l1, tn_log1p(e));
    TN_KEEP(&k, nx, tn_neg(self));
    TN_KEEP(&k, mx, tn_clamp(nx, &zero, NULL));
    TN_KEEP(&k, sp, tn_add(l1, mx, tn_int(1)));
    if (pos_weight) {
        struct tn_tensor *pw1, *lw;
        TN_KEEP(&k, pw1, tn_sub_scalar(pos_weight, tn_int(1), tn_int(1)));
        TN_KEEP(&k, lw, tn_mul(pw1, target));
        TN_KEEP(&k, lw, tn_add_scalar(lw, tn_int(1), tn_int(1)));
        TN_KEEP(&k, sp, tn_mul(lw, sp));
    }
    TN_KEEP(&k, loss, tn_add(a, sp, tn_int(1)));
    if (weight)
        TN_KEEP(&k, loss, tn_mul(loss, weight));
    if (!(loss = reduce(&k, loss, reduction)))
        goto fail;
    return tn__keep_out(&k, loss);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* ------------------------------------------------------------- embedding */

/* weight.index_select(0, indices.reshape(-1)).view(indices.sizes + [D]) */
struct tn_tensor *tn__composite_embedding(tn_keyset ks, const struct tn_tensor *weight,
                                          const struct tn_tensor *indices, int64_t padding_idx,
                                          bool scale_grad_by_freq, bool sparse)
{
    if (weight->ndim != 2) {
        tn_set_error(TN_ESHAPE, "'weight' must be 2-D");
        return NULL;
    }
    if (indices->dtype != TN_INT64 && indices->dtype != TN_INT32) {
        tn_set_error(TN_EDTYPE, "Expected tensor for argument #1 'indices' to have one of the "
                     "following scalar types: Long, Int; but got torch.%sTensor instead (while "
                     "checking arguments for embedding)", tn_dtype_info(indices->dtype)->c10_name);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *flat, *rows, *r;
    int64_t sizes[TN_MAX_DIMS];
    if (indices->ndim + 1 > TN_MAX_DIMS) {
        tn_set_error(TN_ESHAPE, "embedding: indices have too many dims");
        return NULL;
    }
    memcpy(sizes, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
    sizes[indices->ndim] = weight->sizes[1];
    TN_KEEP(&k, flat, tn_reshape(indices, TN_SHAPE(-1)));
    TN_KEEP(&k, rows, tn__redispatch_index_select(ks, weight, 0, flat));
    TN_KEEP(&k, r, tn_reshape(rows, sizes, indices->ndim + 1));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* ----------------------------------------------------------- normalizing */

struct tn_tensor *tn__composite_layer_norm(tn_keyset ks, const struct tn_tensor *input,
                                           const int64_t *normalized_shape,
                                           int normalized_shape_len,
                                           const struct tn_tensor *weight,
                                           const struct tn_tensor *bias, double eps,
                                           bool cudnn_enable)
{
    struct tn_tensor *out, *mean, *rstd;
    if (tn__redispatch_native_layer_norm(ks, input, normalized_shape, normalized_shape_len, weight,
                                        bias, eps, &out, &mean, &rstd) < 0)
        return NULL;
    tn_release(mean);
    tn_release(rstd);
    return out;
}

struct tn_tensor *tn__composite_batch_norm(tn_keyset ks, const struct tn_tensor *input,
                                           const struct tn_tensor *weight,
                                           const struct tn_tensor *bias,
                                           const struct tn_tensor *running_mean,
                                           const struct tn_tensor *running_var, bool training,
                                           double momentum, double eps, bool cudnn_enabled)
{
    struct tn_tensor *out, *a, *b;
    if (tn__redispatch_native_batch_norm(ks, input, weight, bias, running_mean, running_var,
                                        training, momentum, eps, &out, &a, &b) < 0)
        return NULL;
    tn_release(a);
    tn_release(b);
    return out;
}

int tn__composite__native_batch_norm_legit_no_training(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,
    const struct tn_tensor *bias, const struct tn_tensor *running_mean,
    const struct tn_tensor *running_var, double momentum, double eps, struct tn_tensor **result0,
    struct tn_tensor **result1, struct tn_tensor **result2)
{
    return tn__redispatch_native_batch_norm(ks, input, weight, bias, running_mean, running_var,
                                           false, momentum, eps, result0, result1, result2);
}

/* The functional IR's training batch norm: native_batch_norm updating
 * copies of the running statistics, returned as the last two results. */
int tn__composite__native_batch_norm_legit_functional(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,
    const struct tn_tensor *bias, const struct tn_tensor *running_mean,
    const struct tn_tensor *running_var, bool training, double momentum, double eps,
    struct tn_tensor **result0, struct tn_tensor **result1, struct tn_tensor **result2,
    struct tn_tensor **running_mean_out, struct tn_tensor **running_var_out)
{
    struct tn_tensor *rm = tn_clone(running_mean), *rv = rm ? tn_clone(running_var) : NULL;
    int rc = rv ? tn_native_batch_norm(input, weight, bias, rm, rv, training, momentum, eps,
                                       result0, result1, result2)
                : tn_last_status();
    if (rc < 0) {
        tn_release(rm);
        tn_release(rv);
        return rc;
    }
    *running_mean_out = rm;
    *running_var_out = rv;
    return rc;
}

/* ------------------------------------------- convolution, pooling, dropout */

/* conv2d: convolution without transposition; a (C, H, W) input is a batch
 * of one. */
struct tn_tensor *tn__composite_conv2d(tn_keyset ks, const struct tn_tensor *input,
                                       const struct tn_tensor *weight,
                                       const struct tn_tensor *bias, const int64_t *stride,
                                       int stride_len, const int64_t *padding, int padding_len,
                                       const int64_t *dilation, int dilation_len, int64_t groups)
{
    static const int64_t zero[2] = {0, 0};
    if (input->ndim != 3 && input->ndim != 4) {
        char a[128];
        tn_set_error(TN_ESHAPE, "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                     "input of size: %s", tn_shape_format(input->sizes, input->ndim, a, sizeof a));
        return NULL;
    }
    struct tn_tensor *x = input->ndim == 3 ? tn_unsqueeze(input, 0) : tn_retain((struct tn_tensor *)input);
    struct tn_tensor *r = x ? tn__redispatch_convolution(ks, x, weight, bias, stride, stride_len,
                                                        padding, padding_len, dilation,
                                                        dilation_len, false, zero, 2, groups)
                            : NULL;
    tn_release(x);
    if (r && input->ndim == 3) {
        struct tn_tensor *s = tn_squeeze_dims(r, TN_SHAPE(0));
        tn_release(r);
        r = s;
    }
    return r;
}

struct tn_tensor *tn__composite_max_pool2d(tn_keyset ks, const struct tn_tensor *self,
                                           const int64_t *kernel_size, int kernel_size_len,
                                           const int64_t *stride, int stride_len,
                                           const int64_t *padding, int padding_len,
                                           const int64_t *dilation, int dilation_len,
                                           bool ceil_mode)
{
    struct tn_tensor *out, *idx;
    if (tn__redispatch_max_pool2d_with_indices(ks, self, kernel_size, kernel_size_len, stride,
                                              stride_len, padding, padding_len, dilation,
                                              dilation_len, ceil_mode, &out, &idx) < 0)
        return NULL;
    tn_release(idx);
    return out;
}

struct tn_tensor *tn__composite_adaptive_avg_pool2d(tn_keyset ks, const struct tn_tensor *self,
                                                    const int64_t *output_size,
                                                    int output_size_len)
{
    return tn__redispatch_underscore_adaptive_avg_pool2d(ks, self, output_size, output_size_len);
}

/* PyTorch's dropout on the CPU: input * (bernoulli_(1 - p) / (1 - p)) with
 * a noise tensor of the input's dtype (native_dropout's mask is bool). */
struct tn_tensor *tn__composite_dropout(tn_keyset ks, const struct tn_tensor *input, double p,
                                        bool train)
{
    if (p < 0 || p > 1) {
        tn_set_error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    if (p == 0 || !train || tn_numel(input) == 0)
        return tn_retain((struct tn_tensor *)input);
    if (p == 1)
        return tn__nn_scale(input, 0.0);
    struct tn_tensor *noise = tn_empty(input->sizes, input->ndim, input->dtype);
    struct tn_tensor *q = wrapped(1 - p), *d = NULL, *r = NULL;
    if (noise && q && tn_bernoulli_(noise, 1 - p, NULL) == 0 && (d = tn_div(noise, q)) != NULL)
        r = tn_mul(input, d);
    tn__nn_drop(0, noise, q, d, NULL);
    return r;
}

/* ------------------------------------------ single-gradient backward ops */
/*
 * tensorkit's own ops (namespace tn::) for derivatives.yaml, whose formulas
 * give one tensor per input: each returns one output of a backward op that
 * has several (convolution_backward), or recomputes what a decomposition's
 * forward kept (nll_loss's total weight).
 */

static struct tn_tensor *conv_bw_one(int which, const struct tn_tensor *grad_output,
                                     const struct tn_tensor *input, const struct tn_tensor *weight,
                                     const int64_t *stride, int stride_len, const int64_t *padding,
                                     int padding_len, const int64_t *dilation, int dilation_len,
                                     bool transposed, const int64_t *output_padding,
                                     int output_padding_len, int64_t groups)
{
    bool mask[3] = {which == 0, which == 1, which == 2};
    struct tn_tensor *r[3];
    if (tn_convolution_backward(grad_output, input, weight, NULL, 0, stride, stride_len, padding,
                                padding_len, dilation, dilation_len, transposed, output_padding,
                                output_padding_len, groups, mask, 3, &r[0], &r[1], &r[2]) < 0)
        return NULL;
    for (int i = 0; i < 3; i++)
        if (i != which)
            tn_release(r[i]);
    return r[which];
}

#define TN_CONV_BW(NAME, WHICH)                                                                \
    struct tn_tensor *tn__composite_##NAME(                                                    \
        tn_keyset ks, const struct tn_tensor *grad_output, const struct tn_tensor *input,      \
        const struct tn_tensor *weight, const int64_t *stride, int stride_len,                 \
        const int64_t *padding, int padding_len, const int64_t *dilation, int dilation_len,    \
        bool transposed, const int64_t *output_padding, int output_padding_len, int64_t groups) \
    {                                                                                          \
        return conv_bw_one(WHICH, grad_output, input, weight, stride, stride_len, padding,     \
                           padding_len, dilation, dilation_len, transposed, output_padding,    \
                           output_padding_len, groups);                                        \
    }
TN_CONV_BW(convolution_backward_input, 0)
TN_CONV_BW(convolution_backward_weight, 1)
TN_CONV_BW(convolution_backward_bias, 2)

struct tn_tensor *tn__composite_nll_loss_backward_recompute(
    tn_keyset ks, const struct tn_tensor *grad_output, const struct tn_tensor *self,
    const struct tn_tensor *target, const struct tn_tensor *weight, int64_t reduction,
    int64_t ignore_index)
{
    struct tn_keep k = {0};
    struct tn_tensor *x = (struct tn_tensor *)self, *t = (struct tn_tensor *)target;
    struct tn_tensor *g = (struct tn_tensor *)grad_output, *out, *tw, *r;
    int nd = self->ndim;
    int64_t perm[TN_MAX_DIMS], inv[TN_MAX_DIMS], psizes[TN_MAX_DIMS];
    if (nd > 2) { /* nll_loss_nd's layout: classes last, flattened */
        perm[0] = inv[0] = 0;
        for (int i = 2; i < nd; i++)
            perm[i - 1] = i;
        perm[nd - 1] = 1;
        inv[1] = nd - 1;
        for (int i = 2; i < nd; i++)
            inv[i] = i - 1;
        for (int i = 0; i < nd; i++)
            psizes[i] = self->sizes[perm[i]];
        struct tn_tensor *p;
        TN_KEEP(&k, p, tn_permute(self, perm, nd));
        TN_KEEP(&k, x, tn_reshape(p, TN_SHAPE(-1, self->sizes[1])));
        TN_KEEP(&k, t, tn_reshape(target, TN_SHAPE(-1)));
        if (reduction == TN_REDUCTION_NONE)
            TN_KEEP(&k, g, tn_reshape(grad_output, TN_SHAPE(-1)));
    }
    if (tn_nll_loss_forward(x, t, weight, reduction, ignore_index, &out, &tw) < 0)
        goto fail;
    tn__keep(&k, out);
    tn__keep(&k, tw);
    TN_KEEP(&k, r, tn_nll_loss_backward(g, x, t, weight, reduction, ignore_index, tw));
    if (nd > 2) {
        struct tn_tensor *rs;
        TN_KEEP(&k, rs, tn_reshape(r, psizes, nd));
        TN_KEEP(&k, r, tn_permute(rs, inv, nd));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* embedding's weight gradient, num_weights taken from the weight */
struct tn_tensor *tn__composite_embedding_backward_weight(tn_keyset ks,
                                                          const struct tn_tensor *grad,
                                                          const struct tn_tensor *weight,
                                                          const struct tn_tensor *indices,
                                                          int64_t padding_idx,
                                                          bool scale_grad_by_freq)
{
    return tn_embedding_dense_backward(grad, indices, weight->ndim ? weight->sizes[0] : 1,
                                       padding_idx, scale_grad_by_freq);
}
