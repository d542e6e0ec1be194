/*
 * core/tensor.c: the tensor struct: references, geometry queries, items.
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets up tensor struct t around storage, whose reference t takes over. */
static struct tn_tensor *tn_tensor_init(struct tn_tensor *t, struct tn_storage *storage,
                                        int64_t offset, const int64_t *sizes,
                                        const int64_t *strides, int ndim, enum tn_dtype dtype)
{
    /* Every field is set: the struct may come from the cache holding an
     * older tensor (sizes and strides past ndim keep whatever they held:
     * zeroing them cost a tenth of a small op's time). */
    t->refcount = 1;
    t->storage = storage;
    t->offset = offset;
    t->ndim = ndim;
    /* loops, not memcpy: a library call costs more than a few dims */
    for (int i = 0; i < ndim; i++)
        t->sizes[i] = sizes[i];
    if (strides) {
        for (int i = 0; i < ndim; i++)
            t->strides[i] = strides[i];
    } else {
        tn__contiguous_strides(sizes, ndim, t->strides);
    }
    t->dtype = dtype;
    t->device = storage->device;
    t->requires_grad = false;
    t->flags = 0;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->output_nr = 0;
    t->base = NULL;
    t->autograd_meta = NULL;
    return t;
}

static struct tn_tensor *tn_tensor_struct(void)
{
    struct tn_tensor *t = tn__tensor_alloc();
    if (!t)
        tn_set_error(TN_ENOMEM, "out of memory allocating a tensor");
    return t;
}

struct tn_tensor *tn__tensor_make(struct tn_storage *storage, int64_t offset, const int64_t *sizes,
                                  const int64_t *strides, int ndim, enum tn_dtype dtype)
{
    TN_ASSERT(ndim >= 0 && ndim <= TN_MAX_DIMS);
    struct tn_tensor *t = tn_tensor_struct();
    return t ? tn_tensor_init(t, tn_storage_retain(storage), offset, sizes, strides, ndim, dtype)
             : NULL;
}

struct tn_tensor *tn__tensor_new(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                                 struct tn_device device)
{
    int64_t numel;
    if (tn__sizes_numel(sizes, ndim, &numel) != TN_OK)
        return NULL;
    size_t es = tn__dtype_size(dtype);
    if ((uint64_t)numel > SIZE_MAX / es) {
        tn_set_error(TN_ENOMEM, "tensor of %lld elements is too large", (long long)numel);
        return NULL;
    }
    struct tn_storage *s = tn_storage_new((size_t)numel * es, device);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn_tensor_struct();
    if (!t) {
        tn_storage_release(s);
        return NULL;
    }
    return tn_tensor_init(t, s, 0, sizes, NULL, ndim, dtype);
}

struct tn_tensor *tn__view_make(const struct tn_tensor *base, int64_t offset, const int64_t *sizes,
                                const int64_t *strides, int ndim, const char *grad_fn)
{
    struct tn_tensor *v = tn__tensor_make(base->storage, offset, sizes, strides, ndim, base->dtype);
    if (!v)
        return NULL;
    v->requires_grad = base->requires_grad;
    /* Record the root of the view chain, as PyTorch's _base does. */
    v->base = tn_retain((struct tn_tensor *)(base->base ? base->base : base));
    if (v->requires_grad && tn__autograd_hooks && tn__autograd_hooks->on_view(base, v, grad_fn) < 0) {
        tn_release(v);
        return NULL;
    }
    return v;
}

/* Filled by lib/autograd when it loads (core/internal.h). */
const struct tn_autograd_hooks *tn__autograd_hooks;

struct tn_tensor *tn_retain(struct tn_tensor *t)
{
    if (t)
        TN_ATOMIC_INC(&t->refcount);
    return t;
}

static void tn_node_release(struct tn_node *n)
{
    struct tn_node_header *h = (struct tn_node_header *)n;
    if (n && TN_ATOMIC_DEC(&h->refcount) == 0)
        h->destroy(n);
}

