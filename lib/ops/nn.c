/*
 * ops/nn.c: the device-independent half of the nn ops: helpers the nn
 * kernels share, and the CompositeImplicitAutograd decompositions PyTorch
 * has for them (layer_norm, batch_norm, group_norm, conv2d, max_pool2d,
 * adaptive_avg_pool2d, dropout, embedding).  The losses are in
 * nn_loss.c, the other convolutions in conv.c, padding in pad.c.
 */
#include <config.h>

#include <math.h>
#include <stdint.h>
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
    if (tn_numel(input) == 0) {
        /* PyTorch's _batch_norm_impl_index: an empty input (of any rank)
         * gives a copy of it, times weight[0] plus bias[0], not a view
         * (the gradient's chain stays whole) */
        struct tn_keep k = {0};
        struct tn_tensor *w0, *b0;
        TN_KEEP(&k, out, tn_clone(input));
        if (weight) {
            TN_KEEP(&k, w0, tn_select(weight, 0, 0));
            TN_KEEP(&k, out, tn_mul(out, w0));
        }
        if (bias) {
            TN_KEEP(&k, b0, tn_select(bias, 0, 0));
            TN_KEEP(&k, out, tn_add(out, b0, tn_int(1)));
        }
        return tn__keep_out(&k, out);
    fail:
        tn__keep_free(&k);
        return NULL;
    }
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

/* torch.export's core ATen batch norm: native_batch_norm, its running
 * statistics (if any) updated in place in training as there. */
int tn__composite__native_batch_norm_legit(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,
    const struct tn_tensor *bias, const struct tn_tensor *running_mean,
    const struct tn_tensor *running_var, bool training, double momentum, double eps,
    struct tn_tensor **result0, struct tn_tensor **result1, struct tn_tensor **result2)
{
    return tn__redispatch_native_batch_norm(ks, input, weight, bias, running_mean, running_var,
                                           training, momentum, eps, result0, result1, result2);
}

