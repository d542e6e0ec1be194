/*
 * ops/diag.c: the CompositeImplicitAutograd decompositions of the ops that
 * build or read a matrix's diagonals, and rot90, as PyTorch's: diag,
 * diag_embed, diagonal_copy and rot90, through views, where and flip, so
 * autograd records their parts.
 */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>

#include "ops/nn_internal.h"

/* diag_embed: the last dim of self as the offset diagonal of new dims dim1
 * and dim2 (the others zero): where(eye, self[..., None], 0), padded by
 * |offset| and its two dims moved to dim1 and dim2. A where, not a product
 * with the identity, so an inf or NaN stays on its diagonal. */
struct tn_tensor *tn__composite_diag_embed(tn_keyset ks, const struct tn_tensor *self,
                                           int64_t offset, int64_t dim1, int64_t dim2)
{
    (void)ks;
    int nd = self->ndim + 1;
    int d1 = tn_wrap_dim(dim1, nd);
    int d2 = d1 < 0 ? -1 : tn_wrap_dim(dim2, nd);
    if (d1 < 0 || d2 < 0)
        return NULL;
    if (d1 == d2) {
        tn_set_error(TN_EINVAL, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64,
                     dim1, dim2);
        return NULL;
    }
    if (self->ndim == 0) {
        tn_set_error(TN_ESHAPE, "diag_embed: expected a tensor of at least one dimension");
        return NULL;
    }
    int64_t n = self->sizes[self->ndim - 1], a = offset < 0 ? -offset : offset;
    struct tn_keep k = {0};
    struct tn_tensor *eye, *x, *zero, *m, *r;
    TN_KEEP(&k, eye, tn_eye(n, n, TN_BOOL));
    TN_KEEP(&k, x, tn_unsqueeze(self, -1));
    /* a 0-dim zero of self's dtype, so that where keeps it (bool too) */
    TN_KEEP(&k, zero, tn_zeros(NULL, 0, self->dtype));
    TN_KEEP(&k, m, tn_where_self(eye, x, zero));
    if (a) {
        /* rows then columns: offset > 0 puts the diagonal right of the main one */
        const int64_t pad[4] = {offset > 0 ? a : 0, offset > 0 ? 0 : a,
                                offset > 0 ? 0 : a, offset > 0 ? a : 0};
        TN_KEEP(&k, m, tn_constant_pad_nd(m, pad, 4, tn_int(0)));
    }
    /* m's dims: self's leading ones, then the rows and columns; those two
     * go to d1 and d2, the rest keep their order */
    int64_t perm[TN_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++)
        perm[i] = i == d1 ? nd - 2 : i == d2 ? nd - 1 : j++;
    TN_KEEP(&k, r, tn_permute(m, perm, nd));
    TN_KEEP(&k, r, tn_contiguous(r)); /* PyTorch's result is contiguous */
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* diagonal_copy: diagonal's values in a contiguous tensor of their own */
struct tn_tensor *tn__composite_diagonal_copy(tn_keyset ks, const struct tn_tensor *self,
                                              int64_t offset, int64_t dim1, int64_t dim2)
{
    (void)ks;
    struct tn_tensor *d = tn_diagonal(self, offset, dim1, dim2);
    struct tn_tensor *r = d ? (tn_is_contiguous(d) ? tn_clone(d) : tn_contiguous(d)) : NULL;
    tn_release(d);
    return r;
}

/* diag: a vector to the matrix with it on the given diagonal, a matrix to
 * the copy of that diagonal */
struct tn_tensor *tn__composite_diag(tn_keyset ks, const struct tn_tensor *self, int64_t diagonal)
{
    if (self->ndim == 1)
        return tn__composite_diag_embed(ks, self, diagonal, 0, 1);
    if (self->ndim == 2)
        return tn__composite_diagonal_copy(ks, self, diagonal, 0, 1);
    tn_set_error(TN_ESHAPE, "diag(): Supports 1D or 2D tensors. Got %dD", self->ndim);
    return NULL;
}

/* rot90: k quarter turns from dims[0] towards dims[1], as PyTorch's: a flip
 * and a transpose (a view, as PyTorch returns), a flip of both for a half
 * turn, a contiguous copy for none */
struct tn_tensor *tn__composite_rot90(tn_keyset ks, const struct tn_tensor *self, int64_t k,
                                      const int64_t *dims, int dims_len)
{
    (void)ks;
    if (dims_len != 2) {
        tn_set_error(TN_EINVAL, "expected total rotation dims == 2, but got dims = %d", dims_len);
        return NULL;
    }
    if (self->ndim < 2) {
        tn_set_error(TN_ESHAPE, "expected total dims >= 2, but got total dims = %d", self->ndim);
        return NULL;
    }
    int a = tn_wrap_dim(dims[0], self->ndim);
    int b = a < 0 ? -1 : tn_wrap_dim(dims[1], self->ndim);
    if (a < 0 || b < 0)
        return NULL;
    if (a == b) {
        tn_set_error(TN_EINVAL, "expected rotation dims to be different, but got dim0 = %d"
                     " and dim1 = %d", a, b);
        return NULL;
    }
    k = ((k % 4) + 4) % 4;
    if (k == 0)
        return tn_clone(self);
    if (k == 2) {
        const int64_t both[2] = {a, b};
        return tn_flip(self, both, 2);
    }
    const int64_t one[1] = {k == 1 ? b : a};
    struct tn_tensor *f = tn_flip(self, one, 1);
    struct tn_tensor *r = f ? tn_transpose(f, a, b) : NULL;
    tn_release(f);
    return r;
}
