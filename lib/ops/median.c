/*
 * ops/median.c: median and nanmedian, as PyTorch's CPU kernel
 * (median_with_indices_impl, Sorting.cpp) picks them: its nth_element
 * orders a row by (value, index), so the k-th of a stable sort is the same
 * element, index included: k = (size - 1) / 2, or, for median, the first
 * NaN where the row has one; for nanmedian, (non-NaN count - 1) / 2 (NaNs
 * sort last). The .dim overloads are CompositeImplicitAutograd over sort
 * and gather (the gradient lands on the chosen element, as
 * _value_selecting_bw puts it); the full reductions take their own
 * derivative (_evenly_distribute_bw, derivatives.yaml), as PyTorch's do.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"

/* The position std::nth_element (libstdc++'s introselect) leaves at nth =
 * first of n elements that all compare equivalent (an all-NaN row of
 * nanmedian): the median-of-three moves mid to first, the unguarded
 * partition swaps pairs from the ends inwards, and the search goes on in
 * [first, cut) until 3 are left, which insertion sort leaves alone. */
static int64_t nth_of_equal(int64_t n)
{
    int64_t *a = malloc(sizeof *a * (size_t)(n > 0 ? n : 1)), lo = 0, hi = n;
    if (!a)
        return 0;
    for (int64_t i = 0; i < n; i++)
        a[i] = i;
    while (hi - lo > 3) {
        int64_t mid = lo + (hi - lo) / 2, t = a[lo], f = lo + 1, l = hi;
        a[lo] = a[mid], a[mid] = t;
        for (;;) {
            --l;
            if (!(f < l))
                break;
            t = a[f], a[f] = a[l], a[l] = t;
            ++f;
        }
        hi = f; /* cut > nth = lo */
    }
    int64_t r = a[lo];
    free(a);
    return r;
}

/* Each row's k (keepdim shape, int64) from its NaN count nn. */
static struct tn_tensor *kth(const struct tn_tensor *nn, int64_t size, bool ignore_nan)
{
    struct tn_tensor *first = tn_rsub_scalar(nn, tn_int(size), tn_int(1)), *k = NULL; /* size - nn */
    if (!first)
        return NULL;
    if (ignore_nan) { /* (size - nn - 1) / 2; an all-NaN row's as nth_element */
        struct tn_tensor *m = tn_add_scalar(first, tn_int(-1), tn_int(1));
        struct tn_tensor *c = m ? tn_clamp_min(m, tn_int(0)) : NULL;
        struct tn_tensor *h = c ? tn_div_scalar_mode(c, tn_int(2), "floor") : NULL;
        struct tn_tensor *all = h ? tn_eq_scalar(first, tn_int(0)) : NULL;
        k = all ? tn_masked_fill_scalar(h, all, tn_int(nth_of_equal(size))) : NULL;
        tn_release(m), tn_release(c), tn_release(h), tn_release(all);
    } else { /* the first NaN (sorted last, in index order) where there is one */
        struct tn_tensor *has = tn_gt_scalar(nn, tn_int(0));
        k = has ? tn_where_scalarother(has, first, tn_int((size - 1) / 2)) : NULL;
        tn_release(has);
    }
    tn_release(first);
    return k;
}

static int median_dim(const char *name, const struct tn_tensor *self, int64_t dim, bool keepdim,
                      bool ignore_nan, struct tn_tensor **values, struct tn_tensor **indices)
{
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"%s_out\" not implemented for '%s'", name,
                            tn_dtype_info(self->dtype)->c10_name);
    int d = tn_wrap_dim(dim, self->ndim ? self->ndim : 1);
    if (d < 0)
        return tn_last_status();
    /* a 0-dim self as one element */
    struct tn_tensor *x = self->ndim ? tn_retain((struct tn_tensor *)self) : tn_unsqueeze(self, 0);
    if (x && x->sizes[d] == 0) {
        tn_release(x);
        return tn_set_error(TN_EINDEX, "median(): Expected reduction dim %d to have non-zero "
                            "size.", d);
    }
    struct tn_tensor *sv = NULL, *si = NULL, *nan = NULL, *nn = NULL, *k = NULL, *v = NULL,
                     *i = NULL;
    int64_t dd = d;
    if (x && tn_sort(x, d, false, &sv, &si) == 0 && (nan = tn_isnan(x)) &&
        (nn = tn_sum_dim_intlist(nan, &dd, 1, true, TN_INT64)) &&
        (k = kth(nn, x->sizes[d], ignore_nan)) && (v = tn_gather(sv, d, k, false)))
        i = tn_gather(si, d, k, false);
    int rc = i ? TN_OK : tn_last_status();
    if (i && (!keepdim || !self->ndim)) {
        *values = tn_squeeze_dims(v, &dd, 1);
        *indices = *values ? tn_squeeze_dims(i, &dd, 1) : NULL;
        if (!*indices) {
            tn_release(*values);
            rc = tn_last_status();
        }
    } else if (i) {
        *values = tn_retain(v);
        *indices = tn_retain(i);
    }
    tn_release(x), tn_release(sv), tn_release(si), tn_release(nan), tn_release(nn);
    tn_release(k), tn_release(v), tn_release(i);
    return rc;
}

/* The whole tensor's: NaN when it is empty, as PyTorch's median_impl. */
static struct tn_tensor *median_all(const char *name, const struct tn_tensor *self, bool ignore_nan)
{
    if (tn_numel(self) == 0 && (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype)))
        return tn_set_error(TN_EDTYPE, "\"%s_cpu\" not implemented for '%s'", name,
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    if (tn_numel(self) == 0)
        return tn_full(NULL, 0, tn_float(NAN), self->dtype);
    struct tn_tensor *flat = tn_reshape(self, (int64_t[]){-1}, 1), *v = NULL, *i = NULL;
    if (flat && median_dim(name, flat, 0, false, ignore_nan, &v, &i) == 0)
        tn_release(i);
    tn_release(flat);
    return v;
}

int tn__composite_median_dim(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                             struct tn_tensor **values, struct tn_tensor **indices)
{
    (void)ks;
    return median_dim("median", self, dim, keepdim, false, values, indices);
}

int tn__composite_nanmedian_dim(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                bool keepdim, struct tn_tensor **values,
                                struct tn_tensor **indices)
{
    (void)ks;
    return median_dim("nanmedian", self, dim, keepdim, true, values, indices);
}

struct tn_tensor *tn__composite_median(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return median_all("median", self, false);
}

struct tn_tensor *tn__composite_nanmedian(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return median_all("nanmedian", self, true);
}