int tn__composite__native_batch_norm_legit_no_stats(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,
    const struct tn_tensor *bias, bool training, double momentum, double eps,
    struct tn_tensor **result0, struct tn_tensor **result1, struct tn_tensor **result2)
{
    if (!training) /* PyTorch's words (batch_norm_cpu) */
        return tn_set_error(TN_EINVAL, "running_mean must be defined in evaluation mode");
    return tn__redispatch_native_batch_norm(ks, input, weight, bias, NULL, NULL, training,
                                           momentum, eps, result0, result1, result2);
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

/* avg_pool1d: (N, C, L) or (C, L) as (.., 1, L) through avg_pool2d with a
 * (1, kernel) window, as PyTorch's (stride defaults to the kernel). */
struct tn_tensor *tn__composite_avg_pool1d(tn_keyset ks, const struct tn_tensor *self,
                                           const int64_t *kernel_size, int kernel_size_len,
                                           const int64_t *stride, int stride_len,
                                           const int64_t *padding, int padding_len,
                                           bool ceil_mode, bool count_include_pad)
{
    if (kernel_size_len != 1 || (stride_len != 0 && stride_len != 1) || padding_len != 1) {
        bool k = kernel_size_len != 1, p = !k && padding_len != 1;
        tn_set_error(TN_EINVAL, "avg_pool1d() argument '%s' should contain one int (got %d)",
                     k ? "kernel_size" : p ? "padding" : "stride",
                     k ? kernel_size_len : p ? padding_len : stride_len);
        return NULL;
    }
    if (self->ndim != 2 && self->ndim != 3) {
        tn_set_error(TN_ESHAPE, "Expected 2 to 3 dimensions, but got %d-dimensional tensor for "
                     "argument #1 'self' (while checking arguments for avg_pool1d)", self->ndim);
        return NULL;
    }
    const int64_t k2[2] = {1, kernel_size[0]};
    const int64_t s2[2] = {1, stride_len ? stride[0] : kernel_size[0]};
    const int64_t p2[2] = {0, padding[0]};
    struct tn_tensor *x = tn_unsqueeze(self, -2);
    struct tn_tensor *r = x ? tn__redispatch_avg_pool2d(ks, x, k2, 2, s2, 2, p2, 2, ceil_mode,
                                                        count_include_pad, NULL)
                            : NULL;
    struct tn_tensor *out = r ? tn_squeeze_dims(r, TN_SHAPE(-2)) : NULL;
    tn_release(x);
    tn_release(r);
    return out;
}

/* max_pool1d_with_indices: (N, C, L) or (C, L) as (.., 1, L) through
 * max_pool2d_with_indices with a (1, k) window, as PyTorch's
 * (checkDimRange and check1d first, in its words). */
int tn__composite_max_pool1d_with_indices(tn_keyset ks, const struct tn_tensor *self,
                                          const int64_t *kernel_size, int kernel_size_len,
                                          const int64_t *stride, int stride_len,
                                          const int64_t *padding, int padding_len,
                                          const int64_t *dilation, int dilation_len,
                                          bool ceil_mode, struct tn_tensor **result0,
                                          struct tn_tensor **result1)
{
    *result0 = *result1 = NULL;
    if (stride_len == 0) {
        stride = kernel_size;
        stride_len = kernel_size_len;
    }
    if (self->ndim != 2 && self->ndim != 3)
        return tn_set_error(TN_ESHAPE, "Expected 2 to 3 dimensions, but got %d-dimensional tensor "
                            "for argument #1 'self' (while checking arguments for max_pool1d)",
                            self->ndim);
    static const char *const names[] = {"kernel_size", "stride", "padding", "dilation"};
    const int lens[] = {kernel_size_len, stride_len, padding_len, dilation_len};
    for (int i = 0; i < 4; i++)
        if (lens[i] != 1)
            return tn_set_error(TN_EINVAL, "max_pool1d() argument '%s' should contain one int "
                                "(got %d)", names[i], lens[i]);
    const int64_t k2[2] = {1, kernel_size[0]}, s2[2] = {1, stride[0]}, p2[2] = {0, padding[0]},
                  d2[2] = {1, dilation[0]};
    struct tn_tensor *x = tn_unsqueeze(self, -2), *o = NULL, *i = NULL;
    int rc = x ? tn__redispatch_max_pool2d_with_indices(ks, x, k2, 2, s2, 2, p2, 2, d2, 2,
                                                        ceil_mode, &o, &i)
               : tn_last_status();
    tn_release(x);
    if (rc >= 0) {
        *result0 = tn_squeeze_dims(o, TN_SHAPE(-2));
        *result1 = *result0 ? tn_squeeze_dims(i, TN_SHAPE(-2)) : NULL;
        if (!*result1) {
            tn_release(*result0);
            *result0 = NULL;
            rc = tn_last_status();
        }
    }
    tn__nn_drop(0, o, i, NULL, NULL);
    return rc < 0 ? rc : TN_OK;
}

/* max_pool1d: PyTorch's check_max_pool1d (its words, output size
 * included), then max_pool2d over (.., 1, L), which computes the values
 * alone outside autograd and goes through max_pool2d_with_indices under it
 * (PyTorch's max_pool1d takes max_pool1d_with_indices for a gradient). */
struct tn_tensor *tn__composite_max_pool1d(tn_keyset ks, const struct tn_tensor *self,
                                           const int64_t *kernel_size, int kernel_size_len,
                                           const int64_t *stride, int stride_len,
                                           const int64_t *padding, int padding_len,
                                           const int64_t *dilation, int dilation_len,
                                           bool ceil_mode)
{
    char a[128];
    const char *bad = NULL;
    if (self->ndim != 2 && self->ndim != 3) {
        tn_set_error(TN_ESHAPE, "max_pool1d: Expected 2D or 3D (batch mode) tensor with "
                     "optional 0 dim batch size for input, but got:%s",
                     tn_shape_format(self->sizes, self->ndim, a, sizeof a));
        return NULL;
    }
    if (kernel_size_len != 1)
        bad = "kernel_size must be an int, list of ints or tuple of ints";
    else if (stride_len > 1)
        bad = "stride must be None, an int, list of ints, or tuple of ints";
    else if (padding_len != 1)
        bad = "padding must be an int, list of ints, or tuple of ints";
    else if (dilation_len != 1)
        bad = "dilation must be an int, list of ints or tuple of ints";
    if (bad) {
        tn_set_error(TN_EINVAL, "max_pool1d() %s of size 1 but got size %d", bad,
                     kernel_size_len != 1 ? kernel_size_len : stride_len > 1 ? stride_len
                     : padding_len != 1 ? padding_len : dilation_len);
        return NULL;
    }
    int64_t k = kernel_size[0], s = stride_len ? stride[0] : k, p = padding[0], d = dilation[0];
    if (k <= 0 || s <= 0 || p < 0 || p > k / 2 || d <= 0) {
        if (k <= 0 || s <= 0 || d <= 0)
            tn_set_error(TN_EINVAL, "max_pool1d() %s must be greater than zero, but got %lld",
                         k <= 0 ? "kernel_size" : s <= 0 ? "stride" : "dilation",
                         (long long)(k <= 0 ? k : s <= 0 ? s : d));
        else if (p < 0)
            tn_set_error(TN_EINVAL, "max_pool1d() padding must be non-negative, but got %lld",
                         (long long)p);
        else
            tn_set_error(TN_EINVAL, "max_pool1d() padding should be at most half of kernel "
                         "size, but got padding=%lld and kernel_size=%lld", (long long)p,
                         (long long)k);
        return NULL;
    }
    /* pooling_output_shape */
    int64_t l = self->sizes[self->ndim - 1];
    int64_t num = l + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t ow = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (ow - 1) * s >= l + p)
        ow--;
    if (ow <= 0) {
        tn_set_error(TN_ESHAPE, "max_pool1d() Invalid computed output size: %lld", (long long)ow);
        return NULL;
    }
    const int64_t k2[2] = {1, k}, s2[2] = {1, s}, p2[2] = {0, p}, d2[2] = {1, d};
    struct tn_tensor *x = tn_unsqueeze(self, -2);
    struct tn_tensor *r = x ? tn__composite_max_pool2d(ks, x, k2, 2, s2, 2, p2, 2, d2, 2,
                                                       ceil_mode)
                            : NULL;
    struct tn_tensor *out = r ? tn_squeeze_dims(r, TN_SHAPE(-2)) : NULL;
    tn__nn_drop(0, x, r, NULL, NULL);
    return out;
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

/* grid_sampler: grid_sampler_2d for 4-D inputs, grid_sampler_3d for 5-D
 * ones, as PyTorch's without cuDNN. */
struct tn_tensor *tn__composite_grid_sampler(tn_keyset ks, const struct tn_tensor *input,
                                             const struct tn_tensor *grid,
                                             int64_t interpolation_mode, int64_t padding_mode,
                                             bool align_corners)
{
    if (input->ndim == 5)
        return tn_grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners);
    return tn_grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners);
}

