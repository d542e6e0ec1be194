/*
 * dispatch/out.c: in-place and out= calls of structured ops. PyTorch's
 * rules: an out= tensor of the wrong shape is resized (new storage), one of
 * a dtype the result cannot be cast to is refused, one of another castable
 * dtype is computed into a temporary and copied back; an in-place op never
 * resizes self.
 */
#include <config.h>

#include <string.h>

#include <tensor/dispatch.h>

#include "core/internal.h"

/* c10::canCast: no complex to real, float to integer, or number to bool. */
static bool can_cast(enum tn_dtype from, enum tn_dtype to)
{
    if (tn_dtype_is_complex(from) && !tn_dtype_is_complex(to))
        return false;
    if (tn_dtype_is_floating(from) && tn_dtype_is_integral(to, true))
        return false;
    if (from != TN_BOOL && to == TN_BOOL)
        return false;
    return true;
}

/* Whether t has the result's sizes (strides aside). */
static bool same_shape(const struct tn_meta *m, const struct tn_tensor *t)
{
    if (m->ndim != t->ndim)
        return false;
    for (int i = 0; i < m->ndim; i++)
        if (m->sizes[i] != t->sizes[i])
            return false;
    return true;
}

/* Gives out new storage of m's shape (PyTorch resizes out= tensors). */
static int resize_out(struct tn_tensor *out, const struct tn_meta *m)
{
    int64_t numel;
    if (tn__check_sizes(m->sizes, m->ndim, &numel) < 0)
        return tn_last_status();
    struct tn_storage *st = tn_storage_new((size_t)numel * tn_dtype_size(out->dtype), out->device);
    if (!st)
        return tn_last_status();
    tn_storage_release(out->storage);
    out->storage = st;
    out->offset = 0;
    out->ndim = m->ndim;
    memcpy(out->sizes, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    tn_contiguous_strides(out->sizes, out->ndim, out->strides);
    return TN_OK;
}

/* Contract in tensor/dispatch.h: *target is out or a new temporary of
 * m's dtype, never NULL (out on an error). */
int tn_dispatch_prepare_out(const struct tn_meta *m, struct tn_tensor *out, bool inplace,
                            struct tn_tensor **target)
{
    *target = out;
    if (!can_cast(m->dtype, out->dtype))
        return tn_set_error(TN_EDTYPE, "result type %s can't be cast to the desired output type %s",
                            tn_dtype_info(m->dtype)->c10_name, tn_dtype_info(out->dtype)->c10_name);
    if (!same_shape(m, out)) {
        if (inplace) {
            char a[256], b[256];
            return tn_set_error(TN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s",
                                tn_shape_format(out->sizes, out->ndim, a, sizeof a),
                                tn_shape_format(m->sizes, m->ndim, b, sizeof b));
        }
        int rc = resize_out(out, m);
        if (rc < 0)
            return rc;
    }
    if (out->dtype != m->dtype && out->device.type != TN_DEVICE_META) {
        /* *target stays out on failure, so a caller that finishes whatever
         * rc (or reads target) never meets NULL; and the failure is always
         * an error, even from an allocator that did not record one. */
        struct tn_tensor *tmp = tn_dispatch_meta_alloc(m, out->device);
        if (!tmp) {
            int rc = tn_last_status();
            return rc < 0 ? rc
                          : tn_set_error(TN_ENOMEM, "out of memory allocating the %s result for out=",
                                         tn_dtype_info(m->dtype)->c10_name);
        }
        *target = tmp;
    }
    out->storage->version++;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: copies a temporary target into out (when
 * rc >= 0) and releases it; target == out is a no-op. */
int tn_dispatch_finish_out(int rc, struct tn_tensor *out, struct tn_tensor *target)
{
    if (target != out) {
        if (rc >= 0)
            rc = tn_copy_(out, target);
        tn_release(target);
    }
    return rc < 0 ? rc : TN_OK;
}
