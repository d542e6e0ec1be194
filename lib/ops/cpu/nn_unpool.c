/*
 * ops/cpu/nn_unpool.c: max_unpool2d and max_unpool3d (CPU and Meta), as
 * PyTorch's MaxUnpooling.cpp: each input element written into a zero output
 * of output_size at the position its index names in its (N, C) plane, the
 * later of two elements with one index winning. The floating dtypes, as
 * PyTorch's: the elements are copied, never computed. The gradient
 * (derivatives.yaml) gathers grad by the same indices.
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"

/* PyTorch's checks of max_unpooling2d_forward_out_cpu (dims 2) and
 * max_unpooling3d_shape_check (dims 3), in their order and words. */
static int unpool_check(int dims, const struct tn_tensor *self, const struct tn_tensor *indices,
                        int os_len, const int64_t *stride, int stride_len, int padding_len)
{
    char a[128], b[128];
    const char *fn = dims == 2 ? "max_unpooling2d_forward_out_cpu()"
                               : "max_unpooling3d_forward_out_cpu()";
    if (indices->dtype != TN_INT64)
        return tn_set_error(TN_EDTYPE, "elements in indices should be type int64 but got: %s",
                            tn_dtype_info(indices->dtype)->c10_name);
    if (dims == 2 && os_len != 2)
        return tn_set_error(TN_EINVAL, "There should be exactly two elements (height, width) in "
                            "output_size, but got %d elements.", os_len);
    if (self->ndim != dims + 1 && self->ndim != dims + 2)
        return tn_set_error(TN_ESHAPE, "Input to max_unpooling%dd should be a %dd or %dd Tensor, "
                            "but got a tensor with %d dimensions.", dims, dims + 1, dims + 2,
                            self->ndim);
    if (dims == 3) {
        if (os_len != 3)
            return tn_set_error(TN_EINVAL, "There should be exactly three elements (depth, "
                                "height, width) in output_size, but got %d elements.", os_len);
        if (stride_len != 3)
            return tn_set_error(TN_EINVAL, "There should be exactly three elements (depth, "
                                "height, width) in stride, but got: %d elements.", stride_len);
        if (padding_len != 3)
            return tn_set_error(TN_EINVAL, "There should be exactly three elements (depth, "
                                "height, width) in padding, but got: %d elements.", padding_len);
    }
    if (indices->ndim != self->ndim ||
        memcmp(indices->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim) != 0)
        return tn_set_error(TN_ESHAPE, "Expected shape of indices to be same as that of the input "
                            "tensor (%s) but got indices tensor with shape: %s",
                            tn_shape_format(self->sizes, self->ndim, a, sizeof a),
                            tn_shape_format(indices->sizes, indices->ndim, b, sizeof b));
    for (int i = 1; i < self->ndim; i++)
        if (self->sizes[i] <= 0)
            return tn_set_error(TN_ESHAPE, "%s: Expected input to have non-zero size for "
                                "non-batch dimensions, but input has sizes %s with dimension %d "
                                "being empty",
                                fn, tn_shape_format(self->sizes, self->ndim, a, sizeof a), i);
    if (dims == 3 && (stride[0] <= 0 || stride[1] <= 0 || stride[2] <= 0))
        return tn_set_error(TN_EINVAL, "strides should be greater than zero, but got stride: %s",
                            tn_shape_format(stride, 3, a, sizeof a));
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"max_unpool%dd\" not implemented for '%s'", dims,
                            tn_dtype_info(self->dtype)->c10_name);
    return TN_OK;
}

/* The unpooled tensor: self's leading dims, then output_size. */
static struct tn_tensor *unpool(int dims, const struct tn_tensor *self,
                                const struct tn_tensor *indices, const int64_t *output_size)
{
    int64_t sizes[TN_MAX_DIMS];
    int lead = self->ndim - dims;
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)lead);
    memcpy(sizes + lead, output_size, sizeof(int64_t) * (size_t)dims);
    if (self->device.type == TN_DEVICE_META)
        return tn_empty_on(sizes, self->ndim, self->dtype, self->device);
    struct tn_tensor *out = tn_zeros(sizes, self->ndim, self->dtype);
    struct tn_tensor *x = out ? tn_contiguous(self) : NULL;
    struct tn_tensor *ix = x ? tn_contiguous(indices) : NULL;
    if (!ix) {
        tn__nn_drop(0, out, x, NULL, NULL);
        return NULL;
    }
    int64_t channels = 1, plane = 1, oplane = 1;
    for (int i = 0; i < lead; i++)
        channels *= self->sizes[i];
    for (int i = 0; i < dims; i++) {
        plane *= self->sizes[lead + i];
        oplane *= output_size[i];
    }
    size_t es = tn_dtype_info(self->dtype)->size;
    const char *src = tn_data(x);
    char *dst = tn_data(out);
    const int64_t *at = tn_data(ix);
    int64_t bad = 0;
    bool invalid = false;
    if (oplane > 0)
        for (int64_t c = 0; c < channels; c++)
            for (int64_t p = 0; p < plane; p++) {
                int64_t i = c * plane + p, m = at[i];
                if (m < 0 || m >= oplane) {
                    invalid = true;
                    bad = m;
                    continue;
                }
                memcpy(dst + (size_t)(c * oplane + m) * es, src + (size_t)i * es, es);
            }
    tn__nn_drop(0, x, ix, NULL, NULL);
    if (invalid) {
        tn_release(out);
        if (dims == 2)
            tn_set_error(TN_EINDEX, "Found an invalid max index: %lld (output volumes are of "
                         "size %lldx%lld)", (long long)bad, (long long)output_size[0],
                         (long long)output_size[1]);
        else
            tn_set_error(TN_EINDEX, "Found an invalid max index: %lld (output volumes are of "
                         "size %lldx%lldx%lld)", (long long)bad, (long long)output_size[0],
                         (long long)output_size[1], (long long)output_size[2]);
        return NULL;
    }
    return out;
}

struct tn_tensor *tn__cpu_max_unpool2d(tn_keyset ks, const struct tn_tensor *self,
                                       const struct tn_tensor *indices,
                                       const int64_t *output_size, int output_size_len)
{
    if (unpool_check(2, self, indices, output_size_len, NULL, 0, 0) < 0)
        return NULL;
    /* channels_last in, channels_last out (suggest_memory_format); the
     * 3-D op's result is always contiguous */
    return tn__channels_last_if(unpool(2, self, indices, output_size),
                                tn__strides_like_channels_last(self, 4));
}

struct tn_tensor *tn__cpu_max_unpool3d(tn_keyset ks, const struct tn_tensor *self,
                                       const struct tn_tensor *indices,
                                       const int64_t *output_size, int output_size_len,
                                       const int64_t *stride, int stride_len,
                                       const int64_t *padding, int padding_len)
{
    if (unpool_check(3, self, indices, output_size_len, stride, stride_len, padding_len) < 0)
        return NULL;
    return unpool(3, self, indices, output_size);
}
