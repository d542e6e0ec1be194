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

/* values v and indices i (keepdim's shape, both taken over; v NULL on a
 * failure) as the results, dim d squeezed unless keepdim */
static int reduced_out(struct tn_tensor *v, struct tn_tensor *i, int64_t d, bool keepdim,
                       struct tn_tensor **values, struct tn_tensor **indices)
{
    if (!v) {
        tn_release(i);
        return tn_last_status();
    }
    if (keepdim) {
        *values = v, *indices = i;
        return TN_OK;
    }
    *values = tn_squeeze_dims(v, &d, 1);
    *indices = *values ? tn_squeeze_dims(i, &d, 1) : NULL;
    tn_release(v), tn_release(i);
    if (!*indices)
        tn_release(*values);
    return *indices ? TN_OK : tn_last_status();
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
    int64_t ks_[TN_MAX_DIMS];
    for (int i = 0; i < self->ndim; i++)
        ks_[i] = i == d ? 1 : self->sizes[i];
    struct tn_tensor *i = tn_empty(ks_, self->ndim, TN_INT64), *v = NULL;
    if (i && kth_index(&r, k - 1, tn_data(i)) == 0)
        v = tn_gather(self, d, i, false);
    tn_release(r.t);
    return reduced_out(v, i, d, keepdim, values, indices);
}

/* mode: PyTorch's mode_kernel_impl std::sorts (value, index) pairs by value
 * alone, so the index of a tied value is the one libstdc++'s introsort
 * leaves last in its run: that sort, step for step (median-of-three
 * unguarded partitions down to 16, a heap sort past 2 log2(n) levels, then
 * the insertion sorts), over the pairs. */
#define TN_STDSORT(SFX, T)                                                                     \
    struct pair_##SFX {                                                                        \
        T v;                                                                                   \
        int64_t i;                                                                             \
    };                                                                                         \
    typedef struct pair_##SFX P_##SFX;                                                         \
    static void psw_##SFX(P_##SFX *a, P_##SFX *b)                                              \
    {                                                                                          \
        P_##SFX t = *a;                                                                        \
        *a = *b, *b = t;                                                                       \
    }                                                                                          \
    static void adjust_##SFX(P_##SFX *f, int64_t hole, int64_t len, P_##SFX val)               \
    {                                                                                          \
        int64_t top = hole, sc = hole;                                                         \
        while (sc < (len - 1) / 2) {                                                           \
            sc = 2 * (sc + 1);                                                                 \
            if (f[sc].v < f[sc - 1].v)                                                         \
                sc--;                                                                          \
            f[hole] = f[sc], hole = sc;                                                        \
        }                                                                                      \
        if ((len & 1) == 0 && sc == (len - 2) / 2) {                                           \
            sc = 2 * (sc + 1);                                                                 \
            f[hole] = f[sc - 1], hole = sc - 1;                                                \
        }                                                                                      \
        int64_t parent = (hole - 1) / 2;                                                       \
        while (hole > top && f[parent].v < val.v) {                                            \
            f[hole] = f[parent], hole = parent;                                                \
            parent = (hole - 1) / 2;                                                           \
        }                                                                                      \
        f[hole] = val;                                                                         \
    }                                                                                          \
    static void heapsort_##SFX(P_##SFX *f, int64_t len)                                        \
    {                                                                                          \
        if (len >= 2)                                                                          \
            for (int64_t parent = (len - 2) / 2;; parent--) {                                  \
                adjust_##SFX(f, parent, len, f[parent]);                                       \
                if (parent == 0)                                                               \
                    break;                                                                     \
            }                                                                                  \
        for (int64_t last = len; last - 1 > 0;) {                                              \
            --last;                                                                            \
            P_##SFX val = f[last];                                                             \
            f[last] = f[0];                                                                    \
            adjust_##SFX(f, 0, last, val);                                                     \
        }                                                                                      \
    }                                                                                          \
    static void median_first_##SFX(P_##SFX *r, P_##SFX *a, P_##SFX *b, P_##SFX *c)             \
    {                                                                                          \
        if (a->v < b->v) {                                                                     \
            if (b->v < c->v)                                                                   \
                psw_##SFX(r, b);                                                               \
            else if (a->v < c->v)                                                              \
                psw_##SFX(r, c);                                                               \
            else                                                                               \
                psw_##SFX(r, a);                                                               \
        } else if (a->v < c->v)                                                                \
            psw_##SFX(r, a);                                                                   \
        else if (b->v < c->v)                                                                  \
            psw_##SFX(r, c);                                                                   \
        else                                                                                   \
            psw_##SFX(r, b);                                                                   \
    }                                                                                          \
    static void introsort_##SFX(P_##SFX *first, P_##SFX *last, int64_t depth)                  \
    {                                                                                          \
        while (last - first > 16) {                                                            \
            if (depth == 0) {                                                                  \
                heapsort_##SFX(first, last - first);                                           \
                return;                                                                        \
            }                                                                                  \
            --depth;                                                                           \
            median_first_##SFX(first, first + 1, first + (last - first) / 2, last - 1);        \
            P_##SFX *lo = first + 1, *hi = last;                                               \
            for (;;) {                                                                         \
                while (lo->v < first->v)                                                       \
                    ++lo;                                                                      \
                --hi;                                                                          \
                while (first->v < hi->v)                                                       \
                    --hi;                                                                      \
                if (!(lo < hi))                                                                \
                    break;                                                                     \
                psw_##SFX(lo, hi);                                                             \
                ++lo;                                                                          \
            }                                                                                  \
            introsort_##SFX(lo, last, depth);                                                  \
            last = lo;                                                                         \
        }                                                                                      \
    }                                                                                          \
    static void linear_insert_##SFX(P_##SFX *last)                                             \
    {                                                                                          \
        P_##SFX val = *last, *next = last - 1;                                                 \
        while (val.v < next->v)                                                                \
            *last = *next, last = next--;                                                      \
        *last = val;                                                                           \
    }                                                                                          \
    static void insertion_##SFX(P_##SFX *first, P_##SFX *last)                                 \
    {                                                                                          \
        for (P_##SFX *i = first + 1; i < last; i++)                                            \
            if (i->v < first->v) {                                                             \
                P_##SFX val = *i;                                                              \
                memmove(first + 1, first, sizeof *i * (size_t)(i - first));                    \
                *first = val;                                                                  \
            } else                                                                             \
                linear_insert_##SFX(i);                                                        \
    }                                                                                          \
    static void stdsort_##SFX(P_##SFX *f, int64_t n)                                           \
    {                                                                                          \
        if (n < 2)                                                                             \
            return;                                                                            \
        int lg = 0;                                                                            \
        while ((n >> (lg + 1)) > 0)                                                            \
            lg++;                                                                              \
        introsort_##SFX(f, f + n, 2 * (int64_t)lg);                                            \
        if (n > 16) {                                                                          \
            insertion_##SFX(f, f + 16);                                                        \
            for (P_##SFX *i = f + 16; i < f + n; i++)                                          \
                linear_insert_##SFX(i);                                                        \
        } else                                                                                 \
            insertion_##SFX(f, f + n);                                                         \
    }                                                                                          \
    /* the first most frequent run's last index (!= ends a run: NaN alone) */                  \
    static int64_t mode_##SFX(P_##SFX *e, const char *src, int64_t stride, int64_t n)          \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                      \
            memcpy(&e[i].v, src + i * stride, sizeof(T));                                      \
            e[i].i = i;                                                                        \
        }                                                                                      \
        stdsort_##SFX(e, n);                                                                   \
        int64_t modei = 0, freq = 0, best = 0;                                                 \
        for (int64_t i = 0; i < n; i++) {                                                      \
            freq++;                                                                            \
            if (i == n - 1 || e[i].v != e[i + 1].v) {                                          \
                if (freq > best)                                                               \
                    modei = e[i].i, best = freq;                                               \
                freq = 0;                                                                      \
            }                                                                                  \
        }                                                                                      \
        return modei;                                                                          \
    }
