/*
 * ops/bucketize.c: the decompositions over searchsorted.Tensor (whose CPU
 * kernel is ops/cpu/bucketize.c): searchsorted.Scalar (the value as a
 * wrapped number, as searchsorted_scalar_tensor makes it) and bucketize
 * (boundaries first, 1-D only), as Bucketization.cpp writes them.
 */
#include <config.h>

#include "ops/internal.h"

struct tn_tensor *tn__composite_searchsorted_scalar(tn_keyset ks,
                                                   const struct tn_tensor *sorted_sequence,
                                                   struct tn_scalar self, bool out_int32,
                                                   bool right, const char *side,
                                                   const struct tn_tensor *sorter)
{
    (void)ks;
    struct tn_tensor *v = tn__wrapped_scalar(self);
    struct tn_tensor *r = v ? tn_searchsorted(sorted_sequence, v, out_int32, right, side, sorter)
                            : NULL;
    tn_release(v);
    return r;
}

static int one_d(const struct tn_tensor *boundaries)
{
    if (boundaries->ndim != 1)
        return tn_set_error(TN_ERUNTIME, "boundaries tensor must be 1 dimension, but got dim(%d)",
                            boundaries->ndim);
    return TN_OK;
}

struct tn_tensor *tn__composite_bucketize(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *boundaries, bool out_int32,
                                          bool right)
{
    (void)ks;
    if (one_d(boundaries) < 0)
        return NULL;
    return tn_searchsorted(boundaries, self, out_int32, right, NULL, NULL);
}

struct tn_tensor *tn__composite_bucketize_scalar(tn_keyset ks, struct tn_scalar self,
                                                 const struct tn_tensor *boundaries,
                                                 bool out_int32, bool right)
{
    (void)ks;
    if (one_d(boundaries) < 0)
        return NULL;
    return tn__composite_searchsorted_scalar(ks, boundaries, self, out_int32, right, NULL, NULL);
}
