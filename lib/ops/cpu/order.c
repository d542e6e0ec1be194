/*
 * ops/cpu/order.c: the scans beyond cumsum and cumprod and the order
 * statistics, as PyTorch's CPU kernels (aten/src/ATen/native/ReduceOps.cpp,
 * Sorting.cpp) give them: cummax and
 * cummin (cummax_cummin_helper: a NaN, or an element >= (<=) the running
 * one when that is not NaN, takes over, so ties and NaNs move the index to
 * the latest) and logcumsumexp (_log_add_exp_helper, accumulated in
 * double, or float for float16 and bfloat16, as at::acc_type on the CPU),
 * each row walked along dim; kthvalue (SortingUtils.h's
 * quick_select_template run on the row and its indices, so a tie gives the
 * index PyTorch's partitioning leaves at k - 1).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* self's elements as float64 (floating) or int64 (integers, bool), which
 * hold every value exactly, contiguous: a row of n along dim at
 * (o * n) * inner + j, o < outer, j < inner. */
struct rows {
    struct tn_tensor *t;
    int64_t outer, n, inner;
};

static int rows_of(const struct tn_tensor *self, int dim, enum tn_dtype kd, struct rows *r)
{
    struct tn_tensor *c = tn_to_dtype(self, kd);
    r->t = c ? tn_contiguous(c) : NULL;
    tn_release(c);
    if (!r->t)
        return tn_last_status();
    r->outer = 1, r->inner = 1, r->n = self->sizes[dim];
    for (int i = 0; i < self->ndim; i++)
        if (i < dim)
            r->outer *= self->sizes[i];
        else if (i > dim)
            r->inner *= self->sizes[i];
    return TN_OK;
}

/* the index of the running max (min) of each row */
static void cum_index(const struct rows *r, bool max, int64_t *idx)
{
    bool fl = r->t->dtype == TN_FLOAT64;
    const double *d = tn_data(r->t);
    const int64_t *q = tn_data(r->t);
    for (int64_t o = 0; o < r->outer; o++)
        for (int64_t j = 0; j < r->inner; j++) {
            int64_t base = o * r->n * r->inner + j, best = 0;
            for (int64_t i = 0; i < r->n; i++) {
                int64_t at = base + i * r->inner, cur = base + best * r->inner;
                bool take;
                if (fl)
                    take = isnan(d[at]) ||
                           (!isnan(d[cur]) && (max ? d[at] >= d[cur] : d[at] <= d[cur]));
                else
                    take = max ? q[at] >= q[cur] : q[at] <= q[cur];
                if (take)
                    best = i;
                idx[at] = best;
            }
        }
}

