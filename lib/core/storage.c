/*
 * core/storage.c: refcounted blocks of bytes, owned or external.
 */
#include "core/internal.h"

#include <stdlib.h>


struct tn_storage *tn_storage_new(size_t nbytes, struct tn_device device)
{
    /* the CUDA allocator registers itself when its backend loads */
    if (device.type == TN_DEVICE_CUDA && !tn__device_backend(TN_DEVICE_CUDA))
        return NULL;
    const struct tn_allocator *a = tn__allocator(device.type);
    if (!a) {
        char buf[32];
        tn_set_error(TN_EDEVICE, "no backend for device '%s' is loaded",
                     tn_device_format(device, buf, sizeof buf));
        return NULL;
    }
    struct tn_storage *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->data = a->alloc(nbytes, device.index, a->ctx);
    if (!s->data) {
        free(s);
        goto oom;
    }
    s->refcount = 1;
    s->nbytes = nbytes;
    s->device = device;
    return s;
oom:
    tn_set_error(TN_ENOMEM, "DefaultCPUAllocator: not enough memory: you tried to allocate %zu bytes",
                 nbytes);
    return NULL;
}

static void tn_free_nothing(void *data, size_t nbytes, void *ctx)
{
    (void)data;
    (void)nbytes;
    (void)ctx;
}

struct tn_storage *tn_storage_from_external(void *data, size_t nbytes, struct tn_device device,
                                            tn_free_fn free_fn, void *ctx)
{
    struct tn_storage *s = calloc(1, sizeof *s);
    if (!s) {
        tn_set_error(TN_ENOMEM, "out of memory allocating a storage");
        return NULL;
    }
    s->refcount = 1;
    s->data = data;
    s->nbytes = nbytes;
    s->device = device;
    /* A borrowed block must never reach the device allocator. */
    s->free_fn = free_fn ? free_fn : tn_free_nothing;
    s->free_ctx = ctx;
    return s;
}

struct tn_storage *tn_storage_retain(struct tn_storage *s)
{
    if (s)
        TN_ATOMIC_INC(&s->refcount);
    return s;
}

void tn_storage_release(struct tn_storage *s)
{
    if (!s || TN_ATOMIC_DEC(&s->refcount) > 0)
        return;
    if (s->free_fn) {
        s->free_fn(s->data, s->nbytes, s->free_ctx);
    } else {
        const struct tn_allocator *a = tn__allocator(s->device.type);
        TN_ASSERT(a != NULL);
        a->free(s->data, s->device.index, a->ctx);
    }
    free(s);
}
