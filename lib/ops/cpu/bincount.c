/*
 * ops/cpu/bincount.c: bincount as PyTorch's CPU kernel
 * (SummaryOps.cpp's _bincount_cpu): integral 1-D non-negative input, the
 * counts in int64, or the weights summed in input order, in float for
 * float32 weights and in double for any other (int64 for an empty input,
 * weights or not); PyTorch's checks in its order and words. No derivative,
 * as PyTorch's.
 */
#include <config.h>

#include "ops/internal.h"

struct tn_tensor *tn__cpu_bincount(tn_keyset ks, const struct tn_tensor *self,
                                   const struct tn_tensor *weights, int64_t minlength)
{
    (void)ks;
    if (!tn_dtype_is_integral(self->dtype, false))
        return tn_set_error(TN_EDTYPE, "\"bincount_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    if (minlength < 0)
        return tn_set_error(TN_ERUNTIME, "minlength should be >= 0"), NULL;
    if (self->ndim == 1 && !tn_numel(self))
        return tn_zeros(&minlength, 1, TN_INT64);
    struct tn_tensor *x = self->ndim == 1 ? tn_to_dtype(self, TN_INT64) : NULL;
    struct tn_tensor *xc = x ? tn_contiguous(x) : NULL;
    tn_release(x);
    if (self->ndim == 1 && !xc)
        return NULL;
    const int64_t *v = xc ? tn_data(xc) : NULL;
    int64_t n = xc ? xc->sizes[0] : 0, nbins = minlength;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0) {
            n = -1;
            break;
        }
        nbins = v[i] + 1 > nbins ? v[i] + 1 : nbins;
    }
    if (!xc || n < 0) {
        tn_release(xc);
        return tn_set_error(TN_ERUNTIME, "bincount only supports 1-d non-negative integral "
                            "inputs."), NULL;
    }
    if (weights && (weights->ndim != 1 || weights->sizes[0] != n)) {
        tn_release(xc);
        return tn_set_error(TN_ERUNTIME, "weights should be 1-d and have the same length as "
                            "input"), NULL;
    }
    enum tn_dtype dt = !weights ? TN_INT64 : weights->dtype == TN_FLOAT32 ? TN_FLOAT32 : TN_FLOAT64;
    struct tn_tensor *w = weights ? tn_to_dtype(weights, dt) : NULL;
    struct tn_tensor *wc = w ? tn_contiguous(w) : NULL;
    struct tn_tensor *r = !weights || wc ? tn_zeros(&nbins, 1, dt) : NULL;
    for (int64_t i = 0; r && i < n; i++) /* in input order, as PyTorch's loop */
        if (dt == TN_INT64)
            ((int64_t *)tn_data(r))[v[i]] += 1;
        else if (dt == TN_FLOAT32)
            ((float *)tn_data(r))[v[i]] += ((const float *)tn_data(wc))[i];
        else
            ((double *)tn_data(r))[v[i]] += ((const double *)tn_data(wc))[i];
    tn_release(wc);
    tn_release(w);
    tn_release(xc);
    return r;
}
