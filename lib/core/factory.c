/*
 * core/factory.c: constructors (empty, zeros, ones, full, arange, linspace,
 * eye, from data or caller memory, *_like).
 */
#include "core/internal.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum tn_dtype tn_or_default(enum tn_dtype dtype)
{
    return dtype == TN_DTYPE_UNSET ? tn_get_default_dtype() : dtype;
}

struct tn_tensor *tn_empty_on(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                              struct tn_device device)
{
    return tn__tensor_new(sizes, ndim, tn_or_default(dtype), device);
}

struct tn_tensor *tn_empty(const int64_t *sizes, int ndim, enum tn_dtype dtype)
{
    return tn_empty_on(sizes, ndim, dtype, TN_CPU);
}

/* The storage size, in elements, that (sizes, strides, offset) needs, into *out; TN_ESHAPE
 * where it does not fit in int64 (sizes, strides and offsets come from files: every sum and
 * product is checked before it is made). offset must be >= 0. */
static int tn_required_elements(const int64_t *sizes, const int64_t *strides, int ndim,
                                int64_t offset, int64_t *out)
{
    if (offset == INT64_MAX)
        return tn_set_error(TN_ESHAPE, "storage offset %lld addresses beyond int64",
                            (long long)offset);
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

/* The bytes that `need` elements of `dtype` take, into *out; TN_ESHAPE where the product
 * does not fit in size_t (it would wrap to a small allocation that the tensor overruns). */
static int tn_required_bytes(int64_t need, enum tn_dtype dtype, size_t *out)
{
    size_t es = tn_dtype_size(dtype);
    if ((uint64_t)need > SIZE_MAX / es)
        return tn_set_error(TN_ESHAPE, "%lld elements of %zu bytes address beyond size_t",
                            (long long)need, es);
    *out = (size_t)need * es;
    return TN_OK;
}

struct tn_tensor *tn_empty_strided(const int64_t *sizes, int ndim, const int64_t *strides,
                                   enum tn_dtype dtype)
{
    int64_t need;
    if (tn__check_sizes(sizes, ndim, NULL) != TN_OK)
        return NULL;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) {
            /* PyTorch's storage size arithmetic overflows on it */
            char a[256], b[256];
            tn_set_error(TN_ESHAPE, "Storage size calculation overflowed with sizes=%s and "
                                    "strides=%s",
                         tn_shape_format(sizes, ndim, a, sizeof a),
                         tn_shape_format(strides, ndim, b, sizeof b));
            return NULL;
        }
    }
    if (tn_required_elements(sizes, strides, ndim, 0, &need) != TN_OK)
        return NULL;
    dtype = tn_or_default(dtype);
    size_t bytes = 0;
    if (tn_required_bytes(need, dtype, &bytes) != TN_OK)
        return NULL;
    struct tn_storage *s = tn_storage_new(bytes, TN_CPU);
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
        case TN_SCALAR_COMPLEX: dtype = tn__dtype_complex(tn_get_default_dtype()); break;
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
    /* PyTorch 2.x checks this itself (1.13: "Trying to create tensor with
     * negative dimension", as empty and ones still say) */
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) {
            tn_set_error(TN_ESHAPE, "zeros: Dimension size must be non-negative.");
            return NULL;
        }
    }
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && tn__storage_zero(t->storage) != TN_OK) {
        tn_release(t);
        return NULL;
    }
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

/* A Meta tensor has sizes and no values (its storage has no bytes): the
 * *_like factories give it the shape alone, as PyTorch's meta kernels do.
 * zeros_like zeroes the new storage on its device (a CUDA tensor's bytes
 * are not the host's to memset). */
