/*
 * ops/diff.c: diff (CompositeImplicitAutograd in PyTorch too: narrowed
 * differences, prepend/append concatenated first) and nansum (the sum with
 * NaNs counted as 0), as decompositions whose gradients are PyTorch's.
 */
#include <config.h>

#include "ops/internal.h"

/* diff_check_compatible_shape: other (a prepend or append) has self's
 * rank and sizes but along dim. */
static int diff_compatible(const struct tn_tensor *self, const struct tn_tensor *other,
                           int64_t dim)
{
    if (!other)
        return TN_OK;
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return TN_EINDEX;
    if (other->ndim != self->ndim)
        return tn_set_error(TN_ESHAPE, "diff expects prepend or append to be the same dimension "
                            "as input");
    for (int i = 0; i < other->ndim; i++)
        if (i != d && other->sizes[i] != self->sizes[i])
            return tn_set_error(TN_ESHAPE, "diff expects the shape of tensor to prepend or "
                                "append to match that of input except along the differencing "
                                "dimension; input.size(%d) = %lld, but got tensor.size(%d) = "
                                "%lld", i, (long long)self->sizes[i], i,
                                (long long)other->sizes[i]);
    return TN_OK;
}

/* diff: the n-th forward difference along dim (logical_xor for bool), of
 * [prepend, self, append] where they are given; n past the size gives an
 * empty dim. PyTorch's checks in its order. */
struct tn_tensor *tn__composite_diff(tn_keyset ks, const struct tn_tensor *self, int64_t n,
                                     int64_t dim, const struct tn_tensor *prepend,
                                     const struct tn_tensor *append)
{
    if (self->ndim < 1)
        return tn_set_error(TN_ESHAPE, "diff expects input to be at least one-dimensional"), NULL;
    if (n < 0)
        return tn_set_error(TN_EINVAL, "order must be non-negative but got %lld", (long long)n),
               NULL;
    if (diff_compatible(self, prepend, dim) < 0 || diff_compatible(self, append, dim) < 0)
        return NULL;
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return NULL;
    if (n == 0)
        return tn_clone(self);
    struct tn_tensor *r;
    if (prepend || append) {
        const struct tn_tensor *parts[3];
        int k = 0;
        if (prepend)
            parts[k++] = prepend;
        parts[k++] = self;
        if (append)
            parts[k++] = append;
        if (!(r = tn_cat(parts, k, d)))
            return NULL;
    } else {
        r = tn_retain((struct tn_tensor *)self);
    }
    int64_t len = r->sizes[d] - 1;
    if (n > r->sizes[d])
        n = r->sizes[d];
    for (int64_t i = 0; i < n; i++, len--) {
        struct tn_tensor *hi = tn_narrow(r, d, 1, len), *lo = hi ? tn_narrow(r, d, 0, len) : NULL;
        struct tn_tensor *v = !lo ? NULL
                              : r->dtype == TN_BOOL ? tn_logical_xor(hi, lo)
                                                    : tn_sub(hi, lo, tn_int(1));
        tn_release(hi);
        tn_release(lo);
        tn_release(r);
        if (!(r = v))
            return NULL;
    }
    if (r == self) { /* an empty dim: nothing taken (PyTorch hands back self) */
        struct tn_tensor *c = tn_clone(self);
        tn_release(r);
        r = c;
    }
    return r;
}

/* nansum: sum over dim (all where None or empty) with NaNs as 0, the
 * integer and bool dtypes summed as sum does (to int64); complex refused
 * in PyTorch's CPU words. masked_fill keeps the gradient PyTorch's
 * nansum_backward gives (0 at the NaNs). */
struct tn_tensor *tn__composite_nansum(tn_keyset ks, const struct tn_tensor *self,
                                       const int64_t *dim, int dim_len, bool keepdim,
                                       enum tn_dtype dtype)
{
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "nansum on CPU does not support complex inputs"), NULL;
    if (tn_dtype_is_integral(self->dtype, true))
        return tn_sum_dim_intlist(self, dim, dim_len, keepdim, dtype);
    struct tn_tensor *nan = tn_isnan(self);
    struct tn_tensor *z = nan ? tn_masked_fill_scalar(self, nan, tn_int(0)) : NULL;
    struct tn_tensor *r = z ? tn_sum_dim_intlist(z, dim, dim_len, keepdim, dtype) : NULL;
    tn_release(nan);
    tn_release(z);
    return r;
}
