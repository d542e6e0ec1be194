/*
 * ops/reduce.c: meta functions of the reductions (sum, mean, amax, amin over
 * dims, keepdim, dtype) with PyTorch's checks and words, and the full
 * reductions sum(t) and mean(t) as decompositions into the dim overloads.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

int tn__reduce_mask(const char *op, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                    bool *mask)
{
    int nd = self->ndim;
    memset(mask, 0, sizeof(bool) * TN_MAX_DIMS);
    if (!dim || dim_len == 0) {
        for (int i = 0; i < nd; i++)
            mask[i] = true;
        return TN_OK;
    }
    for (int i = 0; i < dim_len; i++) {
        int d = tn_wrap_dim(dim[i], nd);
        if (d < 0)
            return tn_last_status();
        if (nd == 0)
            continue; /* a 0-dim tensor reduces over nothing */
        if (mask[d])
            return tn_set_error(TN_EINVAL, "dim %d appears multiple times in the list of dims", d);
        mask[d] = true;
    }
    (void)op;
    return TN_OK;
}

static int reduce_meta(const char *op, const struct tn_tensor *self, const int64_t *dim,
                       int dim_len, bool keepdim, enum tn_dtype dtype, struct tn_meta *m)
{
    bool mask[TN_MAX_DIMS];
    int rc = tn__reduce_mask(op, self, dim, dim_len, mask);
    if (rc < 0)
        return rc;
    m->ndim = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (!mask[i])
            m->sizes[m->ndim++] = self->sizes[i];
        else if (keepdim)
            m->sizes[m->ndim++] = 1;
    }
    m->dtype = dtype;
    return TN_OK;
}

int tn__meta_sum_intlist_out(const struct tn_tensor *self, const int64_t *dim, int dim_len,
                             bool keepdim, enum tn_dtype dtype, struct tn_meta *m)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_dtype_is_integral(self->dtype, true) ? TN_INT64 : self->dtype;
    return reduce_meta("sum", self, dim, dim_len, keepdim, dtype, m);
}

int tn__meta_mean_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      enum tn_dtype dtype, struct tn_meta *m)
{
    enum tn_dtype dt = dtype == TN_DTYPE_UNSET ? self->dtype : dtype;
    if (!tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt)) {
        static const char *names[TN_NUM_DTYPES] = {
            [TN_INT64] = "Long", [TN_INT32] = "Int", [TN_INT16] = "Short", [TN_INT8] = "Char",
            [TN_UINT8] = "Byte", [TN_BOOL] = "Bool"};
        return tn_set_error(TN_EDTYPE, "mean(): could not infer output dtype. %s dtype must be "
                            "either a floating point or complex dtype. Got: %s",
                            dtype == TN_DTYPE_UNSET ? "Input" : "Optional", names[dt]);
    }
    return reduce_meta("mean", self, dim, dim_len, keepdim, dt, m);
}

static int minmax_meta(const char *op, const struct tn_tensor *self, const int64_t *dim,
                       int dim_len, bool keepdim, struct tn_meta *m)
{
    int rc = reduce_meta(op, self, dim, dim_len, keepdim, self->dtype, m);
    if (rc < 0 || tn_numel(self) != 0)
        return rc;
    if (dim_len == 0)
        return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim to be specified for "
                            "input.numel() == 0. Specify the reduction dim with the 'dim' "
                            "argument.", op);
    for (int i = 0; i < dim_len; i++) {
        int d = tn_wrap_dim(dim[i], self->ndim);
        if (self->ndim > 0 && self->sizes[d] == 0)
            return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim %d to have non-zero size.",
                                op, d);
    }
    return TN_OK;
}

int tn__meta_amax_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      struct tn_meta *m)
{
    return minmax_meta("amax", self, dim, dim_len, keepdim, m);
}

int tn__meta_amin_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      struct tn_meta *m)
{
    return minmax_meta("amin", self, dim, dim_len, keepdim, m);
}

struct tn_tensor *tn__composite_sum(tn_keyset ks, const struct tn_tensor *self, enum tn_dtype dtype)
{
    return tn_sum_dim_intlist(self, NULL, 0, false, dtype);
}

struct tn_tensor *tn__composite_mean(tn_keyset ks, const struct tn_tensor *self, enum tn_dtype dtype)
{
    return tn_mean_dim(self, NULL, 0, false, dtype);
}