struct tn_tensor *tn_zeros_like(const struct tn_tensor *t, enum tn_dtype dtype)
{
    struct tn_tensor *r = tn_empty_like(t, dtype);
    if (r && tn__storage_zero(r->storage) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn_full_like(const struct tn_tensor *t, struct tn_scalar value,
                               enum tn_dtype dtype)
{
    struct tn_tensor *r = tn_empty_like(t, dtype);
    if (r && r->device.type != TN_DEVICE_META && tn_fill_(r, value) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn_ones_like(const struct tn_tensor *t, enum tn_dtype dtype)
{
    return tn_full_like(t, tn_int(1), dtype);
}

/* PyTorch's name of a dtype in "not implemented for 'Bool'" messages: the
 * storage class less "Storage" (Float, Long, Bool, ComplexFloat, ...). */
static void tn_scalar_type_name(enum tn_dtype dtype, char *buf, size_t len)
{
    snprintf(buf, len, "%s", tn_dtype_info(dtype)->c10_name);
}

static bool tn_is_floatish(struct tn_scalar s)
{
    return s.kind == TN_SCALAR_FLOAT || s.kind == TN_SCALAR_COMPLEX;
}

/* Rounds to float16 or bfloat16, keeping the value as a float. */
#define TN_R16(x) tn__round16((float)(x), dtype)

/*
 * torch.arange as PyTorch 2.x computes it on a CPU with AVX2, so values
 * agree bit for bit.  The size comes from the double values of the
 * arguments, also for integer dtypes (1.13 refused a fractional step there
 * as "step must be nonzero" and sized int64 ranges in integers); integer
 * dtypes then count from the truncated start by the truncated step.
 * Floating dtypes are written the way PyTorch's vectorised kernel writes
 * them: runs of two vectors (8 floats, 4 doubles or 16 halves each) start
 * from `start + step * first` and add `k * step` for the k-th lane, the
 * elements after the last whole run come from `start + step * i`, and the
 * compiler fuses those multiply-adds (fma), except for bfloat16.  Ranges
 * above PyTorch's grain (32768 elements) are split between threads there,
 * which moves the runs; we follow the single-threaded split.
 */
struct tn_tensor *tn_arange(struct tn_scalar start, struct tn_scalar end, struct tn_scalar step,
                            enum tn_dtype dtype)
{
    char name[32];
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_is_floatish(start) || tn_is_floatish(end) || tn_is_floatish(step)
                    ? tn_get_default_dtype()
                    : TN_INT64;
    if (tn_dtype_is_complex(dtype) || dtype == TN_BOOL || tn_dtype_is_storage_only(dtype)) {
        tn_scalar_type_name(dtype, name, sizeof name);
        tn_set_error(TN_EDTYPE, "\"arange_cpu\" not implemented for '%s'", name);
        return NULL;
    }
    /* the arguments must fit the accumulate type: int64 for integer
     * dtypes, float for float16/bfloat16, double otherwise */
    enum tn_dtype acc = tn_dtype_is_integral(dtype, false) ? TN_INT64
                        : dtype == TN_FLOAT16 || dtype == TN_BFLOAT16 ? TN_FLOAT32
                                                                       : TN_FLOAT64;
    if (tn__scalar_check(start, acc) != TN_OK || tn__scalar_check(end, acc) != TN_OK ||
        tn__scalar_check(step, acc) != TN_OK)
        return NULL;
    double xs = tn_scalar_to_double(start), xe = tn_scalar_to_double(end);
    double xstep = tn_scalar_to_double(step);
    if (xstep == 0) {
        tn_set_error(TN_EINVAL, "step must be nonzero");
        return NULL;
    }
    if (!isfinite(xs) || !isfinite(xe)) {
        tn_set_error(TN_EINVAL, "unsupported range: %g -> %g", xs, xe);
        return NULL;
    }
    /* 1.13 said "larger bound" */
    if (!((xstep > 0 && xe >= xs) || (xstep < 0 && xe <= xs))) {
        tn_set_error(TN_EINVAL, "upper bound and lower bound inconsistent with step sign");
        return NULL;
    }
    double size_d = ceil((xe - xs) / xstep);
    if (!(size_d >= 0 && size_d <= (double)INT64_MAX)) {
        tn_set_error(TN_EINVAL, "invalid size, possible overflow?");
        return NULL;
    }
    int64_t n = (int64_t)size_d;
    struct tn_tensor *t = tn_empty(TN_SHAPE(n), dtype);
    if (!t)
        return NULL;
    char *p = tn_data(t);
    size_t es = tn_dtype_size(dtype);
    if (tn_dtype_is_integral(dtype, false)) {
        int64_t is = tn_scalar_to_int64(start), ist = tn_scalar_to_int64(step);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)((uint64_t)is + (uint64_t)ist * (uint64_t)i);
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_INT64, 1);
        }
        return t;
    }
    int64_t lanes = dtype == TN_FLOAT32 ? 8 : dtype == TN_FLOAT64 ? 4 : 16;
    int64_t vec_end = n - n % (2 * lanes);
    for (int64_t i = 0; i < n; i++) {
        int64_t first = i - i % lanes, k = i % lanes;
        if (dtype == TN_FLOAT32) {
            float v = i < vec_end ? (float)fma((double)k, xstep, (float)fma(xstep, (double)first, xs))
                                  : (float)fma(xstep, (double)i, xs);
            memcpy(p + i * 4, &v, 4);
        } else if (dtype == TN_FLOAT64) {
            double v = i < vec_end ? fma((double)k, xstep, fma(xstep, (double)first, xs))
                                   : fma(xstep, (double)i, xs);
            memcpy(p + i * 8, &v, 8);
        } else {
            /* float16 accumulates in float with fused steps (1.13 did not
             * fuse them); bfloat16 rounds each product and sum */
            float fs = (float)xs, fst = (float)xstep, v;
            if (dtype == TN_FLOAT16)
                v = i < vec_end ? TN_R16(fmaf((float)k, fst, TN_R16(fmaf(fst, (float)first, fs))))
                                : TN_R16(fmaf(fst, (float)i, fs));
            else
                v = i < vec_end ? TN_R16(TN_R16(fs + fst * (float)first) + (float)k * fst)
                                : TN_R16(fs + fst * (float)i);
            tn_convert(p + i * 2, dtype, &v, TN_FLOAT32, 1);
        }
    }
    return t;
}

/* linspace's complex steps: each part as the real dtype R's, from both ends;
 * CPX makes an element from its parts. */
#define TN_LINSPACE_CPX(T, R, FMA, CPX)                                                        \
    do {                                                                                       \
        R ar = (R)tn_scalar_to_double(start), br = (R)tn_scalar_to_double(end);                \
        R ai = start.kind == TN_SCALAR_COMPLEX ? (R)start.v.c.im : 0;                          \
        R bi = end.kind == TN_SCALAR_COMPLEX ? (R)end.v.c.im : 0;                              \
        R sr = (br - ar) / (R)(steps - 1), si = (bi - ai) / (R)(steps - 1);                    \
        T *o = (T *)p;                                                                         \
        for (int64_t i = 0; i < steps; i++) {                                                  \
            R m = (R)(i < half ? i : steps - i - 1);                                           \
            R re = i < half ? FMA(sr, m, ar) : FMA(-sr, m, br);                                \
            R im = i < half ? FMA(si, m, ai) : FMA(-si, m, bi);                                \
            o[i] = CPX(re, im);                                                                \
        }                                                                                      \
    } while (0)

/* linspace's and logspace's result: [steps] of dtype (the default where
 * unset), or NULL with PyTorch's words for negative steps and for a dtype
 * its kernel `op` lacks (bool, unless bool_ok). */
static struct tn_tensor *space_result(const char *op, int64_t steps, enum tn_dtype *dtype,
                                      bool bool_ok)
{
    char name[32];
    if (steps < 0) {
        tn_set_error(TN_EINVAL, "number of steps must be non-negative");
        return NULL;
    }
    *dtype = tn_or_default(*dtype);
    if ((*dtype == TN_BOOL && !bool_ok) || tn_dtype_is_storage_only(*dtype)) {
        tn_scalar_type_name(*dtype, name, sizeof name);
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op, name);
        return NULL;
    }
    return tn_empty(TN_SHAPE(steps), *dtype);
}

