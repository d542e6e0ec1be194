/*
 * ops/trapezoid.c: trapezoid and cumulative_trapezoid (.x, with the sample
 * points, and .dx, with a constant spacing) as PyTorch's
 * CompositeImplicitAutograd ones (Integration.cpp): the neighbours'
 * sums (y sliced [0, -1) and [1, end) along dim) times the spacing, summed
 * or cumsum-ed and halved; a constant spacing's trapezoid as dx * (sum -
 * (first + last) / 2). x of one dim is viewed along dim, a shorter x
 * padded with leading 1s, and the spacing is its difference along dim, so
 * it broadcasts against y's after it is taken (NumPy's rule).
 */
#include <config.h>

#include "ops/internal.h"
#include "ops/nn_internal.h"

/* y sliced [0, -1) plus y sliced [1, end) along dim */
static struct tn_tensor *neighbours(const struct tn_tensor *y, int64_t dim)
{
    struct tn_tensor *l = tn_slice(y, dim, 0, -1, 1);
    struct tn_tensor *r = l ? tn_slice(y, dim, 1, INT64_MAX, 1) : NULL;
    struct tn_tensor *s = r ? tn_add(l, r, tn_int(1)) : NULL;
    tn_release(r);
    tn_release(l);
    return s;
}

/* (left + right) * (x's differences along dim), after PyTorch's checks of
 * y and x in op's words; *dim wrapped */
static struct tn_tensor *spaced(const char *op, const struct tn_tensor *y,
                                const struct tn_tensor *x, int64_t *dim)
{
    int d = tn_wrap_dim(*dim, y->ndim);
    if (d < 0)
        return NULL;
    *dim = d;
    if (y->dtype == TN_BOOL || x->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "%s: received a bool input for `x` or `y`, but bool is "
                            "not supported", op), NULL;
    int64_t shape[TN_MAX_DIMS];
    int n = y->ndim > x->ndim ? y->ndim : x->ndim;
    for (int i = 0; i < n; i++)
        shape[i] = 1;
    if (x->ndim == 1) {
        if (y->ndim == 0) /* y.size(dim) */
            return tn_set_error(TN_EINDEX, "Dimension specified as %d but tensor has no "
                                "dimensions", d), NULL;
        if (x->sizes[0] != y->sizes[d])
            return tn_set_error(TN_ERUNTIME, "%s: There must be one `x` value for each sample "
                                "point", op), NULL;
        n = y->ndim;
        shape[d] = x->sizes[0];
    } else { /* leading 1s up to y's dims (none where x has as many) */
        for (int i = 0; i < x->ndim; i++)
            shape[n - x->ndim + i] = x->sizes[i];
    }
    struct tn_keep k = {.n = 0};
    struct tn_tensor *xv, *xl, *xr, *dx, *s, *r;
    TN_KEEP(&k, xv, tn_view(x, shape, n));
    TN_KEEP(&k, xl, tn_slice(xv, d, 0, -1, 1));
    TN_KEEP(&k, xr, tn_slice(xv, d, 1, INT64_MAX, 1));
    TN_KEEP(&k, dx, tn_sub(xr, xl, tn_int(1)));
    TN_KEEP(&k, s, neighbours(y, d));
    TN_KEEP(&k, r, tn_mul(s, dx));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* y's zeros without dim: the integral over no samples (NumPy's 0) */
static struct tn_tensor *zeros_except(const struct tn_tensor *y, int dim)
{
    int64_t shape[TN_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < y->ndim; i++)
        if (i != dim)
            shape[n++] = y->sizes[i];
    return tn_zeros(shape, n, y->dtype);
}

/* 1 when y has no samples along dim (*z their zeros, or NULL on an error),
 * 0 when it has */
