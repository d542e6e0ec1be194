/*
 * ops/take_along_dim.c: take_along_dim as PyTorch's CompositeImplicitAutograd
 * one (TensorAdvancedIndexing.cpp): with a dim, self and indices broadcast
 * against each other everywhere but dim (_take_along_dim_helper) and
 * gathered along it; without, gather over both flattened with view(-1).
 * Gradients are gather's and expand's.
 */
#include <config.h>

#include "ops/internal.h"

/* t broadcast to other's sizes but its own size at dim (PyTorch's
 * infer_size of the two, then broadcast_to) */
static struct tn_tensor *broadcast_but(const struct tn_tensor *t, const struct tn_tensor *other,
                                       int dim)
{
    int64_t sizes[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    for (int i = 0; i < other->ndim; i++)
        sizes[i] = i == dim ? t->sizes[dim] : other->sizes[i];
    if (tn_broadcast_shapes(sizes, other->ndim, t->sizes, t->ndim, shape) < 0)
        return NULL;
    return tn_expand(t, shape, t->ndim);
}

struct tn_tensor *tn__composite_take_along_dim(tn_keyset ks, const struct tn_tensor *self,
                                               const struct tn_tensor *indices,
                                               const int64_t *dim)
{
    (void)ks;
    int64_t flat = -1;
    if (!dim) { /* like take, but with gather's dtypes */
        struct tn_tensor *s = tn_view(self, &flat, 1), *i = s ? tn_view(indices, &flat, 1) : NULL;
        struct tn_tensor *r = i ? tn_gather(s, 0, i, false) : NULL;
        tn_release(i);
        tn_release(s);
        return r;
    }
    if (self->ndim != indices->ndim)
        return tn_set_error(TN_ERUNTIME, "torch.take_along_dim(): input and indices should have "
                            "the same number of dimensions, but got %d dimensions for input, and "
                            "%d dimensions for indices", self->ndim, indices->ndim), NULL;
    if (indices->dtype != TN_INT64)
        return tn_set_error(TN_ERUNTIME, "torch.take_along_dim(): dtype of indices should be "
                            "Long but got %s", tn_dtype_info(indices->dtype)->c10_name), NULL;
    int d = tn_wrap_dim(*dim, self->ndim);
    if (d < 0)
        return NULL;
    if (!self->ndim) /* the helper's indices.size(dim) */
        return tn_set_error(TN_EINDEX, "Dimension specified as %d but tensor has no dimensions",
                            d), NULL;
    /* the indices' sizes first, as PyTorch's helper does them */
    struct tn_tensor *i = broadcast_but(indices, self, d);
    struct tn_tensor *s = i ? broadcast_but(self, indices, d) : NULL;
    /* negative (and larger) indices wrapped, as PyTorch 2.x's remainder */
    struct tn_tensor *w = s ? tn_remainder_scalar(i, tn_int(s->sizes[d])) : NULL;
    struct tn_tensor *r = w ? tn_gather(s, d, w, false) : NULL;
    tn_release(w);
    tn_release(s);
    tn_release(i);
    return r;
}