/*
 * torch.linspace as PyTorch 2.x computes it (1.13 vectorised it, with other
 * roundings): the first half counts up from start, the second half down from
 * end, `start + step * i` and `end - step * (steps - i - 1)` fused into one
 * rounding for floating dtypes; float16 and bfloat16 compute in float from
 * the rounded start and end; integer dtypes step by a double from their
 * truncated start and end.  Start and end must fit the dtype ("value cannot
 * be converted to type uint8_t without overflow").
 */
struct tn_tensor *tn_linspace(struct tn_scalar start, struct tn_scalar end, int64_t steps,
                              enum tn_dtype dtype)
{
    struct tn_tensor *t = space_result("linspace_cpu", steps, &dtype, false);
    if (!t || steps == 0)
        return t;
    if (tn__scalar_check(start, dtype) != TN_OK || tn__scalar_check(end, dtype) != TN_OK) {
        tn_release(t);
        return NULL;
    }
    char *p = tn_data(t);
    size_t es = tn_dtype_size(dtype);
    if (steps == 1) {
        tn_scalar_store(p, dtype, start);
        return t;
    }
    int64_t half = steps / 2;
    double xs = tn_scalar_to_double(start), xe = tn_scalar_to_double(end);
    if (dtype == TN_FLOAT64) {
        double st = (xe - xs) / (double)(steps - 1), *o = (double *)p;
        for (int64_t i = 0; i < steps; i++)
            o[i] = i < half ? fma(st, (double)i, xs) : fma(-st, (double)(steps - i - 1), xe);
    } else if (dtype == TN_FLOAT32 || dtype == TN_FLOAT16 || dtype == TN_BFLOAT16) {
        float a = (float)xs, b = (float)xe;
        if (dtype != TN_FLOAT32) {
            a = TN_R16(a);
            b = TN_R16(b);
        }
        float st = (b - a) / (float)(steps - 1);
        for (int64_t i = 0; i < steps; i++) {
            float v = i < half ? fmaf(st, (float)i, a) : fmaf(-st, (float)(steps - i - 1), b);
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_FLOAT32, 1);
        }
    } else if (dtype == TN_COMPLEX64) {
        TN_LINSPACE_CPX(tn_complex64, float, fmaf, tn__complex64);
    } else if (dtype == TN_COMPLEX128) {
        TN_LINSPACE_CPX(tn_complex128, double, fma, tn__complex128);
    } else {
        /* integers: the truncated ends, a double step, truncated results */
        char ta[8], tb[8];
        tn_scalar_store(ta, dtype, start);
        tn_scalar_store(tb, dtype, end);
        double a = tn_scalar_to_double(tn_scalar_load(ta, dtype));
        double b = tn_scalar_to_double(tn_scalar_load(tb, dtype));
        double st = (b - a) / (double)(steps - 1);
        for (int64_t i = 0; i < steps; i++) {
            double v = i < half ? a + st * (double)i : b - st * (double)(steps - i - 1);
            tn_convert(p + i * (int64_t)es, dtype, &v, TN_FLOAT64, 1);
        }
    }
    return t;
}

