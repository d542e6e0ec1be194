/*
 * ops/softmax.c: meta functions of _softmax and _log_softmax, and softmax /
 * log_softmax (with dtype=) as decompositions into them.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

static int softmax_meta(const struct tn_tensor *self, int64_t dim,
                        bool half_to_float, struct tn_meta *m)
{
    if (tn_wrap_dim(dim, self->ndim) < 0)
        return tn_last_status();
    if (half_to_float)
        /* PyTorch says "softmax" for log_softmax too */
        return tn_set_error(TN_EINVAL, "softmax with half to float conversion is not supported on "
                            "CPU");
    m->ndim = self->ndim;
    memcpy(m->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    m->dtype = self->dtype;
    return TN_OK;
}

int tn__meta_underscore_softmax_out(const struct tn_tensor *self, int64_t dim, bool half_to_float,
                          struct tn_meta *m)
{
    return softmax_meta(self, dim, half_to_float, m);
}

int tn__meta_underscore_log_softmax_out(const struct tn_tensor *self, int64_t dim, bool half_to_float,
                              struct tn_meta *m)
{
    return softmax_meta(self, dim, half_to_float, m);
}

struct tn_tensor *tn__composite_softmax(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                        enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET)
        return tn_underscore_softmax(self, dim, false);
    struct tn_tensor *c = tn_to_dtype(self, dtype);
    struct tn_tensor *r = c ? tn_underscore_softmax(c, dim, false) : NULL;
    tn_release(c);
    return r;
}

struct tn_tensor *tn__composite_log_softmax(tn_keyset ks, const struct tn_tensor *self,
                                            int64_t dim, enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET)
        return tn_underscore_log_softmax(self, dim, false);
    struct tn_tensor *c = tn_to_dtype(self, dtype);
    struct tn_tensor *r = c ? tn_underscore_log_softmax(c, dim, false) : NULL;
    tn_release(c);
    return r;
}
