/*
 * ops/cov.c: cov and corrcoef as PyTorch's CompositeImplicitAutograd ones
 * (Correlation.cpp): the observations (dim 1 of self as a 2-D matrix of
 * variables) weighted by fweights times aweights, centred on their
 * weighted mean and multiplied by their conjugate transpose, divided by
 * the weights' sum less the correction (zero when that is not positive,
 * where PyTorch also warns); corrcoef divides by the standard deviations
 * both ways and clips to [-1, 1] (real and imaginary parts apart), so
 * autograd goes through the parts.
 */
#include <config.h>

#include "ops/internal.h"
#include "ops/nn_internal.h"

/* is_scalar_tensor_true(t): 1, 0, or an error (t released) */
static int holds(struct tn_tensor *t)
{
    if (!t)
        return tn_last_status();
    bool v = tn_item(t).v.b;
    tn_release(t);
    return v;
}

/* PyTorch's checks of one weight tensor (`what`: "fweights"/"aweights") */
static int check_weights(const char *what, const struct tn_tensor *w, bool integral, int64_t nobs)
{
    if (w->ndim > 1)
        return tn_set_error(TN_ERUNTIME, "cov(): expected %s to have one or fewer dimensions but "
                            "got %s with %d dimensions", what, what, w->ndim);
    if (integral ? !tn_dtype_is_integral(w->dtype, false) : !tn_dtype_is_floating(w->dtype))
        return tn_set_error(TN_EDTYPE, "cov(): expected %s to have %s dtype but got %s with %s "
                            "dtype", what, integral ? "integral" : "floating point", what,
                            tn_dtype_info(w->dtype)->c10_name);
    if (tn_numel(w) != nobs)
        return tn_set_error(TN_ERUNTIME, "cov(): expected %s to have the same numel as there are "
                            "observations in the input but got %lld != %lld", what,
                            (long long)tn_numel(w), (long long)nobs);
    if (nobs == 0)
        return TN_OK;
    struct tn_tensor *m = tn_min(w);
    int nonneg = m ? holds(tn_ge_scalar(m, tn_int(0))) : tn_last_status();
    tn_release(m);
    if (nonneg < 0)
        return nonneg;
    return nonneg ? TN_OK : tn_set_error(TN_ERUNTIME, "cov(): %s cannot be negative", what);
}