static int no_samples(const struct tn_tensor *y, int64_t dim, struct tn_tensor **z)
{
    int d = tn_wrap_dim(dim, y->ndim);
    if (d >= 0 && y->ndim == 0)
        tn_set_error(TN_EINDEX, "Dimension specified as %d but tensor has no dimensions", d),
            d = -1;
    if (d < 0 || y->sizes[d] == 0) {
        *z = d < 0 ? NULL : zeros_except(y, d);
        return 1;
    }
    return 0;
}

/* the constant spacing's checks in op's words: 0 or an error */
static int real_dx(const char *op, const struct tn_tensor *y, struct tn_scalar dx)
{
    if (y->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "%s: received a bool input for `y`, but bool is not "
                            "supported", op);
    if (dx.kind == TN_SCALAR_COMPLEX || dx.kind == TN_SCALAR_BOOL)
        return tn_set_error(TN_ERUNTIME, "%s: Currently, we only support dx as a real number.",
                            op);
    return TN_OK;
}

/* ((left + right) * dx) summed or cumsum-ed along dim, halved */
static struct tn_tensor *over_x(const char *op, const struct tn_tensor *y,
                                const struct tn_tensor *x, int64_t dim, bool cumulative)
{
    struct tn_tensor *s = spaced(op, y, x, &dim), *t = NULL;
    if (s)
        t = cumulative ? tn_cumsum(s, dim, TN_DTYPE_UNSET)
                       : tn_sum_dim_intlist(s, &dim, 1, false, TN_DTYPE_UNSET);
    struct tn_tensor *r = t ? tn_div_scalar(t, tn_float(2.0)) : NULL;
    tn_release(t);
    tn_release(s);
    return r;
}

struct tn_tensor *tn__composite_trapezoid_x(tn_keyset ks, const struct tn_tensor *y,
                                            const struct tn_tensor *x, int64_t dim)
{
    (void)ks;
    struct tn_tensor *z;
    return no_samples(y, dim, &z) ? z : over_x("trapezoid", y, x, dim, false);
}

/* dx * (the sum along dim - (the first + the last) * 0.5) */
struct tn_tensor *tn__composite_trapezoid_dx(tn_keyset ks, const struct tn_tensor *y,
                                             struct tn_scalar dx, int64_t dim)
{
    (void)ks;
    struct tn_tensor *z;
    if (no_samples(y, dim, &z))
        return z;
    if (real_dx("trapezoid", y, dx) < 0)
        return NULL;
    struct tn_keep k = {.n = 0};
    struct tn_tensor *sum, *first, *last, *ends, *half, *in, *r;
    TN_KEEP(&k, sum, tn_sum_dim_intlist(y, &dim, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(&k, first, tn_select(y, dim, 0));
    TN_KEEP(&k, last, tn_select(y, dim, -1));
    TN_KEEP(&k, ends, tn_add(first, last, tn_int(1)));
    TN_KEEP(&k, half, tn_mul_scalar(ends, tn_float(0.5)));
    TN_KEEP(&k, in, tn_sub(sum, half, tn_int(1)));
    TN_KEEP(&k, r, tn_mul_scalar(in, tn_float(tn_scalar_to_double(dx))));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_cumulative_trapezoid_x(tn_keyset ks, const struct tn_tensor *y,
                                                       const struct tn_tensor *x, int64_t dim)
{
    (void)ks;
    return over_x("cumulative_trapezoid", y, x, dim, true);
}

/* (dx / 2 * (left + right)).cumsum(dim) */
struct tn_tensor *tn__composite_cumulative_trapezoid_dx(tn_keyset ks, const struct tn_tensor *y,
                                                        struct tn_scalar dx, int64_t dim)
{
    (void)ks;
    if (real_dx("cumulative_trapezoid", y, dx) < 0)
        return NULL;
    struct tn_tensor *s = neighbours(y, dim);
    struct tn_tensor *h = s ? tn_mul_scalar(s, tn_float(tn_scalar_to_double(dx) / 2.0)) : NULL;
    struct tn_tensor *r = h ? tn_cumsum(h, dim, TN_DTYPE_UNSET) : NULL;
    tn_release(h);
    tn_release(s);
    return r;
}