/* zeros on dev (a Meta tensor: sizes only) */
static struct tn_tensor *zeros_on(const int64_t *sz, int nd, enum tn_dtype dt,
                                  struct tn_device dev)
{
    struct tn_tensor *r = tn_empty_on(sz, nd, dt, dev);
    if (r && dev.type == TN_DEVICE_CPU && tn_fill_(r, tn_int(0)) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

/* *t (released) as a tensor of n values (n x d for d > 0) of its dtype:
 * its values where they fit, zeros past them. */
static int resize_aux(struct tn_tensor **t, int64_t n, int64_t d)
{
    int64_t sz[2] = {n, d};
    int nd = d > 0 ? 2 : 1;
    if ((*t)->ndim == nd && (*t)->sizes[0] == n && (nd == 1 || (*t)->sizes[1] == d))
        return TN_OK;
    struct tn_tensor *r = zeros_on(sz, nd, (*t)->dtype, (*t)->device);
    if (!r)
        return tn_last_status();
    if ((*t)->device.type == TN_DEVICE_CPU && (*t)->ndim == nd && tn_numel(*t) > 0 && n > 0 &&
        (nd == 1 || (*t)->sizes[1] == d)) {
        int64_t m = (*t)->sizes[0] < n ? (*t)->sizes[0] : n;
        struct tn_tensor *dst = tn_slice(r, 0, 0, m, 1), *src = tn_slice(*t, 0, 0, m, 1);
        int rc = dst && src ? tn_copy_(dst, src) : tn_last_status();
        tn__nn_drop(0, dst, src, NULL, NULL);
        if (rc < 0) {
            tn_release(r);
            return rc;
        }
    }
    tn_release(*t);
    *t = r;
    return TN_OK;
}

/* embedding_bag's offset2bag, bag_size and max_indices in the sizes
 * torch.export declares for them (PyTorch's meta functions of
 * _embedding_bag, or of _embedding_bag_forward_only, which
 * embedding_bag calls for a weight that does not require grad), where
 * those differ from its CPU kernel's: offset2bag of every index off
 * float32/float16 (bfloat16 is on the CPU kernel's fast path, not on the
 * meta function's; its bags computed here), bag_size of every offset
 * (include_last_offset, forward only). Values the kernel has none for are
 * 0. Nothing reads these outputs but the graph's shape check. */
static int embedding_bag_export_sizes(const struct tn_tensor *weight,
                                      const struct tn_tensor *indices,
                                      const struct tn_tensor *offsets, int64_t mode,
                                      const struct tn_tensor *psw, bool include_last_offset,
                                      int64_t pad, struct tn_tensor **offset2bag,
                                      struct tn_tensor **bag_size,
                                      struct tn_tensor **max_indices)
{
    if (weight->ndim != 2 || offsets->ndim != 1 || indices->ndim != 1 ||
        (weight->device.type != TN_DEVICE_CPU && weight->device.type != TN_DEVICE_META))
        return TN_OK;
    int64_t nb = offsets->sizes[0] - (include_last_offset ? 1 : 0), ni = indices->sizes[0];
    if (nb < 0)
        return TN_OK;
    bool fast = (weight->dtype == TN_FLOAT32 || weight->dtype == TN_FLOAT16) &&
                (weight->sizes[1] <= 1 || weight->strides[1] == 1) && pad < 0 &&
                (!psw || psw->ndim != 1 || psw->sizes[0] <= 1 || psw->strides[0] == 1);
    int64_t o2b = mode != 0 || !fast ? ni : 0;
    int64_t bags = weight->requires_grad ? nb : offsets->sizes[0];
    if ((*offset2bag)->sizes[0] != o2b) {
        struct tn_tensor *r = zeros_on(&o2b, 1, (*offset2bag)->dtype, weight->device);
        if (!r)
            return tn_last_status();
        if (o2b && weight->device.type == TN_DEVICE_CPU) { /* the bag of each index */
            struct tn_tensor *of = tn__nn_as(offsets, TN_INT64);
            struct tn_tensor *rl = of ? tn__nn_as(r, TN_INT64) : NULL;
            if (!rl) {
                tn__nn_drop(0, of, r, NULL, NULL);
                return tn_last_status();
            }
            const int64_t *ov = tn_data(of);
            int64_t *bv = tn_data(rl), b = 0;
            for (int64_t k = 0; k < ni; k++) {
                while (b + 1 < nb && ov[b + 1] <= k)
                    b++;
                bv[k] = b;
            }
            int rc = rl != r ? tn_copy_(r, rl) : TN_OK;
            tn__nn_drop(0, of, rl, NULL, NULL);
            if (rc < 0) {
                tn_release(r);
                return rc;
            }
        }
        tn_release(*offset2bag);
        *offset2bag = r;
    }
    int rc = resize_aux(bag_size, bags, 0);
    return rc < 0 ? rc : resize_aux(max_indices, nb, mode == 2 ? weight->sizes[1] : 0);
}

/* embedding_bag.padding_idx: _embedding_bag with indices and offsets of
 * one integer type (int32 only when both are), padding_idx None as -1 and
 * a negative one counted from the end, as PyTorch's. */
int tn__composite_embedding_bag_padding_idx(
    tn_keyset ks, const struct tn_tensor *weight, const struct tn_tensor *indices,
    const struct tn_tensor *offsets, bool scale_grad_by_freq, int64_t mode, bool sparse,
    const struct tn_tensor *per_sample_weights, bool include_last_offset,
    const int64_t *padding_idx, struct tn_tensor **result0, struct tn_tensor **result1,
    struct tn_tensor **result2, struct tn_tensor **result3)
{
    int64_t pad = -1, nw = weight->ndim ? weight->sizes[0] : 0;
    if (padding_idx) {
        pad = *padding_idx;
        if (pad < -nw || pad >= nw)
            return tn_set_error(TN_EINDEX, "padding_idx must be within the number of "
                                "embeddings, -%lld through %lld, but got %lld", (long long)nw,
                                (long long)(nw - 1), (long long)pad);
        if (pad < 0)
            pad += nw;
    }
    struct tn_tensor *i = NULL, *o = NULL;
    if (indices->dtype != offsets->dtype && (indices->dtype == TN_INT32 || indices->dtype == TN_INT64) &&
        (offsets->dtype == TN_INT32 || offsets->dtype == TN_INT64)) {
        i = tn_to_dtype(indices, TN_INT64);
        o = i ? tn_to_dtype(offsets, TN_INT64) : NULL;
        if (!o) {
            tn_release(i);
            return tn_last_status();
        }
    }
    int rc = tn_underscore_embedding_bag(weight, i ? i : indices, o ? o : offsets,
                                         scale_grad_by_freq, mode, sparse, per_sample_weights,
                                         include_last_offset, pad, result0, result1, result2,
                                         result3);
    if (rc >= 0)
        rc = embedding_bag_export_sizes(weight, i ? i : indices, o ? o : offsets, mode,
                                        per_sample_weights, include_last_offset, pad, result1,
                                        result2, result3);
    tn_release(i);
    tn_release(o);
    if (rc < 0) {
        tn__nn_drop(0, *result0, *result1, *result2, *result3);
        *result0 = *result1 = *result2 = *result3 = NULL;
    }
    return rc;
}

int tn__composite_embedding_bag(tn_keyset ks, const struct tn_tensor *weight,
                                const struct tn_tensor *indices, const struct tn_tensor *offsets,
                                bool scale_grad_by_freq, int64_t mode, bool sparse,
                                const struct tn_tensor *per_sample_weights,
                                bool include_last_offset, struct tn_tensor **result0,
                                struct tn_tensor **result1, struct tn_tensor **result2,
                                struct tn_tensor **result3)
{
    return tn__composite_embedding_bag_padding_idx(ks, weight, indices, offsets,
                                                   scale_grad_by_freq, mode, sparse,
                                                   per_sample_weights, include_last_offset, NULL,
                                                   result0, result1, result2, result3);
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

/* ------------------------------------------------ 3-D pooling
 * max_pool3d_with_indices and avg_pool3d (core ATen) as decompositions:
 * self padded (with the lowest value for max, zeros for avg) far enough
 * for every window, ceil_mode's last one included, its windows gathered
 * as [N, C, oD, oH, oW, kD * kH * kW] (stride and dilation in the table of
 * positions); max reduces the window (its index mapped to d * H * W +
 * h * W + w of the unpadded plane through another table), avg sums it and
 * divides by PyTorch's divisor. The gradients are those of pad,
 * index_select, max.dim/sum and div. PyTorch's checks and words. */
/* Whether the n values of v fit a C int, as PyTorch's pools read them. */
static bool pool_ints(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] < INT32_MIN || v[i] > INT32_MAX)
            return false;
    return true;
}

static int pool_int_error(void)
{
    return tn_set_error(TN_EINVAL, "value cannot be converted to type int without overflow");
}

/* Contract in ops/nn_internal.h. One checker for the 2-D and 3-D pools,
 * in PyTorch 2.x's order and words: the list lengths (max_pool2d, avg_pool2d
 * and max_pool3d say "must either be", avg_pool3d "must be"), the early rank
 * check of the max pools and avg_pool3d, the divisor, then
 * pooling_output_shape per spatial dim (Pool.h) and pool2d_shape_check /
 * pool3d_shape_check (PoolingChecks.h). */
int tn__pool_check(enum tn__pool_kind kind, const struct tn_tensor *self, const int64_t *ks,
                   int nks, const int64_t *st, int nst, const int64_t *pd, int npd,
                   const int64_t *dl, int ndl, bool ceil_mode, const int64_t *divisor_override,
                   struct tn__pool *g)
{
    static const char *const ops[] = {"max_pool2d", "avg_pool2d", "max_pool3d", "avg_pool3d"};
    const char *op = ops[kind], *either = kind == TN_POOL_AVG3D ? "" : "either ";
    bool avg = kind == TN_POOL_AVG2D || kind == TN_POOL_AVG3D;
    int n = kind == TN_POOL_MAX2D || kind == TN_POOL_AVG2D ? 2 : 3, nd = self->ndim;
    const char *count = n == 2 ? "two" : "three";
    char shape[256];
    tn_shape_format(self->sizes, nd, shape, sizeof shape);
    /* each list's length, then its values as C ints (safe_downcast) */
    if (nks != 1 && nks != n)
        return tn_set_error(TN_EINVAL, "%s: kernel_size must %sbe a single int, or a tuple of "
                            "%s ints", op, either, count);
    if (!pool_ints(ks, nks))
        return pool_int_error();
    if (nst != 0 && nst != 1 && nst != n)
        return tn_set_error(TN_EINVAL, "%s: stride must %sbe omitted, a single int, or a tuple "
                            "of %s ints", op, either, count);
    if (!pool_ints(st, nst))
        return pool_int_error();
    if (npd != 1 && npd != n)
        return tn_set_error(TN_EINVAL, "%s: padding must %sbe a single int, or a tuple of %s "
                            "ints", op, either, count);
    if (!pool_ints(pd, npd))
        return pool_int_error();
    if (!avg && ndl != 1 && ndl != n)
        return tn_set_error(TN_EINVAL, "%s: dilation must be either a single int, or a tuple of "
                            "%s ints", op, count);
    if (!avg && !pool_ints(dl, ndl))
        return pool_int_error();
    if (kind != TN_POOL_AVG2D && nd != n + 1 && nd != n + 2)
        return tn_set_error(TN_ESHAPE, "non-empty %dD or %dD (batch mode) tensor expected for "
                            "input", n + 1, n + 2);
    if (avg && divisor_override && *divisor_override == 0)
        return tn_set_error(TN_EINVAL, "divisor must be not zero");
    if (nd == 0) /* avg_pool2d reads size(-3) first */
        return tn_set_error(TN_EINDEX, "Dimension specified as -3 but tensor has no dimensions");
    if (nd < n + 1)
        return tn_wrap_dim(-3, nd) < 0 ? tn_last_status() : TN_OK;
    g->n = n;
    g->planes = self->sizes[nd - n - 1];
    for (int i = 0; i < n; i++) {
        g->k[i] = ks[nks == 1 ? 0 : i];
        g->s[i] = nst == 0 ? g->k[i] : st[nst == 1 ? 0 : i];
        g->p[i] = pd[npd == 1 ? 0 : i];
        g->d[i] = avg ? 1 : dl[ndl == 1 ? 0 : i];
        g->in[i] = self->sizes[nd - n + i];
    }
    /* pooling_output_shape, dim by dim */
    for (int i = 0; i < n; i++) {
        int64_t eff;
        if (g->s[i] == 0)
            return tn_set_error(TN_EINVAL, "stride should not be zero");
        if (g->p[i] < 0)
            return tn_set_error(TN_EINVAL, "pad must be non-negative, but got pad: %lld",
                                (long long)g->p[i]);
        if (__builtin_mul_overflow(g->k[i] - 1, g->d[i], &eff) ||
            __builtin_add_overflow(eff, 1, &eff))
            return tn_set_error(TN_EINVAL, "effective kernel size overflows, but got "
                                "kernel_size=%lld and dilation=%lld", (long long)g->k[i],
                                (long long)g->d[i]);
        if (g->p[i] > eff / 2)
            return tn_set_error(TN_EINVAL, "pad should be at most half of effective kernel size, "
                                "but got pad=%lld, kernel_size=%lld and dilation=%lld",
                                (long long)g->p[i], (long long)g->k[i], (long long)g->d[i]);
        int64_t num = g->in[i] + 2 * g->p[i] - eff + (ceil_mode ? g->s[i] - 1 : 0);
        int64_t o = (num >= 0 ? num / g->s[i] : -((-num + g->s[i] - 1) / g->s[i])) + 1;
        if (ceil_mode && (o - 1) * g->s[i] >= g->in[i] + g->p[i])
            o--;
        g->out[i] = o;
    }
    /* pool2d_shape_check / pool3d_shape_check */
    const int64_t *k = g->k, *s = g->s, *d = g->d, *p = g->p, *in = g->in, *out = g->out;
    if (n == 2) {
        if (k[0] <= 0 || k[1] <= 0)
            return tn_set_error(TN_EINVAL, "kernel size should be greater than zero, but got "
                                "kH: %lld kW: %lld", (long long)k[0], (long long)k[1]);
        if (s[0] <= 0 || s[1] <= 0)
            return tn_set_error(TN_EINVAL, "stride should be greater than zero, but got dH: "
                                "%lld dW: %lld", (long long)s[0], (long long)s[1]);
        if (d[0] <= 0 || d[1] <= 0)
            return tn_set_error(TN_EINVAL, "dilation should be greater than zero, but got "
                                "dilationH: %lld dilationW: %lld", (long long)d[0],
                                (long long)d[1]);
        const int64_t *z = self->sizes;
        bool valid = z[1] != 0 && z[2] != 0;
        if (nd == 4 && tn__strides_like_channels_last(self, 4)) {
            if (!valid || z[3] == 0)
                return tn_set_error(TN_ESHAPE, "Expected 4D (batch mode) tensor expected for "
                                    "input with channels_last layout with optional 0 dim batch "
                                    "size for input, but got: %s", shape);
        } else if (!(nd == 3 && z[0] != 0 && valid) && !(nd == 4 && valid && z[3] != 0)) {
            return tn_set_error(TN_ESHAPE, "Expected 3D or 4D (batch mode) tensor with optional "
                                "0 dim batch size for input, but got:%s", shape);
        }
        if (k[1] / 2 < p[1] || k[0] / 2 < p[0])
            return tn_set_error(TN_EINVAL, "pad should be smaller than or equal to half of "
                                "kernel size, but got padW = %lld, padH = %lld, kW = %lld, "
                                "kH = %lld", (long long)p[1], (long long)p[0], (long long)k[1],
                                (long long)k[0]);
        if (out[0] < 1 || out[1] < 1)
            return tn_set_error(TN_ESHAPE, "Given input size: (%lldx%lldx%lld). Calculated "
                                "output size: (%lldx%lldx%lld). Output size is too small",
                                (long long)g->planes, (long long)in[0], (long long)in[1],
                                (long long)g->planes, (long long)out[0], (long long)out[1]);
        return TN_OK;
    }
    if (k[0] <= 0 || k[1] <= 0 || k[2] <= 0)
        return tn_set_error(TN_EINVAL, "kernel size should be greater than zero, but got kT: %lld "
                            "kH: %lld kW: %lld", (long long)k[0], (long long)k[1],
                            (long long)k[2]);
    if (s[0] <= 0 || s[1] <= 0 || s[2] <= 0)
        return tn_set_error(TN_EINVAL, "stride should be greater than zero, but got dT: %lld dH: "
                            "%lld dW: %lld", (long long)s[0], (long long)s[1], (long long)s[2]);
    if (d[0] <= 0 || d[1] <= 0 || d[2] <= 0)
        return tn_set_error(TN_EINVAL, "dilation should be greater than zero, but got dilationT: "
                            "%lld dilationH: %lld dilationW: %lld", (long long)d[0],
                            (long long)d[1], (long long)d[2]);
    /* check_non_empty_dims: a batch of 0 is allowed */
    for (int i = nd == 5 ? 1 : 0; i < nd; i++)
        if (self->sizes[i] == 0)
            return tn_set_error(TN_ESHAPE, "%s: Expected input to have non-zero size for "
                                "non-batch dimensions, but input has sizes %s with dimension %d "
                                "being empty", avg ? "avg_pool3d()" :
                                "max_pool3d_with_indices_out_cpu_template()", shape, i);
    if (avg && (in[0] < k[0] || in[1] < k[1] || in[2] < k[2]))
        return tn_set_error(TN_ESHAPE, "input image (T: %lld H: %lld W: %lld) smaller than "
                            "kernel size (kT: %lld kH: %lld kW: %lld)", (long long)in[0],
                            (long long)in[1], (long long)in[2], (long long)k[0], (long long)k[1],
                            (long long)k[2]);
    if (k[0] / 2 < p[0] || k[2] / 2 < p[2] || k[1] / 2 < p[1])
        return tn_set_error(TN_EINVAL, "pad should be smaller than or equal to half of kernel "
                            "size, but got kT: %lld kW: %lld kH: %lld padT: %lld padW: %lld "
                            "padH: %lld", (long long)k[0], (long long)k[2], (long long)k[1],
                            (long long)p[0], (long long)p[2], (long long)p[1]);
    if (out[0] < 1 || out[1] < 1 || out[2] < 1)
        return tn_set_error(TN_ESHAPE, "Given input size: (%lldx%lldx%lldx%lld). Calculated "
                            "output size: (%lldx%lldx%lldx%lld). Output size is too small",
                            (long long)g->planes, (long long)in[0], (long long)in[1],
                            (long long)in[2], (long long)g->planes, (long long)out[0],
                            (long long)out[1], (long long)out[2]);
    return TN_OK;
}

/* self as [N, C, D, H, W] (a 4-D input gets N = 1), padded with `value`,
 * its windows gathered as [N, C, oD, oH, oW, kD * kH * kW] by index_select
 * of the flattened padded plane through a table of positions (a gather
 * rather than an overlapping view, so that the gradient is index_select's) */
static struct tn_tensor *pool3_windows(const struct tn_tensor *self, const struct tn__pool *g,
                                       struct tn_scalar value)
{
    struct tn_tensor *x5 = self->ndim == 4 ? tn_unsqueeze(self, 0) : tn_retain((struct tn_tensor *)self);
    if (!x5)
        return NULL;
    int64_t pad[6], ps[3]; /* constant_pad_nd's order: the last dim first */
    for (int i = 0; i < 3; i++) {
        int64_t need = (g->out[i] - 1) * g->s[i] + g->d[i] * (g->k[i] - 1) + 1 - g->p[i] - g->in[i];
        pad[2 * (2 - i)] = g->p[i];
        pad[2 * (2 - i) + 1] = need > 0 ? need : 0;
        ps[i] = g->in[i] + g->p[i] + pad[2 * (2 - i) + 1];
    }
    struct tn_tensor *xp = tn_constant_pad_nd(x5, pad, 6, value);
    int64_t fl[3] = {x5->sizes[0], x5->sizes[1], ps[0] * ps[1] * ps[2]};
    int64_t K = g->k[0] * g->k[1] * g->k[2], O = g->out[0] * g->out[1] * g->out[2], OK = O * K;
    struct tn_tensor *xf = xp ? tn_reshape(xp, fl, 3) : NULL;
    struct tn_tensor *table = xf ? tn_empty_on(&OK, 1, TN_INT64, xf->device) : NULL, *r = NULL;
    if (table && table->device.type == TN_DEVICE_CPU) {
        int64_t *t = tn_data(table);
        for (int64_t o = 0; o < O; o++)
            for (int64_t l = 0; l < K; l++) {
                int64_t oo[3] = {o / (g->out[1] * g->out[2]), o / g->out[2] % g->out[1], o % g->out[2]};
                int64_t ll[3] = {l / (g->k[1] * g->k[2]), l / g->k[2] % g->k[1], l % g->k[2]}, at = 0;
                for (int i = 0; i < 3; i++)
                    at = at * ps[i] + oo[i] * g->s[i] + ll[i] * g->d[i];
                t[o * K + l] = at;
            }
    } else if (table && table->device.type != TN_DEVICE_META) {
        tn_set_error(TN_EDEVICE, "3-D pooling: only the CPU and Meta are supported");
        goto out;
    }
    struct tn_tensor *sel = table ? tn_index_select(xf, 2, table) : NULL;
    int64_t wsz[6] = {fl[0], fl[1], g->out[0], g->out[1], g->out[2], K};
    r = sel ? tn_reshape(sel, wsz, 6) : NULL;
    tn_release(sel);
out:
    tn_release(x5);
    tn_release(xp);
    tn_release(xf);
    tn_release(table);
    return r;
}

/* the result back to self's rank (a 4-D input's N = 1 dropped) */
static struct tn_tensor *pool3_rank(const struct tn_tensor *self, struct tn_tensor *r)
{
    if (!r || self->ndim == 5)
        return r;
    struct tn_tensor *s = tn_squeeze_dims(r, (const int64_t[]){0}, 1);
    tn_release(r);
    return s;
}

int tn__composite_max_pool3d_with_indices(tn_keyset ks, const struct tn_tensor *self,
                                          const int64_t *kernel_size, int kernel_size_len,
                                          const int64_t *stride, int stride_len,
                                          const int64_t *padding, int padding_len,
                                          const int64_t *dilation, int dilation_len,
                                          bool ceil_mode, struct tn_tensor **result0,
                                          struct tn_tensor **result1)
{
    struct tn__pool g;
    *result0 = *result1 = NULL;
    int rc = tn__pool_check(TN_POOL_MAX3D, self, kernel_size, kernel_size_len, stride, stride_len,
                            padding, padding_len, dilation, dilation_len, ceil_mode, NULL, &g);
    if (rc < 0)
        return rc;
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"max_pool3d_with_indices\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name);
    struct tn_scalar lowest = tn_dtype_is_floating(self->dtype) ? tn_float(-INFINITY)
                              : self->dtype == TN_UINT8 ? tn_int(0)
                              : self->dtype == TN_INT8 ? tn_int(INT8_MIN)
                              : self->dtype == TN_INT16 ? tn_int(INT16_MIN)
                              : self->dtype == TN_INT32 ? tn_int(INT32_MIN) : tn_int(INT64_MIN);
    int64_t K = g.k[0] * g.k[1] * g.k[2], O = g.out[0] * g.out[1] * g.out[2];
    struct tn_tensor *wf = pool3_windows(self, &g, lowest);
    struct tn_tensor *v = NULL, *li = NULL, *table = NULL, *tx = NULL, *ix = NULL, *liu = NULL;
    if (!wf || tn_max_dim(wf, -1, false, &v, &li) < 0)
        goto out;
    /* table[od, oh, ow, l]: the plane index window l of output (od, oh, ow) reads */
    int64_t tsz[4] = {g.out[0], g.out[1], g.out[2], K};
    table = tn_empty_on(tsz, 4, TN_INT64, li->device);
    if (!table)
        goto out;
    if (li->device.type == TN_DEVICE_CPU) {
        int64_t *t = tn_data(table);
        for (int64_t o = 0; o < O; o++)
            for (int64_t l = 0; l < K; l++) {
                int64_t oo[3] = {o / (g.out[1] * g.out[2]), o / g.out[2] % g.out[1], o % g.out[2]};
                int64_t ll[3] = {l / (g.k[1] * g.k[2]), l / g.k[2] % g.k[1], l % g.k[2]}, at = 0;
                for (int i = 0; i < 3; i++)
                    at = at * g.in[i] + oo[i] * g.s[i] - g.p[i] + ll[i] * g.d[i];
                t[o * K + l] = at;
            }
    } else if (li->device.type != TN_DEVICE_META) {
        tn_set_error(TN_EDEVICE, "max_pool3d_with_indices: only the CPU and Meta are supported");
        goto out;
    }
    int64_t esz[6] = {li->sizes[0], li->sizes[1], g.out[0], g.out[1], g.out[2], K};
    tx = tn_expand(table, esz, 6);
    liu = tx ? tn_unsqueeze(li, -1) : NULL;
    struct tn_tensor *gi = liu ? tn_gather(tx, -1, liu, false) : NULL;
    ix = gi ? tn_squeeze_dims(gi, (const int64_t[]){-1}, 1) : NULL;
    tn_release(gi);
    if (!ix)
        goto out;
    *result0 = pool3_rank(self, v);
    *result1 = pool3_rank(self, ix);
    v = ix = NULL;
    if (*result0 && *result1 && tn__strides_like_channels_last(self, 5)) {
        /* PyTorch's kernel: self's suggest_memory_format */
        int64_t mf = 3;
        struct tn_tensor *a = tn_underscore_to_copy(*result0, TN_DTYPE_UNSET, NULL, NULL, NULL, false, &mf);
        struct tn_tensor *b = tn_underscore_to_copy(*result1, TN_DTYPE_UNSET, NULL, NULL, NULL, false, &mf);
        tn_release(*result0);
        tn_release(*result1);
        *result0 = a, *result1 = b;
    }
    if (!*result0 || !*result1) {
        tn_release(*result0);
        tn_release(*result1);
        *result0 = *result1 = NULL;
    }
out:
    tn_release(wf);
    tn_release(v);
    tn_release(li);
    tn_release(table);
    tn_release(tx);
    tn_release(liu);
    tn_release(ix);
    return *result0 ? TN_OK : tn_last_status() ? tn_last_status() : TN_EINVAL;
}

struct tn_tensor *tn__composite_avg_pool3d(tn_keyset ks, const struct tn_tensor *self,
                                           const int64_t *kernel_size, int kernel_size_len,
                                           const int64_t *stride, int stride_len,
                                           const int64_t *padding, int padding_len,
                                           bool ceil_mode, bool count_include_pad,
                                           const int64_t *divisor_override)
{
    struct tn__pool g;
    if (tn__pool_check(TN_POOL_AVG3D, self, kernel_size, kernel_size_len, stride, stride_len,
                       padding, padding_len, NULL, 0, ceil_mode, divisor_override, &g) < 0)
        return NULL;
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype) || self->dtype == TN_BFLOAT16 ||
        self->dtype == TN_FLOAT16)
        return tn_set_error(TN_EDTYPE, "\"avg_pool3d_out_frame\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    struct tn_tensor *w = pool3_windows(self, &g, tn_int(0));
    int64_t last = -1;
    struct tn_tensor *s = w ? tn_sum_dim_intlist(w, &last, 1, false, TN_DTYPE_UNSET) : NULL;
    tn_release(w);
    if (!s)
        return NULL;
    /* the divisor of each output, PyTorch's: the override, or the window
     * clipped to the padded input (count_include_pad), or to the input */
    int64_t dsz[3] = {g.out[0], g.out[1], g.out[2]};
    bool fl = tn_dtype_is_floating(self->dtype);
    struct tn_tensor *dv = tn_empty_on(dsz, 3, fl ? self->dtype : TN_INT64, s->device), *r = NULL;
    if (dv && s->device.type == TN_DEVICE_CPU) {
        int64_t o = 0;
        for (int64_t a = 0; a < g.out[0]; a++)
            for (int64_t b = 0; b < g.out[1]; b++)
                for (int64_t c = 0; c < g.out[2]; c++, o++) {
                    int64_t at[3] = {a, b, c}, n = 1;
                    for (int i = 0; i < 3; i++) {
                        int64_t lo = at[i] * g.s[i] - g.p[i], hi = lo + g.k[i];
                        if (hi > g.in[i] + g.p[i])
                            hi = g.in[i] + g.p[i];
                        int64_t cnt = hi - lo;
                        if (!count_include_pad) {
                            lo = lo < 0 ? 0 : lo;
                            hi = hi > g.in[i] ? g.in[i] : hi;
                            cnt = hi - lo;
                        }
                        n *= cnt;
                    }
                    if (divisor_override)
                        n = *divisor_override;
                    if (self->dtype == TN_FLOAT32)
                        ((float *)tn_data(dv))[o] = (float)n;
                    else if (self->dtype == TN_FLOAT64)
                        ((double *)tn_data(dv))[o] = (double)n;
                    else
                        ((int64_t *)tn_data(dv))[o] = n;
                }
    } else if (dv && s->device.type != TN_DEVICE_META) {
        tn_set_error(TN_EDEVICE, "avg_pool3d: only the CPU and Meta are supported");
        tn_release(dv);
        dv = NULL;
    }
    if (dv)
        r = fl ? tn_div(s, dv) : tn_div_mode(s, dv, "trunc");
    tn_release(s);
    tn_release(dv);
    return pool3_rank(self, r);
}

