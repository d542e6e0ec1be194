/*
 * ops/cpu/unique.c: _unique2 (torch.unique without dim), unique_dim and
 * unique_consecutive as PyTorch's CPU kernels (aten/src/ATen/native/
 * Unique.cpp) give them: the elements (or the slices along dim, compared
 * as rows in moveaxis(dim, 0)'s order) sorted, NaNs last in index order and
 * each NaN its own value (PyTorch's != test), or left in place for
 * unique_consecutive; equal neighbours make one group. The results: the
 * first of each group, the inverse (self's shape, or [size(dim)]) and the
 * counts, int64; without dim, an output not asked for is empty ([0]), as
 * PyTorch's (its dim kernels give both either way).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* The rows compared: n rows of r keys, float64 (f) or int64. */
struct rows {
    const double *d;
    const int64_t *i;
    int64_t n, r;
};

/* a < b: -1, a > b: 1, else 0; a NaN above every number and equal to a NaN */
static int cmp_rows(const struct rows *k, int64_t a, int64_t b)
{
    for (int64_t j = 0; j < k->r; j++) {
        if (k->d) {
            double x = k->d[a * k->r + j], y = k->d[b * k->r + j];
            bool nx = isnan(x), ny = isnan(y);
            if (nx || ny) {
                if (nx != ny)
                    return nx ? 1 : -1;
                continue;
            }
            if (x != y)
                return x < y ? -1 : 1;
        } else if (k->i[a * k->r + j] != k->i[b * k->r + j])
            return k->i[a * k->r + j] < k->i[b * k->r + j] ? -1 : 1;
    }
    return 0;
}

/* PyTorch's equality of neighbours: every key ==, so a NaN never equals */
static bool same_rows(const struct rows *k, int64_t a, int64_t b)
{
    for (int64_t j = 0; j < k->r; j++)
        if (k->d ? !(k->d[a * k->r + j] == k->d[b * k->r + j]) : k->i[a * k->r + j] != k->i[b * k->r + j])
            return false;
    return true;
}

/* stable merge sort of p[0..n) by the rows, tmp of n */
static void sort_rows(const struct rows *k, int64_t *p, int64_t *tmp, int64_t n)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    sort_rows(k, p, tmp, h);
    sort_rows(k, p + h, tmp, n - h);
    int64_t a = 0, b = h, o = 0;
    while (a < h && b < n)
        tmp[o++] = cmp_rows(k, p[b], p[a]) < 0 ? p[b++] : p[a++];
    while (a < h)
        tmp[o++] = p[a++];
    while (b < n)
        tmp[o++] = p[b++];
    memcpy(p, tmp, sizeof *p * (size_t)n);
}

/* t with dim d's contents laid out first (contiguous as [size(d), rest]),
 * viewed back in t's dim order: moveaxis(0, d) of a contiguous result */
static struct tn_tensor *moved_back(const struct tn_tensor *t, int d)
{
    int64_t perm[TN_MAX_DIMS], back[TN_MAX_DIMS];
    perm[0] = d;
    for (int i = 0, o = 1; i < t->ndim; i++)
        if (i != d)
            perm[o++] = i;
    for (int i = 0; i < t->ndim; i++)
        back[perm[i]] = i;
    struct tn_tensor *m = tn_permute(t, perm, t->ndim), *c = m ? tn_contiguous(m) : NULL;
    struct tn_tensor *r = c ? tn_permute(c, back, t->ndim) : NULL;
    tn_release(m), tn_release(c);
    return r;
}

static struct tn_tensor *ints(const int64_t *v, int64_t n, bool want)
{
    int64_t len = want ? n : 0;
    return tn_from_data(v, &len, 1, TN_INT64);
}

/* The three results from self's slices along d (dim: whether one was
 * given) and the keys of those slices. */
