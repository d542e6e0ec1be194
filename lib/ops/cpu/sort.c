/*
 * ops/cpu/sort.c: CPU kernels of max.dim and min.dim (amax and argmax over
 * one dim, which already agree with PyTorch on NaN and ties), and of sort
 * and topk: each row along the dim is read as float64 or int64 keys (exact
 * for every real dtype), its indices merge-sorted (stable, NaN greatest as
 * PyTorch orders it), and the elements copied out byte for byte.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

int tn__cpu_max_dim_max_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                            struct tn_tensor *max, struct tn_tensor *max_values)
{
    int rc = tn__cpu_amax_out(ks, self, &dim, 1, keepdim, max);
    return rc < 0 ? rc : tn__cpu_argmax_out(ks, self, &dim, keepdim, max_values);
}

int tn__cpu_min_dim_min_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                            struct tn_tensor *min, struct tn_tensor *min_indices)
{
    int rc = tn__cpu_amin_out(ks, self, &dim, 1, keepdim, min);
    return rc < 0 ? rc : tn__cpu_argmin_out(ks, self, &dim, keepdim, min_indices);
}

/* One row's keys, and which order puts a before b. */
struct keys {
    const double *f;  /* floating dtypes; NULL for integers and bool */
    const int64_t *i;
    bool descending;
};

/* NaN sorts above every number, as in PyTorch. */
static bool before(const struct keys *k, int64_t a, int64_t b)
{
    if (k->f) {
        double x = k->f[a], y = k->f[b];
        if (k->descending)
            return !isnan(y) && (isnan(x) || x > y);
        return !isnan(x) && (isnan(y) || x < y);
    }
    return k->descending ? k->i[a] > k->i[b] : k->i[a] < k->i[b];
}

/* Stable bottom-up merge sort of idx[0..n) by the keys; tmp is as long. */
static void merge_sort(const struct keys *k, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                tmp[o++] = before(k, idx[b], idx[a]) ? idx[b++] : idx[a++];
            while (a < mid)
                tmp[o++] = idx[a++];
            while (b < hi)
                tmp[o++] = idx[b++];
        }
        memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
    }
}

/* Byte offset of row r (counting over every dim but d) in t. */
static int64_t row_offset(const struct tn_tensor *t, int d, int64_t r)
{
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (i == d)
            continue;
        off += (r % t->sizes[i]) * t->strides[i];
        r /= t->sizes[i];
    }
    return off * (int64_t)tn_dtype_size(t->dtype);
}

/* Sorts each row of self along dim, writing its first `k` elements and
 * their indices. */
static int sort_rows(const struct tn_tensor *self, int64_t dim, bool descending, int64_t k,
                     struct tn_tensor *values, struct tn_tensor *indices)
{
    int d = self->ndim ? tn_wrap_dim(dim, self->ndim) : -1;
    int64_t n = d >= 0 ? self->sizes[d] : 1;
    if (n == 0 || k == 0 || tn_numel(self) == 0)
        return TN_OK;
    int64_t rows = tn_numel(self) / n;
    size_t es = tn_dtype_size(self->dtype);
    int64_t ss = d >= 0 ? self->strides[d] * (int64_t)es : 0;
    int64_t vs = d >= 0 ? values->strides[d] * (int64_t)es : 0;
    int64_t is = d >= 0 ? indices->strides[d] : 0;
    bool fl = tn_dtype_is_floating(self->dtype);
    void *keybuf = malloc(sizeof(double) * (size_t)n);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n), *tmp = malloc(sizeof(int64_t) * (size_t)n);
    if (!keybuf || !idx || !tmp) {
        free(keybuf);
        free(idx);
        free(tmp);
        return tn_set_error(TN_ENOMEM, "sort: out of memory for a row of %lld elements",
                            (long long)n);
    }
    struct keys ky = {fl ? keybuf : NULL, fl ? NULL : keybuf, descending};
    const char *src = tn_data(self);
    char *vdst = tn_data(values);
    int64_t *idst = tn_data(indices);
    for (int64_t r = 0; r < rows; r++) {
        const char *row = src + row_offset(self, d, r);
        tn__convert_strided(keybuf, fl ? TN_FLOAT64 : TN_INT64, 8, row, self->dtype, ss, n);
        for (int64_t i = 0; i < n; i++)
            idx[i] = i;
        merge_sort(&ky, idx, tmp, n);
        char *vrow = vdst + row_offset(values, d, r);
        int64_t *irow = idst + row_offset(indices, d, r) / 8;
        for (int64_t i = 0; i < k; i++) {
            memcpy(vrow + i * vs, row + idx[i] * ss, es);
            irow[i * is] = idx[i];
        }
    }
    free(keybuf);
    free(idx);
    free(tmp);
    return TN_OK;
}

int tn__cpu_sort_values_stable_out(tn_keyset ks, const struct tn_tensor *self, const bool *stable,
                                   int64_t dim, bool descending, struct tn_tensor *values,
                                   struct tn_tensor *indices)
{
    (void)ks;
    (void)stable; /* always stable, which an unstable sort may be too */
    int d = self->ndim ? tn_wrap_dim(dim, self->ndim) : -1;
    return sort_rows(self, dim, descending, d >= 0 ? self->sizes[d] : 1, values, indices);
}

int tn__cpu_topk_values_out(tn_keyset ks, const struct tn_tensor *self, int64_t k, int64_t dim,
                            bool largest, bool sorted, struct tn_tensor *values,
                            struct tn_tensor *indices)
{
    (void)ks;
    (void)sorted; /* the k come out sorted either way */
    return sort_rows(self, dim, largest, k, values, indices);
}
