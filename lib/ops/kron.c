/*
 * ops/kron.c: kron as PyTorch's CompositeImplicitAutograd one (LinearAlgebra.cpp's
 * KronImpl): both padded to the same number of dims, self viewed with a 1
 * after each dim and other with a 1 before each, multiplied (broadcast) and
 * viewed back (views: a non-contiguous input whose dims cannot be split
 * fails, as PyTorch's), so the values are mul's and the gradients mul's and
 * view's.
 */
#include <config.h>

#include "ops/internal.h"

struct tn_tensor *tn__composite_kron(tn_keyset ks, const struct tn_tensor *self,
                                     const struct tn_tensor *other)
{
    (void)ks;
    int maxdim = self->ndim > other->ndim ? self->ndim : other->ndim;
    int ps = maxdim - self->ndim, po = maxdim - other->ndim;
    if (2 * maxdim > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "kron: %d dims make more than %d", 2 * maxdim,
                            TN_MAX_DIMS), NULL;
    int64_t a[TN_MAX_DIMS], b[TN_MAX_DIMS], out[TN_MAX_DIMS];
    for (int i = 0; i < maxdim; i++) {
        a[2 * i] = i >= ps ? self->sizes[i - ps] : 1;
        a[2 * i + 1] = 1;
        b[2 * i] = 1;
        b[2 * i + 1] = i >= po ? other->sizes[i - po] : 1;
        out[i] = a[2 * i] * b[2 * i + 1];
    }
    struct tn_tensor *sv = tn_view(self, a, 2 * maxdim);
    struct tn_tensor *ov = sv ? tn_view(other, b, 2 * maxdim) : NULL;
    struct tn_tensor *m = ov ? tn_mul(sv, ov) : NULL;
    struct tn_tensor *r = m ? tn_view(m, out, maxdim) : NULL;
    tn_release(m);
    tn_release(ov);
    tn_release(sv);
    return r;
}
