/*
 * ops/conv.c: the CompositeImplicitAutograd front ends PyTorch puts over
 * convolution and the upsample kernels: conv1d, conv_transpose1d, the
 * padding="same"/"valid" overloads of conv1d and conv2d (with an unbatched
 * input as one sample), and the .vec overloads of upsample_nearest2d and
 * upsample_bilinear2d that F.interpolate calls; conv_transpose2d at the
 * end.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "ops/nn_internal.h"

/* One convolution call but for its input; `mode` ("same"/"valid") replaces
 * padding when set. */
struct conv_call {
    const struct tn_tensor *weight, *bias;
    const int64_t *stride, *padding, *dilation, *output_padding;
    int stride_len, padding_len, dilation_len, output_padding_len;
    const char *mode;
    bool transposed;
    int64_t groups;
};

static const int64_t zeros[TN_MAX_DIMS];

/* PyTorch's convolution_same: stride 1 only; the padding dilation * (k -
 * 1) split with the smaller half on the left, an odd remainder added to
 * the input by constant_pad_nd first. */
static struct tn_tensor *conv_same(const struct tn_tensor *x, const struct conv_call *c)
{
    const struct tn_tensor *w = c->weight;
    int k = w->ndim, dims = k - 2;
    char a[128], b[128];
    if (k <= 2)
        return tn_set_error(TN_ESHAPE, "weight should have at least three dimensions"), NULL;
    if (c->groups <= 0)
        return tn_set_error(TN_EINVAL, "non-positive groups is not supported"), NULL;
    if (k != x->ndim)
        return tn_set_error(TN_ESHAPE, "Expected %d-dimensional input for %d-dimensional "
                            "weight%s, but got %d-dimensional input of size %s instead", k, k,
                            tn_shape_format(w->sizes, k, b, sizeof b), x->ndim,
                            tn_shape_format(x->sizes, x->ndim, a, sizeof a)), NULL;
    if (c->stride_len != dims && c->stride_len != 1)
        return tn_set_error(TN_EINVAL, "stride cannot broadcast to %d dimensions", dims), NULL;
    if (c->dilation_len != dims && c->dilation_len != 1)
        return tn_set_error(TN_EINVAL, "dilation cannot broadcast to %d dimensions", dims), NULL;
    for (int i = 0; i < c->stride_len; i++)
        if (c->stride[i] != 1)
            return tn_set_error(TN_EINVAL, "padding='same' is not supported for strided "
                                "convolutions"), NULL;
    int64_t left[TN_MAX_DIMS], pad_nd[2 * TN_MAX_DIMS] = {0};
    bool asym = false;
    for (int i = 0; i < dims; i++) {
        int64_t d = c->dilation[c->dilation_len == 1 ? 0 : i];
        int64_t total = d * (w->sizes[i + 2] - 1), l = total / 2, delta = total - 2 * l;
        left[i] = l; /* the right side is l + delta: pad the input by delta there */
        pad_nd[2 * (dims - 1 - i) + 1] = delta;
        asym |= delta != 0;
    }
    struct tn_tensor *xp = asym ? tn_constant_pad_nd(x, pad_nd, 2 * dims, tn_int(0))
                                : tn_retain((struct tn_tensor *)x);
    struct tn_tensor *r = xp ? tn_convolution(xp, w, c->bias, c->stride, c->stride_len, left,
                                              dims, c->dilation, c->dilation_len, false, zeros,
                                              dims, c->groups)
                             : NULL;
    tn_release(xp);
    return r;
}

static struct tn_tensor *conv_run(const struct tn_tensor *x, const struct conv_call *c)
{
    if (!c->mode)
        return tn_convolution(x, c->weight, c->bias, c->stride, c->stride_len, c->padding,
                              c->padding_len, c->dilation, c->dilation_len, c->transposed,
                              c->output_padding ? c->output_padding : zeros,
                              c->output_padding ? c->output_padding_len : 1, c->groups);
    if (!strcmp(c->mode, "same"))
        return conv_same(x, c);
    if (!strcmp(c->mode, "valid"))
        return tn_convolution(x, c->weight, c->bias, c->stride, c->stride_len, zeros, 1,
                              c->dilation, c->dilation_len, false, zeros, 1, c->groups);
    return tn_set_error(TN_EINVAL, "Invalid padding string: '%s'", c->mode), NULL;
}

