/*
 * core/dtype.c: the dtype table, names, float16/bfloat16 bit conversions and
 * element conversions between every pair of dtypes with PyTorch's CPU rules.
 */
#include "core/internal.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct tn_dtype_info tn_dtype_table[TN_NUM_ALL_DTYPES] = {
#define TN_X_ROW(E, n, T, s, st, sf, np, sc, k, c10) {TN_##E, #n, s, st, sf, np, sc, (#k)[0], c10},
    TN_FOR_EACH_ANY_DTYPE(TN_X_ROW)
#undef TN_X_ROW
};

const struct tn_dtype_info *tn_dtype_info(enum tn_dtype dtype)
{
    TN_ASSERT(dtype >= 0 && dtype < TN_NUM_ALL_DTYPES);
    return &tn_dtype_table[dtype];
}

size_t tn_dtype_size(enum tn_dtype dtype) { return tn_dtype_info(dtype)->size; }

const char *tn_dtype_name(enum tn_dtype dtype) { return tn_dtype_info(dtype)->name; }

bool tn_dtype_is_floating(enum tn_dtype dtype) { return tn_dtype_info(dtype)->kind == 'f'; }

bool tn_dtype_is_complex(enum tn_dtype dtype) { return tn_dtype_info(dtype)->kind == 'c'; }

bool tn_dtype_is_integral(enum tn_dtype dtype, bool include_bool)
{
    char k = tn_dtype_info(dtype)->kind;
    return k == 'i' || k == 'u' || (include_bool && k == 'b');
}

/* PyTorch's other spellings of each dtype (torch.float is float32, ...). */
static const struct {
    const char *alias;
    enum tn_dtype dtype;
} tn_dtype_aliases[] = {
    {"float", TN_FLOAT32},  {"f32", TN_FLOAT32},     {"double", TN_FLOAT64},
    {"f64", TN_FLOAT64},    {"half", TN_FLOAT16},    {"f16", TN_FLOAT16},
    {"bf16", TN_BFLOAT16},  {"long", TN_INT64},      {"i64", TN_INT64},
    {"int", TN_INT32},      {"i32", TN_INT32},       {"short", TN_INT16},
    {"i16", TN_INT16},      {"i8", TN_INT8},         {"u8", TN_UINT8},
    {"cfloat", TN_COMPLEX64}, {"c64", TN_COMPLEX64}, {"cdouble", TN_COMPLEX128},
    {"c128", TN_COMPLEX128}, {"f8e4m3", TN_FLOAT8_E4M3FN}, {"f8e5m2", TN_FLOAT8_E5M2},
    {"u16", TN_UINT16}, {"u32", TN_UINT32}, {"u64", TN_UINT64},
};

enum tn_dtype tn_dtype_from_name(const char *name)
{
    const char *n = name;
    if (strncmp(n, "torch.", 6) == 0)
        n += 6;
    for (int d = 0; d < TN_NUM_ALL_DTYPES; d++)
        if (strcasecmp(n, tn_dtype_table[d].name) == 0)
            return (enum tn_dtype)d;
    for (size_t i = 0; i < sizeof tn_dtype_aliases / sizeof tn_dtype_aliases[0]; i++)
        if (strcasecmp(n, tn_dtype_aliases[i].alias) == 0)
            return tn_dtype_aliases[i].dtype;
    tn_set_error(TN_EDTYPE, "unknown dtype '%s'", name);
    return TN_DTYPE_UNSET;
}

static enum tn_dtype tn_default_dtype = TN_FLOAT32;

enum tn_dtype tn_get_default_dtype(void) { return tn_default_dtype; }

int tn_set_default_dtype(enum tn_dtype dtype)
{
    if (dtype != TN_FLOAT32 && dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "only floating-point types are supported as the default "
                                       "type (float32 and float64 here), got %s",
                            dtype >= 0 && dtype < TN_NUM_DTYPES ? tn_dtype_name(dtype) : "unset");
    tn_default_dtype = dtype;
    return TN_OK;
}

/* ------------------------------------------------------ float16, bfloat16 */

static inline uint32_t tn_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float tn_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

