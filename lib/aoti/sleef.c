/*
 * lib/aoti/sleef.c: the SLEEF vector math functions that AOTInductor's
 * generated kernels call (ATen's Vectorized<float>::exp() is
 * Sleef_expf16_u10 on AVX-512, Sleef_expf8_u10 on AVX2).  libtorch_cpu
 * carries SLEEF inside it, so a package's library expects them from the
 * libtorch it links; here each lane goes through the C library's function
 * of the same name (glibc's float and double functions are within the
 * 1-ULP bound of the _u10 variants).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define EXPORT __attribute__((visibility("default")))
#define AVX512 __attribute__((target("avx512f")))
#define AVX __attribute__((target("avx")))
#define SSE

/* One vector width: VT, lanes N of element type ET, load and store. */
#define UNARY(attr, VT, ET, N, load, store, name, fn)                                         \
    EXPORT attr VT name(VT x);                                                                \
    attr VT name(VT x)                                                                        \
    {                                                                                         \
        ET a[N];                                                                              \
        store(a, x);                                                                          \
        for (int i = 0; i < N; i++)                                                           \
            a[i] = fn(a[i]);                                                                  \
        return load(a);                                                                       \
    }
#define BINARY(attr, VT, ET, N, load, store, name, fn)                                        \
    EXPORT attr VT name(VT x, VT y);                                                          \
    attr VT name(VT x, VT y)                                                                  \
    {                                                                                         \
        ET a[N], b[N];                                                                        \
        store(a, x);                                                                          \
        store(b, y);                                                                          \
        for (int i = 0; i < N; i++)                                                           \
            a[i] = fn(a[i], b[i]);                                                            \
        return load(a);                                                                       \
    }

/* Every width of one function: float f16/f8/f4, double d8/d4/d2. */
#define ALL(KIND, name, suffix, fn)                                                           \
    KIND(AVX512, __m512, float, 16, _mm512_loadu_ps, _mm512_storeu_ps, Sleef_##name##f16##suffix, fn##f) \
    KIND(AVX, __m256, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, Sleef_##name##f8##suffix, fn##f)      \
    KIND(SSE, __m128, float, 4, _mm_loadu_ps, _mm_storeu_ps, Sleef_##name##f4##suffix, fn##f)            \
    KIND(AVX512, __m512d, double, 8, _mm512_loadu_pd, _mm512_storeu_pd, Sleef_##name##d8##suffix, fn)    \
    KIND(AVX, __m256d, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, Sleef_##name##d4##suffix, fn)       \
    KIND(SSE, __m128d, double, 2, _mm_loadu_pd, _mm_storeu_pd, Sleef_##name##d2##suffix, fn)

ALL(UNARY, exp, _u10, exp)
ALL(UNARY, exp2, _u10, exp2)
ALL(UNARY, expm1, _u10, expm1)
ALL(UNARY, log, _u10, log)
ALL(UNARY, log2, _u10, log2)
ALL(UNARY, log10, _u10, log10)
ALL(UNARY, log1p, _u10, log1p)
ALL(UNARY, sin, _u10, sin)
ALL(UNARY, cos, _u10, cos)
ALL(UNARY, sin, _u35, sin)
ALL(UNARY, cos, _u35, cos)
ALL(UNARY, tan, _u10, tan)
ALL(UNARY, asin, _u10, asin)
ALL(UNARY, acos, _u10, acos)
ALL(UNARY, atan, _u10, atan)
ALL(UNARY, sinh, _u10, sinh)
ALL(UNARY, cosh, _u10, cosh)
ALL(UNARY, tanh, _u10, tanh)
ALL(UNARY, asinh, _u10, asinh)
ALL(UNARY, acosh, _u10, acosh)
ALL(UNARY, atanh, _u10, atanh)
ALL(UNARY, erf, _u10, erf)
ALL(UNARY, erfc, _u15, erfc)
ALL(UNARY, lgamma, _u10, lgamma)
ALL(BINARY, atan2, _u10, atan2)
ALL(BINARY, pow, _u10, pow)
ALL(BINARY, hypot, _u05, hypot)
ALL(BINARY, fmod, , fmod)
ALL(BINARY, copysign, , copysign)
ALL(BINARY, nextafter, , nextafter)
#else
typedef int tn__aoti_no_sleef; /* SLEEF's x86 names only */
#endif
