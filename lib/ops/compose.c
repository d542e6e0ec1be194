/*
 * ops/compose.c: products and compositions PyTorch writes over other ops
 * (CompositeImplicitAutograd there, so autograd goes through their parts):
 * tensordot (LinearAlgebra.cpp: contracted dims of size 1 summed away, both
 * permuted and reshaped to one mm), block_diag (TensorShape.cpp's; PyTorch's
 * is CompositeExplicitAutograd with block_diag_backward, which slices the
 * gradient as these pads and cat do), cartesian_prod and combinations
 * (Itertools.cpp: meshgrid, masked_select, stack).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "ops/internal.h"
#include "ops/nn_internal.h"

/* "[2, 2]": PyTorch's sizes in its messages */
#define SHAPE(t, buf) tn_shape_format((t)->sizes, (t)->ndim, buf, sizeof buf)

struct tn_tensor *tn__composite_tensordot(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *other, const int64_t *dims_self,
                                          int dims_self_len, const int64_t *dims_other,
                                          int dims_other_len)
{
    (void)ks;
    int k = dims_self_len;
    if (k != dims_other_len)
        return tn_set_error(TN_ERUNTIME, "both dimension lists should have same length"), NULL;
    if (self->dtype != other->dtype)
        return tn_set_error(TN_ERUNTIME, "both inputs should have same dtype"), NULL;
    struct tn_keep kp = {.n = 0};
    struct tn_tensor *t1 = (struct tn_tensor *)self, *t2 = (struct tn_tensor *)other, *a, *b, *m;
    int64_t csize = 1;
    for (int i = 0; i < k; i++) {
        int d1 = tn_wrap_dim(dims_self[i], self->ndim), d2 = tn_wrap_dim(dims_other[i], other->ndim);
        if (d1 < 0 || d2 < 0)
            goto fail;
        int64_t s1 = self->ndim ? self->sizes[d1] : 1, s2 = other->ndim ? other->sizes[d2] : 1;
        if (s2 == 1) /* broadcast dims summed right away */
            TN_KEEP(&kp, t1, tn_sum_dim_intlist(t1, &dims_self[i], 1, true, t1->dtype));
        else if (s1 == 1)
            TN_KEEP(&kp, t2, tn_sum_dim_intlist(t2, &dims_other[i], 1, true, t2->dtype));
        else if (s1 != s2) {
            tn_set_error(TN_ERUNTIME, "contracted dimensions need to match, but first has size "
                         "%lld in dim %lld and second has size %lld in dim %lld", (long long)s1,
                         (long long)dims_self[i], (long long)s2, (long long)dims_other[i]);
            goto fail;
        } else
            csize *= s1;
    }
    bool c1[TN_MAX_DIMS] = {false}, c2[TN_MAX_DIMS] = {false};
    if (k && (tn__reduce_mask("tensordot", self, dims_self, k, c1) < 0 ||
              tn__reduce_mask("tensordot", other, dims_other, k, c2) < 0))
        goto fail;
    /* the kept dims of self, then the contracted ones; the contracted
     * ones of other, then its kept ones: one mm */
    int64_t p1[TN_MAX_DIMS], p2[TN_MAX_DIMS], rs[2 * TN_MAX_DIMS], size1 = 1, size2 = 1;
    int n1 = 0, n2 = 0, nr = 0;
    for (int i = 0; i < self->ndim; i++)
        if (!c1[i])
            p1[n1++] = i, size1 *= t1->sizes[i], rs[nr++] = t1->sizes[i];
    for (int i = 0; i < k && self->ndim && other->ndim; i++)
        p1[n1++] = dims_self[i], p2[n2++] = dims_other[i];
    for (int i = 0; i < other->ndim; i++)
        if (!c2[i])
            p2[n2++] = i, size2 *= t2->sizes[i], rs[nr++] = t2->sizes[i];
    if (nr > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "tensordot: a result of %d dims is more than %d", nr, TN_MAX_DIMS);
        goto fail;
    }
    int64_t m1[2] = {size1, csize}, m2[2] = {csize, size2};
    TN_KEEP(&kp, a, tn_permute(t1, p1, n1));
    TN_KEEP(&kp, a, tn_reshape(a, m1, 2));
    TN_KEEP(&kp, b, tn_permute(t2, p2, n2));
    TN_KEEP(&kp, b, tn_reshape(b, m2, 2));
    TN_KEEP(&kp, m, tn_mm(a, b));
    struct tn_tensor *r = tn_reshape(m, rs, nr);
    tn__keep_free(&kp);
    return r;
fail:
    tn__keep_free(&kp);
    return NULL;
}