tn_half tn_half_from_float(float f)
{
    uint32_t x = tn_f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    tn_half h;
    if (ax > 0x7F800000u) { /* NaN: the quiet NaN with the sign kept */
        h.bits = (uint16_t)(sign | 0x7E00u);
        return h;
    }
    if (ax >= 0x477FF000u) { /* rounds to >= 65520: infinity */
        h.bits = (uint16_t)(sign | 0x7C00u);
        return h;
    }
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        /* Adding 0.5 puts the subnormal bits at the bottom of the mantissa,
         * rounded to nearest even by the FPU itself. */
        float r = tn_u2f(ax) + 0.5f;
        h.bits = (uint16_t)(sign | (tn_f2u(r) - 0x3F000000u));
        return h;
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xC8000FFFu + mant_odd; /* rebias exponent (-112 << 23) and round */
    h.bits = (uint16_t)(sign | (ax >> 13));
    return h;
}

float tn_half_to_float(tn_half h)
{
    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16;
    uint32_t exp = (h.bits >> 10) & 0x1Fu;
    uint32_t mant = h.bits & 0x3FFu;
    if (exp == 0x1F)
        return tn_u2f(sign | 0x7F800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return tn_u2f(sign);
        float v = (float)mant * 0x1p-24f; /* exact */
        return sign ? -v : v;
    }
    return tn_u2f(sign | ((exp + 112u) << 23) | (mant << 13));
}