/* max_pool3d (what torch.export writes for F.max_pool3d): the values of
 * max_pool3d_with_indices */
struct tn_tensor *tn__composite_max_pool3d(tn_keyset ks, const struct tn_tensor *self,
                                           const int64_t *kernel_size, int kernel_size_len,
                                           const int64_t *stride, int stride_len,
                                           const int64_t *padding, int padding_len,
                                           const int64_t *dilation, int dilation_len,
                                           bool ceil_mode)
{
    struct tn_tensor *v = NULL, *ix = NULL;
    if (tn__composite_max_pool3d_with_indices(ks, self, kernel_size, kernel_size_len, stride,
                                              stride_len, padding, padding_len, dilation,
                                              dilation_len, ceil_mode, &v, &ix) < 0)
        return NULL;
    tn_release(ix);
    return v;
}

/* ------------------------------------------------ adaptive 3-D average pooling
 * _adaptive_avg_pool3d as a decomposition: an adaptive average is separable
 * (window o of a dimension of size n is [floor(o n / out), ceil((o + 1) n /
 * out))), so it is three products with averaging matrices, W, then H, then
 * D, computed in float64 (float32 for float32, float16 and bfloat16) and
 * rounded once, except that float16 and bfloat16 take the values PyTorch's
 * kernel rounds step by step (pool3_half_values); Meta shapes and gradients
 * are those of matmul. PyTorch's checks and words. */
