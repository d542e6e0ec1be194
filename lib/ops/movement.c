/*
 * ops/movement.c: meta functions of the data-movement ops whose CPU
 * kernels live in ops/cpu/movement.c: tril and triu (structured: the
 * result has self's shape and dtype), with PyTorch's checks and words; and
 * the decompositions tile (over repeat), argsort (over sort), and
 * nonzero_static (over nonzero).
 */
#include <config.h>

#include "ops/internal.h"

/* tril/triu: a matrix or a batch of them, any dtype. */
static int triangle_meta(const char *op, const struct tn_tensor *self, struct tn_meta *m)
{
    if (self->ndim < 2)
        return tn_set_error(TN_EINVAL, "%s: input tensor must have at least 2 dimensions", op);
    m->ndim = self->ndim;
    for (int i = 0; i < self->ndim; i++)
        m->sizes[i] = self->sizes[i];
    m->dtype = self->dtype;
    return TN_OK;
}

int tn__meta_tril_out(const struct tn_tensor *self, int64_t diagonal, struct tn_meta *m)
{
    (void)diagonal;
    return triangle_meta("tril", self, m);
}

int tn__meta_triu_out(const struct tn_tensor *self, int64_t diagonal, struct tn_meta *m)
{
    (void)diagonal;
    return triangle_meta("triu", self, m);
}

/* tile: dims padded with leading 1s to self's ndim, then repeat. */
struct tn_tensor *tn__composite_tile(tn_keyset ks, const struct tn_tensor *self,
                                     const int64_t *dims, int dims_len)
{
    (void)ks;
    int n = dims_len < self->ndim ? self->ndim : dims_len;
    if (n > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "tile: %d dims, more than the %d a tensor can have", n,
                     TN_MAX_DIMS);
        return NULL;
    }
    int64_t reps[TN_MAX_DIMS];
    for (int i = 0; i < n; i++)
        reps[i] = i < n - dims_len ? 1 : dims[i - (n - dims_len)];
    return tn_repeat(self, reps, n);
}

/* argsort: the indices of sort (always stable here). */
static struct tn_tensor *sort_indices(const struct tn_tensor *self, const bool *stable,
                                      int64_t dim, bool descending)
{
    struct tn_tensor *values = NULL, *indices = NULL;
    if (tn_sort_stable(self, stable, dim, descending, &values, &indices) < 0)
        return NULL;
    tn_release(values);
    return indices;
}

struct tn_tensor *tn__composite_argsort(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                        bool descending)
{
    (void)ks;
    return sort_indices(self, NULL, dim, descending);
}

struct tn_tensor *tn__composite_argsort_stable(tn_keyset ks, const struct tn_tensor *self,
                                               bool stable, int64_t dim, bool descending)
{
    (void)ks;
    return sort_indices(self, &stable, dim, descending);
}

/* fliplr and flipud: flip of dim 1 (at least 2-D) and of dim 0 (at least
 * 1-D), with PyTorch's messages */
static struct tn_tensor *flip_dim(const struct tn_tensor *self, int64_t dim)
{
    if (self->ndim < dim + 1) {
        tn_set_error(TN_EINVAL, "Input must be >= %d-d.", (int)dim + 1);
        return NULL;
    }
    return tn_flip(self, &dim, 1);
}

struct tn_tensor *tn__composite_fliplr(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return flip_dim(self, 1);
}

struct tn_tensor *tn__composite_flipud(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return flip_dim(self, 0);
}

struct tn_tensor *tn__composite_argwhere(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return tn_nonzero(self);
}

/* nonzero_static: nonzero's first size rows, or all of them followed by
 * rows of fill_value up to size: a shape known before the values are */
struct tn_tensor *tn__composite_nonzero_static(tn_keyset ks, const struct tn_tensor *self,
                                               int64_t size, int64_t fill_value)
{
    (void)ks;
    if (size < 0) {
        tn_set_error(TN_EINVAL, "nonzero_static: 'size' must be an non-negative integer, but got "
                     "size: %lld", (long long)size);
        return NULL;
    }
    struct tn_tensor *nz = tn_nonzero(self), *r = NULL;
    if (!nz)
        return NULL;
    int64_t n = nz->sizes[0];
    if (n >= size) {
        struct tn_tensor *head = tn_narrow(nz, 0, 0, size);
        r = head ? tn_contiguous(head) : NULL; /* nonzero's own: no alias of self */
        tn_release(head);
    } else {
        struct tn_tensor *pad = tn_full(TN_SHAPE(size - n, nz->sizes[1]), tn_int(fill_value),
                                        TN_INT64);
        const struct tn_tensor *both[2] = {nz, pad};
        r = pad ? tn_cat(both, 2, 0) : NULL;
        tn_release(pad);
    }
    tn_release(nz);
    /* row-major, as PyTorch's kernel writes it (nonzero's is column-major) */
    struct tn_tensor *c = r ? tn_contiguous(r) : NULL;
    tn_release(r);
    return c;
}