tn_bfloat16 tn_bfloat16_from_float(float f)
{
    tn_bfloat16 b;
    if (isnan(f)) {
        b.bits = 0x7FC0u;
        return b;
    }
    uint32_t u = tn_f2u(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    b.bits = (uint16_t)(u >> 16);
    return b;
}

float tn_bfloat16_to_float(tn_bfloat16 b) { return tn_u2f((uint32_t)b.bits << 16); }

float tn__round16(float x, enum tn_dtype dtype)
{
    return dtype == TN_FLOAT16 ? tn_half_to_float(tn_half_from_float(x))
                               : tn_bfloat16_to_float(tn_bfloat16_from_float(x));
}

/* ------------------------------------------------------------------ float8 */

/*
 * The four float8 formats as (exponent bias, mantissa bits, infinities?,
 * unsigned zero?). "fn" formats have no infinity and one NaN per sign
 * (all bits set); "fnuz" formats have neither negative zero nor infinity,
 * and 0x80 is their only NaN.  `limit` is the float32 magnitude from which
 * PyTorch no longer rounds: e4m3fn saturates to +-448 there (infinities
 * too), e5m2 gives infinity, the fnuz formats NaN.
 */
struct tn_f8_format {
    int bias, mbits;
    bool inf, uz;
    float limit;
};

static const struct tn_f8_format tn_f8_formats[4] = {
    [TN_FLOAT8_E5M2 - TN_FLOAT8_E5M2] = {15, 2, true, false, 61440.0f},
    [TN_FLOAT8_E4M3FN - TN_FLOAT8_E5M2] = {7, 3, false, false, 464.0f},
    [TN_FLOAT8_E5M2FNUZ - TN_FLOAT8_E5M2] = {16, 2, false, true, 61440.0f},
    [TN_FLOAT8_E4M3FNUZ - TN_FLOAT8_E5M2] = {8, 3, false, true, 248.0f},
};

/* Rounds `f` to nearest even in format `fm`; overflow, NaN and zero's sign
 * as PyTorch 2.x's CPU conversion gives them (tested against it). */
static uint8_t tn_f8_encode(float f, const struct tn_f8_format *fm)
{
    uint32_t u = tn_f2u(f);
    uint8_t sign = (uint8_t)(u >> 24 & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    uint8_t top = (uint8_t)(0x7Fu >> fm->mbits << fm->mbits); /* the highest exponent's code */
    if (a > 0x7F800000u)
        return fm->uz ? 0x80 : (uint8_t)(sign | 0x7F);
    if (tn_u2f(a) >= fm->limit) {
        if (fm->uz)
            return 0x80;
        return (uint8_t)(sign | (fm->inf ? top : 0x7E)); /* infinity, or e4m3fn's 448 */
    }
    int emin = 1 - fm->bias; /* the smallest normal exponent */
    uint32_t code;
    if ((int)(a >> 23) - 127 < emin) {
        /* a subnormal (or zero) of the format: an integer count of its
         * smallest step, rounded by the FPU (nearest even), exactly */
        code = (uint32_t)nearbyintf(ldexpf(tn_u2f(a), fm->mbits - emin));
    } else {
        int drop = 23 - fm->mbits;
        uint32_t half = (1u << (drop - 1)) - 1u + ((a >> drop) & 1u);
        code = ((a + half) >> drop) - ((uint32_t)(127 - fm->bias) << fm->mbits);
    }
    if (code == 0 && fm->uz)
        return 0;
    return (uint8_t)(sign | code);
}

/* The float32 bits PyTorch gives for a float8 code (exact for numbers; its
 * NaNs are quiet and keep the code's mantissa, fnuz's NaN reads as
 * 0x7F800001). */
static float tn_f8_decode(uint8_t b, const struct tn_f8_format *fm)
{
    if (fm->uz && b == 0x80)
        return tn_u2f(0x7F800001u);
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t c = b & 0x7Fu, e = c >> fm->mbits, m = c & ((1u << fm->mbits) - 1u);
    uint32_t top = 0x7Fu >> fm->mbits;
    if (!fm->uz && e == top && (fm->inf || m == (1u << fm->mbits) - 1u))
        return tn_u2f(sign | 0x7F800000u | (m << (23 - fm->mbits)) | (m ? 0x400000u : 0u));
    float v = e == 0 ? ldexpf((float)m, 1 - fm->bias - fm->mbits)
                     : ldexpf((float)(m | (1u << fm->mbits)), (int)e - fm->bias - fm->mbits);
    return sign ? -v : v;
}

#define TN_F8FMT(E) (&tn_f8_formats[TN_##E - TN_FLOAT8_E5M2])

/* float8 to float16 goes through the FPU's conversion in PyTorch, which
 * keeps a NaN's payload (tn_half_from_float gives the one quiet NaN). */
#define TN_DEF_F8_TO_HALF(n, E)                                                                 \
    static void tn_conv_half_from_##n(char *d, int64_t dstep, const char *s, int64_t sstep,    \
                                      int64_t n_)                                               \
    {                                                                                           \
        for (int64_t i = 0; i < n_; i++, d += dstep, s += sstep) {                              \
            float f = tn_f8_decode(*(const uint8_t *)s, TN_F8FMT(E));                           \
            uint32_t u = tn_f2u(f);                                                             \
            tn_half h = isnan(f) ? (tn_half){(uint16_t)((u >> 16 & 0x8000u) | 0x7E00u |         \
                                                        (u >> 13 & 0x3FFu))}                    \
                                 : tn_half_from_float(f);                                       \
            memcpy(d, &h, 2);                                                                   \
        }                                                                                       \
    }
TN_DEF_F8_TO_HALF(float8_e5m2, FLOAT8_E5M2)
TN_DEF_F8_TO_HALF(float8_e4m3fn, FLOAT8_E4M3FN)
TN_DEF_F8_TO_HALF(float8_e5m2fnuz, FLOAT8_E5M2FNUZ)
TN_DEF_F8_TO_HALF(float8_e4m3fnuz, FLOAT8_E4M3FNUZ)
#define TN_F8_LOAD(p, E) ((double)tn_f8_decode(*(const uint8_t *)(p), TN_F8FMT(E)))
#define TN_F8_STORE(p, E, f) (*(uint8_t *)(p) = tn_f8_encode((f), TN_F8FMT(E)))

/* ------------------------------------------------------ element conversion */

/*
 * Every source element is first read as one of three canonical values
 * (int64 for bool and integers, double for floats, complex for complex; all
 * exact), then stored into the destination type.  Float to integer follows
 * what x86 compilers emit for PyTorch's static_cast: a 32-bit truncating
 * conversion (0x80000000 when out of range) narrowed by wrap-around for the
 * small types, a 64-bit one for int64.
 */
static inline int32_t tn_f2i32(double d)
{
    return (d > -2147483649.0 && d < 2147483648.0) ? (int32_t)d : INT32_MIN;
}

static inline int64_t tn_f2i64(double d)
{
    return (d >= -9223372036854775808.0 && d < 9223372036854775808.0) ? (int64_t)d : INT64_MIN;
}


static inline double tn_load_f16(const void *p) { return tn_half_to_float(*(const tn_half *)p); }
static inline double tn_load_bf16(const void *p)
{
    return tn_bfloat16_to_float(*(const tn_bfloat16 *)p);
}

/* Canonical loaders per dtype: the kind tells which canonical type. */
#define TN_CANON_float32(p) ((double)*(const float *)(p))
#define TN_CANON_float64(p) (*(const double *)(p))
#define TN_CANON_float16(p) tn_load_f16(p)
#define TN_CANON_bfloat16(p) tn_load_bf16(p)
#define TN_CANON_int64(p) (*(const int64_t *)(p))
#define TN_CANON_int32(p) ((int64_t)*(const int32_t *)(p))
#define TN_CANON_int16(p) ((int64_t)*(const int16_t *)(p))
#define TN_CANON_int8(p) ((int64_t)*(const int8_t *)(p))
#define TN_CANON_uint8(p) ((int64_t)*(const uint8_t *)(p))
#define TN_CANON_bool(p) ((int64_t)*(const bool *)(p))
#define TN_CANON_complex64(p) (*(const tn_complex64 *)(p))
#define TN_CANON_float8_e5m2(p) TN_F8_LOAD(p, FLOAT8_E5M2)
#define TN_CANON_float8_e4m3fn(p) TN_F8_LOAD(p, FLOAT8_E4M3FN)
#define TN_CANON_float8_e5m2fnuz(p) TN_F8_LOAD(p, FLOAT8_E5M2FNUZ)
#define TN_CANON_float8_e4m3fnuz(p) TN_F8_LOAD(p, FLOAT8_E4M3FNUZ)
#define TN_CANON_uint16(p) ((int64_t)*(const uint16_t *)(p))
#define TN_CANON_uint32(p) ((int64_t)*(const uint32_t *)(p))
/* uint64 and complex128 do not fit int64 and float complex: two more
 * canonical kinds, _UNS (uint64_t) and _CPXD (double complex) */
#define TN_CANON_uint64(p) (*(const uint64_t *)(p))
#define TN_CANON_complex128(p) (*(const tn_complex128 *)(p))

/* float to uint32/uint64 as PyTorch's CPU kernels convert (what compilers
 * emit for static_cast): below 2^31 (2^63) a signed truncation, above it
 * a signed truncation of d - 2^31 (2^63) with the top bit added back. */
static inline uint32_t tn_f2u32(double d)
{
    return d >= 2147483648.0 ? (uint32_t)tn_f2i32(d - 2147483648.0) + 0x80000000u
                             : (uint32_t)tn_f2i32(d);
}

static inline uint64_t tn_f2u64(double d)
{
    return d >= 9223372036854775808.0
               ? (uint64_t)tn_f2i64(d - 9223372036854775808.0) + 0x8000000000000000u
               : (uint64_t)tn_f2i64(d);
}

/* Stores from each canonical kind: _INT from int64, _FLT from double, _CPX
 * from complex. */
#define TN_STORE_float32_INT(p, v) (*(float *)(p) = (float)(v))
#define TN_STORE_float32_FLT(p, v) (*(float *)(p) = (float)(v))
#define TN_STORE_float32_CPX(p, v) (*(float *)(p) = crealf(v))
#define TN_STORE_float64_INT(p, v) (*(double *)(p) = (double)(v))
#define TN_STORE_float64_FLT(p, v) (*(double *)(p) = (v))
#define TN_STORE_float64_CPX(p, v) (*(double *)(p) = (double)crealf(v))
#define TN_STORE_float16_INT(p, v) (*(tn_half *)(p) = tn_half_from_float((float)(v)))
#define TN_STORE_float16_FLT(p, v) (*(tn_half *)(p) = tn_half_from_float((float)(v)))
#define TN_STORE_float16_CPX(p, v) (*(tn_half *)(p) = tn_half_from_float(crealf(v)))
#define TN_STORE_bfloat16_INT(p, v) (*(tn_bfloat16 *)(p) = tn_bfloat16_from_float((float)(v)))
#define TN_STORE_bfloat16_FLT(p, v) (*(tn_bfloat16 *)(p) = tn_bfloat16_from_float((float)(v)))
#define TN_STORE_bfloat16_CPX(p, v) (*(tn_bfloat16 *)(p) = tn_bfloat16_from_float(crealf(v)))
#define TN_STORE_int64_INT(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define TN_STORE_int64_FLT(p, v) (*(int64_t *)(p) = tn_f2i64(v))
#define TN_STORE_int64_CPX(p, v) (*(int64_t *)(p) = tn_f2i64(crealf(v)))
#define TN_STORE_int32_INT(p, v) (*(int32_t *)(p) = (int32_t)(v))
#define TN_STORE_int32_FLT(p, v) (*(int32_t *)(p) = tn_f2i32(v))
#define TN_STORE_int32_CPX(p, v) (*(int32_t *)(p) = tn_f2i32(crealf(v)))
#define TN_STORE_int16_INT(p, v) (*(int16_t *)(p) = (int16_t)(v))
#define TN_STORE_int16_FLT(p, v) (*(int16_t *)(p) = (int16_t)tn_f2i32(v))
#define TN_STORE_int16_CPX(p, v) (*(int16_t *)(p) = (int16_t)tn_f2i32(crealf(v)))
#define TN_STORE_int8_INT(p, v) (*(int8_t *)(p) = (int8_t)(v))
#define TN_STORE_int8_FLT(p, v) (*(int8_t *)(p) = (int8_t)tn_f2i32(v))
#define TN_STORE_int8_CPX(p, v) (*(int8_t *)(p) = (int8_t)tn_f2i32(crealf(v)))
#define TN_STORE_uint8_INT(p, v) (*(uint8_t *)(p) = (uint8_t)(v))
/* uint8 is the exception: compilers convert through 64 bits for it. */
#define TN_STORE_uint8_FLT(p, v) (*(uint8_t *)(p) = (uint8_t)tn_f2i64(v))
#define TN_STORE_uint8_CPX(p, v) (*(uint8_t *)(p) = (uint8_t)tn_f2i64(crealf(v)))
/* `bool` is a macro for _Bool, and the outer expansion has expanded it. */
#define TN_STORE__Bool_INT(p, v) (*(bool *)(p) = (v) != 0)
#define TN_STORE__Bool_FLT(p, v) (*(bool *)(p) = (v) != 0)
#define TN_STORE__Bool_CPX(p, v) (*(bool *)(p) = (crealf(v) != 0 || cimagf(v) != 0))
#define TN_STORE_complex64_INT(p, v) (*(tn_complex64 *)(p) = (float)(v))
#define TN_STORE_complex64_FLT(p, v) (*(tn_complex64 *)(p) = (float)(v))
#define TN_STORE_complex64_CPX(p, v) (*(tn_complex64 *)(p) = (v))
/* From uint64 (_UNS): C's unsigned conversions, as static_cast does. */
#define TN_STORE_float32_UNS(p, v) (*(float *)(p) = (float)(v))
#define TN_STORE_float64_UNS(p, v) (*(double *)(p) = (double)(v))
#define TN_STORE_float16_UNS(p, v) (*(tn_half *)(p) = tn_half_from_float((float)(v)))
#define TN_STORE_bfloat16_UNS(p, v) (*(tn_bfloat16 *)(p) = tn_bfloat16_from_float((float)(v)))
#define TN_STORE_int64_UNS(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define TN_STORE_int32_UNS(p, v) (*(int32_t *)(p) = (int32_t)(v))
#define TN_STORE_int16_UNS(p, v) (*(int16_t *)(p) = (int16_t)(v))
#define TN_STORE_int8_UNS(p, v) (*(int8_t *)(p) = (int8_t)(v))
#define TN_STORE_uint8_UNS(p, v) (*(uint8_t *)(p) = (uint8_t)(v))
#define TN_STORE__Bool_UNS(p, v) (*(bool *)(p) = (v) != 0)
#define TN_STORE_complex64_UNS(p, v) (*(tn_complex64 *)(p) = (float)(v))
/* From complex128 (_CPXD): the real part as a double, as for float64. */
#define TN_STORE_float32_CPXD(p, v) TN_STORE_float32_FLT(p, creal(v))
#define TN_STORE_float64_CPXD(p, v) TN_STORE_float64_FLT(p, creal(v))
#define TN_STORE_float16_CPXD(p, v) TN_STORE_float16_FLT(p, creal(v))
#define TN_STORE_bfloat16_CPXD(p, v) TN_STORE_bfloat16_FLT(p, creal(v))
#define TN_STORE_int64_CPXD(p, v) TN_STORE_int64_FLT(p, creal(v))
#define TN_STORE_int32_CPXD(p, v) TN_STORE_int32_FLT(p, creal(v))
#define TN_STORE_int16_CPXD(p, v) TN_STORE_int16_FLT(p, creal(v))
#define TN_STORE_int8_CPXD(p, v) TN_STORE_int8_FLT(p, creal(v))
#define TN_STORE_uint8_CPXD(p, v) TN_STORE_uint8_FLT(p, creal(v))
#define TN_STORE__Bool_CPXD(p, v) (*(bool *)(p) = (creal(v) != 0 || cimag(v) != 0))
#define TN_STORE_complex64_CPXD(p, v) (*(tn_complex64 *)(p) = (tn_complex64)(v))
/* Into the storage-only dtypes: float8 through float32 as c10 does;
 * uint16 like int16, uint32/uint64 with the unsigned truncations above. */
#define TN_F8_STORES(n, E)                                                                      \
    static inline void TN_STORE_##n##_INT(void *p, int64_t v) { TN_F8_STORE(p, E, (float)v); } \
    static inline void TN_STORE_##n##_FLT(void *p, double v) { TN_F8_STORE(p, E, (float)v); }  \
    static inline void TN_STORE_##n##_CPX(void *p, tn_complex64 v)                              \
    {                                                                                           \
        TN_F8_STORE(p, E, crealf(v));                                                           \
    }                                                                                           \
    static inline void TN_STORE_##n##_UNS(void *p, uint64_t v) { TN_F8_STORE(p, E, (float)v); } \
    static inline void TN_STORE_##n##_CPXD(void *p, tn_complex128 v)                            \
    {                                                                                           \
        TN_F8_STORE(p, E, (float)creal(v));                                                     \
    }
TN_F8_STORES(float8_e5m2, FLOAT8_E5M2)
TN_F8_STORES(float8_e4m3fn, FLOAT8_E4M3FN)
TN_F8_STORES(float8_e5m2fnuz, FLOAT8_E5M2FNUZ)
TN_F8_STORES(float8_e4m3fnuz, FLOAT8_E4M3FNUZ)
#define TN_STORE_uint16_INT(p, v) (*(uint16_t *)(p) = (uint16_t)(v))
#define TN_STORE_uint16_FLT(p, v) (*(uint16_t *)(p) = (uint16_t)tn_f2i32(v))
#define TN_STORE_uint16_CPX(p, v) (*(uint16_t *)(p) = (uint16_t)tn_f2i32(crealf(v)))
#define TN_STORE_uint16_UNS(p, v) (*(uint16_t *)(p) = (uint16_t)(v))
#define TN_STORE_uint16_CPXD(p, v) (*(uint16_t *)(p) = (uint16_t)tn_f2i32(creal(v)))
#define TN_STORE_uint32_INT(p, v) (*(uint32_t *)(p) = (uint32_t)(v))
#define TN_STORE_uint32_FLT(p, v) (*(uint32_t *)(p) = tn_f2u32(v))
#define TN_STORE_uint32_CPX(p, v) (*(uint32_t *)(p) = tn_f2u32(crealf(v)))
#define TN_STORE_uint32_UNS(p, v) (*(uint32_t *)(p) = (uint32_t)(v))
#define TN_STORE_uint32_CPXD(p, v) (*(uint32_t *)(p) = tn_f2u32(creal(v)))
#define TN_STORE_uint64_INT(p, v) (*(uint64_t *)(p) = (uint64_t)(v))
#define TN_STORE_uint64_FLT(p, v) (*(uint64_t *)(p) = tn_f2u64(v))
#define TN_STORE_uint64_CPX(p, v) (*(uint64_t *)(p) = tn_f2u64(crealf(v)))
#define TN_STORE_uint64_UNS(p, v) (*(uint64_t *)(p) = (v))
#define TN_STORE_uint64_CPXD(p, v) (*(uint64_t *)(p) = tn_f2u64(creal(v)))
#define TN_STORE_complex128_INT(p, v) (*(tn_complex128 *)(p) = (double)(v))
#define TN_STORE_complex128_FLT(p, v) (*(tn_complex128 *)(p) = (v))
#define TN_STORE_complex128_CPX(p, v) (*(tn_complex128 *)(p) = (tn_complex128)(v))
#define TN_STORE_complex128_UNS(p, v) (*(tn_complex128 *)(p) = (double)(v))
#define TN_STORE_complex128_CPXD(p, v) (*(tn_complex128 *)(p) = (v))

/* The canonical kind letter for each dtype kind. */
#define TN_CK_b INT
#define TN_CK_u INT
#define TN_CK_i INT
#define TN_CK_f FLT
#define TN_CK_c CPX
#define TN_CK_U UNS
#define TN_CK_C CPXD
#define TN_CAT2_(a, b) a##b
#define TN_CAT2(a, b) TN_CAT2_(a, b)
#define TN_STORE_K(k, n, p, v) TN_CAT2(TN_STORE_##n##_, TN_CK_##k)(p, v)

/* The dtypes again as (name, kind) for the inner level of the two-level
 * expansion below (a macro cannot expand inside itself); the order must
 * match TN_FOR_EACH_DTYPE, which the table's size check enforces. */
#define TN_SRC_LIST(X, dn)                                                                      \
    X(dn, float32, f) X(dn, float64, f) X(dn, float16, f) X(dn, bfloat16, f) X(dn, int64, i)    \
    X(dn, int32, i) X(dn, int16, i) X(dn, int8, i) X(dn, uint8, u) X(dn, bool, b)               \
    X(dn, complex64, c) X(dn, complex128, C) X(dn, float8_e5m2, f) X(dn, float8_e4m3fn, f)      \
    X(dn, float8_e5m2fnuz, f) X(dn, float8_e4m3fnuz, f) X(dn, uint16, u) X(dn, uint32, u)       \
    X(dn, uint64, U)

/* One strided conversion loop per (dst, src) pair. */
typedef void (*tn_conv_fn)(char *d, int64_t dstep, const char *s, int64_t sstep, int64_t n);

#define TN_DEF_CONV(dn, sn, sk)                                                                 \
    static void tn_conv_##dn##_##sn(char *d, int64_t dstep, const char *s, int64_t sstep,       \
                                    int64_t n)                                                  \
    {                                                                                           \
        for (int64_t i = 0; i < n; i++, d += dstep, s += sstep)                                 \
            TN_STORE_K(sk, dn, d, TN_CANON_##sn(s));                                            \
    }
#define TN_X_DEFS(E, n, T, s, st, sf, np, sc, k, c10) TN_SRC_LIST(TN_DEF_CONV, n)
TN_FOR_EACH_ANY_DTYPE(TN_X_DEFS)

/* float32 -> bfloat16, PyTorch's hot conversion, has its own loop: its
 * vectorised kernel turns every NaN into 0xFFFF (the scalar path, used for
 * float64 sources and fills, gives 0x7FC0). */
/* The contiguous loop, branch-free so compilers vectorise it (a NaN's
 * rounded bits are ORed up to 0xFFFF). Narrowing 32-bit lanes to 16 needs
 * more than x86-64's baseline SSE2, hence the AVX2 copy picked at run time. */
#define TN_BF16_LOOP_BODY                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                           \
        uint32_t u = in[i];                                                                     \
        uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;                                    \
        uint32_t nan = (uint32_t)0 - (uint32_t)((u & 0x7FFFFFFFu) > 0x7F800000u);               \
        o[i] = (uint16_t)(r | nan);                                                             \
    }

