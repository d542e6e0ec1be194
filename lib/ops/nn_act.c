/*
 * ops/nn_act.c: activations PyTorch has as their own kernels that are
 * here CompositeImplicitAutograd decompositions with the same values: glu
 * (first half times the sigmoid of the second) and prelu (a learned slope
 * per channel where the input is not positive); and bilinear, PyTorch's
 * decomposition through _trilinear here two einsums.
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
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return NULL;
    int64_t n = self->sizes[d];
    if (n % 2) {
        tn_set_error(TN_ESHAPE, "Halving dimension must be even, but dimension %d"
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

/* bilinear: y[..., o] = sum_ij x1[..., i] w[o, i, j] x2[..., j] + bias[o],
 * with PyTorch's checks */
struct tn_tensor *tn__composite_bilinear(tn_keyset ks, const struct tn_tensor *input1,
                                         const struct tn_tensor *input2,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias)
{
    (void)ks;
    int n = input1->ndim;
    if (n != input2->ndim) {
        tn_set_error(TN_ESHAPE, "bilinear(): input dimensions do not match: got %d and %d", n,
                     input2->ndim);
        return NULL;
    }
    for (int i = 0; i + 1 < n; i++)
        if (input1->sizes[i] != input2->sizes[i]) {
            tn_set_error(TN_ESHAPE, "bilinear(): input batch dimensions do not match: got %"
                         PRId64 " and %" PRId64, input1->sizes[i], input2->sizes[i]);
            return NULL;
        }
    if (n < 1 || weight->ndim != 3) {
        tn_set_error(TN_ESHAPE, "bilinear(): expected inputs of at least one dimension and a "
                     "3-D weight, got %d and %d", n, weight->ndim);
        return NULL;
    }
    if (input1->sizes[n - 1] != weight->sizes[1] || input2->sizes[n - 1] != weight->sizes[2]) {
        bool one = input1->sizes[n - 1] != weight->sizes[1];
        tn_set_error(TN_ESHAPE, "bilinear(): input%d size does not match weight size: got %"
                     PRId64 " but expected %" PRId64, one ? 1 : 2,
                     (one ? input1 : input2)->sizes[n - 1], weight->sizes[one ? 1 : 2]);
        return NULL;
    }
    if (bias && (bias->ndim < 1 || bias->sizes[0] != weight->sizes[0])) {
        tn_set_error(TN_ESHAPE, "bilinear(): bias size does not match weight size: got %" PRId64
                     " but expected %" PRId64, bias->ndim ? bias->sizes[0] : 0, weight->sizes[0]);
        return NULL;
    }
    /* two contractions, input1's first, each rounded to the dtype once, as
     * PyTorch's _trilinear (and its einsum) round them */
    const struct tn_tensor *first[2] = {input1, weight};
    struct tn_tensor *t = tn_einsum("...i,oij->...oj", first, 2, NULL, 0);
    const struct tn_tensor *second[2] = {t, input2};
    struct tn_tensor *y = t ? tn_einsum("...oj,...j->...o", second, 2, NULL, 0) : NULL;
    tn_release(t);
    if (!y || !bias)
        return y;
    struct tn_tensor *r = tn_add(y, bias, tn_int(1));
    tn_release(y);
    return r;
}