static int cummaxmin(bool max, const struct tn_tensor *self, int64_t dim_,
                     struct tn_tensor **values, struct tn_tensor **indices)
{
    const char *name = max ? "cummax_cpu" : "cummin_cpu";
    struct tn_tensor *v = NULL, *i = NULL;
    if (self->ndim == 0 || tn_numel(self) == 0) { /* PyTorch fills these unchecked */
        v = tn_contiguous(self);
        i = v ? tn_zeros(self->sizes, self->ndim, TN_INT64) : NULL;
        goto done;
    }
    if (tn_dtype_is_complex(self->dtype) || tn_dtype_is_storage_only(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", name,
                            tn_dtype_info(self->dtype)->c10_name);
    int d = tn_wrap_dim(dim_, self->ndim);
    if (d < 0)
        return tn_last_status();
    struct rows r = {0};
    if (rows_of(self, d, tn_dtype_is_floating(self->dtype) ? TN_FLOAT64 : TN_INT64, &r))
        return tn_last_status();
    i = tn_empty(self->sizes, self->ndim, TN_INT64);
    if (i) {
        cum_index(&r, max, tn_data(i));
        v = tn_gather(self, d, i, false);
    }
    tn_release(r.t);
done:
    if (!v) {
        tn_release(i);
        return tn_last_status();
    }
    *values = v;
    *indices = i;
    return TN_OK;
}

int tn__cpu_cummax(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                   struct tn_tensor **values, struct tn_tensor **indices)
{
    (void)ks;
    return cummaxmin(true, self, dim, values, indices);
}

int tn__cpu_cummin(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                   struct tn_tensor **values, struct tn_tensor **indices)
{
    (void)ks;
    return cummaxmin(false, self, dim, values, indices);
}

/* _log_add_exp_helper: log(exp(x) + exp(y)) with std::min/std::max's NaN
 * order (the first argument when either is NaN), y the running sum */
#define TN_LAE(SFX, T, LOG1P, EXP)                                                             \
    static T lae_##SFX(T x, T y)                                                               \
    {                                                                                          \
        T mn = isnan(y) ? y : (y < x ? y : x), mx = isnan(y) ? y : (x < y ? y : x);            \
        if (mn != mx || isfinite(mn))                                                          \
            return LOG1P(EXP(mn - mx)) + mx;                                                   \
        return x;                                                                              \
    }
TN_LAE(f, float, log1pf, expf)
TN_LAE(d, double, log1p, exp)

struct tn_tensor *tn__cpu_logcumsumexp(tn_keyset ks, const struct tn_tensor *self, int64_t dim)
{
    (void)ks;
    int d = tn_wrap_dim(dim, self->ndim ? self->ndim : 1);
    if (d < 0)
        return NULL;
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"logcumsumexp_out_cpu\" not implemented for '%s'%s",
                            tn_dtype_info(self->dtype)->c10_name,
                            tn_dtype_is_complex(self->dtype) ? " (complex: not here yet)" : ""),
               NULL;
    if (self->ndim == 0 || tn_numel(self) == 0) /* one element: itself */
        return tn_contiguous(self);
    struct rows r = {0};
    if (rows_of(self, d, TN_FLOAT64, &r))
        return NULL;
    struct tn_tensor *out = NULL, *acc = tn_empty(self->sizes, self->ndim, TN_FLOAT64);
    if (acc) {
        bool half = self->dtype == TN_FLOAT16 || self->dtype == TN_BFLOAT16;
        const double *x = tn_data(r.t);
        double *y = tn_data(acc);
        for (int64_t o = 0; o < r.outer; o++)
            for (int64_t j = 0; j < r.inner; j++) {
                int64_t base = o * r.n * r.inner + j;
                double cd = -INFINITY;
                float cf = -INFINITY;
                for (int64_t i = 0; i < r.n; i++) {
                    int64_t at = base + i * r.inner;
                    if (half)
                        y[at] = cf = lae_f((float)x[at], cf);
                    else
                        y[at] = cd = lae_d(x[at], cd);
                }
            }
        out = tn_to_dtype(acc, self->dtype);
    }
    tn_release(acc), tn_release(r.t);
    return out;
}

/* quick_select_template: v and ix (n each) partially ordered so that
 * [k] holds the k-th smallest, NaN above all; the same swaps as PyTorch's */