/* PyTorch's batchify: a (C, L...) input is a batch of one. */
static struct tn_tensor *conv_batchify(const char *name, int dims, const struct tn_tensor *input,
                                       const struct conv_call *c)
{
    if (input->ndim != dims + 1 && input->ndim != dims + 2) {
        char a[128];
        tn_set_error(TN_ESHAPE, "Expected %dD (unbatched) or %dD (batched) input to %s, but got "
                     "input of size: %s", dims + 1, dims + 2, name,
                     tn_shape_format(input->sizes, input->ndim, a, sizeof a));
        return NULL;
    }
    if (input->ndim == dims + 2)
        return conv_run(input, c);
    struct tn_tensor *x = tn_unsqueeze(input, 0), *r = x ? conv_run(x, c) : NULL;
    struct tn_tensor *s = r ? tn_squeeze_dims(r, zeros, 1) : NULL;
    tn__nn_drop(0, x, r, NULL, NULL);
    return s;
}

/* conv1d and conv3d, conv_transpose1d and conv_transpose3d: convolution
 * with a (C, L...) input as one sample (3-D: lib/ops/cpu/conv3d.c) */
#define CONV_PLAIN(NAME, DIMS)                                                                    \
    struct tn_tensor *tn__composite_##NAME(                                                       \
        tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,              \
        const struct tn_tensor *bias, const int64_t *stride, int stride_len,                      \
        const int64_t *padding, int padding_len, const int64_t *dilation, int dilation_len,       \
        int64_t groups)                                                                           \
    {                                                                                             \
        struct conv_call c = {.weight = weight, .bias = bias, .stride = stride,                   \
                              .padding = padding, .dilation = dilation,                           \
                              .stride_len = stride_len, .padding_len = padding_len,               \
                              .dilation_len = dilation_len, .groups = groups};                    \
        return conv_batchify(#NAME, DIMS, input, &c);                                             \
    }
CONV_PLAIN(conv1d, 1)
CONV_PLAIN(conv3d, 3)

#define CONV_TRANSPOSE(NAME, DIMS, FN)                                                            \
    struct tn_tensor *tn__composite_##FN(                                                         \
        tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,              \
        const struct tn_tensor *bias, const int64_t *stride, int stride_len,                      \
        const int64_t *padding, int padding_len, const int64_t *output_padding,                   \
        int output_padding_len, int64_t groups, const int64_t *dilation, int dilation_len)        \
    {                                                                                             \
        struct conv_call c = {.weight = weight, .bias = bias, .stride = stride,                   \
                              .padding = padding, .dilation = dilation,                           \
                              .output_padding = output_padding, .stride_len = stride_len,         \
                              .padding_len = padding_len, .dilation_len = dilation_len,           \
                              .output_padding_len = output_padding_len, .transposed = true,       \
                              .groups = groups};                                                  \
        return conv_batchify(#NAME, DIMS, input, &c);                                             \
    }
CONV_TRANSPOSE(conv_transpose1d, 1, conv_transpose1d)
CONV_TRANSPOSE(conv_transpose3d, 3, conv_transpose3d_input)

/* conv1d.padding and conv2d.padding: a padding string for the sizes */
#define CONV_PADDING(NAME, DIMS)                                                                  \
    struct tn_tensor *tn__composite_##NAME##_padding(                                             \
        tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,              \
        const struct tn_tensor *bias, const int64_t *stride, int stride_len, const char *padding, \
        const int64_t *dilation, int dilation_len, int64_t groups)                                \
    {                                                                                             \
        struct conv_call c = {.weight = weight, .bias = bias, .stride = stride,                   \
                              .dilation = dilation, .stride_len = stride_len,                     \
                              .dilation_len = dilation_len, .mode = padding, .groups = groups};   \
        return conv_batchify(#NAME, DIMS, input, &c);                                             \
    }
CONV_PADDING(conv1d, 1)
CONV_PADDING(conv2d, 2)
CONV_PADDING(conv3d, 3)

/* ------------------------------------------------------------ upsample */

/* PyTorch's compute_output_size and get_scale_value: the output size given,
 * or floor(size * scale) with the first two scales passed on; the kernel
 * checks the lengths it needs. Returns the size's length. */
static int upsample_size(const struct tn_tensor *input, const int64_t *output_size, int osz_len,
                         const double *scales, int scales_len, int64_t *osize,
                         const double **sh, const double **sw)
{
    int spatial = input->ndim - 2;
    *sh = *sw = NULL;
    if (!output_size == !scales)
        return tn_set_error(TN_EINVAL, "Must specify exactly one of output_size and "
                            "scale_factors");
    int len = output_size ? osz_len : scales_len;
    if (len != spatial)
        return tn_set_error(TN_EINVAL, "Expected static_cast<int64_t>(%s->size()) == "
                            "spatial_dimensions to be true, but got false.  (Could this error "
                            "message be improved?  If so, please report an enhancement request "
                            "to PyTorch.)", output_size ? "output_size" : "scale_factors");
    for (int i = 0; i < len; i++)
        osize[i] = output_size ? output_size[i]
                               : (int64_t)((double)input->sizes[i + 2] * scales[i]);
    if (scales && len < 2)
        return tn_set_error(TN_EINVAL, "ArrayRef: invalid index Index = 1; Length = %d", len);
    if (scales) {
        *sh = &scales[0];
        *sw = &scales[1];
    }
    return len;
}

static struct tn_tensor *upsample_vec(bool bilinear, const struct tn_tensor *input,
                                      const int64_t *output_size, int output_size_len,
                                      bool align_corners, const double *scale_factors,
                                      int scale_factors_len)
{
    int64_t osize[TN_MAX_DIMS];
    const double *sh, *sw;
    int n = upsample_size(input, output_size, output_size_len, scale_factors, scale_factors_len,
                          osize, &sh, &sw);
    if (n < 0)
        return NULL;
    return bilinear ? tn_upsample_bilinear2d(input, osize, n, align_corners, sh, sw)
                    : tn_upsample_nearest2d(input, osize, n, sh, sw);
}

struct tn_tensor *tn__composite_upsample_nearest2d_vec(tn_keyset ks,
                                                       const struct tn_tensor *input,
                                                       const int64_t *output_size,
                                                       int output_size_len,
                                                       const double *scale_factors,
                                                       int scale_factors_len)
{
    return upsample_vec(false, input, output_size, output_size_len, false, scale_factors,
                        scale_factors_len);
}

struct tn_tensor *tn__composite_upsample_bilinear2d_vec(tn_keyset ks,
                                                        const struct tn_tensor *input,
                                                        const int64_t *output_size,
                                                        int output_size_len, bool align_corners,
                                                        const double *scale_factors,
                                                        int scale_factors_len)
{
    return upsample_vec(true, input, output_size, output_size_len, align_corners, scale_factors,
                        scale_factors_len);
}

/* PyTorch's conv_transpose2d: convolution with transposed=True (a 3-D
 * input is one sample, as there) */
struct tn_tensor *tn__composite_conv_transpose2d_input(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *weight,
    const struct tn_tensor *bias, const int64_t *stride, int stride_len, const int64_t *padding,
    int padding_len, const int64_t *output_padding, int output_padding_len, int64_t groups,
    const int64_t *dilation, int dilation_len)
{
    if (input->ndim != 3)
        return tn_convolution(input, weight, bias, stride, stride_len, padding, padding_len,
                              dilation, dilation_len, true, output_padding, output_padding_len,
                              groups);
    struct tn_tensor *x = tn_unsqueeze(input, 0), *r = NULL, *s = NULL;
    if (x)
        r = tn_convolution(x, weight, bias, stride, stride_len, padding, padding_len, dilation,
                           dilation_len, true, output_padding, output_padding_len, groups);
    if (r)
        s = tn_squeeze_dims(r, (const int64_t[]){0}, 1);
    tn__nn_drop(0, x, r, NULL, NULL);
    return s;
}

/* col2im (F.fold's core ATen op): self [N, C * kH * kW, L] (or without N)
 * summed into [N, C, H, W], each column's kH * kW values added where im2col
 * took them from. A decomposition: the columns scatter_add'ed into the
 * padded plane through a table of positions (in PyTorch's order: channel and
 * kernel offset, then block), the padding sliced off; Meta shapes and the
 * gradient (im2col: a gather) are those ops'. PyTorch's checks and words. */
struct tn_tensor *tn__composite_col2im(tn_keyset ks, const struct tn_tensor *self,
                                       const int64_t *output_size, int output_size_len,
                                       const int64_t *kernel_size, int kernel_size_len,
                                       const int64_t *dilation, int dilation_len,
                                       const int64_t *padding, int padding_len,
                                       const int64_t *stride, int stride_len)
{
    char a[128];
    const int64_t *arr[5] = {output_size, kernel_size, dilation, padding, stride};
    const int lens[5] = {output_size_len, kernel_size_len, dilation_len, padding_len, stride_len};
    const char *names[5] = {"output_size", "kernel_size", "dilation", "padding", "stride"};
    int64_t v[5][2];
    for (int i = 0; i < 5; i++) {
        if (lens[i] != 2 && lens[i] != 1)
            return tn_set_error(TN_EINVAL, "It is expected %s equals to 2, but got size %d",
                                names[i], lens[i]), NULL;
        v[i][0] = arr[i][0];
        v[i][1] = arr[i][lens[i] - 1];
    }
    int64_t oh = v[0][0], ow = v[0][1], kh = v[1][0], kw = v[1][1], dh = v[2][0], dw = v[2][1];
    int64_t ph = v[3][0], pw = v[3][1], sh = v[4][0], sw = v[4][1];
    if (kh <= 0 || kw <= 0)
        return tn_set_error(TN_EINVAL, "kernel size should be greater than zero, but got "
                            "kernel_height: %lld kernel_width: %lld", (long long)kh,
                            (long long)kw), NULL;
    if (sh <= 0 || sw <= 0)
        return tn_set_error(TN_EINVAL, "stride should be greater than zero, but got stride_height: "
                            "%lld stride_width: %lld", (long long)sh, (long long)sw), NULL;
    if (dh <= 0 || dw <= 0)
        return tn_set_error(TN_EINVAL, "dilation should be greater than zero, but got "
                            "dilation_height: %lld dilation_width: %lld", (long long)dh,
                            (long long)dw), NULL;
    if (ph < 0 || pw < 0)
        return tn_set_error(TN_EINVAL, "padding should be non-negative, but got pad_height: %lld "
                            "pad_width: %lld", (long long)ph, (long long)pw), NULL;
    bool batched = self->ndim == 3;
    if ((self->ndim != 2 && self->ndim != 3) || self->sizes[self->ndim - 2] == 0 ||
        self->sizes[self->ndim - 1] == 0)
        return tn_set_error(TN_ESHAPE, "Expected 2D or 3D (batch mode) tensor for input with "
                            "possibly 0 batch size and non-zero dimensions for input, but got: %s",
                            tn_shape_format(self->sizes, self->ndim, a, sizeof a)), NULL;
    int64_t ck = self->sizes[self->ndim - 2], l = self->sizes[self->ndim - 1];
    if (ck % (kh * kw))
        return tn_set_error(TN_ESHAPE, "Expected size of input's dimension 1 to be divisible by "
                            "the product of kernel_size, but got input.size(1)=%lld and "
                            "kernel_size=(%lld, %lld).", (long long)ck, (long long)kh,
                            (long long)kw), NULL;
    int64_t lh = (oh + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
    int64_t lw = (ow + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
    if (lh < 1 || lw < 1 || l != lh * lw)
        return tn_set_error(TN_ESHAPE, "Given output_size=(%lld, %lld), kernel_size=(%lld, %lld), "
                            "dilation=(%lld, %lld), padding=(%lld, %lld), stride=(%lld, %lld), "
                            "expected size of input's dimension 2 to match the calculated number "
                            "of sliding blocks %lld * %lld = %lld, but got input.size(2)=%lld.",
                            (long long)oh, (long long)ow, (long long)kh, (long long)kw,
                            (long long)dh, (long long)dw, (long long)ph, (long long)pw,
                            (long long)sh, (long long)sw, (long long)lh, (long long)lw,
                            (long long)(lh * lw), (long long)l), NULL;
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"col2im_out_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    int64_t n = batched ? self->sizes[0] : 1, c = ck / (kh * kw), k = kh * kw;
    int64_t hp = oh + 2 * ph, wp = ow + 2 * pw;
    struct tn_keep kp = {0};
    struct tn_tensor *x, *table, *idx, *z, *s, *r;
    TN_KEEP(&kp, x, tn_reshape(self, TN_SHAPE(n, c, k * l)));
    TN_KEEP(&kp, table, tn_empty_on(TN_SHAPE(k * l), TN_INT64, self->device));
    if (self->device.type == TN_DEVICE_CPU) {
        int64_t *t = tn_data(table);
        for (int64_t ki = 0; ki < kh; ki++)
            for (int64_t kj = 0; kj < kw; kj++)
                for (int64_t bi = 0; bi < lh; bi++)
                    for (int64_t bj = 0; bj < lw; bj++)
                        *t++ = (bi * sh + ki * dh) * wp + bj * sw + kj * dw;
    } else if (self->device.type != TN_DEVICE_META) {
        tn_set_error(TN_EDEVICE, "col2im: only the CPU and Meta are supported");
        goto fail;
    }
    TN_KEEP(&kp, idx, tn_expand(table, TN_SHAPE(n, c, k * l)));
    TN_KEEP(&kp, z, tn_empty_on(TN_SHAPE(n, c, hp * wp), self->dtype, self->device));
    if (self->device.type == TN_DEVICE_CPU && tn_fill_(z, tn_int(0)) < 0)
        goto fail;
    TN_KEEP(&kp, s, tn_scatter_add(z, 2, idx, x));
    TN_KEEP(&kp, r, tn_reshape(s, TN_SHAPE(n, c, hp, wp)));
    TN_KEEP(&kp, r, tn_slice(r, 2, ph, ph + oh, 1));
    TN_KEEP(&kp, r, tn_slice(r, 3, pw, pw + ow, 1));
    TN_KEEP(&kp, r, batched ? tn_contiguous(r) : tn_reshape(r, TN_SHAPE(c, oh, ow)));
    if (!batched)
        TN_KEEP(&kp, r, tn_contiguous(r));
    return tn__keep_out(&kp, r);
fail:
    tn__keep_free(&kp);
    return NULL;
}

/* ------------------------------------------------------------------ Meta */

/* convolution's and convolution_backward's Meta kernels (shape-only runs,
 * tcompile check): the output sizes PyTorch's convolution gives, 1-D to
 * 3-D, regular and transposed, in the input's dtype; the checks of the
 * shapes the sizes need, in the CPU kernels' words. */
static int conv_meta_sizes(const struct tn_tensor *input, const struct tn_tensor *weight,
                           const int64_t *stride, int stride_len, const int64_t *padding,
                           int padding_len, const int64_t *dilation, int dilation_len,
                           bool transposed, const int64_t *output_padding,
                           int output_padding_len, int64_t groups, int64_t *osz)
{
    char a[128], b[128];
    int k = weight->ndim;
    if (k < 3 || k > 5)
        return tn_set_error(TN_ESHAPE, "convolution: expected a 3-D, 4-D or 5-D weight, got %s",
                            tn_shape_format(weight->sizes, k, a, sizeof a));
    if (input->ndim != k)
        return tn_set_error(TN_ESHAPE, "Expected %d-dimensional input for %d-dimensional weight "
                            "%s, but got %d-dimensional input of size %s instead", k, k,
                            tn_shape_format(weight->sizes, k, a, sizeof a), input->ndim,
                            tn_shape_format(input->sizes, input->ndim, b, sizeof b));
    if (groups <= 0)
        return tn_set_error(TN_EINVAL, "non-positive groups is not supported");
    int64_t want = transposed ? weight->sizes[0] : weight->sizes[1] * groups;
    char given[48];
    if (transposed)
        snprintf(given, sizeof given, "transposed=1");
    else
        snprintf(given, sizeof given, "groups=%lld", (long long)groups);
    if (input->sizes[1] != want)
        return tn_set_error(TN_ESHAPE, "Given %s, weight of size %s, expected input%s to have "
                            "%lld channels, but got %lld channels instead", given,
                            tn_shape_format(weight->sizes, k, a, sizeof a),
                            tn_shape_format(input->sizes, k, b, sizeof b), (long long)want,
                            (long long)input->sizes[1]);
    osz[0] = input->sizes[0];
    osz[1] = transposed ? weight->sizes[1] * groups : weight->sizes[0];
    for (int i = 0; i < k - 2; i++) {
        int64_t s = stride_len ? stride[stride_len == 1 ? 0 : i] : 1;
        int64_t p = padding_len ? padding[padding_len == 1 ? 0 : i] : 0;
        int64_t d = dilation_len ? dilation[dilation_len == 1 ? 0 : i] : 1;
        int64_t op = output_padding_len ? output_padding[output_padding_len == 1 ? 0 : i] : 0;
        int64_t in = input->sizes[2 + i], kk = weight->sizes[2 + i];
        if (s <= 0)
            return tn_set_error(TN_EINVAL, "non-positive stride is not supported");
        if (d <= 0)
            return tn_set_error(TN_EINVAL, "dilation should be greater than zero");
        osz[2 + i] = transposed ? (in - 1) * s - 2 * p + d * (kk - 1) + op + 1
                                : (in + 2 * p - d * (kk - 1) - 1) / s + 1;
        if (osz[2 + i] <= 0 || (!transposed && in + 2 * p < d * (kk - 1) + 1))
            return tn_set_error(TN_ESHAPE, "convolution: the input's size %lld at dim %d gives "
                                "no output (kernel %lld, stride %lld, padding %lld, dilation "
                                "%lld)", (long long)in, 2 + i, (long long)kk, (long long)s,
                                (long long)p, (long long)d);
    }
    return TN_OK;
}

struct tn_tensor *tn__meta_convolution(tn_keyset ks, const struct tn_tensor *input,
                                       const struct tn_tensor *weight,
                                       const struct tn_tensor *bias, const int64_t *stride,
                                       int stride_len, const int64_t *padding, int padding_len,
                                       const int64_t *dilation, int dilation_len, bool transposed,
                                       const int64_t *output_padding, int output_padding_len,
                                       int64_t groups)
{
    int64_t osz[TN_MAX_DIMS];
    if (conv_meta_sizes(input, weight, stride, stride_len, padding, padding_len, dilation,
                        dilation_len, transposed, output_padding, output_padding_len, groups,
                        osz) < 0)
        return NULL;
    return tn_empty_on(osz, input->ndim, input->dtype, input->device);
}

int tn__meta_convolution_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                  const struct tn_tensor *input, const struct tn_tensor *weight,
                                  const int64_t *bias_sizes, int bias_sizes_len,
                                  const int64_t *stride, int stride_len, const int64_t *padding,
                                  int padding_len, const int64_t *dilation, int dilation_len,
                                  bool transposed, const int64_t *output_padding,
                                  int output_padding_len, int64_t groups, const bool *output_mask,
                                  int output_mask_len, struct tn_tensor **result0,
                                  struct tn_tensor **result1, struct tn_tensor **result2)
{
    int64_t osz[TN_MAX_DIMS], nb = transposed ? weight->sizes[1] * groups : weight->sizes[0];
    *result0 = *result1 = *result2 = NULL;
    if (output_mask_len != 3)
        return tn_set_error(TN_EINVAL, "output_mask must hold 3 bools, not %d", output_mask_len);
    int rc = conv_meta_sizes(input, weight, stride, stride_len, padding, padding_len, dilation,
                             dilation_len, transposed, output_padding, output_padding_len,
                             groups, osz);
    if (rc < 0)
        return rc;
    if (bias_sizes && bias_sizes_len == 1)
        nb = bias_sizes[0];
    struct tn_tensor *r[3] = {
        output_mask[0] ? tn_empty_on(input->sizes, input->ndim, input->dtype, input->device)
                       : NULL,
        output_mask[1] ? tn_empty_on(weight->sizes, weight->ndim, input->dtype, input->device)
                       : NULL,
        output_mask[2] ? tn_empty_on(&nb, 1, input->dtype, input->device) : NULL};
    for (int i = 0; i < 3; i++)
        if (output_mask[i] && !r[i])
            return tn__nn_drop(tn_last_status(), r[0], r[1], r[2], NULL);
    *result0 = r[0], *result1 = r[1], *result2 = r[2];
    return TN_OK;
}
