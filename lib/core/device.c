/*
 * core/device.c: device names and the per-device allocator registry.
 */
#include "core/internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *tn_cpu_alloc(size_t nbytes, int device_index, void *ctx)
{
    (void)device_index;
    (void)ctx;
    /* aligned_alloc wants a multiple of the alignment; zero-size storages
     * still get a unique pointer. */
    size_t n = (nbytes + TN_ALIGNMENT - 1) / TN_ALIGNMENT * TN_ALIGNMENT;
    /* large blocks come from the cache (core/cpu_cache.c) */
    void *p = tn__cpu_cache_alloc(nbytes);
    return p ? p : aligned_alloc(TN_ALIGNMENT, n ? n : TN_ALIGNMENT);
}

static void tn_cpu_free(void *ptr, int device_index, void *ctx)
{
    (void)device_index;
    (void)ctx;
    if (!tn__cpu_cache_free(ptr))
        free(ptr);
}

static struct tn_allocator tn_allocators[3] = {
    [TN_DEVICE_CPU] = {tn_cpu_alloc, tn_cpu_free, NULL},
};

void tn_register_allocator(enum tn_device_type type, const struct tn_allocator *alloc)
{
    TN_ASSERT(type >= 0 && type < 3);
    tn_allocators[type] = *alloc;
}

/* The allocator for `type`, or NULL when no backend registered one. */
const struct tn_allocator *tn__allocator(enum tn_device_type type)
{
    TN_ASSERT(type >= 0 && type < 3);
    return tn_allocators[type].alloc ? &tn_allocators[type] : NULL;
}

int tn_device_parse(const char *text, struct tn_device *out)
{
    if (strcmp(text, "cpu") == 0) {
        *out = TN_CPU;
        return TN_OK;
    }
    if (strcmp(text, "meta") == 0) {
        *out = (struct tn_device){TN_DEVICE_META, -1};
        return TN_OK;
    }
    if (strncmp(text, "cuda", 4) == 0) {
        const char *p = text + 4;
        if (*p == '\0') {
            *out = (struct tn_device){TN_DEVICE_CUDA, -1};
            return TN_OK;
        }
        char *end;
        long idx = *p == ':' ? strtol(p + 1, &end, 10) : -1;
        if (*p == ':' && p[1] >= '0' && p[1] <= '9' && *end == '\0' && idx < 1024) {
            *out = (struct tn_device){TN_DEVICE_CUDA, (int)idx};
            return TN_OK;
        }
    }
    return tn_set_error(TN_EINVAL,
                        "Expected one of cpu, cuda, meta device type at start of device string: %s",
                        text);
}

char *tn_device_format(struct tn_device dev, char *buf, size_t len)
{
    static const char *const names[] = {"cpu", "cuda", "meta"};
    if (dev.index >= 0)
        snprintf(buf, len, "%s:%d", names[dev.type], dev.index);
    else
        snprintf(buf, len, "%s", names[dev.type]);
    return buf;
}

bool tn_device_equal(struct tn_device a, struct tn_device b)
{
    return a.type == b.type && a.index == b.index;
}

/* ------------------------------------------------------- device backends */

static pthread_once_t tn_cuda_once = PTHREAD_ONCE_INIT;
static struct tn_device_backend tn_cuda_backend;
static int tn_cuda_status = TN_EDEVICE;
static char tn_cuda_error[512];

/* Loads libtensor-cuda.so: $TN_CUDA_BACKEND, else the installed copy, else
 * the dynamic linker's search path. */
static void tn_cuda_load(void)
{
    const char *env = getenv("TN_CUDA_BACKEND");
    const char *paths[] = {env && *env ? env : NULL, TN_PKGLIBDIR "/libtensor-cuda.so",
                           "libtensor-cuda.so"};
    void *h = NULL;
    char why[400] = "";
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !h; i++) {
        if (!paths[i])
            continue;
        h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = h ? NULL : dlerror();
        if (e && !why[0]) /* the first failure says the most */
            snprintf(why, sizeof why, "%s", e);
    }
#ifndef TN_HAVE_CUDA
    if (!h && !(env && *env))
        snprintf(why, sizeof why, "libtensor was built without CUDA (configure found no CUDA Toolkit)");
#endif
    if (!h) {
        snprintf(tn_cuda_error, sizeof tn_cuda_error, "CUDA support is not available: %s", why);
        return;
    }
    tn_backend_init_fn init = (tn_backend_init_fn)dlsym(h, "tn_cuda_backend_init");
    if (!init) {
        snprintf(tn_cuda_error, sizeof tn_cuda_error,
                 "CUDA support is not available: libtensor-cuda.so lacks tn_cuda_backend_init");
        return;
    }
    static const struct tn_backend_host host = {tn_set_error, tn_register_allocator};
    tn_cuda_status = init(&host, &tn_cuda_backend);
    if (tn_cuda_status != TN_OK)
        snprintf(tn_cuda_error, sizeof tn_cuda_error, "CUDA support is not available: %s",
                 tn_last_error());
}

const struct tn_device_backend *tn__device_backend(enum tn_device_type type)
{
    TN_ASSERT(type == TN_DEVICE_CUDA);
    pthread_once(&tn_cuda_once, tn_cuda_load);
    if (tn_cuda_status != TN_OK) {
        tn_set_error(TN_EDEVICE, "%s", tn_cuda_error);
        return NULL;
    }
    return &tn_cuda_backend;
}
