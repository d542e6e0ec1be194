/*
 * core/storage.c: refcounted blocks of bytes, owned or external, and the
 * small-block cache behind tensor and storage structs.
 */
#include "core/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* --- small-block cache --------------------------------------------------
 *
 * A call on tiny tensors spends a third of its time in malloc: calloc of
 * the tensor struct, calloc of the storage struct and aligned_alloc of the
 * data (glibc's slow memalign path). Each thread keeps short free lists of
 * tensor structs and of storages whose data is one of a few small CPU
 * capacity classes, reused as a unit. Lists are per thread, so no lock; a
 * struct released on another thread than the one that made it simply joins
 * that thread's list. Lists are capped, and a thread's lists are freed when
 * the thread exits. A sanitizer build (TN_SANITIZE) bypasses the cache so
 * that ASan and LeakSanitizer see every allocation and free. */

#define TN_CACHE_TENSORS 64   /* tensor structs kept per thread */
#define TN_CACHE_STORAGES 32  /* storages kept per thread and class */
#define TN_CACHE_CLASSES 3    /* data capacities 64, 256, 1024 bytes */

/* A storage as the library allocates it: the public struct first, then
 * what the cache needs to know to reuse its data block. */
struct tn_storage_block {
    struct tn_storage s;
    int cls; /* capacity class of s.data, -1: not cacheable */
    struct tn_allocator alloc; /* who made s.data (free_fn NULL); frees it */
};

static size_t tn_class_bytes(int cls) { return (size_t)64 << (2 * cls); }

static int tn_class_of(size_t nbytes)
{
    for (int c = 0; c < TN_CACHE_CLASSES; c++)
        if (nbytes <= tn_class_bytes(c))
            return c;
    return -1;
}

#ifndef TN_SANITIZE
struct tn_block_cache {
    int ntensors;
    struct tn_tensor *tensors[TN_CACHE_TENSORS];
    int nstorages[TN_CACHE_CLASSES];
    struct tn_storage_block *storages[TN_CACHE_CLASSES][TN_CACHE_STORAGES];
    bool closed; /* the thread is exiting, or no cache could be made: keep nothing */
};

/* This thread's cache, made at its first release of a block; a pointer so
 * that it takes 8 bytes of static TLS.  Per thread so that the allocate and
 * release paths, which read it on every block, take no lock; only this
 * thread reads and fills it, and at its exit tn_cache_key's destructor frees
 * the blocks it holds. */
static _Thread_local struct tn_block_cache *tn_cache TN_TLS_IE;
/* Where tn_cache points once nothing may be cached on this thread (never
 * written: every store checks `closed` first). */
static struct tn_block_cache tn_cache_closed = {.closed = true};
static pthread_key_t tn_cache_key;
static pthread_once_t tn_cache_once = PTHREAD_ONCE_INIT;
static bool tn_cache_key_ok;

/* At thread exit: frees what the cache holds and the cache. */
static void tn_cache_drain(void *arg)
{
    struct tn_block_cache *c = arg;
    for (int i = 0; i < c->ntensors; i++)
        free(c->tensors[i]);
    for (int k = 0; k < TN_CACHE_CLASSES; k++) {
        for (int i = 0; i < c->nstorages[k]; i++) {
            struct tn_storage_block *b = c->storages[k][i];
            b->alloc.free(b->s.data, 0, b->alloc.ctx);
            free(b);
        }
    }
    free(c);
    tn_cache = &tn_cache_closed;
}

static void tn_cache_key_init(void) { tn_cache_key_ok = pthread_key_create(&tn_cache_key, tn_cache_drain) == 0; }

/* Makes this thread's cache, registered for release at thread exit. */
static __attribute__((noinline)) struct tn_block_cache *tn_cache_open(void)
{
    pthread_once(&tn_cache_once, tn_cache_key_init);
    struct tn_block_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL; /* tried again at the next release */
    if (!tn_cache_key_ok || pthread_setspecific(tn_cache_key, c) != 0) {
        free(c);
        c = &tn_cache_closed;
    }
    tn_cache = c;
    return c->closed ? NULL : c;
}

/* This thread's cache to keep a released block in; NULL when none. */
static inline struct tn_block_cache *tn_cache_put(void)
{
    struct tn_block_cache *c = tn_cache;
    if (__builtin_expect(c != NULL, 1))
        return c->closed ? NULL : c;
    return tn_cache_open();
}
#endif

struct tn_tensor *tn__tensor_alloc(void)
{
#ifndef TN_SANITIZE
    struct tn_block_cache *c = tn_cache;
    if (c && c->ntensors > 0) {
        /* not zeroed here: tn__tensor_make sets every field (an inlined
         * memset of the whole struct cost more than the rest of the
         * reuse) */
        return c->tensors[--c->ntensors];
    }
#endif
    return calloc(1, sizeof(struct tn_tensor));
}

void tn__tensor_free(struct tn_tensor *t)
{
#ifndef TN_SANITIZE
    struct tn_block_cache *c = tn_cache_put();
    if (c && c->ntensors < TN_CACHE_TENSORS) {
        c->tensors[c->ntensors++] = t;
        return;
    }
#endif
    free(t);
}

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
    int cls = device.type == TN_DEVICE_CPU ? tn_class_of(nbytes) : -1;
    struct tn_storage_block *b = NULL;
#ifndef TN_SANITIZE
    if (cls >= 0) {
        struct tn_block_cache *c = tn_cache;
        /* a block is reused only if the allocator that made it is still
         * the registered one (tn_register_allocator may replace it) */
        while (c && c->nstorages[cls] > 0) {
            b = c->storages[cls][--c->nstorages[cls]];
            if (b->alloc.alloc == a->alloc && b->alloc.ctx == a->ctx)
                break;
            b->alloc.free(b->s.data, 0, b->alloc.ctx);
            free(b);
            b = NULL;
        }
        if (b) {
            void *data = b->s.data;
            memset(&b->s, 0, sizeof b->s);
            b->s.data = data;
            b->s.refcount = 1;
            b->s.nbytes = nbytes;
            b->s.device = device;
            return &b->s;
        }
    }
#endif
    b = calloc(1, sizeof *b);
    if (!b)
        goto oom;
    /* a small CPU block gets its class's whole capacity, so that the cache
     * can hand it to any request of the class */
    b->s.data = a->alloc(cls >= 0 ? tn_class_bytes(cls) : nbytes, device.index, a->ctx);
    if (!b->s.data) {
        free(b);
        goto oom;
    }
    b->cls = cls;
    b->alloc = *a;
    b->s.refcount = 1;
    b->s.nbytes = nbytes;
    b->s.device = device;
    return &b->s;
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
    struct tn_storage_block *b = calloc(1, sizeof *b);
    if (!b) {
        tn_set_error(TN_ENOMEM, "out of memory allocating a storage");
        return NULL;
    }
    b->cls = -1;
    struct tn_storage *s = &b->s;
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

int tn__storage_zero(struct tn_storage *s)
{
    if (!s->nbytes || s->device.type == TN_DEVICE_META)
        return TN_OK;
    if (s->device.type == TN_DEVICE_CPU) {
        memset(s->data, 0, s->nbytes);
        return TN_OK;
    }
    const struct tn_device_backend *be = tn__device_backend(s->device.type);
    return be ? be->memzero(s->data, s->device, s->nbytes) : tn_last_status();
}

void tn_storage_release(struct tn_storage *s)
{
    if (!s || !tn__unref(&s->refcount))
        return;
    struct tn_storage_block *b = (struct tn_storage_block *)s;
    if (s->free_fn) {
        s->free_fn(s->data, s->nbytes, s->free_ctx);
        free(b);
        return;
    }
#ifndef TN_SANITIZE
    if (b->cls >= 0) {
        struct tn_block_cache *c = tn_cache_put();
        if (c && c->nstorages[b->cls] < TN_CACHE_STORAGES) {
            c->storages[b->cls][c->nstorages[b->cls]++] = b;
            return;
        }
    }
#endif
    b->alloc.free(s->data, s->device.index, b->alloc.ctx);
    free(b);
}
