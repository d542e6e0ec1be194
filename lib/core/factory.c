/*
 * core/factory.c: constructors (empty, zeros, ones, full, arange, linspace,
 * eye, from data or caller memory, *_like).
 */
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static enum tn_dtype tn_or_default(enum tn_dtype dtype)
{
    return dtype == TN_DTYPE_UNSET ? tn_get_default_dtype() : dtype;
}

struct tn_tensor *tn_empty_on(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                              struct tn_device device)
{
    int64_t numel;
    if (tn__check_sizes(sizes, ndim, &numel) != TN_OK)
        return NULL;
    dtype = tn_or_default(dtype);
    size_t es = tn_dtype_size(dtype);
    if ((uint64_t)numel > SIZE_MAX / es) {
        tn_set_error(TN_ENOMEM, "tensor of %lld elements is too large", (long long)numel);
        return NULL;
    }
    struct tn_storage *s = tn_storage_new((size_t)numel * es, device);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn__tensor_make(s, 0, sizes, NULL, ndim, dtype);
    tn_storage_release(s);
    return t;
}

struct tn_tensor *tn_empty(const int64_t *sizes, int ndim, enum tn_dtype dtype)
{
    return tn_empty_on(sizes, ndim, dtype, TN_CPU);
}

/* The storage size, in elements, that (sizes, strides, offset) needs. */
static int tn_required_elements(const int64_t *sizes, const int64_t *strides, int ndim,
                                int64_t offset, int64_t *out)
{
    int64_t need = offset + 1;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) {
            *out = 0;
            return TN_OK;
        }
        if (strides[i] < 0)
            return tn_set_error(TN_ESHAPE, "as_strided: Negative strides are not supported at the "
                                           "moment, got strides: [%lld]",
                                (long long)strides[i]);
        if (strides[i] && sizes[i] - 1 > (INT64_MAX - need) / strides[i])
            return tn_set_error(TN_ESHAPE, "the strides and sizes address beyond int64");
        need += (sizes[i] - 1) * strides[i];
    }
    *out = need;
    return TN_OK;
}

struct tn_tensor *tn_empty_strided(const int64_t *sizes, int ndim, const int64_t *strides,
                                   enum tn_dtype dtype)
{
    int64_t need;
    if (tn__check_sizes(sizes, ndim, NULL) != TN_OK ||
        tn_required_elements(sizes, strides, ndim, 0, &need) != TN_OK)
        return NULL;
    dtype = tn_or_default(dtype);
    struct tn_storage *s = tn_storage_new((size_t)need * tn_dtype_size(dtype), TN_CPU);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn__tensor_make(s, 0, sizes, strides, ndim, dtype);
    tn_storage_release(s);
    return t;
}

struct tn_tensor *tn_full(const int64_t *sizes, int ndim, struct tn_scalar value,
                          enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET) {
        switch (value.kind) {
        case TN_SCALAR_BOOL: dtype = TN_BOOL; break;
        case TN_SCALAR_INT: dtype = TN_INT64; break;
        case TN_SCALAR_FLOAT: dtype = tn_get_default_dtype(); break;
        case TN_SCALAR_COMPLEX: dtype = TN_COMPLEX64; break;
        }
    }
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && tn_fill_(t, value) != TN_OK) {
        tn_release(t);
        return NULL;
    }
    return t;
}

struct tn_tensor *tn_zeros(const int64_t *sizes, int ndim, enum tn_dtype dtype)
{
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t)
        memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

struct tn_tensor *tn_ones(const int64_t *sizes, int ndim, enum tn_dtype dtype)
{
    return tn_full(sizes, ndim, tn_int(1), tn_or_default(dtype));
}

struct tn_tensor *tn_scalar_tensor(struct tn_scalar value, enum tn_dtype dtype)
{
    return tn_full(NULL, 0, value, dtype);
}

struct tn_tensor *tn_zeros_like(const struct tn_tensor *t, enum tn_dtype dtype)
{
    struct tn_tensor *r = tn_empty_like(t, dtype);
    if (r)
        memset(r->storage->data, 0, r->storage->nbytes);
    return r;
}

