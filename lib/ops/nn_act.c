/*
 * ops/nn_act.c: activations PyTorch has as their own kernels that are
 * here CompositeImplicitAutograd decompositions with the same values: glu
 * (first half times the sigmoid of the second) and prelu (a learned slope
 * per channel where the input is not positive).
 */
#include <config.h>

#include <inttypes.h>

#include "ops/nn_internal.h"

struct tn_tensor *tn__composite_glu(tn_keyset ks, const struct tn_tensor *self, int64_t dim)
{
    (void)ks;
    if (self->ndim == 0) {
        tn_set_error(TN_ESHAPE, "glu does not support scalars because halving size must be even");
        return NULL;
    }
    int64_t d = dim < 0 ? dim + self->ndim : dim;
    if (d < 0 || d >= self->ndim) {
        tn_set_error(TN_EINDEX, "Dimension out of range (expected to be in range of [%d, %d], "
                     "but got %" PRId64 ")", -self->ndim, self->ndim - 1, dim);
        return NULL;
    }
    int64_t n = self->sizes[d];
    if (n % 2) {
        tn_set_error(TN_ESHAPE, "Halving dimension must be even, but dimension %" PRId64
                     " is size %" PRId64, d, n);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *a, *b, *r;
    TN_KEEP(&k, a, tn_narrow(self, d, 0, n / 2));
    TN_KEEP(&k, b, tn_narrow(self, d, n / 2, n / 2));
    TN_KEEP(&k, b, tn_sigmoid(b));
    TN_KEEP(&k, r, tn_mul(a, b));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* prelu as PyTorch's: a weight of more than one value is one per channel
 * (dim 1) and broadcast there; then self where self > 0, else weight *
 * self (_prelu_kernel) */
struct tn_tensor *tn__composite_prelu(tn_keyset ks, const struct tn_tensor *self,
                                      const struct tn_tensor *weight)
{
    (void)ks;
    if (self->dtype != weight->dtype) {
        tn_set_error(TN_EDTYPE, "prelu: Type promoting not supported. Got %s and %s",
                     tn_dtype_info(self->dtype)->c10_name, tn_dtype_info(weight->dtype)->c10_name);
        return NULL;
    }
    int64_t nw = tn_numel(weight);
    if (nw != 1) {
        if (self->ndim == 0) {
            tn_set_error(TN_ESHAPE, "Not allow zero-dim input tensor.");
            return NULL;
        }
        int64_t c = self->ndim > 1 ? self->sizes[1] : 1;
        if (c != nw) {
            tn_set_error(TN_ESHAPE, "Mismatch of parameter numbers and input channel size. Found "
                         "parameter numbers = %" PRId64 " and channel size = %" PRId64 ".", nw, c);
            return NULL;
        }
    }
    if (weight->ndim > 1) {
        tn_set_error(TN_ESHAPE, "prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                     "ndim = %d", weight->ndim);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *w, *pos, *wx, *r;
    if (self->ndim != weight->ndim) {
        int64_t shape[TN_MAX_DIMS];
        for (int i = 0; i < self->ndim; i++)
            shape[i] = i == 1 ? nw : 1;
        TN_KEEP(&k, w, tn_reshape(weight, shape, self->ndim));
    } else {
        TN_KEEP(&k, w, tn_retain((struct tn_tensor *)weight));
    }
    TN_KEEP(&k, pos, tn_gt_scalar(self, tn_int(0)));
    TN_KEEP(&k, wx, tn_mul(w, self));
    TN_KEEP(&k, r, tn_where_self(pos, self, wx));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
