/*
 * ops/split.c: the ops returning Tensor[] (split.Tensor, split_with_sizes,
 * chunk, unbind.int, tensor_split.sections and tensor_split.indices), as
 * PyTorch's CompositeImplicitAutograd decompositions over the views of
 * lib/core: every piece is a narrow (or, for unbind, a select) of self,
 * sharing its storage, so their gradients come through the views' backward.
 * Each returns the number of pieces and leaves a malloc'd array of new
 * references in *result (tn_release_list frees it), or a negative status with
 * *result NULL; checks and words are PyTorch's.
 */
#include <config.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* More pieces than this is refused (a graph could otherwise ask for
 * chunk(empty, 2**40) and the list alone would exhaust memory). */
#define TN_SPLIT_MAX_PIECES ((int64_t)1 << 26)

/* An array for n pieces, or NULL with an error. */
static struct tn_tensor **pieces_new(const char *op, int64_t n)
{
    if (n > TN_SPLIT_MAX_PIECES) {
        tn_set_error(TN_EINVAL, "%s: %lld pieces is more than the %lld allowed", op,
                     (long long)n, (long long)TN_SPLIT_MAX_PIECES);
        return NULL;
    }
    struct tn_tensor **p = calloc(n > 0 ? (size_t)n : 1, sizeof *p);
    if (!p)
        tn_set_error(TN_ENOMEM, "%s: out of memory for %lld pieces", op, (long long)n);
    return p;
}

/* The pieces of self along d (wrapped) of the given lengths, one after the
 * other from start 0 (the caller has checked that they fit). */
static int narrow_pieces(const struct tn_tensor *self, int d, const int64_t *len, int64_t n,
                         int64_t last, struct tn_tensor ***result, const char *op)
{
    struct tn_tensor **p = pieces_new(op, n);
    if (!p)
        return tn_last_status();
    int64_t start = 0;
    for (int64_t i = 0; i < n; i++) {
        /* len NULL: every piece is `last` long except the final one */
        int64_t l = len ? len[i] : i < n - 1 ? last : self->sizes[d] - start;
        if (!(p[i] = tn_narrow(self, d, start, l))) {
            tn_release_list(p, (int)i);
            return tn_last_status();
        }
        start += l;
    }
    *result = p;
    return (int)n;
}

int tn__composite_split(tn_keyset ks, const struct tn_tensor *self, int64_t split_size,
                        int64_t dim, struct tn_tensor ***result)
{
    if (self->ndim == 0)
        return tn_set_error(TN_ERUNTIME, "split expects at least a 1-dimensional tensor");
    if (split_size < 0)
        return tn_set_error(TN_ERUNTIME, "split expects split_size be non-negative, but got "
                            "split_size=%lld", (long long)split_size);
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    int64_t size = self->sizes[d];
    if (split_size == 0 && size != 0)
        return tn_set_error(TN_ERUNTIME, "split_size can only be 0 if dimension size is 0, but "
                            "got dimension size of %lld", (long long)size);
    /* one (empty) piece for an empty dim */
    int64_t n = size == 0 ? 1 : (size - 1) / split_size + 1;
    return narrow_pieces(self, d, NULL, n, split_size, result, "split");
}

/* "[1, 2]" as c10 prints an int list. */
static const char *ints_text(const int64_t *v, int n, char *buf, size_t len)
{
    return tn_shape_format(v, n, buf, len);
}

int tn__composite_split_with_sizes(tn_keyset ks, const struct tn_tensor *self,
                                   const int64_t *split_sizes, int split_sizes_len, int64_t dim,
                                   struct tn_tensor ***result)
{
    if (self->ndim == 0)
        return tn_set_error(TN_ERUNTIME, "split expects at least a 1-dimensional tensor");
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    char buf[512];
    int64_t sum = 0;
    bool over = false;
    for (int i = 0; i < split_sizes_len; i++) {
        if (split_sizes[i] < 0)
            return tn_set_error(TN_ERUNTIME, "split_with_sizes expects split_sizes have only "
                                "non-negative entries, but got split_sizes=%s",
                                ints_text(split_sizes, split_sizes_len, buf, sizeof buf));
        over = over || split_sizes[i] > INT64_MAX - sum;
        sum = over ? sum : sum + split_sizes[i];
    }
    if (over || sum != self->sizes[d])
        return tn_set_error(TN_ERUNTIME, "split_with_sizes expects split_sizes to sum exactly to "
                            "%lld (input tensor's size at dimension %lld), but got split_sizes=%s",
                            (long long)self->sizes[d], (long long)dim,
                            ints_text(split_sizes, split_sizes_len, buf, sizeof buf));
    return narrow_pieces(self, d, split_sizes, split_sizes_len, 0, result, "split_with_sizes");
}