#define TN_QSEL(SFX, T, NAN_)                                                                   \
    static bool gt_##SFX(T x, T y) { return (NAN_(x) && !NAN_(y)) || x > y; }                  \
    static void swap_##SFX(T *v, int64_t *ix, int64_t i, int64_t j)                            \
    {                                                                                          \
        T t = v[i];                                                                            \
        v[i] = v[j], v[j] = t;                                                                 \
        int64_t u = ix[i];                                                                     \
        ix[i] = ix[j], ix[j] = u;                                                              \
    }                                                                                          \
    static void qsel_##SFX(T *v, int64_t *ix, int64_t n, int64_t k)                            \
    {                                                                                          \
        int64_t L = 0, R = n - 1;                                                              \
        for (;;) {                                                                             \
            if (R <= L)                                                                        \
                return;                                                                        \
            if (R == L + 1) {                                                                  \
                if (gt_##SFX(v[L], v[R]))                                                      \
                    swap_##SFX(v, ix, L, R);                                                   \
                return;                                                                        \
            }                                                                                  \
            int64_t P = L + (R - L) / 2, i = L + 1, j = R;                                     \
            swap_##SFX(v, ix, P, L + 1);                                                       \
            if (gt_##SFX(v[L + 1], v[R]))                                                      \
                swap_##SFX(v, ix, L + 1, R);                                                   \
            if (gt_##SFX(v[L], v[R]))                                                          \
                swap_##SFX(v, ix, L, R);                                                       \
            if (gt_##SFX(v[L + 1], v[L]))                                                      \
                swap_##SFX(v, ix, L + 1, L);                                                   \
            T piv = v[L];                                                                      \
            for (;;) {                                                                         \
                do                                                                             \
                    i++;                                                                       \
                while (gt_##SFX(piv, v[i]));                                                   \
                do                                                                             \
                    j--;                                                                       \
                while (gt_##SFX(v[j], piv));                                                   \
                if (j < i)                                                                     \
                    break;                                                                     \
                swap_##SFX(v, ix, i, j);                                                       \
            }                                                                                  \
            swap_##SFX(v, ix, L, j);                                                           \
            if (j <= k)                                                                        \
                L = i;                                                                         \
            if (j >= k)                                                                        \
                R = j - 1;                                                                     \
        }                                                                                      \
    }
#define NOT_NAN(x) ((void)(x), false)
TN_QSEL(d, double, isnan)
TN_QSEL(i, int64_t, NOT_NAN)

/* each row's k-th index into idx (outer * inner, row order) */
static int kth_index(const struct rows *r, int64_t k, int64_t *idx)
{
    bool fl = r->t->dtype == TN_FLOAT64;
    int64_t *ix = malloc(sizeof *ix * (size_t)r->n);
    char *v = malloc(8 * (size_t)r->n);
    if (!ix || !v) {
        free(ix), free(v);
        return tn_set_error(TN_ENOMEM, "kthvalue: out of memory for a row of %lld",
                            (long long)r->n);
    }
    const char *src = tn_data(r->t);
    for (int64_t o = 0; o < r->outer; o++)
        for (int64_t j = 0; j < r->inner; j++) {
            for (int64_t i = 0; i < r->n; i++) {
                memcpy(v + 8 * i, src + 8 * ((o * r->n + i) * r->inner + j), 8);
                ix[i] = i;
            }
            if (fl)
                qsel_d((double *)(void *)v, ix, r->n, k);
            else
                qsel_i((int64_t *)(void *)v, ix, r->n, k);
            idx[o * r->inner + j] = ix[k];
        }
    free(ix), free(v);
    return TN_OK;
}

int tn__cpu_kthvalue(tn_keyset ks, const struct tn_tensor *self, int64_t k, int64_t dim,
                     bool keepdim, struct tn_tensor **values, struct tn_tensor **indices)
{
    (void)ks;
    int d = tn_wrap_dim(dim, self->ndim ? self->ndim : 1);
    if (d < 0)
        return tn_last_status();
    int64_t n = self->ndim ? self->sizes[d] : 1;
    if (n == 0)
        return tn_set_error(TN_EINDEX, "kthvalue(): Expected reduction dim %d to have non-zero "
                            "size.", d);
    if (k < 1 || k > n)
        return tn_set_error(TN_EINDEX, "kthvalue(): selected number k out of range for "
                            "dimension %lld", (long long)d);
    if (self->ndim == 0) {
        *values = tn_contiguous(self);
        *indices = *values ? tn_zeros(NULL, 0, TN_INT64) : NULL;
        return *indices ? TN_OK : (tn_release(*values), tn_last_status());
    }
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype) ||
        tn_dtype_is_storage_only(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"kthvalue_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name);
    struct rows r = {0};
    if (rows_of(self, d, tn_dtype_is_floating(self->dtype) ? TN_FLOAT64 : TN_INT64, &r))
        return tn_last_status();
    int64_t ks_[TN_MAX_DIMS], dd = d;
    for (int i = 0; i < self->ndim; i++)
        ks_[i] = i == d ? 1 : self->sizes[i];
    struct tn_tensor *i = tn_empty(ks_, self->ndim, TN_INT64), *v = NULL;
    if (i && kth_index(&r, k - 1, tn_data(i)) == 0)
        v = tn_gather(self, d, i, false);
    tn_release(r.t);
    if (v && !keepdim) {
        *values = tn_squeeze_dims(v, &dd, 1);
        *indices = *values ? tn_squeeze_dims(i, &dd, 1) : NULL;
        tn_release(v), tn_release(i);
        if (!*indices)
            tn_release(*values);
        return *indices ? TN_OK : tn_last_status();
    }
    if (!v) {
        tn_release(i);
        return tn_last_status();
    }
    *values = v, *indices = i;
    return TN_OK;
}