static void tn_bf16_run(uint16_t *restrict o, const uint32_t *restrict in, int64_t n)
{
    TN_BF16_LOOP_BODY
}

#if defined(__x86_64__) && defined(__GNUC__)
#ifdef __clang__
#define TN_VECTORISE /* clang vectorises at -O2 already */
#else
#define TN_VECTORISE __attribute__((optimize("tree-vectorize")))
#endif
__attribute__((target("avx2"))) TN_VECTORISE static void
tn_bf16_run_avx2(uint16_t *restrict o, const uint32_t *restrict in, int64_t n)
{
    TN_BF16_LOOP_BODY
}
#endif

static void tn_conv_bf16_from_f32(char *d, int64_t dstep, const char *s, int64_t sstep, int64_t n)
{
    if (dstep == 2 && sstep == 4) {
        uint16_t *o = (uint16_t *)(void *)d;
        const uint32_t *in = (const uint32_t *)(const void *)s;
#if defined(__x86_64__) && defined(__GNUC__)
        if (__builtin_cpu_supports("avx2")) {
            tn_bf16_run_avx2(o, in, n);
            return;
        }
#endif
        tn_bf16_run(o, in, n);
        return;
    }
    for (int64_t i = 0; i < n; i++, d += dstep, s += sstep) {
        float f;
        memcpy(&f, s, 4);
        uint16_t b = isnan(f) ? 0xFFFFu : tn_bfloat16_from_float(f).bits;
        memcpy(d, &b, 2);
    }
}

