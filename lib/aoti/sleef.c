/*
 * lib/aoti/sleef.c: the SLEEF vector math functions that AOTInductor's
 * generated kernels call (ATen's Vectorized<float>::exp() is
 * Sleef_expf16_u10 on AVX-512, Sleef_expf8_u10 on AVX2).  libtorch_cpu
 * carries SLEEF inside it, so a package's library expects them from the
 * libtorch it links.  Here each goes to glibc's vector math library
 * (libmvec: _ZGVeN16v_expf is expf on 16 lanes of AVX-512), looked up at
 * the first call where the C library has it and the CPU runs it, else each
 * lane goes through the C library's scalar function of the same name.
 * libmvec's functions are within 4 ULP, its scalar ones within 1 (SLEEF's
 * _u10 within 1): the tests compare with a tolerance.
 */
#if defined(__x86_64__)
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>

static void *mvec_lib;
static pthread_once_t mvec_once = PTHREAD_ONCE_INIT;

static void mvec_open(void)
{
    mvec_lib = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
}

/* libmvec's function `sym`, when the CPU runs its ISA ('b' SSE4, 'd'
 * AVX2, 'e' AVX-512), else NULL. */
static void *mvec(const char *sym)
{
    char isa = sym[4];
    if ((isa == 'e' && !__builtin_cpu_supports("avx512f")) ||
        (isa == 'd' && !__builtin_cpu_supports("avx2")) ||
        (isa == 'b' && !__builtin_cpu_supports("sse4.1")))
        return NULL;
    pthread_once(&mvec_once, mvec_open);
    return mvec_lib ? dlsym(mvec_lib, sym) : NULL;
}

/* The function a SLEEF entry point goes to: libmvec's `sym`, looked up
 * once (two threads racing look it up twice, to the same answer). */
#define MVEC(T, sym)                                                                          \
    static T impl;                                                                            \
    static bool looked;                                                                       \
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {                                        \
        __atomic_store_n(&impl, (T)mvec(sym), __ATOMIC_RELAXED);                              \
        __atomic_store_n(&looked, true, __ATOMIC_RELEASE);                                    \
    }                                                                                         \
    T f = __atomic_load_n(&impl, __ATOMIC_RELAXED)

#define EXPORT __attribute__((visibility("default")))
#define AVX512 __attribute__((target("avx512f")))
#define AVX __attribute__((target("avx")))
#define SSE

/* One vector width: VT, lanes N of element type ET, load and store;
 * libmvec's name of the function. */
#define UNARY(attr, VT, ET, N, load, store, name, fn, sym)                                    \
    EXPORT attr VT name(VT x);                                                                \
    attr VT name(VT x)                                                                        \
    {                                                                                         \
        typedef VT (*fn_t)(VT);                                                               \
        MVEC(fn_t, sym);                                                                      \
        if (f)                                                                                \
            return f(x);                                                                      \
        ET a[N];                                                                              \
        store(a, x);                                                                          \
        for (int i = 0; i < N; i++)                                                           \
            a[i] = fn(a[i]);                                                                  \
        return load(a);                                                                       \
    }
#define BINARY(attr, VT, ET, N, load, store, name, fn, sym)                                   \
    EXPORT attr VT name(VT x, VT y);                                                          \
    attr VT name(VT x, VT y)                                                                  \
    {                                                                                         \
        typedef VT (*fn_t)(VT, VT);                                                           \
        MVEC(fn_t, sym);                                                                      \
        if (f)                                                                                \
            return f(x, y);                                                                   \
        ET a[N], b[N];                                                                        \
        store(a, x);                                                                          \
        store(b, y);                                                                          \
        for (int i = 0; i < N; i++)                                                           \
            a[i] = fn(a[i], b[i]);                                                            \
        return load(a);                                                                       \
    }

/* Every width of one function: float f16/f8/f4, double d8/d4/d2; V is
 * libmvec's "v" (one argument) or "vv" (two). */
#define ALL(KIND, V, name, suffix, fn)                                                        \
    KIND(AVX512, __m512, float, 16, _mm512_loadu_ps, _mm512_storeu_ps, Sleef_##name##f16##suffix, \
         fn##f, "_ZGVeN16" V "_" #fn "f")                                                     \
    KIND(AVX, __m256, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, Sleef_##name##f8##suffix,   \
         fn##f, "_ZGVdN8" V "_" #fn "f")                                                      \
    KIND(SSE, __m128, float, 4, _mm_loadu_ps, _mm_storeu_ps, Sleef_##name##f4##suffix, fn##f,  \
         "_ZGVbN4" V "_" #fn "f")                                                             \
    KIND(AVX512, __m512d, double, 8, _mm512_loadu_pd, _mm512_storeu_pd,                       \
         Sleef_##name##d8##suffix, fn, "_ZGVeN8" V "_" #fn)                                   \
    KIND(AVX, __m256d, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, Sleef_##name##d4##suffix, \
         fn, "_ZGVdN4" V "_" #fn)                                                             \
    KIND(SSE, __m128d, double, 2, _mm_loadu_pd, _mm_storeu_pd, Sleef_##name##d2##suffix, fn,   \
         "_ZGVbN2" V "_" #fn)

ALL(UNARY, "v", exp, _u10, exp)
ALL(UNARY, "v", exp2, _u10, exp2)
ALL(UNARY, "v", expm1, _u10, expm1)
ALL(UNARY, "v", log, _u10, log)
ALL(UNARY, "v", log2, _u10, log2)
ALL(UNARY, "v", log10, _u10, log10)
ALL(UNARY, "v", log1p, _u10, log1p)
ALL(UNARY, "v", sin, _u10, sin)
ALL(UNARY, "v", cos, _u10, cos)
ALL(UNARY, "v", sin, _u35, sin)
ALL(UNARY, "v", cos, _u35, cos)
ALL(UNARY, "v", tan, _u10, tan)
ALL(UNARY, "v", asin, _u10, asin)
ALL(UNARY, "v", acos, _u10, acos)
ALL(UNARY, "v", atan, _u10, atan)
ALL(UNARY, "v", sinh, _u10, sinh)
ALL(UNARY, "v", cosh, _u10, cosh)
ALL(UNARY, "v", tanh, _u10, tanh)
ALL(UNARY, "v", asinh, _u10, asinh)
ALL(UNARY, "v", acosh, _u10, acosh)
ALL(UNARY, "v", atanh, _u10, atanh)
ALL(UNARY, "v", erf, _u10, erf)
ALL(UNARY, "v", erfc, _u15, erfc)
ALL(UNARY, "v", lgamma, _u10, lgamma)
ALL(BINARY, "vv", atan2, _u10, atan2)
ALL(BINARY, "vv", pow, _u10, pow)
ALL(BINARY, "vv", hypot, _u05, hypot)
ALL(BINARY, "vv", fmod, , fmod)
ALL(BINARY, "vv", copysign, , copysign)
ALL(BINARY, "vv", nextafter, , nextafter)
#else
typedef int tn__aoti_no_sleef; /* SLEEF's x86 names only */
#endif