struct tn_tensor *tn_full_like(const struct tn_tensor *t, struct tn_scalar value,
                               enum tn_dtype dtype)
{
    struct tn_tensor *r = tn_empty_like(t, dtype);
    if (r && tn_fill_(r, value) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn_ones_like(const struct tn_tensor *t, enum tn_dtype dtype)
{
    return tn_full_like(t, tn_int(1), dtype);
}

static bool tn_is_floatish(struct tn_scalar s)
{
    return s.kind == TN_SCALAR_FLOAT || s.kind == TN_SCALAR_COMPLEX;
}

struct tn_tensor *tn_arange(struct tn_scalar start, struct tn_scalar end, struct tn_scalar step,
                            enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_is_floatish(start) || tn_is_floatish(end) || tn_is_floatish(step)
                    ? tn_get_default_dtype()
                    : TN_INT64;
    if (tn_dtype_is_complex(dtype)) {
        tn_set_error(TN_EDTYPE, "\"arange_cpu\" not implemented for 'ComplexFloat'");
        return NULL;
    }
    double xs = tn_scalar_to_double(start), xe = tn_scalar_to_double(end);
    double xstep = tn_scalar_to_double(step);
    double size_d;
    if (dtype == TN_INT64) {
        int64_t is = tn_scalar_to_int64(start), ie = tn_scalar_to_int64(end);
        int64_t ist = tn_scalar_to_int64(step);
        if (ist == 0) {
            tn_set_error(TN_EINVAL, "step must be nonzero");
            return NULL;
        }
        size_d = ceil((double)(ie - is) / (double)ist);
    } else {
        size_d = ceil((xe - xs) / xstep);
    }
    if (xstep == 0) {
        tn_set_error(TN_EINVAL, "step must be nonzero");
        return NULL;
    }
    if (!isfinite(xs) || !isfinite(xe)) {
        tn_set_error(TN_EINVAL, "unsupported range: %g -> %g", xs, xe);
        return NULL;
    }
    if (!((xstep > 0 && xe >= xs) || (xstep < 0 && xe <= xs))) {
        tn_set_error(TN_EINVAL, "upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    if (!(size_d >= 0 && size_d <= (double)INT64_MAX)) {
        tn_set_error(TN_EINVAL,
                     "invalid size, possible overflow? start=%g, end=%g, step=%g", xs, xe, xstep);
        return NULL;
    }
    int64_t n = (int64_t)size_d;
    struct tn_tensor *t = tn_empty(TN_SHAPE(n), dtype);
    if (!t)
        return NULL;
    char *p = tn_data(t);
    size_t es = tn_dtype_size(dtype);
    if (dtype == TN_INT64 || tn_dtype_is_integral(dtype, false)) {
        /* integer arithmetic, as PyTorch's kernel does for integral types */
        int64_t is = tn_scalar_to_int64(start), ist = tn_scalar_to_int64(step);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)((uint64_t)is + (uint64_t)ist * (uint64_t)i);
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_INT64, 1);
        }
    } else if (dtype == TN_FLOAT16 || dtype == TN_BFLOAT16) {
        /* the accumulate type of half types is float */
        float fs = (float)xs, fst = (float)xstep;
        for (int64_t i = 0; i < n; i++) {
            float v = fs + fst * (float)i;
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_FLOAT32, 1);
        }
    } else {
        /* float32 and float64 accumulate in double */
        for (int64_t i = 0; i < n; i++) {
            double v = xs + xstep * (double)i;
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_FLOAT64, 1);
        }
    }
    return t;
}

/* linspace's per-type arithmetic: the step is computed in the element type
 * (double for integers), the first half counts up from start and the second
 * half down from end, as PyTorch's CPU kernel does. */
#define TN_LINSPACE(T, STEP_T)                                                                  \
    do {                                                                                        \
        T *o = tn_data(t);                                                                      \
        T a = (T)xs, b = (T)xe;                                                                 \
        STEP_T stp = ((STEP_T)b - (STEP_T)a) / (STEP_T)(steps - 1);                             \
        for (int64_t i = 0; i < steps; i++)                                                     \
            o[i] = i < half ? (T)(a + stp * (STEP_T)i) : (T)(b - stp * (STEP_T)(steps - i - 1)); \
    } while (0)

