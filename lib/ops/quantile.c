/*
 * ops/quantile.c: quantile and nanquantile (the Tensor q and float q
 * overloads) as PyTorch's CompositeImplicitAutograd quantile_compute
 * (aten/src/ATen/native/Sorting.cpp) writes them: the reduced dim moved
 * last and sorted, q's ranks in it (a NaN's row ranked last for quantile;
 * nanquantile's ranks over the non-NaN count), the values below and above
 * gathered and lerped, so autograd goes through sort, gather and lerp.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/internal.h"

enum mode { LINEAR, LOWER, HIGHER, MIDPOINT, NEAREST };

/* The temporaries of one computation, released together. */
struct pool {
    struct tn_tensor *t[32]; /* the most one computation keeps is 24 */
    int n;
};

static struct tn_tensor *keep(struct pool *p, struct tn_tensor *t)
{
    if (t)
        p->t[p->n++] = t;
    return t;
}

static void drain(struct pool *p)
{
    for (int i = 0; i < p->n; i++)
        tn_release(p->t[i]);
}

static int parse_mode(const char *s)
{
    static const char *const names[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i]))
            return i;
    return tn_set_error(TN_ERUNTIME, "quantile() interpolation must be one of linear, lower, "
                        "higher, midpoint or nearest, but got %s", s);
}

/* quantile_checks, in PyTorch's order and words */
static int checks(const struct tn_tensor *self, const struct tn_tensor *q)
{
    if (tn_numel(self) == 0)
        return tn_set_error(TN_ERUNTIME, "quantile() input tensor must be non-empty");
    if (q->ndim > 1)
        return tn_set_error(TN_ERUNTIME, "quantile() q must be a scalar or 1D tensor");
    if (self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64)
        return tn_set_error(TN_ERUNTIME, "quantile() input tensor must be either float or double "
                            "dtype");
    if (self->dtype != q->dtype)
        return tn_set_error(TN_ERUNTIME, "quantile() q tensor must be same dtype as the input "
                            "tensor");
    return TN_OK;
}

/* every q in [0, 1] (a NaN is not) */
static int q_in_range(const struct tn_tensor *q)
{
    if (q->device.type == TN_DEVICE_META)
        return TN_OK;
    struct tn_tensor *q64 = tn_to_dtype(q, TN_FLOAT64), *c = q64 ? tn_contiguous(q64) : NULL;
    int rc = c ? TN_OK : TN_ENOMEM;
    for (int64_t i = 0; c && i < tn_numel(c); i++) {
        double v = ((const double *)tn_data(c))[i];
        if (!(v >= 0 && v <= 1)) {
            rc = tn_set_error(TN_ERUNTIME, "quantile() q values must be in the range [0, 1]");
            break;
        }
    }
    tn_release(q64);
    tn_release(c);
    return rc;
}

/* self sorted along the reduced dim, moved last and viewed as out_shape's
 * (without q's dim) with that dim's length last */
static struct tn_tensor *sorted_rows(struct pool *p, const struct tn_tensor *self, const int64_t *dim,
                                     int wd, bool keepdim)
{
    struct tn_tensor *src;
    if (!dim)
        src = keep(p, tn_flatten(self, 0, -1));
    else if (wd == self->ndim - 1 || self->ndim == 0)
        src = (struct tn_tensor *)self;
    else {
        struct tn_tensor *u = keep(p, tn_unsqueeze(self, -1));
        src = u ? keep(p, tn_transpose(u, wd, -1)) : NULL;
    }
    struct tn_tensor *v = NULL, *ix = NULL;
    if (!src || tn_sort(src, -1, false, &v, &ix) < 0)
        return NULL;
    keep(p, v), keep(p, ix);
    int64_t shape[TN_MAX_DIMS + 1];
    int nd = 0;
    if (dim && self->ndim > 0) {
        for (int i = 0; i < self->ndim; i++)
            if (i != wd)
                shape[nd++] = self->sizes[i];
            else if (keepdim)
                shape[nd++] = 1;
    } else if (keepdim)
        for (int i = 0; i < self->ndim; i++)
            shape[nd++] = 1;
    shape[nd++] = v->ndim ? v->sizes[v->ndim - 1] : 1;
    return keep(p, tn_reshape(v, shape, nd));
}

