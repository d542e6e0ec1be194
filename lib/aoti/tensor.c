/*
 * lib/aoti/tensor.c: the shim's tensor handles: their lifetime, their
 * geometry getters, the constructors (empty_strided, from_blob, pool
 * allocations, reinterpreted views), copies, scalars and grad mode.
 */
#include <string.h>

#include <tensor/autograd.h>

#include "aoti/internal.h"

#define CHECK(t)                                                                                   \
    do {                                                                                           \
        if (tn__aoti_bad((t), __func__))                                                           \
            return AOTI_TORCH_FAILURE;                                                             \
    } while (0)

/* ---------------------------------------------------------- lifetime */

SHIM(aoti_torch_delete_tensor_object, AtenTensorHandle t)
{
    tn_release(t);
    return AOTI_TORCH_SUCCESS;
}

SHIM(aoti_torch_new_tensor_handle, AtenTensorHandle t, AtenTensorHandle *ret)
{
    CHECK(t);
    *ret = tn_retain(t);
    return AOTI_TORCH_SUCCESS;
}

SHIM(aoti_torch_is_defined, AtenTensorHandle t, bool *ret)
{
    *ret = t != NULL;
    return AOTI_TORCH_SUCCESS;
}

/* ----------------------------------------------------------- getters */

/* SHIM(aoti_torch_NAME, AtenTensorHandle t, T *ret): *ret = expr of t. */
#define GETTER(name, T, expr)                                                                      \
    SHIM(aoti_torch_##name, AtenTensorHandle t, T *ret)                                            \
    {                                                                                              \
        CHECK(t);                                                                                  \
        *ret = (expr);                                                                             \
        return AOTI_TORCH_SUCCESS;                                                                 \
    }

GETTER(get_data_ptr, void *,
       t->storage->data ? (char *)t->storage->data + t->offset *(int64_t)tn_dtype_size(t->dtype)
                        : NULL)
GETTER(get_storage_size, int64_t, (int64_t)t->storage->nbytes) /* bytes */
GETTER(get_storage_numel, int64_t, (int64_t)(t->storage->nbytes / tn_dtype_size(t->dtype)))
GETTER(get_dim, int64_t, t->ndim)
GETTER(get_numel, int64_t, tn_numel(t))
/* borrowed: valid while the handle lives */
GETTER(get_sizes, int64_t *, t->sizes)
GETTER(get_strides, int64_t *, t->strides)
GETTER(get_dtype, int32_t, tn_dtype_info(t->dtype)->scalar_type)
GETTER(get_device_type, int32_t,
       t->device.type == TN_DEVICE_CUDA   ? TN__AOTI_CUDA
       : t->device.type == TN_DEVICE_META ? TN__AOTI_META
                                          : TN__AOTI_CPU)
GETTER(get_device_index, int32_t, t->device.index)
GETTER(get_layout, int32_t, TN__AOTI_STRIDED)
GETTER(get_storage_offset, int64_t, t->offset)
GETTER(is_contiguous, bool, tn_is_contiguous(t))

static int dim_index(const struct tn_tensor *t, int64_t d, const char *fn)
{
    int64_t n = t->ndim, k = d < 0 ? d + n : d;
    if (k < 0 || k >= n)
        return tn_set_error(TN_EINDEX, "%s: dimension %lld out of range for a %lld-dim tensor", fn,
                            (long long)d, (long long)n);
    return (int)k;
}

/* get_size and get_stride: one dimension of sizes or strides. */
#define DIM_GETTER(name, field)                                                                    \
    SHIM(aoti_torch_##name, AtenTensorHandle t, int64_t d, int64_t *ret)                           \
    {                                                                                              \
        CHECK(t);                                                                                  \
        int k = dim_index(t, d, __func__);                                                         \
        if (k < 0)                                                                                 \
            return AOTI_TORCH_FAILURE;                                                             \
        *ret = t->field[k];                                                                        \
        return AOTI_TORCH_SUCCESS;                                                                 \
    }

DIM_GETTER(get_size, sizes)
DIM_GETTER(get_stride, strides)

/* ------------------------------------------------------- constructors */

static int check_ndim(int64_t ndim, const char *fn)
{
    if (ndim < 0 || ndim > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "%s: %lld dimensions (libtensor has at most %d)", fn,
                            (long long)ndim, TN_MAX_DIMS);
    return 0;
}

SHIM(aoti_torch_empty_strided, int64_t ndim, const int64_t *sizes, const int64_t *strides,
     int32_t dtype, int32_t device_type, int32_t device_index, AtenTensorHandle *ret)
{
    (void)device_index;
    struct tn_device dev;
    enum tn_dtype dt = tn__aoti_dtype(dtype, __func__);
    if (dt == TN_DTYPE_UNSET || check_ndim(ndim, __func__) < 0 ||
        tn__aoti_device(device_type, __func__, &dev) < 0)
        return AOTI_TORCH_FAILURE;
    return tn__aoti_ret(tn_empty_strided(sizes, (int)ndim, strides, dt), ret);
}

/* Bytes the geometry reaches from element 0 of its storage. */
static size_t span_bytes(int64_t ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                         enum tn_dtype dt)
{
    int64_t last = offset;
    for (int64_t d = 0; d < ndim; d++) {
        if (sizes[d] == 0)
            return 0;
        last += (sizes[d] - 1) * strides[d];
    }
    return (size_t)(last + 1) * tn_dtype_size(dt);
}

/* A tensor over memory the caller keeps alive (the model's constants, a
 * user's buffer): data is element 0 of the storage, the tensor starts
 * storage_offset elements in. */
static AOTITorchError from_blob(void *data, int64_t ndim, const int64_t *sizes,
                                const int64_t *strides, int64_t storage_offset, int32_t dtype,
                                int32_t device_type, AtenTensorHandle *ret, const char *fn)
{
    struct tn_device dev;
    enum tn_dtype dt = tn__aoti_dtype(dtype, fn);
    if (dt == TN_DTYPE_UNSET || check_ndim(ndim, fn) < 0 ||
        tn__aoti_device(device_type, fn, &dev) < 0)
        return AOTI_TORCH_FAILURE;
    struct tn_storage *s = tn_storage_from_external(
        data, span_bytes(ndim, sizes, strides, storage_offset, dt), dev, NULL, NULL);
    if (!s)
        return AOTI_TORCH_FAILURE;
    struct tn_tensor *t = tn_tensor_from_storage(s, storage_offset, sizes, (int)ndim, strides, dt);
    tn_storage_release(s);
    return tn__aoti_ret(t, ret);
}

SHIM(aoti_torch_create_tensor_from_blob, void *data, int64_t ndim, const int64_t *sizes,
     const int64_t *strides, int64_t storage_offset, int32_t dtype, int32_t device_type,
     int32_t device_index, AtenTensorHandle *ret)
{
    (void)device_index;
    return from_blob(data, ndim, sizes, strides, storage_offset, dtype, device_type, ret, __func__);
}

SHIM(aoti_torch_create_tensor_from_blob_v2, void *data, int64_t ndim, const int64_t *sizes,
     const int64_t *strides, int64_t storage_offset, int32_t dtype, int32_t device_type,
     int32_t device_index, AtenTensorHandle *ret, int32_t layout, const uint8_t *opaque_metadata,
     int64_t opaque_metadata_size)
{
    (void)device_index, (void)opaque_metadata, (void)opaque_metadata_size;
    if (layout != TN__AOTI_STRIDED)
        return tn__aoti_rc(tn_set_error(TN_EINVAL,
                                        "%s: layout %d (mkldnn, sparse) is not "
                                        "supported: only strided tensors",
                                        __func__, (int)layout));
    return from_blob(data, ndim, sizes, strides, storage_offset, dtype, device_type, ret, __func__);
}

/* A view of self's storage with another geometry, starting `offset`
 * elements after self's own start (inductor's _reinterpret_tensor). */
SHIM(aoti_torch__reinterpret_tensor, AtenTensorHandle self, int64_t ndim, const int64_t *sizes,
     const int64_t *strides, int64_t offset_increment, AtenTensorHandle *ret)
{
    CHECK(self);
    if (check_ndim(ndim, __func__) < 0)
        return AOTI_TORCH_FAILURE;
    return tn__aoti_ret(tn_tensor_from_storage(self->storage, self->offset + offset_increment,
                                               sizes, (int)ndim, strides, self->dtype),
                        ret);
}

/* A tensor of `dtype` inside the pool tensor self's storage, offset_bytes
 * after self's start (inductor's memory planning). */
SHIM(aoti_torch__alloc_from_pool, AtenTensorHandle self, int64_t offset_bytes, int32_t dtype,
     int64_t ndim, const int64_t *sizes, const int64_t *strides, AtenTensorHandle *ret)
{
    CHECK(self);
    enum tn_dtype dt = tn__aoti_dtype(dtype, __func__);
    if (dt == TN_DTYPE_UNSET || check_ndim(ndim, __func__) < 0)
        return AOTI_TORCH_FAILURE;
    int64_t bytes = self->offset * (int64_t)tn_dtype_size(self->dtype) + offset_bytes;
    if (bytes % (int64_t)tn_dtype_size(dt))
        return tn__aoti_rc(tn_set_error(TN_EINVAL,
                                        "%s: byte offset %lld is not a multiple of "
                                        "%s's size",
                                        __func__, (long long)bytes, tn_dtype_name(dt)));
    return tn__aoti_ret(tn_tensor_from_storage(self->storage, bytes / (int64_t)tn_dtype_size(dt),
                                               sizes, (int)ndim, strides, dt),
                        ret);
}

SHIM(aoti_torch_as_strided, AtenTensorHandle self, const int64_t *sizes, const int64_t *strides,
     AtenTensorHandle *ret)
{
    CHECK(self);
    return tn__aoti_ret(tn_as_strided(self, sizes, self->ndim, strides, self->offset), ret);
}

/* ------------------------------------------------------------- copies */

SHIM(aoti_torch_clone, AtenTensorHandle self, AtenTensorHandle *ret)
{
    CHECK(self);
    return tn__aoti_ret(tn_clone(self), ret);
}

/* A copy with self's very strides (overlapping or with gaps): the span of
 * storage self reaches, cloned, viewed with self's geometry. */
SHIM(aoti_torch_clone_preserve_strides, AtenTensorHandle self, AtenTensorHandle *ret)
{
    CHECK(self);
    int64_t n = (int64_t)(span_bytes(self->ndim, self->sizes, self->strides, 0, self->dtype) /
                          tn_dtype_size(self->dtype));
    int64_t one = 1;
    struct tn_tensor *flat = tn_as_strided(self, &n, 1, &one, self->offset);
    struct tn_tensor *copy = flat ? tn_clone(flat) : NULL;
    struct tn_tensor *t =
        copy ? tn_as_strided(copy, self->sizes, self->ndim, self->strides, 0) : NULL;
    tn_release(flat);
    tn_release(copy);
    return tn__aoti_ret(t, ret);
}

SHIM(aoti_torch_copy_, AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking)
{
    (void)non_blocking;
    CHECK(self);
    CHECK(src);
    return tn__aoti_rc(tn_copy_(self, src));
}

SHIM(aoti_torch_tensor_copy_, AtenTensorHandle src, AtenTensorHandle dst)
{
    return aoti_torch_copy_(dst, src, 0);
}

SHIM(aoti_torch_assign_tensors, AtenTensorHandle src, AtenTensorHandle dst)
{
    return aoti_torch_copy_(dst, src, 0);
}

/* *ret_dst: a new handle on src's tensor (PyTorch's Tensor copy). */
SHIM(aoti_torch_assign_tensors_out, AtenTensorHandle src, AtenTensorHandle *ret_dst)
{
    return aoti_torch_new_tensor_handle(src, ret_dst);
}

SHIM(aoti_torch_zero_, AtenTensorHandle self)
{
    CHECK(self);
    return tn__aoti_rc(tn_fill_(self, tn_int(0)));
}

/* --------------------------------------------------- scalars and items */

#define SCALAR(name, T, dt, make)                                                                  \
    SHIM(aoti_torch_scalar_to_tensor_##name, T value, AtenTensorHandle *ret)                       \
    {                                                                                              \
        return tn__aoti_ret(tn_scalar_tensor(make(value), dt), ret);                               \
    }                                                                                              \
    SHIM(aoti_torch_item_##name, AtenTensorHandle t, T *ret)                                       \
    {                                                                                              \
        CHECK(t);                                                                                  \
        if (tn_numel(t) != 1 || t->dtype != dt || t->device.type != TN_DEVICE_CPU)                 \
            return tn__aoti_rc(tn_set_error(TN_EINVAL, "%s: needs one %s on the CPU", __func__,    \
                                            tn_dtype_name(dt)));                                   \
        memcpy(ret, (const char *)t->storage->data + t->offset * (int64_t)sizeof *ret,             \
               sizeof *ret);                                                                       \
        return AOTI_TORCH_SUCCESS;                                                                 \
    }

SCALAR(float32, float, TN_FLOAT32, tn_float)
SCALAR(float64, double, TN_FLOAT64, tn_float)
SCALAR(uint8, uint8_t, TN_UINT8, tn_int)
SCALAR(int8, int8_t, TN_INT8, tn_int)
SCALAR(int16, int16_t, TN_INT16, tn_int)
SCALAR(int32, int32_t, TN_INT32, tn_int)
SCALAR(int64, int64_t, TN_INT64, tn_int)
SCALAR(bool, bool, TN_BOOL, tn_bool)

/* ----------------------------------------------------------- grad mode */

TN__AOTI_EXPORT bool aoti_torch_grad_mode_is_enabled(void);
bool aoti_torch_grad_mode_is_enabled(void)
{
    return tn_is_grad_enabled();
}

TN__AOTI_EXPORT void aoti_torch_grad_mode_set_enabled(bool enabled);
void aoti_torch_grad_mode_set_enabled(bool enabled)
{
    tn_set_grad_enabled(enabled);
}