static int unique_rows(const struct tn_tensor *self, int d, bool dim, const struct rows *k,
                       bool sorted, bool inverse, bool counts, struct tn_tensor **r0,
                       struct tn_tensor **r1, struct tn_tensor **r2)
{
    inverse |= dim, counts |= dim; /* the dim kernels fill both either way */
    int64_t n = k->n, *buf = malloc(sizeof *buf * (size_t)(4 * n + 1));
    if (!buf)
        return tn_set_error(TN_ENOMEM, "unique: out of memory for %lld rows", (long long)n);
    int64_t *p = buf, *inv = buf + n, *cnt = buf + 2 * n, *first = buf + 3 * n, g = -1;
    for (int64_t j = 0; j < n; j++)
        p[j] = j;
    if (sorted)
        sort_rows(k, p, cnt, n);
    for (int64_t j = 0; j < n; j++) {
        if (j == 0 || !same_rows(k, p[j], p[j - 1])) {
            first[++g] = p[j];
            cnt[g] = 0;
        }
        inv[p[j]] = g;
        cnt[g]++;
    }
    int64_t groups = g + 1;
    struct tn_tensor *idx = tn_from_data(first, &groups, 1, TN_INT64);
    struct tn_tensor *flat = idx && !dim ? tn_reshape(self, (int64_t[]){-1}, 1) : NULL;
    *r0 = idx && (dim || flat) ? tn_index_select(dim ? self : flat, dim ? d : 0, idx) : NULL;
    if (*r0 && dim) { /* the dim kernels' layout: [groups, rest] moved back to dim */
        struct tn_tensor *f = moved_back(*r0, d);
        tn_release(*r0);
        *r0 = f;
    }
    *r1 = *r0 ? ints(inv, n, inverse) : NULL;
    if (*r1 && inverse && !dim) { /* self's shape */
        struct tn_tensor *v = tn_reshape(*r1, self->sizes, self->ndim);
        tn_release(*r1);
        *r1 = v;
    }
    *r2 = *r1 ? ints(cnt, groups, counts) : NULL;
    tn_release(idx);
    tn_release(flat);
    free(buf);
    if (!*r2) {
        tn_release(*r0), tn_release(*r1);
        return tn_last_status();
    }
    return TN_OK;
}

/* The keys of self's slices along dim (none: its elements), moveaxis'
 * order, as float64 or int64; then the results. */
static int unique(const struct tn_tensor *self, const int64_t *dim, bool sorted, bool inverse,
                  bool counts, struct tn_tensor **r0, struct tn_tensor **r1, struct tn_tensor **r2)
{
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"unique\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name);
    int d = 0;
    int64_t perm[TN_MAX_DIMS];
    if (dim) {
        if ((d = tn_wrap_dim(*dim, self->ndim ? self->ndim : 1)) < 0)
            return tn_last_status();
        for (int i = 0; i < self->ndim; i++)
            if (i != d && self->sizes[i] == 0)
                return tn_set_error(TN_ERUNTIME, "There are 0 sized dimensions, and they aren't "
                                    "selected, so unique cannot be applied");
        perm[0] = d;
        for (int i = 0, o = 1; i < self->ndim; i++)
            if (i != d)
                perm[o++] = i;
    }
    enum tn_dtype kd = tn_dtype_is_floating(self->dtype) ? TN_FLOAT64 : TN_INT64;
    struct tn_tensor *m = dim && self->ndim ? tn_permute(self, perm, self->ndim)
                                            : tn_retain((struct tn_tensor *)self);
    struct tn_tensor *kt = m ? tn_to_dtype(m, kd) : NULL, *kc = kt ? tn_contiguous(kt) : NULL;
    int rc = tn_last_status();
    if (kc) {
        int64_t n = dim && self->ndim ? self->sizes[d] : tn_numel(self);
        struct rows k = {kd == TN_FLOAT64 ? tn_data(kc) : NULL, kd == TN_INT64 ? tn_data(kc) : NULL,
                         n, n ? tn_numel(self) / n : 0};
        rc = unique_rows(self, d, dim && self->ndim, &k, sorted, inverse, counts, r0, r1, r2);
    }
    tn_release(m), tn_release(kt), tn_release(kc);
    return rc;
}

int tn__cpu__unique2(tn_keyset ks, const struct tn_tensor *self, bool sorted, bool return_inverse,
                     bool return_counts, struct tn_tensor **result0, struct tn_tensor **result1,
                     struct tn_tensor **result2)
{
    (void)ks, (void)sorted; /* PyTorch's CPU kernel sorts either way */
    return unique(self, NULL, true, return_inverse, return_counts, result0, result1, result2);
}

int tn__cpu_unique_dim(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool sorted,
                       bool return_inverse, bool return_counts, struct tn_tensor **result0,
                       struct tn_tensor **result1, struct tn_tensor **result2)
{
    (void)ks, (void)sorted;
    return unique(self, &dim, true, return_inverse, return_counts, result0, result1, result2);
}

int tn__cpu_unique_consecutive(tn_keyset ks, const struct tn_tensor *self, bool return_inverse,
                               bool return_counts, const int64_t *dim, struct tn_tensor **result0,
                               struct tn_tensor **result1, struct tn_tensor **result2)
{
    (void)ks;
    return unique(self, dim, false, return_inverse, return_counts, result0, result1, result2);
}