struct tn_tensor *tn__composite_cov(tn_keyset ks, const struct tn_tensor *self, int64_t correction,
                                    const struct tn_tensor *fweights,
                                    const struct tn_tensor *aweights)
{
    (void)ks;
    if (self->ndim > 2)
        return tn_set_error(TN_ERUNTIME, "cov(): expected input to have two or fewer dimensions "
                            "but got an input with %d dimensions", self->ndim), NULL;
    if (self->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "cov(): bool dtype is not supported for input"), NULL;
    struct tn_keep k = {.n = 0};
    struct tn_tensor *in, *w = NULL, *wsum, *win, *tot, *avg, *norm, *c, *rhs, *mean, *r;
    int64_t flat[2] = {1, -1};
    if (self->ndim < 2)
        TN_KEEP(&k, in, tn_view(self, flat, 2));
    else
        in = (struct tn_tensor *)self;
    int64_t nobs = in->sizes[1];
    if (fweights) {
        if (check_weights("fweights", fweights, true, nobs) < 0)
            goto fail;
        w = (struct tn_tensor *)fweights;
    }
    if (aweights) {
        if (check_weights("aweights", aweights, false, nobs) < 0)
            goto fail;
        if (w)
            TN_KEEP(&k, w, tn_mul(w, aweights));
        else
            w = (struct tn_tensor *)aweights;
    }
    /* the weighted mean of each variable's observations */
    if (w)
        TN_KEEP(&k, wsum, tn_sum(w, TN_DTYPE_UNSET));
    else
        TN_KEEP(&k, wsum, tn_scalar_tensor(tn_int(nobs), TN_INT64));
    int nz = w ? holds(tn_ne_scalar(wsum, tn_int(0))) : 1;
    if (nz <= 0) {
        if (nz == 0)
            tn_set_error(TN_ERUNTIME, "cov(): weights sum to zero, can't be normalized");
        goto fail;
    }
    if (w)
        TN_KEEP(&k, win, tn_mul(in, w));
    else
        win = in;
    int64_t one = 1;
    TN_KEEP(&k, tot, tn_sum_dim_intlist(win, &one, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(&k, avg, tn_div(tot, wsum));
    /* the normalisation: the weights' sum less the correction (scaled by
     * the aweights' share where there are any) */
    if (w && aweights && correction != 0) {
        struct tn_tensor *wa, *was, *cor, *share;
        TN_KEEP(&k, wa, tn_mul(w, aweights));
        TN_KEEP(&k, was, tn_sum(wa, TN_DTYPE_UNSET));
        TN_KEEP(&k, cor, tn_mul_scalar(was, tn_int(correction)));
        TN_KEEP(&k, share, tn_div(cor, wsum));
        TN_KEEP(&k, norm, tn_sub(wsum, share, tn_int(1)));
    } else
        TN_KEEP(&k, norm, tn_sub_scalar(wsum, tn_int(correction), tn_int(1)));
    int le = holds(tn_le_scalar(norm, tn_int(0)));
    if (le < 0)
        goto fail;
    if (le) /* no degrees of freedom: PyTorch warns and divides by zero */
        TN_KEEP(&k, norm, tn_zeros_like(norm, TN_DTYPE_UNSET));
    /* the centred observations times their (weighted) conjugate transpose */
    TN_KEEP(&k, mean, tn_unsqueeze(avg, 1));
    TN_KEEP(&k, in, tn_sub(in, mean, tn_int(1)));
    if (w)
        TN_KEEP(&k, rhs, tn_mul(in, w));
    else
        rhs = in;
    TN_KEEP(&k, rhs, tn_t(rhs));
    if (tn_dtype_is_complex(rhs->dtype))
        TN_KEEP(&k, rhs, tn_underscore_conj_physical(rhs));
    TN_KEEP(&k, c, tn_mm(in, rhs));
    TN_KEEP(&k, c, tn_true_divide(c, norm));
    TN_KEEP(&k, r, tn_squeeze(c));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* x clipped to [-1, 1]; a complex x's real and imaginary parts apart */
static struct tn_tensor *clip1(const struct tn_tensor *x)
{
    struct tn_scalar lo = tn_int(-1), hi = tn_int(1);
    if (!tn_dtype_is_complex(x->dtype))
        return tn_clamp(x, &lo, &hi);
    struct tn_tensor *v = tn_view_as_real(x);
    struct tn_tensor *c = v ? tn_clamp(v, &lo, &hi) : NULL;
    struct tn_tensor *r = c ? tn_view_as_complex(c) : NULL;
    tn_release(c);
    tn_release(v);
    return r;
}

struct tn_tensor *tn__composite_corrcoef(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    if (self->ndim > 2)
        return tn_set_error(TN_ERUNTIME, "corrcoef(): expected input to have two or fewer "
                            "dimensions but got an input with %d dimensions", self->ndim), NULL;
    struct tn_keep k = {.n = 0};
    struct tn_tensor *c, *d, *sd, *col, *row, *r;
    TN_KEEP(&k, c, tn_cov(self, 1, NULL, NULL));
    if (c->ndim == 0) { /* one variable: NaN where c is NaN, inf or 0, else 1 */
        TN_KEEP(&k, r, tn_div(c, c));
        return tn__keep_out(&k, r);
    }
    TN_KEEP(&k, d, tn_diagonal(c, 0, 0, 1));
    if (tn_dtype_is_complex(d->dtype))
        TN_KEEP(&k, d, tn_real(d));
    TN_KEEP(&k, sd, tn_sqrt(d));
    TN_KEEP(&k, col, tn_view(sd, (int64_t[]){-1, 1}, 2));
    TN_KEEP(&k, row, tn_view(sd, (int64_t[]){1, -1}, 2));
    TN_KEEP(&k, c, tn_div(c, col));
    TN_KEEP(&k, c, tn_div(c, row));
    TN_KEEP(&k, r, clip1(c));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
