/*
 * ops/fill.c: fill, zero and dtype conversion through the dispatcher, over
 * lib/core's tn_fill_ and tn_copy_: fill/fill_ (a Scalar, or a 0-dim
 * tensor), zero/zero_, _to_copy (what torch.export graphs hold) and
 * to.dtype (self itself when nothing changes). Their Autograd kernels come
 * from derivatives.yaml; these run below it.
 */
#include <config.h>

#include "ops/internal.h"
#include <string.h>

/* PyTorch's c10::MemoryFormat and c10::Layout values. */
enum { MF_CONTIGUOUS = 0, MF_PRESERVE = 1, MF_CHANNELS_LAST = 2, MF_CHANNELS_LAST_3D = 3,
       LAYOUT_STRIDED = 0 };

/* c10's get_channels_last_strides_2d/3d: channels innermost, then the
 * spatial dims from the last, the batch outermost; sizes as they are (a
 * 0 size gives 0 strides above it, as PyTorch's). -1 with the error set
 * where the rank is not 4 (channels_last) or 5 (channels_last_3d). */
static int channels_last_strides(const struct tn_tensor *t, int64_t mf, int64_t *strides)
{
    int want = mf == MF_CHANNELS_LAST ? 4 : 5;
    if (t->ndim != want)
        return tn_set_error(TN_EINVAL, "required rank %d tensor to use %s format", want,
                            want == 4 ? "channels_last" : "channels_last_3d");
    strides[1] = 1;
    strides[want - 1] = t->sizes[1];
    for (int d = want - 2; d >= 2; d--)
        strides[d] = strides[d + 1] * t->sizes[d + 1];
    strides[0] = strides[2] * t->sizes[2];
    return TN_OK;
}

/* A meta tensor (tcompile check's shape pass) has no data to write. */
static bool no_data(const struct tn_tensor *t) { return t->device.type == TN_DEVICE_META; }

static int fill_data(struct tn_tensor *t, struct tn_scalar value)
{
    return no_data(t) ? TN_OK : tn_fill_(t, value);
}

int tn__composite_fill_scalar_(tn_keyset ks, struct tn_tensor *self, struct tn_scalar value)
{
    return fill_data(self, value);
}

/* As PyTorch 2.x: a copy of the 0-dim value (converted without an
 * overflow check; 1.13 took its item() as fill_.Scalar does) */
int tn__composite_fill_(tn_keyset ks, struct tn_tensor *self, const struct tn_tensor *value)
{
    if (value->ndim != 0)
        return tn_set_error(TN_ESHAPE, "fill_ only supports 0-dimension value tensor but got "
                            "tensor with %d dimensions.", value->ndim);
    return no_data(self) ? TN_OK : tn_copy_(self, value);
}

int tn__composite_zero_(tn_keyset ks, struct tn_tensor *self)
{
    return fill_data(self, tn_int(0));
}

