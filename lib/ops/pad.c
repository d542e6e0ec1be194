/*
 * ops/pad.c: pad's modes as PyTorch 2.x dispatches them (constant to
 * constant_pad_nd, reflect and replicate to the reflection_pad / replication
 * _pad kernels of lib/ops/cpu/pad.c by the number of padded dims, circular
 * to _pad_circular) with its checks and words, and _pad_circular as a
 * decomposition into slices put together with cat, so that its gradient
 * comes through narrow and cat; constant_pad_nd and its backward at the
 * end.
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"

struct tn_tensor *tn__composite_pad(tn_keyset ks, const struct tn_tensor *self,
                                    const int64_t *pad, int pad_len, const char *mode,
                                    const double *value)
{
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(mode, modes[i]))
            m = i;
    if (m < 0)
        return tn_set_error(TN_EINVAL, "Unrecognised padding mode %s", mode), NULL;
    if (pad_len % 2)
        return tn_set_error(TN_EINVAL, "Padding length must be divisible by 2"), NULL;
    if (pad_len > 2 * self->ndim)
        return tn_set_error(TN_EINVAL, "Padding length should be less than or equal to two times "
                            "the input dimension but got padding length %d and input of "
                            "dimension %d", pad_len, self->ndim), NULL;
    if (m == 0)
        return tn_constant_pad_nd(self, pad, pad_len, tn_float(value ? *value : 0.0));
    if (value && *value != 0)
        return tn_set_error(TN_EINVAL, "Padding mode \"%s\" doesn't take in value argument",
                            mode), NULL;
    int nsp = pad_len / 2, nd = self->ndim;
    if (nsp >= 1 && (nd == nsp + 1 || nd == nsp + 2)) {
        if (m == 3)
            return tn_underscore_pad_circular(self, pad, pad_len);
        bool refl = m == 1;
        switch (nsp) {
        case 1:
            return refl ? tn_reflection_pad1d(self, pad, pad_len)
                        : tn_replication_pad1d(self, pad, pad_len);
        case 2:
            return refl ? tn_reflection_pad2d(self, pad, pad_len)
                        : tn_replication_pad2d(self, pad, pad_len);
        case 3:
            return refl ? tn_reflection_pad3d(self, pad, pad_len)
                        : tn_replication_pad3d(self, pad, pad_len);
        }
    }
    return tn_set_error(TN_EINVAL, "Padding size %d is not supported for %dD input tensor.",
                        pad_len, nd), NULL;
}

/* PyTorch's _pad_circular: the last pad_len / 2 dims padded, from the last
 * one backwards, each with the end of the (cropped) dim before it and its
 * start after it. */
struct tn_tensor *tn__composite__pad_circular(tn_keyset ks, const struct tn_tensor *self,
                                              const int64_t *pad, int pad_len)
{
    int npad = pad_len / 2, keep = self->ndim - npad;
    if (keep != 1 && keep != 2)
        return tn_set_error(TN_EINVAL, "Invalid padding size, expected 1 or 2 non-padded "
                            "dimensions, which would be equivalent to padding of length %d or %d "
                            "respectively but got %d", (self->ndim - 1) * 2,
                            (self->ndim - 2) * 2, pad_len), NULL;
    for (int i = 0; i < npad; i++) {
        int64_t pl = pad[2 * (npad - i - 1)], pr = pad[2 * (npad - i - 1) + 1];
        int64_t size = self->sizes[keep + i];
        if (!(pl <= size && pr <= size))
            return tn_set_error(TN_EINVAL, "Padding value causes wrapping around more than "
                                "once."), NULL;
        int64_t out;
        if (__builtin_add_overflow(size, pl, &out) || __builtin_add_overflow(out, pr, &out) ||
            out < 0)
            return tn_set_error(TN_EINVAL, "Negative padding value is resulting in an empty "
                                "dimension"), NULL;
    }
    if (npad == 0)
        return tn_clone(self);
    struct tn_keep k = {0};
    struct tn_tensor *x = tn_retain((struct tn_tensor *)self);
    for (int i = 0; i < npad; i++) {
        int d = self->ndim - 1 - i; /* pad[2i], pad[2i + 1] pad the i-th dim from the end */
        int64_t pl = pad[2 * i], pr = pad[2 * i + 1], size = x->sizes[d];
        int64_t lo = pl < 0 ? -pl : 0, hi = pr < 0 ? -pr : 0;
        struct tn_tensor *mid, *parts[3];
        int n = 0;
        TN_KEEP(&k, mid, tn_narrow(x, d, lo, size - lo - hi > 0 ? size - lo - hi : 0));
        if (pl > 0)
            TN_KEEP(&k, parts[n++], tn_narrow(mid, d, mid->sizes[d] - pl, pl));
        parts[n++] = mid;
        if (pr > 0)
            TN_KEEP(&k, parts[n++], tn_narrow(mid, d, 0, pr));
        struct tn_tensor *y = tn_cat((const struct tn_tensor *const *)parts, n, d);
        tn__keep_free(&k);
        tn_release(x);
        if (!(x = y))
            return NULL;
    }
    return x;
fail:
    tn__keep_free(&k);
    tn_release(x);
    return NULL;
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
    if (self->device.type == TN_DEVICE_META) { /* Meta: the padded shape only */
        tn__keep_free(&k);
        return tn_empty_on(sizes, nd, self->dtype, self->device);
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
