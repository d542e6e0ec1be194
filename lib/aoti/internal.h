/*
 * lib/aoti/internal.h: what libtensor-aoti's files share.  libtensor-aoti
 * implements PyTorch's AOTInductor C shim (torch/csrc/inductor/aoti_torch/
 * c/shim.h and the generated c_shim_cpu.h: the aoti_torch_* functions a
 * package's compiled model calls) over libtensor's tensors, so that a
 * package made by torch._inductor.aoti_compile_and_package runs without
 * libtorch.  The names and signatures are PyTorch's (an ABI we do not
 * choose), hence no tn_ prefix on them.
 *
 * An AtenTensorHandle is a struct tn_tensor * owning one reference;
 * dtypes are c10::ScalarType numbers, devices c10::DeviceType numbers, as
 * PyTorch numbers them.  Every function returns AOTI_TORCH_SUCCESS (0) or
 * AOTI_TORCH_FAILURE (1) with tn_last_error() saying why.
 */
#ifndef TN_AOTI_INTERNAL_H
#define TN_AOTI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/core.h>

typedef struct tn_tensor *AtenTensorHandle;
typedef int32_t AOTITorchError;

#define AOTI_TORCH_SUCCESS 0
#define AOTI_TORCH_FAILURE 1

/* c10::DeviceType and c10::Layout numbers */
enum { TN__AOTI_CPU = 0, TN__AOTI_CUDA = 1, TN__AOTI_XPU = 12, TN__AOTI_MPS = 13,
       TN__AOTI_META = 14, TN__AOTI_PRIVATEUSE1 = 20 };
enum { TN__AOTI_STRIDED = 0 };

#define TN__AOTI_EXPORT __attribute__((visibility("default")))
/* Declares (exported) and starts the definition of a shim function:
 * SHIM(aoti_torch_get_dim, AtenTensorHandle t, int64_t *ret) { ... } */
#define SHIM(name, ...)                                                                       \
    TN__AOTI_EXPORT AOTITorchError name(__VA_ARGS__);                                        \
    AOTITorchError name(__VA_ARGS__)

/* 0 when rc is 0 (or a pointer result is non-NULL), else 1. */
static inline AOTITorchError tn__aoti_rc(int rc)
{
    return rc < 0 ? AOTI_TORCH_FAILURE : AOTI_TORCH_SUCCESS;
}
/* Stores t in *ret: success, or failure when t is NULL. */
AOTITorchError tn__aoti_ret(struct tn_tensor *t, AtenTensorHandle *ret);
/* A handle that must be a tensor: failure with a message for NULL. */
bool tn__aoti_bad(const struct tn_tensor *t, const char *fn);

/* The libtensor dtype of a c10::ScalarType number; TN_DTYPE_UNSET (with an
 * error naming fn) for one we lack. */
enum tn_dtype tn__aoti_dtype(int32_t scalar_type, const char *fn);
/* The device of a c10::DeviceType number: the CPU; anything else
 * fails with an error naming fn. */
int tn__aoti_device(int32_t device_type, const char *fn, struct tn_device *out);
/* A Python number for a double argument (beta, alpha) given to an op
 * whose result has dtype dt: an int for integral results. */
struct tn_scalar tn__aoti_scalar(double v, enum tn_dtype dt);

#endif