#define TN_TBL_ENTRY(dn, sn, sk) tn_conv_##dn##_##sn,
#define TN_X_TBL(E, n, T, s, st, sf, np, sc, k, c10) {TN_SRC_LIST(TN_TBL_ENTRY, n)},
static const tn_conv_fn tn_conv_table[][TN_NUM_ALL_DTYPES] = {TN_FOR_EACH_ANY_DTYPE(TN_X_TBL)};
_Static_assert(sizeof tn_conv_table / sizeof tn_conv_table[0] == TN_NUM_ALL_DTYPES,
               "TN_SRC_LIST must list every dtype");

/* The strided conversion loop from `src` to `dst` elements (library-internal). */
static tn_conv_fn tn_conv_lookup(enum tn_dtype ddt, enum tn_dtype sdt)
{
    if (ddt == TN_BFLOAT16 && sdt == TN_FLOAT32)
        return tn_conv_bf16_from_f32;
    if (ddt == TN_FLOAT16) {
        switch (sdt) {
        case TN_FLOAT8_E5M2: return tn_conv_half_from_float8_e5m2;
        case TN_FLOAT8_E4M3FN: return tn_conv_half_from_float8_e4m3fn;
        case TN_FLOAT8_E5M2FNUZ: return tn_conv_half_from_float8_e5m2fnuz;
        case TN_FLOAT8_E4M3FNUZ: return tn_conv_half_from_float8_e4m3fnuz;
        default: break;
        }
    }
    return tn_conv_table[ddt][sdt];
}

