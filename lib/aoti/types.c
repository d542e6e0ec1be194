/*
 * lib/aoti/types.c: the shim's numbering of dtypes, devices, layouts and
 * memory formats (c10's enums), and their conversions to libtensor's.
 */
#include "aoti/internal.h"

#define NUM(name, value)                                                                     \
    TN__AOTI_EXPORT int32_t aoti_torch_##name(void);                                         \
    int32_t aoti_torch_##name(void) { return value; }

NUM(device_type_cpu, TN__AOTI_CPU)
NUM(device_type_cuda, TN__AOTI_CUDA)
NUM(device_type_meta, TN__AOTI_META)
NUM(device_type_xpu, TN__AOTI_XPU)
NUM(device_type_mps, TN__AOTI_MPS)
NUM(device_type_privateuse1, TN__AOTI_PRIVATEUSE1)

/* c10::ScalarType */
NUM(dtype_uint8, 0)
NUM(dtype_int8, 1)
NUM(dtype_int16, 2)
NUM(dtype_int32, 3)
NUM(dtype_int64, 4)
NUM(dtype_float16, 5)
NUM(dtype_float32, 6)
NUM(dtype_float64, 7)
NUM(dtype_complex32, 8)
NUM(dtype_complex64, 9)
NUM(dtype_complex128, 10)
NUM(dtype_bool, 11)
NUM(dtype_bfloat16, 15)
NUM(dtype_float8_e5m2, 23)
NUM(dtype_float8_e4m3fn, 24)
NUM(dtype_float8_e5m2fnuz, 25)
NUM(dtype_float8_e4m3fnuz, 26)
NUM(dtype_uint16, 27)
NUM(dtype_uint32, 28)
NUM(dtype_uint64, 29)

/* c10::Layout */
NUM(layout_strided, TN__AOTI_STRIDED)
NUM(layout_sparse_coo, 1)
NUM(layout_sparse_csr, 2)
NUM(layout_sparse_csc, 3)
NUM(layout_sparse_bsr, 4)
NUM(layout_sparse_bsc, 5)
NUM(layout__mkldnn, 6)
NUM(layout_jagged, 7)

/* c10::MemoryFormat */
NUM(memory_format_contiguous_format, 0)
NUM(memory_format_preserve_format, 1)
NUM(memory_format_channels_last, 2)
NUM(memory_format_channels_last_3d, 3)

enum tn_dtype tn__aoti_dtype(int32_t scalar_type, const char *fn)
{
    for (int d = 0; d < TN_NUM_ALL_DTYPES; d++)
        if (tn_dtype_info((enum tn_dtype)d)->scalar_type == scalar_type)
            return (enum tn_dtype)d;
    tn_set_error(TN_EDTYPE, "%s: dtype %d (a c10::ScalarType) is not one libtensor has", fn,
                 (int)scalar_type);
    return TN_DTYPE_UNSET;
}

TN__AOTI_EXPORT size_t aoti_torch_dtype_element_size(int32_t dtype);
size_t aoti_torch_dtype_element_size(int32_t dtype)
{
    enum tn_dtype d = tn__aoti_dtype(dtype, "aoti_torch_dtype_element_size");
    return d == TN_DTYPE_UNSET ? 0 : tn_dtype_size(d);
}

int tn__aoti_device(int32_t device_type, const char *fn, struct tn_device *out)
{
    if (device_type == TN__AOTI_CPU) {
        *out = TN_CPU;
        return 0;
    }
    return tn_set_error(TN_EDEVICE, "%s: device type %d (a c10::DeviceType) is not supported: "
                        "libtensor-aoti runs CPU packages", fn, (int)device_type);
}

struct tn_scalar tn__aoti_scalar(double v, enum tn_dtype dt)
{
    if (tn_dtype_is_integral(dt, true) && v == (double)(int64_t)v)
        return tn_int((int64_t)v);
    return tn_float(v);
}

AOTITorchError tn__aoti_ret(struct tn_tensor *t, AtenTensorHandle *ret)
{
    if (!t)
        return AOTI_TORCH_FAILURE;
    *ret = t;
    return AOTI_TORCH_SUCCESS;
}

bool tn__aoti_bad(const struct tn_tensor *t, const char *fn)
{
    if (t)
        return false;
    tn_set_error(TN_EINVAL, "%s: a null tensor handle", fn);
    return true;
}