TN_STDSORT(d, double)
TN_STDSORT(i, int64_t)

int tn__cpu_mode(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                 struct tn_tensor **values, struct tn_tensor **indices)
{
    (void)ks;
    int d = tn_wrap_dim(dim, self->ndim ? self->ndim : 1);
    if (d < 0)
        return tn_last_status();
    if (self->ndim == 0) {
        *values = tn_contiguous(self);
        *indices = *values ? tn_zeros(NULL, 0, TN_INT64) : NULL;
        return *indices ? TN_OK : (tn_release(*values), tn_last_status());
    }
    if (self->sizes[d] == 0)
        return tn_set_error(TN_EINDEX, "mode(): Expected reduction dim %d to have non-zero size.",
                            d);
    if (tn_dtype_is_complex(self->dtype) || tn_dtype_is_storage_only(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"mode_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name);
    struct rows r = {0};
    bool fl = tn_dtype_is_floating(self->dtype);
    if (rows_of(self, d, fl ? TN_FLOAT64 : TN_INT64, &r))
        return tn_last_status();
    int64_t ks_[TN_MAX_DIMS];
    for (int i = 0; i < self->ndim; i++)
        ks_[i] = i == d ? 1 : self->sizes[i];
    struct tn_tensor *i = tn_empty(ks_, self->ndim, TN_INT64), *v = NULL;
    void *e = malloc(sizeof(struct pair_d) * (size_t)r.n);
    if (i && e) {
        int64_t *idx = tn_data(i);
        const char *src = tn_data(r.t);
        for (int64_t o = 0; o < r.outer; o++)
            for (int64_t j = 0; j < r.inner; j++) {
                const char *row = src + 8 * (o * r.n * r.inner + j);
                idx[o * r.inner + j] = fl ? mode_d(e, row, 8 * r.inner, r.n)
                                          : mode_i(e, row, 8 * r.inner, r.n);
            }
    }
    if (i && !e)
        tn_set_error(TN_ENOMEM, "mode: out of memory for a row of %lld", (long long)r.n);
    else if (i)
        v = tn_gather(self, d, i, false);
    free(e);
    tn_release(r.t);
    return reduced_out(v, i, d, keepdim, values, indices);
}