void tn__convert_strided(char *d, enum tn_dtype ddt, int64_t dstep, const char *s,
                         enum tn_dtype sdt, int64_t sstep, int64_t n)
{
    tn_conv_lookup(ddt, sdt)(d, dstep, s, sstep, n);
}

void tn_convert(void *dst, enum tn_dtype ddt, const void *src, enum tn_dtype sdt, size_t n)
{
    if (ddt == sdt) {
        memcpy(dst, src, n * tn_dtype_size(ddt));
        return;
    }
    tn_conv_lookup(ddt, sdt)(dst, (int64_t)tn_dtype_size(ddt), src, (int64_t)tn_dtype_size(sdt),
                             (int64_t)n);
}

void tn_scalar_store(void *dst, enum tn_dtype dtype, struct tn_scalar s)
{
    switch (s.kind) {
    case TN_SCALAR_BOOL: {
        bool b = s.v.b;
        tn_convert(dst, dtype, &b, TN_BOOL, 1);
        break;
    }
    case TN_SCALAR_INT:
        tn_convert(dst, dtype, &s.v.i, TN_INT64, 1);
        break;
    case TN_SCALAR_FLOAT:
        tn_convert(dst, dtype, &s.v.f, TN_FLOAT64, 1);
        break;
    case TN_SCALAR_COMPLEX: {
        /* real targets take the real part of the double value directly so
         * no precision is lost on the way; a complex number is stored as
         * its two parts (C11 6.2.5: the layout of an array of two), which
         * keeps an infinite part's partner (re + im * I would make it NaN)
         * and needs no CMPLX, which glibc gives gcc only */
        if (dtype == TN_COMPLEX64) {
            float parts[2] = {(float)s.v.c.re, (float)s.v.c.im};
            memcpy(dst, parts, sizeof parts);
        } else if (dtype == TN_COMPLEX128) {
            double parts[2] = {s.v.c.re, s.v.c.im};
            memcpy(dst, parts, sizeof parts);
        } else if (dtype == TN_BOOL) {
            *(bool *)dst = s.v.c.re != 0 || s.v.c.im != 0;
        } else {
            tn_convert(dst, dtype, &s.v.c.re, TN_FLOAT64, 1);
        }
        break;
    }
    }
}

