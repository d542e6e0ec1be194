/*
 * ops/nn.c: the device-independent half of the nn ops: helpers the nn
 * kernels share, and the CompositeImplicitAutograd decompositions PyTorch
 * has for them (layer_norm, batch_norm, group_norm, conv2d, max_pool2d,
 * adaptive_avg_pool2d, dropout, embedding).  The losses are in
 * nn_loss.c, the other convolutions in conv.c, padding in pad.c.
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

/* PyTorch's group_norm: its checks, then native_group_norm's first result
 * over input (N, C, *). */
struct tn_tensor *tn__composite_group_norm(tn_keyset ks, const struct tn_tensor *input,
                                           int64_t num_groups, const struct tn_tensor *weight,
                                           const struct tn_tensor *bias, double eps,
                                           bool cudnn_enabled)
{
    char a[128], b[128];
    if (input->ndim < 2)
        return tn_set_error(TN_EINDEX, "Dimension out of range (expected to be in range of "
                            "[-1, 0], but got 1)"), NULL;
    int64_t n = input->sizes[0], c = input->sizes[1], hxw = 1;
    for (int i = 2; i < input->ndim; i++)
        hxw *= input->sizes[i];
    if (num_groups <= 0 || c % num_groups)
        return tn_set_error(TN_ESHAPE, "Expected number of channels in input to be divisible "
                            "by num_groups, but got input of shape %s and num_groups=%lld",
                            tn_shape_format(input->sizes, input->ndim, a, sizeof a),
                            (long long)num_groups), NULL;
    const struct tn_tensor *wb[2] = {weight, bias};
    const char *what[2] = {"weight", "bias"};
    for (int i = 0; i < 2; i++)
        if (wb[i] && (wb[i]->ndim != 1 || tn_numel(wb[i]) != c))
            return tn_set_error(TN_ESHAPE, "Expected %s to be a vector of size equal to the "
                                "number of channels in input, but got %s of shape %s and input "
                                "of shape %s", what[i], what[i],
                                tn_shape_format(wb[i]->sizes, wb[i]->ndim, b, sizeof b),
                                tn_shape_format(input->sizes, input->ndim, a, sizeof a)), NULL;
    struct tn_tensor *y, *mean, *rstd;
    if (tn_native_group_norm(input, weight, bias, n, c, hxw, num_groups, eps, &y, &mean,
                             &rstd) < 0)
        return NULL;
    tn__nn_drop(0, mean, rstd, NULL, NULL);
    return y;
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
    if (!(ks & TN_KEYSET(TN_KEY_AUTOGRAD))) { /* no graph: the values alone */
        bool handled;
        out = tn__cpu_max_pool2d_values(self, kernel_size, kernel_size_len, stride, stride_len,
                                        padding, padding_len, dilation, dilation_len, ceil_mode,
                                        &handled);
        if (handled)
            return out;
    }
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

/* adaptive_avg_pool1d: (N, C, L) or (C, L) as (.., 1, L) through
 * adaptive_avg_pool2d with output (1, output_size), as PyTorch's. */
struct tn_tensor *tn__composite_adaptive_avg_pool1d(tn_keyset ks, const struct tn_tensor *self,
                                                    const int64_t *output_size,
                                                    int output_size_len)
{
    if (output_size_len != 1) {
        tn_set_error(TN_EINVAL, "adaptive_avg_pool1d: output_size should contain one int "
                     "(got %d)", output_size_len);
        return NULL;
    }
    if (self->ndim != 2 && self->ndim != 3) {
        tn_set_error(TN_ESHAPE, "Expected 2 to 3 dimensions, but got %d-dimensional tensor for "
                     "argument #1 'self' (while checking arguments for adaptive_avg_pool1d)",
                     self->ndim);
        return NULL;
    }
    const int64_t size2[2] = {1, output_size[0]};
    struct tn_tensor *x = tn_unsqueeze(self, -2);
    struct tn_tensor *r = x ? tn__redispatch_adaptive_avg_pool2d(ks, x, size2, 2) : NULL;
    struct tn_tensor *s = r ? tn_squeeze_dims(r, TN_SHAPE(-2)) : NULL;
    tn_release(x);
    tn_release(r);
    return s;
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
    /* on the input's device: a meta pass draws nothing */
    struct tn_tensor *noise = tn_empty_on(input->sizes, input->ndim, input->dtype, input->device);
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