/* logspace's complex values: base^(start + step i) from both ends, in
 * complex T (PyTorch's std::pow of c10::complex) */
#define TN_LOGSPACE_CPX(T, R, POW)                                                             \
    do {                                                                                       \
        T a = (R)tn_scalar_to_double(start) +                                                  \
              (start.kind == TN_SCALAR_COMPLEX ? (R)start.v.c.im : 0) * _Complex_I;            \
        T b = (R)tn_scalar_to_double(end) +                                                    \
              (end.kind == TN_SCALAR_COMPLEX ? (R)end.v.c.im : 0) * _Complex_I;                \
        R scl = (R)1 / (R)(steps - 1); /* c10::complex divides by a real through 1/c */        \
        T d = b - a, st = (R)creal(d) * scl + (R)cimag(d) * scl * _Complex_I;                  \
        T bs = (T)(R)base, *o = (T *)p;                                                        \
        for (int64_t i = 0; i < steps; i++)                                                    \
            o[i] = i < half ? POW(bs, a + st * (T)(R)i) : POW(bs, b - st * (T)(R)(steps - i - 1)); \
    } while (0)

/*
 * torch.logspace as PyTorch 2.x's CPU kernel computes it: base^v for the v
 * of a progression from start to end, the first half counted up from start,
 * the second down from end; for real dtypes start and end are first
 * converted to the dtype (truncated for integers, rounded for half
 * precision), their difference taken there, the step and the powers in
 * double and the results converted back. Bool is refused as PyTorch does.
 */