struct tn_tensor *tn__composite_block_diag(tn_keyset ks, const struct tn_tensor *const *tensors,
                                           int tensors_len)
{
    (void)ks;
    int n = tensors_len;
    if (n <= 0)
        return tn_empty((int64_t[]){1, 0}, 2, tn_get_default_dtype());
    enum tn_dtype dt = tn_result_type(tensors, n, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    int64_t cols = 0;
    for (int i = 0; i < n; i++) {
        const struct tn_tensor *t = tensors[i];
        if (t->ndim > 2)
            return tn_set_error(TN_ERUNTIME, "torch.block_diag: Input tensors must have 2 or "
                                "fewer dimensions. Input %d has %d dimensions", i, t->ndim), NULL;
        cols += t->ndim == 2 ? t->sizes[1] : t->ndim == 1 ? t->sizes[0] : 1;
    }
    /* each as 2-D (a 1-D one as a row), in the common dtype, padded out to
     * its columns of the result; the rows of all stacked */
    struct tn_tensor **rows = calloc((size_t)n, sizeof *rows);
    if (!rows)
        return tn_set_error(TN_ENOMEM, "block_diag: out of memory"), NULL;
    struct tn_tensor *r = NULL;
    int64_t at = 0;
    int i = 0;
    for (; i < n; i++) {
        const struct tn_tensor *t = tensors[i];
        int64_t shape[2] = {t->ndim == 2 ? t->sizes[0] : 1,
                            t->ndim == 2 ? t->sizes[1] : t->ndim == 1 ? t->sizes[0] : 1};
        struct tn_tensor *e = t->ndim == 2 ? tn_retain((struct tn_tensor *)t)
                                           : tn_expand(t, shape, 2);
        struct tn_tensor *c = e ? tn_to_dtype(e, dt) : NULL;
        int64_t pad[2] = {at, cols - at - shape[1]};
        rows[i] = c ? tn_constant_pad_nd(c, pad, 2, tn_int(0)) : NULL;
        tn_release(c);
        tn_release(e);
        if (!rows[i])
            break;
        at += shape[1];
    }
    if (i == n)
        r = tn_cat((const struct tn_tensor *const *)rows, n, 0);
    for (int j = 0; j < n; j++)
        tn_release(rows[j]);
    free(rows);
    return r;
}

static int need_1d(const struct tn_tensor *t)
{
    char buf[160];
    if (t->ndim != 1)
        return tn_set_error(TN_ERUNTIME, "Expect a 1D vector, but got shape %s", SHAPE(t, buf));
    return TN_OK;
}

/* the grids flattened (their first `n`; all released) and stacked along dim 1,
 * or each masked_select-ed by mask first. A grid whose flattening would be
 * a view of its expanded elements (an input of one element beside others)
 * is copied first: the same values, and autograd here goes back through a
 * copy of an expanded tensor but not through a view of one. */
static struct tn_tensor *stack_grids(struct tn_tensor **grids, int n, const struct tn_tensor *mask)
{
    struct tn_tensor *flat[TN_MAX_DIMS] = {NULL}, *r = NULL;
    int i = 0;
    for (; i < n; i++) {
        struct tn_tensor *g = grids[i];
        if (mask)
            flat[i] = tn_masked_select(g, mask);
        else if (tn_is_non_overlapping_and_dense(g))
            flat[i] = tn_flatten(g, 0, -1);
        else {
            struct tn_tensor *c = tn_contiguous(g);
            flat[i] = c ? tn_flatten(c, 0, -1) : NULL;
            tn_release(c);
        }
        if (!flat[i])
            break;
    }
    if (i == n)
        r = tn_stack((const struct tn_tensor *const *)flat, n, 1);
    for (int j = 0; j < n; j++)
        tn_release(flat[j]);
    tn_release_list(grids, n);
    return r;
}

struct tn_tensor *tn__composite_cartesian_prod(tn_keyset ks,
                                               const struct tn_tensor *const *tensors,
                                               int tensors_len)
{
    (void)ks;
    for (int i = 0; i < tensors_len; i++)
        if (need_1d(tensors[i]) < 0)
            return NULL;
    if (tensors_len == 1)
        return tn_retain((struct tn_tensor *)tensors[0]);
    struct tn_tensor **grids;
    int n = tn_meshgrid_indexing(tensors, tensors_len, "ij", &grids);
    return n < 0 ? NULL : stack_grids(grids, n, NULL);
}

/* i < j < k ... (or <= with replacement) over r copies of 0..n-1 as a grid */
static struct tn_tensor *triu_mask(int64_t n, int r, bool with_replacement)
{
    const struct tn_tensor *copies[TN_MAX_DIMS];
    struct tn_tensor *range = tn_arange(tn_int(0), tn_int(n), tn_int(1), TN_INT64), **g;
    for (int i = 0; i < r; i++)
        copies[i] = range;
    int ng = range ? tn_meshgrid_indexing(copies, r, "ij", &g) : -1;
    tn_release(range);
    if (ng < 0)
        return NULL;
    struct tn_tensor *mask = tn_full(g[0]->sizes, r, tn_bool(true), TN_BOOL);
    for (int i = 0; mask && i + 1 < r; i++) {
        struct tn_tensor *c = with_replacement ? tn_le(g[i], g[i + 1]) : tn_lt(g[i], g[i + 1]);
        struct tn_tensor *m = c ? tn_mul(mask, c) : NULL;
        tn_release(c);
        tn_release(mask);
        mask = m;
    }
    tn_release_list(g, ng);
    return mask;
}

struct tn_tensor *tn__composite_combinations(tn_keyset ks, const struct tn_tensor *self, int64_t r,
                                             bool with_replacement)
{
    (void)ks;
    if (need_1d(self) < 0)
        return NULL;
    if (r < 0)
        return tn_set_error(TN_ERUNTIME, "Expect a non-negative number, but got %lld",
                            (long long)r), NULL;
    if (r == 0)
        return tn_empty((int64_t[]){0}, 1, self->dtype);
    if (r > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "combinations: r = %lld makes a grid of more than %d dims",
                            (long long)r, TN_MAX_DIMS), NULL;
    const struct tn_tensor *copies[TN_MAX_DIMS];
    for (int i = 0; i < r; i++)
        copies[i] = self;
    struct tn_tensor **grids;
    int n = tn_meshgrid_indexing(copies, (int)r, "ij", &grids);
    if (n < 0)
        return NULL;
    struct tn_tensor *mask = triu_mask(self->sizes[0], n, with_replacement);
    if (!mask)
        return tn_release_list(grids, n), NULL;
    struct tn_tensor *out = stack_grids(grids, n, mask);
    tn_release(mask);
    return out;
}
