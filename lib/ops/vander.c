/*
 * ops/vander.c: vander and linalg_vander (torch.linalg.vander) as
 * PyTorch's CompositeImplicitAutograd ones: a column of ones beside the
 * cumulative products of x repeated (powers 1 .. N-1), so the values are
 * cumprod's (integers in int64, as its promotion gives them) and the
 * gradients go through it; vander's columns flipped to decreasing powers
 * unless increasing.
 */
#include <config.h>

#include "ops/internal.h"
#include "ops/nn_internal.h"

/* [ones | cumprod(x[..., None] expanded to n - 1 columns)] along the last
 * dim, x of `dtype` first where dtype is set (vander's promotion) */
static struct tn_tensor *powers(const struct tn_tensor *x, int64_t n, enum tn_dtype dtype)
{
    int nd = x->ndim + 1;
    if (nd > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "vander: %d dims are more than %d", nd, TN_MAX_DIMS), NULL;
    int64_t shape[TN_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        shape[i] = x->sizes[i];
    struct tn_keep k = {.n = 0};
    struct tn_tensor *xc, *u, *e, *p, *ones, *r;
    TN_KEEP(&k, xc, tn_to_dtype(x, dtype));
    TN_KEEP(&k, u, tn_unsqueeze(xc, -1));
    shape[nd - 1] = n - 1;
    TN_KEEP(&k, e, tn_expand(u, shape, nd));
    TN_KEEP(&k, p, tn_cumprod(e, -1, TN_DTYPE_UNSET));
    shape[nd - 1] = 1;
    TN_KEEP(&k, ones, tn_ones(shape, nd, p->dtype));
    TN_KEEP(&k, r, tn_cat((const struct tn_tensor *const[]){ones, p}, 2, -1));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_vander(tn_keyset ks, const struct tn_tensor *x, const int64_t *N,
                                       bool increasing)
{
    (void)ks;
    if (x->ndim != 1)
        return tn_set_error(TN_ERUNTIME, "x must be a one-dimensional tensor."), NULL;
    int64_t n = N ? *N : x->sizes[0];
    if (n < 0)
        return tn_set_error(TN_ERUNTIME, "N must be non-negative."), NULL;
    enum tn_dtype dt = tn_promote_types(x->dtype, TN_INT64);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    if (n == 0)
        return tn_empty((int64_t[]){x->sizes[0], 0}, 2, dt);
    struct tn_tensor *r = n == 1 ? tn_ones((int64_t[]){x->sizes[0], 1}, 2, dt) : powers(x, n, dt);
    if (!r || increasing)
        return r;
    struct tn_tensor *f = tn_flip(r, (int64_t[]){1}, 1);
    tn_release(r);
    return f;
}

struct tn_tensor *tn__composite_linalg_vander(tn_keyset ks, const struct tn_tensor *x,
                                              const int64_t *N)
{
    (void)ks;
    enum tn_dtype t = x->dtype;
    if (t != TN_FLOAT32 && t != TN_FLOAT64 && t != TN_COMPLEX64 && t != TN_COMPLEX128 &&
        !tn_dtype_is_integral(t, false))
        return tn_set_error(TN_EDTYPE, "linalg.vander supports floating point, complex, and "
                            "integer tensors, but got %s", tn_dtype_info(t)->c10_name), NULL;
    struct tn_tensor *x1 = x->ndim == 0 ? tn_unsqueeze(x, -1) : tn_retain((struct tn_tensor *)x);
    if (!x1)
        return NULL;
    int64_t n = N ? *N : x1->sizes[x1->ndim - 1];
    struct tn_tensor *r = n > 1 ? powers(x1, n, TN_DTYPE_UNSET)
                                : (tn_set_error(TN_ERUNTIME, "N must be greater than 1."), NULL);
    tn_release(x1);
    return r;
}
