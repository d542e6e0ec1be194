/*
 * ops/cuda/backend.cu: libtensor's CUDA backend, built as its own shared object
 * (libtensor-cuda.so) that libtensor loads on the first use of a CUDA tensor,
 * so CPU-only programs never need the CUDA libraries at run time.
 *
 * It registers the device allocator and the host/device copy with the core,
 * through the callbacks the core hands it (it does not link libtensor).
 */
#include <cuda_runtime.h>

extern "C" {
#include "core/internal.h"

static const struct tn_backend_host *tn_host;

static int tn_cuda_fail(cudaError_t err, const char *what)
{
    return tn_host->set_error(err == cudaErrorMemoryAllocation ? TN_ENOMEM : TN_EDEVICE,
                        "CUDA error during %s: %s", what, cudaGetErrorString(err));
}

static void *tn_cuda_alloc(size_t nbytes, int device_index, void *ctx)
{
    (void)ctx;
    void *p = NULL;
    if (device_index >= 0) {
        cudaError_t e = cudaSetDevice(device_index);
        if (e != cudaSuccess) {
            tn_cuda_fail(e, "cudaSetDevice");
            return NULL;
        }
    }
    cudaError_t e = cudaMalloc(&p, nbytes ? nbytes : 1);
    if (e != cudaSuccess) {
        tn_cuda_fail(e, "cudaMalloc");
        return NULL;
    }
    return p;
}

static void tn_cuda_free(void *ptr, int device_index, void *ctx)
{
    (void)device_index;
    (void)ctx;
    cudaFree(ptr);
}

static int tn_cuda_memcpy(void *dst, struct tn_device ddev, const void *src,
                          struct tn_device sdev, size_t nbytes)
{
    cudaMemcpyKind kind = ddev.type == TN_DEVICE_CUDA
                              ? (sdev.type == TN_DEVICE_CUDA ? cudaMemcpyDeviceToDevice
                                                             : cudaMemcpyHostToDevice)
                              : cudaMemcpyDeviceToHost;
    cudaError_t e = cudaMemcpy(dst, src, nbytes, kind);
    return e == cudaSuccess ? TN_OK : tn_cuda_fail(e, "cudaMemcpy");
}

static int tn_cuda_memzero(void *dst, struct tn_device dev, size_t nbytes)
{
    (void)dev;
    cudaError_t e = cudaMemset(dst, 0, nbytes);
    return e == cudaSuccess ? TN_OK : tn_cuda_fail(e, "cudaMemset");
}

static int tn_cuda_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* The entry point libtensor looks up after dlopen: registers the CUDA
 * allocator and fills in the backend's functions. Returns 0, or an error
 * when no CUDA device is usable. */
int tn_cuda_backend_init(const struct tn_backend_host *host, struct tn_device_backend *out)
{
    tn_host = host;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return host->set_error(TN_EDEVICE, "no usable CUDA device: %s", cudaGetErrorString(e));
    if (n == 0)
        return host->set_error(TN_EDEVICE, "no CUDA device is present");
    struct tn_allocator a = {tn_cuda_alloc, tn_cuda_free, NULL};
    host->register_allocator(TN_DEVICE_CUDA, &a);
    out->memcpy = tn_cuda_memcpy;
    out->memzero = tn_cuda_memzero;
    out->device_count = tn_cuda_device_count;
    return TN_OK;
}

} /* extern "C" */