struct tn_tensor *tn_linspace(struct tn_scalar start, struct tn_scalar end, int64_t steps,
                              enum tn_dtype dtype)
{
    if (steps < 0) {
        tn_set_error(TN_EINVAL, "number of steps must be non-negative");
        return NULL;
    }
    dtype = tn_or_default(dtype);
    struct tn_tensor *t = tn_empty(TN_SHAPE(steps), dtype);
    if (!t || steps == 0)
        return t;
    double xs = tn_scalar_to_double(start), xe = tn_scalar_to_double(end);
    if (steps == 1) {
        tn_scalar_store(tn_data(t), dtype, start);
        return t;
    }
    int64_t half = steps / 2;
    switch (dtype) {
    case TN_FLOAT32: TN_LINSPACE(float, float); break;
    case TN_FLOAT64: TN_LINSPACE(double, double); break;
    case TN_INT64: TN_LINSPACE(int64_t, double); break;
    case TN_INT32: TN_LINSPACE(int32_t, double); break;
    case TN_INT16: TN_LINSPACE(int16_t, double); break;
    case TN_INT8: TN_LINSPACE(int8_t, double); break;
    case TN_UINT8: TN_LINSPACE(uint8_t, double); break;
    case TN_FLOAT16:
    case TN_BFLOAT16: {
        /* every operation rounds back to the 16-bit type, as c10::Half does */
        char *o = tn_data(t);
        float a, b, stp;
        tn_scalar_store(&a, TN_FLOAT32, start);
        tn_scalar_store(&b, TN_FLOAT32, end);
#define TN_R16(x) tn__round16((x), dtype)
        a = TN_R16(a);
        b = TN_R16(b);
        stp = TN_R16((b - a) / TN_R16((float)(steps - 1)));
        for (int64_t i = 0; i < steps; i++) {
            float v = i < half ? TN_R16(a + TN_R16(stp * TN_R16((float)i)))
                               : TN_R16(b - TN_R16(stp * TN_R16((float)(steps - i - 1))));
            tn_convert(o + i * 2, dtype, &v, TN_FLOAT32, 1);
        }
#undef TN_R16
        break;
    }
    default:
        tn_release(t);
        tn_set_error(TN_EDTYPE, "\"linspace_cpu\" not implemented for '%s'", tn_dtype_name(dtype));
        return NULL;
    }
    return t;
}

struct tn_tensor *tn_eye(int64_t n, int64_t m, enum tn_dtype dtype)
{
    if (m < 0)
        m = n;
    if (n < 0) {
        tn_set_error(TN_EINVAL, "n must be greater or equal to 0, got %lld", (long long)n);
        return NULL;
    }
    struct tn_tensor *t = tn_zeros(TN_SHAPE(n, m), dtype);
    if (!t)
        return NULL;
    size_t es = tn_dtype_size(t->dtype);
    char *p = tn_data(t);
    for (int64_t i = 0; i < n && i < m; i++)
        tn_scalar_store(p + (i * m + i) * (int64_t)es, t->dtype, tn_int(1));
    return t;
}

struct tn_tensor *tn_from_data(const void *data, const int64_t *sizes, int ndim,
                               enum tn_dtype dtype)
{
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && t->storage->nbytes)
        memcpy(t->storage->data, data, t->storage->nbytes);
    return t;
}

struct tn_tensor *tn_tensor_from_storage(struct tn_storage *storage, int64_t offset,
                                         const int64_t *sizes, int ndim, const int64_t *strides,
                                         enum tn_dtype dtype)
{
    int64_t need, cstr[TN_MAX_DIMS];
    if (tn__check_sizes(sizes, ndim, NULL) != TN_OK)
        return NULL;
    if (!strides) {
        tn_contiguous_strides(sizes, ndim, cstr);
        strides = cstr;
    }
    if (offset < 0) {
        tn_set_error(TN_ESHAPE, "Tensor: invalid storage offset %lld", (long long)offset);
        return NULL;
    }
    if (tn_required_elements(sizes, strides, ndim, offset, &need) != TN_OK)
        return NULL;
    size_t es = tn_dtype_size(dtype == TN_DTYPE_UNSET ? tn_get_default_dtype() : dtype);
    if ((uint64_t)need > storage->nbytes / es) {
        char buf[256], sbuf[256];
        tn_set_error(TN_ESHAPE,
                     "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu "
                     "requiring a storage size of %llu are out of bounds for storage of size %zu",
                     tn_shape_format(sizes, ndim, buf, sizeof buf),
                     tn_shape_format(strides, ndim, sbuf, sizeof sbuf), (long long)offset,
                     es, (unsigned long long)need * es, storage->nbytes);
        return NULL;
    }
    return tn__tensor_make(storage, offset, sizes, strides, ndim, tn_or_default(dtype));
}

struct tn_tensor *tn_from_blob(void *data, const int64_t *sizes, int ndim, const int64_t *strides,
                               enum tn_dtype dtype, tn_free_fn free_fn, void *ctx)
{
    int64_t need, cstr[TN_MAX_DIMS];
    if (tn__check_sizes(sizes, ndim, NULL) != TN_OK)
        return NULL;
    if (!strides) {
        tn_contiguous_strides(sizes, ndim, cstr);
        strides = cstr;
    }
    if (tn_required_elements(sizes, strides, ndim, 0, &need) != TN_OK)
        return NULL;
    dtype = tn_or_default(dtype);
    struct tn_storage *s = tn_storage_from_external(data, (size_t)need * tn_dtype_size(dtype),
                                                    TN_CPU, free_fn, ctx);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn__tensor_make(s, 0, sizes, strides, ndim, dtype);
    tn_storage_release(s);
    return t;
}
