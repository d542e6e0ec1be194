/*
 * dispatch/meta.c: the Meta device's allocator (shape-only runs) and the
 * allocation of a structured op's outputs from its meta function's result.
 */
#include <config.h>

#include <stdint.h>

#include <tensor/dispatch.h>

#include "core/internal.h"

/* A meta tensor has sizes and no bytes: its "data" is a pointer that
 * faults if anything reads it. */
static void *meta_alloc(size_t nbytes, int device_index, void *ctx)
{
    return (void *)(uintptr_t)TN_ALIGNMENT;
}
static void meta_free(void *ptr, int device_index, void *ctx) {}

/* At load, before any op can allocate: the Meta device's allocator (a
 * static table the registry keeps; never unregistered). */
__attribute__((constructor)) static void register_meta_allocator(void)
{
    static const struct tn_allocator a = {meta_alloc, meta_free, NULL};
    tn_register_allocator(TN_DEVICE_META, &a);
}

/* Contract in tensor/dispatch.h: a new uninitialised tensor (the caller's
 * reference) of m's sizes and dtype on `device`, contiguous, or dense in
 * the order m->strides gives when m->strided; NULL with the error for sizes
 * tn__check_sizes refuses or a failed allocation. m is the op's meta
 * function's result, trusted as the library's own (not user input). */
struct tn_tensor *tn_dispatch_meta_alloc(const struct tn_meta *m, struct tn_device device)
{
    if (m->dtype == TN_DTYPE_UNSET)
        return tn_empty_on(m->sizes, m->ndim, m->dtype, device);
    if (m->strided) { /* dense in another order: as many elements */
        int64_t numel;
        if (tn__check_sizes(m->sizes, m->ndim, &numel) != TN_OK)
            return NULL;
        struct tn_storage *s = tn_storage_new((size_t)numel * tn_dtype_size(m->dtype), device);
        if (!s)
            return NULL;
        struct tn_tensor *t = tn__tensor_make(s, 0, m->sizes, m->strides, m->ndim, m->dtype);
        tn_storage_release(s);
        return t;
    }
    return tn__tensor_new(m->sizes, m->ndim, m->dtype, device);
}
