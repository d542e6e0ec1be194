/*
 * ops/nn2.c: the device-independent half of the nn ops added after
 * lib/ops/nn.c: the reduction every loss applies, and the
 * CompositeImplicitAutograd decompositions PyTorch has (l1_loss; pad is in
 * pad.c), and
 * constant_pad_nd with its backward.
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"

/* x itself (retained) for reduction none, else its mean or sum: PyTorch's
 * apply_loss_reduction. */
struct tn_tensor *tn__nn_reduce_loss(struct tn_tensor *x, int64_t reduction)
{
    if (reduction == TN_REDUCTION_MEAN)
        return tn_mean(x, TN_DTYPE_UNSET);
    if (reduction == TN_REDUCTION_SUM)
        return tn_sum(x, TN_DTYPE_UNSET);
    return tn_retain(x);
}

/* PyTorch's decomposition: |self - target| reduced; autograd goes through
 * sub and abs. */
struct tn_tensor *tn__composite_l1_loss(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *target, int64_t reduction)
{
    struct tn_tensor *d = tn_sub(self, target, tn_int(1)), *a = d ? tn_abs(d) : NULL;
    struct tn_tensor *r = a ? tn__nn_reduce_loss(a, reduction) : NULL;
    tn__nn_drop(0, d, a, NULL, NULL);
    return r;
}

/* PyTorch's constant_pad_nd: pad holds (before, after) pairs from the last
 * dim backwards; negative pads crop (narrow the input), positive ones add
 * elements of `value` (converted to the input's dtype). */
struct tn_tensor *tn__composite_constant_pad_nd(tn_keyset ks, const struct tn_tensor *self,
                                                const int64_t *pad, int pad_len,
                                                struct tn_scalar value)
{
    if (pad_len % 2)
        return tn_set_error(TN_EINVAL, "Length of pad must be even but instead it equals %d",
                            pad_len), NULL;
    int nd = self->ndim, lp = pad_len / 2, first = nd - lp;
    if (lp > nd)
        return tn_set_error(TN_EINVAL, "Length of pad should be no more than twice the number "
                            "of dimensions of the input. Pad length is %dwhile the input has "
                            "%ddimensions.", pad_len, nd), NULL;
    struct tn_keep k = {0};
    struct tn_tensor *in = tn_retain((struct tn_tensor *)self), *out, *win;
    bool grows = false;
    tn__keep(&k, in);
    int64_t sizes[TN_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        sizes[i] = self->sizes[i];
        if (i < first)
            continue;
        int64_t lo = pad[2 * (nd - i - 1)], hi = pad[2 * (nd - i - 1) + 1];
        if (lo < 0)
            TN_KEEP(&k, in, tn_narrow(in, i, -lo, in->sizes[i] + lo));
        if (hi < 0)
            TN_KEEP(&k, in, tn_narrow(in, i, 0, in->sizes[i] + hi));
        grows |= lo > 0 || hi > 0;
        sizes[i] += lo + hi;
    }
    if (!grows) { /* only crops: a copy of the narrowed input, as PyTorch */
        struct tn_tensor *c = tn_clone(in);
        tn__keep_free(&k);
        return c;
    }
    TN_KEEP(&k, out, tn_full(sizes, nd, value, self->dtype));
    win = tn_retain(out);
    tn__keep(&k, win);
    for (int i = first; i < nd; i++) {
        int64_t lo = pad[2 * (nd - i - 1)];
        TN_KEEP(&k, win, tn_narrow(win, i, lo > 0 ? lo : 0, in->sizes[i]));
    }
    if (tn_copy_(win, in) < 0)
        goto fail;
    return tn__keep_out(&k, out);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* constant_pad_nd's gradient: the padding taken off again (PyTorch's
 * constant_pad_nd_backward, an op here as formulas cannot negate lists). */
struct tn_tensor *tn__composite_constant_pad_nd_backward(tn_keyset ks,
                                                         const struct tn_tensor *grad,
                                                         const int64_t *pad, int pad_len)
{
    int64_t neg[2 * TN_MAX_DIMS];
    if (pad_len > 2 * TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "Length of pad should be no more than twice the number "
                            "of dimensions of the input. Pad length is %dwhile the input has "
                            "%ddimensions.", pad_len, grad->ndim), NULL;
    for (int i = 0; i < pad_len; i++)
        neg[i] = -pad[i];
    return tn_constant_pad_nd(grad, neg, pad_len, tn_int(0));
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