void tn_release(struct tn_tensor *t)
{
    if (!t || !tn__unref(&t->refcount))
        return;
    tn_storage_release(t->storage);
    if (t->grad)
        tn_release(t->grad);
    if (t->base)
        tn_release(t->base);
    if (t->grad_fn)
        tn_node_release(t->grad_fn);
    if (t->autograd_meta)
        tn__autograd_hooks->free_meta(t);
    tn__tensor_free(t);
}

int64_t tn_numel(const struct tn_tensor *t) { return tn__numel(t); }

int tn_dim(const struct tn_tensor *t) { return t->ndim; }

int tn_wrap_dim(int64_t dim, int ndim)
{
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts -1 and 0 */
    if (dim < -n || dim >= n) {
        tn_set_error(TN_EINDEX,
                     "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                     (long long)-n, (long long)(n - 1), (long long)dim);
        return -1;
    }
    return (int)(dim < 0 ? dim + n : dim);
}

int64_t tn_size(const struct tn_tensor *t, int dim)
{
    int d = dim < 0 ? dim + t->ndim : dim;
    TN_ASSERT(d >= 0 && d < t->ndim);
    return t->sizes[d];
}

int64_t tn_stride(const struct tn_tensor *t, int dim)
{
    int d = dim < 0 ? dim + t->ndim : dim;
    TN_ASSERT(d >= 0 && d < t->ndim);
    return t->strides[d];
}

void *tn_data(const struct tn_tensor *t) { return tn__data(t, tn__dtype_size(t->dtype)); }

size_t tn_nbytes(const struct tn_tensor *t)
{
    return (size_t)tn_numel(t) * tn_dtype_size(t->dtype);
}

void tn_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides)
{
    tn__contiguous_strides(sizes, ndim, strides);
}

bool tn_is_contiguous(const struct tn_tensor *t) { return tn__is_contiguous(t); }

bool tn_is_non_overlapping_and_dense(const struct tn_tensor *t)
{
    if (t->ndim == 1)
        return t->sizes[0] < 2 || t->strides[0] == 1;
    if (tn_is_contiguous(t))
        return true;
    /* Sort dims by stride (size-1 dims last) and check they tile. */
    int perm[TN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        perm[i] = i;
    for (int i = 1; i < t->ndim; i++) {
        for (int j = i; j > 0; j--) {
            int a = perm[j - 1], b = perm[j];
            bool a_after = t->sizes[a] < 2 ? t->sizes[b] >= 2 : (t->sizes[b] >= 2 && t->strides[a] > t->strides[b]);
            if (!a_after)
                break;
            perm[j - 1] = b;
            perm[j] = a;
        }
    }
    int64_t expected = 1;
    for (int i = 0; i < t->ndim; i++) {
        int d = perm[i];
        if (t->sizes[d] == 1)
            continue;
        if (t->strides[d] != expected)
            return false;
        expected *= t->sizes[d];
    }
    return true;
}

char *tn_shape_format(const int64_t *sizes, int ndim, char *buf, size_t len)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
    return buf;
}

int tn__check_sizes(const int64_t *sizes, int ndim, int64_t *numel)
{
    if (ndim < 0 || ndim > TN_MAX_DIMS)
        return tn_set_error(TN_ESHAPE, "tensors may have at most %d dimensions, got %d",
                            TN_MAX_DIMS, ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) {
            char buf[256];
            return tn_set_error(TN_ESHAPE, "Trying to create tensor with negative dimension %lld: %s",
                                (long long)sizes[i], tn_shape_format(sizes, ndim, buf, sizeof buf));
        }
        if (sizes[i] && n > INT64_MAX / sizes[i])
            return tn_set_error(TN_ESHAPE, "the number of elements overflows int64");
        n *= sizes[i];
    }
    if (numel)
        *numel = n;
    return TN_OK;
}

struct tn_scalar tn_item(const struct tn_tensor *t)
{
    int64_t n = tn_numel(t);
    if (n != 1) {
        tn_set_error(TN_EINVAL, "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)n);
        return tn_int(0);
    }
    return tn_scalar_load(tn_data(t), t->dtype);
}

double tn_item_double(const struct tn_tensor *t) { return tn_scalar_to_double(tn_item(t)); }