/* at::fill: empty_like(self) (strides kept) filled */
static struct tn_tensor *filled_like(const struct tn_tensor *self, struct tn_scalar v)
{
    struct tn_tensor *r = tn_empty_like(self, TN_DTYPE_UNSET);
    if (r && fill_data(r, v) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn__composite_fill_scalar(tn_keyset ks, const struct tn_tensor *self,
                                            struct tn_scalar value)
{
    return filled_like(self, value);
}

struct tn_tensor *tn__composite_fill(tn_keyset ks, const struct tn_tensor *self,
                                     const struct tn_tensor *value)
{
    struct tn_tensor *r = tn_empty_like(self, TN_DTYPE_UNSET);
    if (r && tn__composite_fill_(ks, r, value) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn__composite_zero(tn_keyset ks, const struct tn_tensor *self)
{
    return filled_like(self, tn_int(0));
}

/* A new tensor of self's values in `dtype` (UNSET: self's) on `device`
 * (NULL: self's), strided: self's strides kept where it is dense
 * (memory_format None or preserve) and stays on its device, contiguous
 * otherwise. */
struct tn_tensor *tn__composite__to_copy(tn_keyset ks, const struct tn_tensor *self,
                                         enum tn_dtype dtype, const int64_t *layout,
                                         const struct tn_device *device, const bool *pin_memory,
                                         bool non_blocking, const int64_t *memory_format)
{
    if (layout && *layout != LAYOUT_STRIDED)
        return tn_set_error(TN_EINVAL, "_to_copy: only the strided layout is supported"), NULL;
    if (pin_memory && *pin_memory)
        return tn_set_error(TN_EINVAL, "_to_copy: pin_memory is not supported"), NULL;
    int64_t mf = memory_format ? *memory_format : MF_PRESERVE;
    if (mf < MF_CONTIGUOUS || mf > MF_CHANNELS_LAST_3D)
        return tn_set_error(TN_EINVAL, "_to_copy: unknown memory format %lld", (long long)mf),
               NULL;
    enum tn_dtype dt = dtype == TN_DTYPE_UNSET ? self->dtype : dtype;
    bool moves = device && !tn_device_equal(*device, self->device);
    struct tn_tensor *r;
    if (mf == MF_CHANNELS_LAST || mf == MF_CHANNELS_LAST_3D) {
        int64_t strides[TN_MAX_DIMS];
        if (channels_last_strides(self, mf, strides) < 0)
            return NULL;
        /* dense in (N, spatial..., C) order on the target device (Meta
         * included), seen as (N, C, spatial...): those strides */
        int64_t sz[TN_MAX_DIMS], perm[TN_MAX_DIMS];
        int nd = self->ndim;
        sz[0] = self->sizes[0], sz[nd - 1] = self->sizes[1];
        for (int d = 2; d < nd; d++)
            sz[d - 1] = self->sizes[d];
        perm[0] = 0, perm[1] = nd - 1;
        for (int d = 2; d < nd; d++)
            perm[d] = d - 1;
        struct tn_tensor *base = tn_empty_on(sz, nd, dt, moves ? *device : self->device);
        r = base ? tn_permute(base, perm, nd) : NULL;
        tn_release(base);
    } else {
        r = mf == MF_PRESERVE && !moves ? tn_empty_like(self, dt)
                                        : tn_empty_on(self->sizes, self->ndim, dt,
                                                      moves ? *device : self->device);
    }
    if (r && !no_data(r) && tn_copy_(r, self) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

/* copy (the functional copy_, core ATen): a new tensor of self's sizes,
 * dtype and device, self's strides where it is dense (PyTorch's
 * clone-then-copy_), holding src broadcast to self and converted; through
 * copy_ so the gradient reaches src alone */
struct tn_tensor *tn__composite_copy(tn_keyset ks, const struct tn_tensor *self,
                                     const struct tn_tensor *src, bool non_blocking)
{
    struct tn_tensor *r = tn_empty_like(self, TN_DTYPE_UNSET);
    if (!r)
        return NULL;
    if (no_data(r) || no_data(src)) { /* Meta: only the broadcast is checked */
        int64_t shape[TN_MAX_DIMS];
        int nd = tn_broadcast_shapes(self->sizes, self->ndim, src->sizes, src->ndim, shape);
        if (nd >= 0 && (nd != self->ndim ||
                        memcmp(shape, self->sizes, (size_t)nd * sizeof *shape) != 0)) {
            char a[256], b[256];
            tn_set_error(TN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s",
                         tn_shape_format(self->sizes, self->ndim, a, sizeof a),
                         tn_shape_format(shape, nd, b, sizeof b));
            nd = -1;
        }
        if (nd < 0) {
            tn_release(r);
            return NULL;
        }
        return r;
    }
    if (tn_copy_(r, src) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

/* c10's suggest_memory_format: channels_last(_3d) where the strides are
 * like them, contiguous for every other strided tensor (a transposed or
 * sliced one included) */
static int64_t suggest_memory_format(const struct tn_tensor *self)
{
    return tn__strides_like_channels_last(self, 4)   ? MF_CHANNELS_LAST
           : tn__strides_like_channels_last(self, 5) ? MF_CHANNELS_LAST_3D
                                                 : MF_CONTIGUOUS;
}

/* PyTorch's to_impl: self itself when to_will_alias (dtype, layout and
 * device unchanged, no copy asked for, the memory format preserve or the
 * one self's strides suggest: contiguous keeps a transposed tensor but
 * copies a channels_last one); otherwise _to_copy, whose node autograd
 * records. */
static struct tn_tensor *to_impl(const struct tn_tensor *self, enum tn_dtype dtype,
                                 const int64_t *layout, const struct tn_device *device,
                                 const bool *pin_memory, bool non_blocking, bool copy,
                                 const int64_t *memory_format)
{
    int64_t mf = memory_format ? *memory_format : MF_PRESERVE;
    if ((dtype == TN_DTYPE_UNSET || dtype == self->dtype) &&
        (!layout || *layout == LAYOUT_STRIDED) && (!device || tn_device_equal(*device, self->device)) &&
        !copy && (mf == MF_PRESERVE || suggest_memory_format(self) == mf))
        return tn_retain((struct tn_tensor *)self);
    return tn_underscore_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
}

struct tn_tensor *tn__composite_to_dtype(tn_keyset ks, const struct tn_tensor *self,
                                         enum tn_dtype dtype, bool non_blocking, bool copy,
                                         const int64_t *memory_format)
{
    return to_impl(self, dtype, NULL, NULL, NULL, non_blocking, copy, memory_format);
}

struct tn_tensor *tn__composite_to_device(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_device *device, enum tn_dtype dtype,
                                          bool non_blocking, bool copy,
                                          const int64_t *memory_format)
{
    return to_impl(self, dtype, NULL, device, NULL, non_blocking, copy, memory_format);
}

struct tn_tensor *tn__composite_to_dtype_layout(tn_keyset ks, const struct tn_tensor *self,
                                                enum tn_dtype dtype, const int64_t *layout,
                                                const struct tn_device *device,
                                                const bool *pin_memory, bool non_blocking,
                                                bool copy, const int64_t *memory_format)
{
    return to_impl(self, dtype, layout, device, pin_memory, non_blocking, copy, memory_format);
}

/* resize's functional form: a new contiguous tensor of `size` holding
 * self's elements in row-major order, the first numel(size) of them; where
 * size holds more, the rest are zero (resize_ leaves them uninitialised). */
struct tn_tensor *tn__composite_resize(tn_keyset ks, const struct tn_tensor *self,
                                       const int64_t *size, int size_len,
                                       const int64_t *memory_format)
{
    (void)ks;
    if (memory_format && *memory_format != MF_CONTIGUOUS && *memory_format != MF_PRESERVE)
        return tn_set_error(TN_EINVAL, "resize: only the contiguous memory format is "
                            "supported"), NULL;
    int64_t n = 1;
    for (int d = 0; d < size_len; d++) {
        if (size[d] < 0)
            return tn_set_error(TN_EINVAL, "Trying to create tensor with negative dimension "
                                "%lld: [resize]", (long long)size[d]), NULL;
        n *= size[d];
    }
    int64_t have = tn_numel(self);
    struct tn_tensor *flat = tn_reshape(self, TN_SHAPE(-1));
    struct tn_tensor *part = flat ? tn_narrow(flat, 0, 0, n < have ? n : have) : NULL;
    struct tn_tensor *r = !part ? NULL
                          : n <= have ? tn_clone(part)
                                      : tn_constant_pad_nd(part, TN_SHAPE(0, n - have), tn_int(0));
    struct tn_tensor *out = r ? tn_reshape(r, size, size_len) : NULL;
    tn_release(flat);
    tn_release(part);
    tn_release(r);
    return out;
}

struct tn_tensor *tn__composite_resize_as(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *the_template,
                                          const int64_t *memory_format)
{
    return tn__composite_resize(ks, self, the_template->sizes, the_template->ndim,
                                memory_format);
}
