/*
 * ops/distance.c: the norm-built ops of PyTorch's Distance.cpp and
 * Normalization.cpp that are not the cdist/pdist forwards (ops/linalg.c):
 * pairwise_distance (CompositeImplicitAutograd in PyTorch too) and renorm.
 */
#include <config.h>

#include <math.h>

#include "ops/internal.h"
#include "ops/nn_internal.h"

/* pairwise_distance: the p-norm over the innermost dim of the broadcast
 * x1 - x2 + eps, as PyTorch's (at::norm, so its dtype rules and errors). */
struct tn_tensor *tn__composite_pairwise_distance(tn_keyset ks, const struct tn_tensor *x1,
                                                  const struct tn_tensor *x2, double p,
                                                  double eps, bool keepdim)
{
    int64_t inner = (x1->ndim > x2->ndim ? x1->ndim : x2->ndim) - 1;
    struct tn_tensor *d = tn_sub(x1, x2, tn_int(1));
    struct tn_tensor *de = d ? tn_add_scalar(d, tn_float(eps), tn_int(1)) : NULL;
    struct tn_scalar ps = tn_float(p);
    struct tn_tensor *r = de ? tn_norm_scalaropt_dim(de, &ps, &inner, 1, keepdim) : NULL;
    tn_release(d);
    tn_release(de);
    return r;
}

/* renorm: each slice along dim whose p-norm (over the other dims) exceeds
 * maxnorm scaled by maxnorm / (norm + 1e-7). As PyTorch's renorm_out: the
 * norm in the accumulate type (float32 for half and bfloat16), the factor
 * computed there with maxnorm and 1e-7 in that type, cast to self's dtype,
 * then self * factor. Built of differentiable ops, so its gradient is the
 * chain rule of these, which is PyTorch's renorm_backward (factor (grad -
 * norm_backward(sum(self grad)) / (norm + 1e-7)) where norm > maxnorm). */
struct tn_tensor *tn__composite_renorm(tn_keyset ks, const struct tn_tensor *self,
                                       struct tn_scalar p, int64_t dim, struct tn_scalar maxnorm)
{
    if (p.kind == TN_SCALAR_COMPLEX)
        return tn_set_error(TN_EINVAL, "renorm: p must be real-valued"), NULL;
    if (!(tn_scalar_to_double(p) > 0))
        return tn_set_error(TN_EINVAL, "renorm: non-positive-norm not supported"), NULL;
    if (maxnorm.kind == TN_SCALAR_COMPLEX)
        return tn_set_error(TN_EINVAL, "renorm: maxnorm must be real-valued"), NULL;
    double mx = tn_scalar_to_double(maxnorm);
    if (!(mx >= 0))
        return tn_set_error(TN_EINVAL, "renorm: expected maxnorm to be >= 0 but got %g", mx), NULL;
    if (self->ndim <= 1)
        return tn_set_error(TN_ESHAPE, "renorm: input needs at least 2 dimensions, got %d "
                            "dimensions", self->ndim), NULL;
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return NULL;
    int64_t rd[TN_MAX_DIMS];
    int nr = 0;
    for (int i = 0; i < self->ndim; i++)
        if (i != d)
            rd[nr++] = i;
    enum tn_dtype acc = self->dtype == TN_FLOAT16 || self->dtype == TN_BFLOAT16 ? TN_FLOAT32
                                                                        : TN_DTYPE_UNSET;
    struct tn_keep k = {0};
    struct tn_tensor *norm, *m, *over, *den, *q, *f, *r;
    TN_KEEP(&k, norm, tn_linalg_vector_norm(self, p, rd, nr, true, acc));
    /* maxnorm in the norm's (real) dtype, as the kernel's maxnorm_s */
    TN_KEEP(&k, m, tn_empty_on(NULL, 0, norm->dtype, norm->device));
    if (m->device.type != TN_DEVICE_META && tn_fill_(m, maxnorm) < 0)
        goto fail;
    TN_KEEP(&k, over, tn_gt(norm, m));
    TN_KEEP(&k, den, tn_add_scalar(norm, tn_float(1e-7), tn_int(1)));
    TN_KEEP(&k, q, tn_div(m, den));
    TN_KEEP(&k, f, tn_where_scalarother(over, q, tn_int(1)));
    if (f->dtype != self->dtype && !tn_dtype_is_complex(self->dtype))
        TN_KEEP(&k, f, tn_to_dtype(f, self->dtype));
    TN_KEEP(&k, r, tn_mul(self, f));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