/* torch.split with a list: split_with_sizes, through the dispatcher as
 * PyTorch's split.sizes calls it */
int tn__composite_split_sizes(tn_keyset ks, const struct tn_tensor *self, const int64_t *split_size,
                              int split_size_len, int64_t dim, struct tn_tensor ***result)
{
    return tn_split_with_sizes(self, split_size, split_size_len, dim, result);
}

int tn__composite_chunk(tn_keyset ks, const struct tn_tensor *self, int64_t chunks, int64_t dim,
                        struct tn_tensor ***result)
{
    if (self->ndim == 0)
        return tn_set_error(TN_ERUNTIME, "chunk expects at least a 1-dimensional tensor");
    if (chunks <= 0)
        return tn_set_error(TN_ERUNTIME, "chunk expects `chunks` to be greater than 0, got: %lld",
                            (long long)chunks);
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    int64_t size = self->sizes[d];
    if (size == 0) /* chunks empty pieces, as PyTorch's split_with_sizes gives */
        return narrow_pieces(self, d, NULL, chunks, 0, result, "chunk");
    return tn__composite_split(ks, self, (size - 1) / chunks + 1, d, result);
}

/* broadcast_tensors: every tensor expanded to the shape all of them
 * broadcast to (torch.broadcast_shapes' rule and error). */
int tn__composite_broadcast_tensors(tn_keyset ks, const struct tn_tensor *const *tensors,
                                    int tensors_len, struct tn_tensor ***result)
{
    int64_t shape[TN_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < tensors_len; i++) {
        int64_t next[TN_MAX_DIMS];
        int r = tn_broadcast_shapes(shape, nd, tensors[i]->sizes, tensors[i]->ndim, next);
        if (r < 0)
            return tn_last_status();
        memcpy(shape, next, sizeof(int64_t) * (size_t)r);
        nd = r;
    }
    struct tn_tensor **p = pieces_new("broadcast_tensors", tensors_len);
    if (!p)
        return tn_last_status();
    for (int i = 0; i < tensors_len; i++)
        if (!(p[i] = tn_expand(tensors[i], shape, nd))) {
            tn_release_list(p, i);
            return tn_last_status();
        }
    *result = p;
    return tensors_len;
}

int tn__composite_unbind_int(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                             struct tn_tensor ***result)
{
    if (self->ndim == 0)
        return tn_set_error(TN_EINDEX, "Dimension specified as %lld but tensor has no dimensions",
                            (long long)dim);
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    int64_t n = self->sizes[d];
    struct tn_tensor **p = pieces_new("unbind", n);
    if (!p)
        return tn_last_status();
    for (int64_t i = 0; i < n; i++)
        if (!(p[i] = tn_select(self, d, i))) {
            tn_release_list(p, (int)i);
            return tn_last_status();
        }
    *result = p;
    return (int)n;
}

/* nonzero_numpy (nonzero(as_tuple=True)): nonzero's columns, as PyTorch's
 * (a 0-dim self as one element) */
int tn__composite_nonzero_numpy(tn_keyset ks, const struct tn_tensor *self,
                                struct tn_tensor ***result)
{
    struct tn_tensor *s = self->ndim == 0 ? tn_unsqueeze(self, 0)
                                          : tn_retain((struct tn_tensor *)self);
    struct tn_tensor *nz = s ? tn_nonzero(s) : NULL;
    int rc = nz ? tn__composite_unbind_int(ks, nz, 1, result) : tn_last_status();
    tn_release(s);
    tn_release(nz);
    return rc;
}

static int tensor_split_dim(const struct tn_tensor *self, int64_t dim)
{
    if (self->ndim == 0)
        return tn_set_error(TN_ERUNTIME, "tensor_split expected at least a 1-dimensional tensor, "
                            "but got a tensor with 0 dims");
    return tn_wrap_dim(dim, self->ndim);
}