static struct tn_tensor *avg_matrix(int64_t out, int64_t n, enum tn_dtype dt,
                                    struct tn_device dev)
{
    struct tn_tensor *p = tn_empty_on(TN_SHAPE(out, n), TN_FLOAT64, dev);
    if (!p || dev.type == TN_DEVICE_META)
        return p ? tn__nn_to(p, dt) : NULL;
    double *d = tn_data(p);
    for (int64_t o = 0; o < out; o++) {
        int64_t lo = o * n / out, hi = ((o + 1) * n + out - 1) / out;
        for (int64_t i = 0; i < n; i++)
            d[o * n + i] = i >= lo && i < hi ? 1.0 / (double)(hi - lo) : 0.0;
    }
    return tn__nn_to(p, dt);
}

/* float16 and bfloat16: the values of PyTorch's CPU kernel, which keeps a
 * running sum in the dtype (over d, then h, then w) and divides it by kD,
 * kH and kW in turn, each step rounded; a new float32 tensor of them. */
static float round_half(enum tn_dtype dt, float v)
{
    return dt == TN_BFLOAT16 ? tn_bfloat16_to_float(tn_bfloat16_from_float(v))
                             : tn_half_to_float(tn_half_from_float(v));
}

static struct tn_tensor *pool3_half_values(const struct tn_tensor *self, const int64_t *osz)
{
    int nd = self->ndim;
    int64_t planes = 1, sz[5];
    for (int i = 0; i < nd - 3; i++)
        planes *= self->sizes[i];
    memcpy(sz, self->sizes, sizeof(int64_t) * (size_t)(nd - 3));
    memcpy(sz + nd - 3, osz, 3 * sizeof(int64_t));
    const int64_t *in = self->sizes + nd - 3;
    struct tn_tensor *x = tn__nn_as(self, TN_FLOAT32), *out = x ? tn_empty(sz, nd, TN_FLOAT32) : NULL;
    if (!out) {
        tn_release(x);
        return NULL;
    }
    const float *xp = tn_data(x);
    float *op = tn_data(out);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t od = 0; od < osz[0]; od++)
            for (int64_t oh = 0; oh < osz[1]; oh++)
                for (int64_t ow = 0; ow < osz[2]; ow++) {
                    int64_t lo[3], hi[3], o[3] = {od, oh, ow};
                    for (int i = 0; i < 3; i++) {
                        lo[i] = o[i] * in[i] / osz[i];
                        hi[i] = ((o[i] + 1) * in[i] + osz[i] - 1) / osz[i];
                    }
                    float s = 0;
                    for (int64_t d = lo[0]; d < hi[0]; d++)
                        for (int64_t h = lo[1]; h < hi[1]; h++)
                            for (int64_t w = lo[2]; w < hi[2]; w++)
                                s = round_half(self->dtype,
                                               s + xp[((p * in[0] + d) * in[1] + h) * in[2] + w]);
                    for (int i = 0; i < 3; i++)
                        s = round_half(self->dtype, s / (float)(hi[i] - lo[i]));
                    *op++ = s;
                }
    tn_release(x);
    return out;
}