struct tn_scalar tn_scalar_load(const void *src, enum tn_dtype dtype)
{
    struct tn_scalar s;
    switch (tn_dtype_info(dtype)->kind) {
    case 'b':
        s.kind = TN_SCALAR_BOOL;
        s.v.b = *(const bool *)src;
        break;
    case 'c': {
        tn_complex128 c;
        tn_convert(&c, TN_COMPLEX128, src, dtype, 1);
        s.kind = TN_SCALAR_COMPLEX;
        s.v.c.re = creal(c);
        s.v.c.im = cimag(c);
        break;
    }
    case 'f':
        s.kind = TN_SCALAR_FLOAT;
        tn_convert(&s.v.f, TN_FLOAT64, src, dtype, 1);
        break;
    default:
        s.kind = TN_SCALAR_INT;
        tn_convert(&s.v.i, TN_INT64, src, dtype, 1);
        break;
    }
    return s;
}

double tn_scalar_to_double(struct tn_scalar s)
{
    switch (s.kind) {
    case TN_SCALAR_BOOL: return s.v.b;
    case TN_SCALAR_INT: return (double)s.v.i;
    case TN_SCALAR_FLOAT: return s.v.f;
    case TN_SCALAR_COMPLEX: return s.v.c.re;
    }
    return 0;
}

int64_t tn_scalar_to_int64(struct tn_scalar s)
{
    switch (s.kind) {
    case TN_SCALAR_BOOL: return s.v.b;
    case TN_SCALAR_INT: return s.v.i;
    case TN_SCALAR_FLOAT: return tn_f2i64(s.v.f);
    case TN_SCALAR_COMPLEX: return tn_f2i64(s.v.c.re);
    }
    return 0;
}