/* The ranks of q in each row of sorted, rounded as the mode says. */
static struct tn_tensor *ranks_of(struct pool *p, const struct tn_tensor *sorted,
                                  const struct tn_tensor *q, bool ignore_nan, int mode)
{
    int last = sorted->ndim - 1;
    struct tn_tensor *nan = keep(p, tn_isnan(sorted)), *r = NULL;
    if (!nan)
        return NULL;
    if (ignore_nan) { /* over the non-NaN count; all NaN: rank 0, a NaN */
        struct tn_tensor *ok = keep(p, tn_logical_not(nan));
        int64_t d = last;
        struct tn_tensor *cnt = ok ? keep(p, tn_sum_dim_intlist(ok, &d, 1, true, TN_DTYPE_UNSET)) : NULL;
        struct tn_tensor *m1 = cnt ? keep(p, tn_sub_scalar(cnt, tn_int(1), tn_int(1))) : NULL;
        struct tn_tensor *rk = m1 ? keep(p, tn_mul(q, m1)) : NULL;
        struct tn_tensor *neg = rk ? keep(p, tn_lt_scalar(rk, tn_int(0))) : NULL;
        r = neg ? keep(p, tn_masked_fill_scalar(rk, neg, tn_int(0))) : NULL;
    } else { /* a row with a NaN ranked last, so its quantile is NaN */
        int64_t li = sorted->sizes[last] - 1;
        struct tn_tensor *rk = keep(p, tn_mul_scalar(q, tn_int(li)));
        struct tn_tensor *any = rk ? keep(p, tn_any_dim(nan, last, true)) : NULL;
        struct tn_tensor **bt = NULL;
        const struct tn_tensor *both[2] = {rk, any};
        if (!any || tn_broadcast_tensors(both, 2, &bt) < 0)
            return NULL;
        r = keep(p, tn_masked_fill_scalar(bt[0], bt[1], tn_int(li)));
        tn_release_list(bt, 2);
    }
    if (!r || mode == LINEAR || mode == MIDPOINT)
        return r;
    return keep(p, mode == LOWER ? tn_floor(r) : mode == HIGHER ? tn_ceil(r) : tn_round(r));
}

static struct tn_tensor *compute(const struct tn_tensor *self, const struct tn_tensor *q,
                                 const int64_t *dim, bool keepdim, const char *interpolation,
                                 bool ignore_nan)
{
    int mode = parse_mode(interpolation);
    if (mode < 0 || checks(self, q) < 0)
        return NULL;
    int wd = dim ? tn_wrap_dim(*dim, self->ndim) : 0;
    if (wd < 0 || q_in_range(q) < 0)
        return NULL;
    struct pool p = {.n = 0};
    struct tn_tensor *out = NULL, *sorted = sorted_rows(&p, self, dim, wd, keepdim);
    if (sorted && sorted->sizes[sorted->ndim - 1] > (1 << 24)) {
        tn_set_error(TN_ERUNTIME, "quantile() input tensor is too large");
        sorted = NULL;
    }
    struct tn_tensor *ranks = sorted ? ranks_of(&p, sorted, q, ignore_nan, mode) : NULL;
    struct tn_tensor *below = ranks ? keep(&p, tn_to_dtype(ranks, TN_INT64)) : NULL;
    struct tn_tensor *vb = below ? keep(&p, tn_gather(sorted, -1, below, false)) : NULL;
    if (vb && (mode == LINEAR || mode == MIDPOINT)) {
        struct tn_tensor *w = mode == MIDPOINT ? keep(&p, tn_scalar_tensor(tn_float(0.5), ranks->dtype))
                                               : keep(&p, tn_sub(ranks, below, tn_int(1)));
        struct tn_tensor *up = w ? keep(&p, tn_ceil(ranks)) : NULL;
        struct tn_tensor *above = up ? keep(&p, tn_to_dtype(up, TN_INT64)) : NULL;
        struct tn_tensor *va = above ? keep(&p, tn_gather(sorted, -1, above, false)) : NULL;
        vb = va ? keep(&p, tn_lerp(vb, va, w)) : NULL;
    }
    if (vb && q->ndim == 0) {
        int64_t d = vb->ndim - 1;
        out = tn_squeeze_dims(vb, &d, 1);
    } else if (vb) { /* q's dim first */
        struct tn_tensor *u = keep(&p, tn_unsqueeze(vb, 0));
        struct tn_tensor *t = u ? keep(&p, tn_transpose(u, 0, -1)) : NULL;
        int64_t d = u ? u->ndim - 1 : 0;
        out = t ? tn_squeeze_dims(t, &d, 1) : NULL;
    }
    drain(&p);
    return out;
}

static struct tn_tensor *compute_scalar(const struct tn_tensor *self, double q, const int64_t *dim,
                                        bool keepdim, const char *interpolation, bool ignore_nan)
{
    if (!(q >= 0 && q <= 1)) {
        return tn_set_error(TN_ERUNTIME, "quantile() q must be in the range [0, 1] but got %g",
                            q), NULL;
    }
    struct tn_tensor *qt = tn_scalar_tensor(tn_float(q), self->dtype);
    struct tn_tensor *r = qt ? compute(self, qt, dim, keepdim, interpolation, ignore_nan) : NULL;
    tn_release(qt);
    return r;
}

struct tn_tensor *tn__composite_quantile(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *q, const int64_t *dim,
                                         bool keepdim, const char *interpolation)
{
    (void)ks;
    return compute(self, q, dim, keepdim, interpolation, false);
}

struct tn_tensor *tn__composite_quantile_scalar(tn_keyset ks, const struct tn_tensor *self, double q,
                                                const int64_t *dim, bool keepdim,
                                                const char *interpolation)
{
    (void)ks;
    return compute_scalar(self, q, dim, keepdim, interpolation, false);
}

struct tn_tensor *tn__composite_nanquantile(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_tensor *q, const int64_t *dim,
                                            bool keepdim, const char *interpolation)
{
    (void)ks;
    return compute(self, q, dim, keepdim, interpolation, true);
}

struct tn_tensor *tn__composite_nanquantile_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                   double q, const int64_t *dim, bool keepdim,
                                                   const char *interpolation)
{
    (void)ks;
    return compute_scalar(self, q, dim, keepdim, interpolation, true);
}