struct tn_tensor *tn__composite__adaptive_avg_pool3d(tn_keyset ks, const struct tn_tensor *self,
                                                     const int64_t *output_size,
                                                     int output_size_len)
{
    char a[128];
    if (output_size_len != 3)
        return tn_set_error(TN_EINVAL, "adaptive_avg_pool3d: output_size must be 3"), NULL;
    enum tn_dtype dt = self->dtype;
    if (dt != TN_FLOAT32 && dt != TN_FLOAT64 && dt != TN_FLOAT16 && dt != TN_BFLOAT16)
        return tn_set_error(TN_EDTYPE, "\"adaptive_avg_pool3d_cpu\" not implemented for '%s'",
                            tn_dtype_info(dt)->c10_name), NULL;
    if (self->ndim != 4 && self->ndim != 5)
        return tn_set_error(TN_ESHAPE, "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got "
                            "%s", tn_shape_format(self->sizes, self->ndim, a, sizeof a)), NULL;
    for (int i = self->ndim - 4; i < self->ndim; i++)
        if (i > 0 || self->ndim == 4)
            if (self->sizes[i] == 0)
                return tn_set_error(TN_ESHAPE, "adaptive_avg_pool3d(): Expected input to have "
                                    "non-zero size for non-batch dimensions, but input has sizes "
                                    "%s with dimension %d being empty",
                                    tn_shape_format(self->sizes, self->ndim, a, sizeof a), i),
                       NULL;
    for (int i = 0; i < 3; i++)
        if (output_size[i] < 0)
            return tn_set_error(TN_EINVAL, "adaptive_avg_pool3d: output_size must be "
                                "non-negative, got %lld", (long long)output_size[i]), NULL;
    const int64_t *in = self->sizes + self->ndim - 3;
    enum tn_dtype ct = dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
    struct tn_keep k = {0};
    struct tn_tensor *x, *pd, *ph, *pw, *pwt, *y, *z, *zf, *v, *r;
    TN_KEEP(&k, x, tn__nn_as(self, ct));
    TN_KEEP(&k, pd, avg_matrix(output_size[0], in[0], ct, self->device));
    TN_KEEP(&k, ph, avg_matrix(output_size[1], in[1], ct, self->device));
    TN_KEEP(&k, pw, avg_matrix(output_size[2], in[2], ct, self->device));
    TN_KEEP(&k, pwt, tn_transpose(pw, 0, 1));
    TN_KEEP(&k, y, tn_matmul(x, pwt));  /* [.., D, H, oW] */
    TN_KEEP(&k, z, tn_matmul(ph, y));   /* [.., D, oH, oW] */
    int64_t sz[5];
    int nd = self->ndim;
    memcpy(sz, self->sizes, sizeof(int64_t) * (size_t)(nd - 3));
    sz[nd - 3] = in[0];
    sz[nd - 2] = output_size[1] * output_size[2];
    TN_KEEP(&k, zf, tn_reshape(z, sz, nd - 1));
    TN_KEEP(&k, v, tn_matmul(pd, zf));  /* [.., oD, oH * oW] */
    sz[nd - 3] = output_size[0];
    sz[nd - 2] = output_size[1];
    sz[nd - 1] = output_size[2];
    TN_KEEP(&k, r, tn_reshape(v, sz, nd));
    if (dt != ct && self->device.type == TN_DEVICE_CPU) {
        /* PyTorch's rounded values, the products' gradient: r + (them - r), the
         * difference detached (exact in float32, so the sum is them) */
        struct tn_tensor *hv, *d, *dd;
        TN_KEEP(&k, hv, pool3_half_values(self, output_size));
        TN_KEEP(&k, d, tn_sub(hv, r, tn_int(1)));
        TN_KEEP(&k, dd, tn_detach(d));
        TN_KEEP(&k, r, tn_add(r, dd, tn_int(1)));
    }
    if (dt != ct)
        TN_KEEP(&k, r, tn_to_dtype(r, dt));
    else
        TN_KEEP(&k, r, tn_contiguous(r));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_adaptive_avg_pool3d(tn_keyset ks, const struct tn_tensor *self,
                                                    const int64_t *output_size,
                                                    int output_size_len)
{
    /* PyTorch's: a mean over the three dims for an output of 1 x 1 x 1 */
    if (output_size_len == 3 && output_size[0] == 1 && output_size[1] == 1 &&
        output_size[2] == 1 && (self->ndim == 4 || self->ndim == 5) &&
        tn_dtype_is_floating(self->dtype))
        return tn_mean_dim(self, (const int64_t[]){-1, -2, -3}, 3, true, TN_DTYPE_UNSET);
    return tn__composite__adaptive_avg_pool3d(ks, self, output_size, output_size_len);
}
