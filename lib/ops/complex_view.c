/*
 * view_as_real and view_as_complex (real and imag over them): a complex
 * tensor's storage read as (real, imaginary) pairs of its part dtype, and
 * back. Both share self's storage; sizes, strides and offset follow
 * PyTorch's (the pair is a last dimension of size 2 and stride 1, the other
 * strides and the offset doubled or halved).
 */
#include "ops/internal.h"

/* a view of self's storage in dtype, its root self's (as tn__view_make) */
static struct tn_tensor *retyped_view(const struct tn_tensor *self, enum tn_dtype dtype,
                                      int64_t offset, const int64_t *sizes,
                                      const int64_t *strides, int ndim)
{
    struct tn_tensor *v = tn__tensor_make(self->storage, offset, sizes, strides, ndim, dtype);
    if (v)
        v->base = tn_retain((struct tn_tensor *)(self->base ? self->base : self));
    return v;
}

struct tn_tensor *tn__cpu_view_as_real(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    if (!tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "view_as_real is only supported for complex tensors"),
               NULL;
    if (self->ndim + 1 > TN_MAX_DIMS)
        return tn_set_error(TN_ESHAPE, "view_as_real: more than %d dimensions", TN_MAX_DIMS),
               NULL;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    for (int d = 0; d < self->ndim; d++) {
        sizes[d] = self->sizes[d];
        strides[d] = self->strides[d] * 2;
    }
    sizes[self->ndim] = 2;
    strides[self->ndim] = 1;
    return retyped_view(self, tn__dtype_real(self->dtype), self->offset * 2, sizes, strides,
                        self->ndim + 1);
}

struct tn_tensor *tn__cpu_view_as_complex(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    int n = self->ndim;
    if (self->dtype == TN_FLOAT16)
        return tn_set_error(TN_EDTYPE, "view_as_complex: complex32 is not a tensorkit dtype"),
               NULL;
    if (self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE,
                            "view_as_complex is only supported for half, float and double "
                            "tensors, but got a tensor of scalar type: %s",
                            tn_dtype_info(self->dtype)->c10_name),
               NULL;
    if (n == 0)
        return tn_set_error(TN_ESHAPE, "Input tensor must have one or more dimensions"), NULL;
    if (self->sizes[n - 1] != 2)
        return tn_set_error(TN_ESHAPE, "Tensor must have a last dimension of size 2"), NULL;
    if (self->strides[n - 1] != 1)
        return tn_set_error(TN_ESHAPE, "Tensor must have a last dimension with stride 1"), NULL;
    int64_t strides[TN_MAX_DIMS];
    for (int d = 0; d < n - 1; d++) {
        if (self->strides[d] % 2)
            return tn_set_error(TN_ESHAPE,
                                "Tensor must have a stride divisible by 2 for all but last "
                                "dimension"),
                   NULL;
        strides[d] = self->strides[d] / 2;
    }
    if (self->offset % 2)
        return tn_set_error(TN_ESHAPE, "Tensor must have a storage_offset divisible by 2"),
               NULL;
    return retyped_view(self, tn__dtype_complex(self->dtype), self->offset / 2, self->sizes,
                        strides, n - 1);
}

/* real and imag: view_as_real(self).select(-1, part), as PyTorch's
 * composites (their gradients are select's and view_as_real's) */
static struct tn_tensor *part(const struct tn_tensor *self, int64_t which)
{
    struct tn_tensor *pairs = tn_view_as_real(self);
    struct tn_tensor *r = pairs ? tn_select(pairs, -1, which) : NULL;
    tn_release(pairs);
    return r;
}

struct tn_tensor *tn__composite_real(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    return tn_dtype_is_complex(self->dtype) ? part(self, 0) : tn_retain((struct tn_tensor *)self);
}

struct tn_tensor *tn__composite_imag(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    if (!tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_ERUNTIME,
                            "imag is not implemented for tensors with non-complex dtypes."),
               NULL;
    return part(self, 1);
}