int tn__composite_tensor_split_sections(tn_keyset ks, const struct tn_tensor *self,
                                        int64_t sections, int64_t dim, struct tn_tensor ***result)
{
    int d = tensor_split_dim(self, dim);
    if (d < 0)
        return tn_last_status();
    if (sections <= 0)
        return tn_set_error(TN_ERUNTIME, "number of sections must be larger than 0, got %lld",
                            (long long)sections);
    struct tn_tensor **p = pieces_new("tensor_split", sections);
    if (!p)
        return tn_last_status();
    /* the first size % sections pieces are one longer */
    int64_t size = self->sizes[d], base = size / sections, extra = size % sections, start = 0;
    for (int64_t i = 0; i < sections; i++) {
        int64_t l = base + (i < extra);
        if (!(p[i] = tn_narrow(self, d, start, l))) {
            tn_release_list(p, (int)i);
            return tn_last_status();
        }
        start += l;
    }
    *result = p;
    return (int)sections;
}

/* Python's slice bounds: negative counts from the end, clamped to [0, n]. */
static int64_t slice_bound(int64_t i, int64_t n)
{
    if (i < 0)
        i = i < -n ? 0 : i + n;
    return i > n ? n : i;
}

int tn__composite_tensor_split_indices(tn_keyset ks, const struct tn_tensor *self,
                                       const int64_t *indices, int indices_len, int64_t dim,
                                       struct tn_tensor ***result)
{
    int d = tensor_split_dim(self, dim);
    if (d < 0)
        return tn_last_status();
    struct tn_tensor **p = pieces_new("tensor_split", (int64_t)indices_len + 1);
    if (!p)
        return tn_last_status();
    int64_t n = self->sizes[d], start = 0;
    for (int i = 0; i <= indices_len; i++) {
        /* at::slice(self, d, start, end): an end before start is empty */
        int64_t s = slice_bound(start, n), e = i < indices_len ? slice_bound(indices[i], n) : n;
        if (!(p[i] = tn_narrow(self, d, s, e > s ? e - s : 0))) {
            tn_release_list(p, i);
            return tn_last_status();
        }
        start = i < indices_len ? indices[i] : n;
    }
    *result = p;
    return indices_len + 1;
}

/* tensor_split with the sections or indices in a CPU int64 tensor: 0-dim
 * for sections, 1-dim (any stride) for indices. */
int tn__composite_tensor_split_tensor_indices_or_sections(tn_keyset ks,
                                                          const struct tn_tensor *self,
                                                          const struct tn_tensor *tios,
                                                          int64_t dim, struct tn_tensor ***result)
{
    if (self->ndim == 0)
        return tensor_split_dim(self, dim);
    char dev[64];
    if (tios->device.type != TN_DEVICE_CPU)
        return tn_set_error(TN_EDEVICE, "tensor_split expected tensor_indices_or_sections to be "
                            "on cpu, but it's on %s",
                            tn_device_format(tios->device, dev, sizeof dev));
    if (tios->dtype != TN_INT64)
        return tn_set_error(TN_EDTYPE, "tensor_split expected tensor_indices_or_sections to have "
                            "dtype of long, but got %s", tn_dtype_info(tios->dtype)->c10_name);
    if (tios->ndim > 1)
        return tn_set_error(TN_ESHAPE, "tensor_split expected tensor_indices_or_sections to be a "
                            "zero-dimensional or one-dimensional tensor, but got a tensor with %d "
                            "dims", tios->ndim);
    const int64_t *d = (const int64_t *)tn_data(tios);
    if (tios->ndim == 0)
        return tn__composite_tensor_split_sections(ks, self, d[0], dim, result);
    int64_t n = tios->sizes[0];
    if (n >= TN_SPLIT_MAX_PIECES)
        return tn_set_error(TN_EINVAL, "tensor_split: %lld pieces is more than the %lld allowed",
                            (long long)n + 1, (long long)TN_SPLIT_MAX_PIECES);
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx)
        return tn_set_error(TN_ENOMEM, "tensor_split: out of memory");
    for (int64_t i = 0; i < n; i++)
        idx[i] = d[i * tios->strides[0]];
    int rc = tn__composite_tensor_split_indices(ks, self, idx, (int)n, dim, result);
    free(idx);
    return rc;
}
