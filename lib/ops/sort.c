/*
 * ops/sort.c: meta functions of the ops with two returns (values and int64
 * indices): max.dim and min.dim, sort, topk, with PyTorch's checks and
 * words; sort without `stable` as a call of sort.stable.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

/* self's shape with dim d (-1: none) of size `keep` (-1: dropped), values
 * in self's dtype and int64 indices. */
static void pair_meta(const struct tn_tensor *self, int d, int64_t keep, struct tn_meta *m)
{
    m[0].ndim = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (i != d)
            m[0].sizes[m[0].ndim++] = self->sizes[i];
        else if (keep >= 0)
            m[0].sizes[m[0].ndim++] = keep;
    }
    m[0].dtype = self->dtype;
    m[1] = m[0];
    m[1].dtype = TN_INT64;
}

/* max.dim/min.dim: one dim reduced (kept as 1 with keepdim). */
static int extreme_meta(const char *op, const struct tn_tensor *self, int64_t dim, bool keepdim,
                        struct tn_meta *m)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "%s(): does not support complex input", op);
    if (self->ndim > 0 && self->sizes[d] == 0)
        return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim %d to have non-zero size.", op,
                            d);
    pair_meta(self, self->ndim ? d : -1, keepdim ? 1 : -1, m);
    return TN_OK;
}

int tn__meta_max_dim_max_out(const struct tn_tensor *self, int64_t dim, bool keepdim,
                             struct tn_meta *m)
{
    return extreme_meta("max", self, dim, keepdim, m);
}

int tn__meta_min_dim_min_out(const struct tn_tensor *self, int64_t dim, bool keepdim,
                             struct tn_meta *m)
{
    return extreme_meta("min", self, dim, keepdim, m);
}

int tn__meta_sort_values_stable_out(const struct tn_tensor *self, const bool *stable, int64_t dim,
                                    bool descending, struct tn_meta *m)
{
    if (tn_wrap_dim(dim, self->ndim) < 0)
        return tn_last_status();
    if (tn_dtype_is_complex(self->dtype)) /* (PyTorch 2.x's words) */
        return tn_set_error(TN_EDTYPE, "Sort does not support complex dtypes on CPU");
    pair_meta(self, -1, -1, m);
    return TN_OK;
}

int tn__meta_topk_values_out(const struct tn_tensor *self, int64_t k, int64_t dim, bool largest,
                             bool sorted, struct tn_meta *m)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    int64_t n = self->ndim ? self->sizes[d] : 1;
    if (k < 0 || k > n)
        return tn_set_error(TN_EINVAL, "selected index k out of range");
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "topk does not support %s dtypes on CPU",
                            self->dtype == TN_BOOL ? "bool" : "complex");
    pair_meta(self, self->ndim ? d : -1, k, m);
    return TN_OK;
}

int tn__composite_sort(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool descending,
                       struct tn_tensor **values, struct tn_tensor **indices)
{
    return tn__redispatch_sort_stable(ks, self, NULL, dim, descending, values, indices);
}

int tn__composite_sort_values_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                  bool descending, struct tn_tensor *values,
                                  struct tn_tensor *indices)
{
    return tn__redispatch_sort_values_stable_out(ks, self, NULL, dim, descending, values, indices);
}