struct tn_tensor *tn_logspace(struct tn_scalar start, struct tn_scalar end, int64_t steps,
                              double base, enum tn_dtype dtype)
{
    struct tn_tensor *t = space_result("logspace_cpu", steps, &dtype, steps <= 1);
    if (!t || steps == 0)
        return t;
    char *p = tn_data(t);
    size_t es = tn_dtype_size(dtype);
    int64_t half = steps / 2;
    if (steps == 1) {
        /* std::pow(double, complex<double>): polar(base^re, im log(base)) for a
         * positive base */
        double re = tn_scalar_to_double(start), im = start.kind == TN_SCALAR_COMPLEX ? start.v.c.im : 0;
        double complex v = base > 0 ? pow(base, re) * cos(im * log(base)) +
                                          pow(base, re) * sin(im * log(base)) * I
                                    : cpow(base, re + im * I);
        struct tn_scalar s = tn_dtype_is_complex(dtype) ? tn_complex(creal(v), cimag(v))
                                                        : tn_float(pow(base, re));
        if (tn_fill_(t, s) < 0) {
            tn_release(t);
            return NULL;
        }
        return t;
    }
    if (dtype == TN_COMPLEX64) {
        TN_LOGSPACE_CPX(float complex, float, cpowf);
        return t;
    }
    if (dtype == TN_COMPLEX128) {
        TN_LOGSPACE_CPX(double complex, double, cpow);
        return t;
    }
    if (tn__scalar_check(start, dtype) != TN_OK || tn__scalar_check(end, dtype) != TN_OK) {
        tn_release(t);
        return NULL;
    }
    /* start and end as scalar_t holds them, their difference taken there */
    char ta[8], tb[8];
    tn_scalar_store(ta, dtype, start);
    tn_scalar_store(tb, dtype, end);
    double a = tn_scalar_to_double(tn_scalar_load(ta, dtype));
    double b = tn_scalar_to_double(tn_scalar_load(tb, dtype));
    double d = dtype == TN_FLOAT64   ? b - a
               : dtype == TN_FLOAT32 ? (double)((float)b - (float)a)
               : dtype == TN_FLOAT16 || dtype == TN_BFLOAT16 ? (double)TN_R16((float)b - (float)a)
                                                             : b - a;
    double st = d / (double)(steps - 1);
    for (int64_t i = 0; i < steps; i++) {
        double v = i < half ? pow(base, a + st * (double)i)
                            : pow(base, b - st * (double)(steps - i - 1));
        tn_convert(p + i * (int64_t)es, dtype, &v, TN_FLOAT64, 1);
    }
    return t;
}
#undef TN_R16

struct tn_tensor *tn_eye(int64_t n, int64_t m, enum tn_dtype dtype)
{
    if (m == -1)
        m = n;
    if (n < 0) {
        tn_set_error(TN_EINVAL, "n must be greater or equal to 0, got %lld", (long long)n);
        return NULL;
    }
    if (m < 0) {
        tn_set_error(TN_EINVAL, "m must be greater or equal to 0, got %lld", (long long)m);
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
    size_t bytes = 0;
    if (tn_required_bytes(need, dtype, &bytes) != TN_OK)
        return NULL;
    struct tn_storage *s = tn_storage_from_external(data, bytes, TN_CPU, free_fn, ctx);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn__tensor_make(s, 0, sizes, strides, ndim, dtype);
    tn_storage_release(s);
    return t;
}
