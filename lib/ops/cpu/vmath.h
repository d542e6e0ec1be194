/*
 * ops/cpu/vmath.h: math functions on eight float32 lanes for the AVX2
 * kernels (TN_AVX2 functions; include under TN_HAVE_AVX2), shared by
 * softmax.c and unary.c.
 */
#ifndef TN_OPS_CPU_VMATH_H
#define TN_OPS_CPU_VMATH_H

#include <immintrin.h>

#include "ops/internal.h"

/* The eight-lane exp's reduction: x = (8m + j) ln2/8 + r, n = 8m + j =
 * round(8 x log2 e): one FMA onto the shifter 1.5 * 2^23, whose ulp is 1,
 * rounds 8 x log2 e to the nearest integer (ties to even) as t, n = t - 1.5
 * * 2^23, and t's low mantissa bits hold n (|n| < 2^22); r = x - n ln2/8
 * (ln2/8 in two parts, the first exact in n ln2/8), |r| <= ln2/16; then
 * e^r = 1 + q with q = r + r^2 (c2 + c3 r) a minimax fit of the relative
 * error on that range (2.6e-8, 0.22 ulp at 1: bench/ops/expfit.py 3 8), and
 * e^x = 2^m 2^(j/8) (1 + q). */
#define TN_EXP8_REDUCE(x, t, n, r)                                                                 \
    __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(11.5415603271f), _mm256_set1_ps(12582912.0f));    \
    __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(12582912.0f));                                      \
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.086669921875f), x);                            \
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.65243050e-5f), r)
#define TN_EXP8_C2 5.0006455183e-1f
#define TN_EXP8_C3 1.6666857898e-1f
#define TN_EXP8_Q(r, q)                                                                            \
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(TN_EXP8_C3), r, _mm256_set1_ps(TN_EXP8_C2));         \
    q = _mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r)

/* 2^(j/8), j = 0 .. 7 (the floats nearest), as float bits (TN_EXP8_TAB(0),
 * the edge path's) or less j << 20 (TN_EXP8_TAB(1 << 20)), so that adding t
 * << 20 as integers (n << 20: the low three bits of n cancel the j << 20,
 * the rest lands in the exponent as m) gives 2^m 2^(j/8); vpermps reads the
 * entry by t's low three bits, j. */
#define TN_EXP8_TAB(J)                                                                             \
    _mm256_castsi256_ps(_mm256_setr_epi32(                                                         \
        1065353216 - 0 * (J), 1065063874 + (1 << 20) - 1 * (J), 1064843248 + (2 << 20) - 2 * (J),  \
        1064697559 + (3 << 20) - 3 * (J), 1064633587 + (4 << 20) - 4 * (J),                        \
        1064658730 + (5 << 20) - 5 * (J), 1064781053 + (6 << 20) - 6 * (J),                        \
        1065009351 + (7 << 20) - 7 * (J)))

/* tn__exp8 for vectors with a lane of |x| > 86 or NaN: x clamped to
 * [-104, 89] (NaN stays NaN: -inf gives 0, inf inf), 2^(j/8) (1 + q)
 * rounded as tn__exp8 rounds it, and 2^m applied as two halves 2^(m/2)
 * 2^(m - m/2), so that results down in the subnormals round once and large
 * x overflow to inf. */
TN_AVX2 __attribute__((noinline)) static __m256 tn__exp8_edge(__m256 x)
{
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    TN_EXP8_REDUCE(x, t, n, r);
    TN_EXP8_Q(r, q);
    __m256 s = _mm256_permutevar8x32_ps(TN_EXP8_TAB(0), _mm256_castps_si256(t));
    __m256 p = _mm256_fmadd_ps(s, q, s);
    __m256i m = _mm256_srai_epi32(_mm256_cvtps_epi32(n), 3), m1 = _mm256_srai_epi32(m, 1);
    __m256i m2 = _mm256_sub_epi32(m, m1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(m1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(m2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* e^x for eight floats: x = (8m + j) ln2/8 + r (TN_EXP8_REDUCE), s = 2^m
 * 2^(j/8) from a table in a register (TN_EXP8_TAB, one vpermps, no gather)
 * and an integer add of m into its exponent, and e^x = s + s q in one FMA
 * (TN_EXP8_Q: degree 3 on |r| <= ln2/16). Within 1.14 ulp of e^x over
 * every float (1.24 before; tests/unit/test_ops_unary.c, and a sweep of
 * every fifth float): the table's entries round to float, the FMA once
 * more. Exact at 0, inf and -inf (inf, 0); NaN stays NaN. With |x| <=
 * 86, |n| <= 993 and s is normal, the add exact. Vectors with a lane
 * outside (large, subnormal or zero results, infinities, NaN) take
 * tn__exp8_edge, which gives the same bits for the other lanes. NaN stays
 * NaN, -inf gives 0 (tn__exp8_near: |x| <= 86 alone, without the check).
 * 11 vector operations besides the range check, against 13 for the
 * degree-6 polynomial on |r| <= ln2/2 before, 7 of them on the FMA pipes
 * against 9: exp of 2048 floats in L1, over and over, 1.23-1.25x as fast
 * (36 GB/s against 29.5, thread clock, loaded machine; issue 27). */
TN_AVX2 static inline __m256 tn__exp8_near(__m256 x)
{
    TN_EXP8_REDUCE(x, t, n, r);
    TN_EXP8_Q(r, q);
    (void)n;
    __m256i ti = _mm256_castps_si256(t);
    __m256 s = _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_castps_si256(_mm256_permutevar8x32_ps(TN_EXP8_TAB(1 << 20), ti)),
                         _mm256_slli_epi32(ti, 20)));
    return _mm256_fmadd_ps(s, q, s);
}

TN_AVX2 static inline __m256 tn__exp8(__m256 x)
{
    __m256 far = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(86.0f),
                               _CMP_NLE_UQ);
    if (__builtin_expect(!_mm256_testz_ps(far, far), 0))
        return tn__exp8_edge(x);
    return tn__exp8_near(x);
}

/* tn__exp8 of two vectors in place, one range check for both (the edge
 * path gives in-range lanes tn__exp8_near's bits). */
TN_AVX2 static inline void tn__exp8x2(__m256 *v)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), lim = _mm256_set1_ps(86.0f);
    __m256 far = _mm256_or_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v[0]), lim, _CMP_NLE_UQ),
                              _mm256_cmp_ps(_mm256_andnot_ps(sign, v[1]), lim, _CMP_NLE_UQ));
    if (__builtin_expect(_mm256_testz_ps(far, far), 1)) {
        v[0] = tn__exp8_near(v[0]);
        v[1] = tn__exp8_near(v[1]);
    } else {
        v[0] = tn__exp8_edge(v[0]);
        v[1] = tn__exp8_edge(v[1]);
    }
}

/* tn__exp8 of x <= 0 or NaN (softmax's x - max): only the lower end
 * checked, one comparison instead of an and and a comparison. */
TN_AVX2 static inline __m256 tn__exp8_neg(__m256 x)
{
    __m256 far = _mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_NGE_UQ);
    if (__builtin_expect(!_mm256_testz_ps(far, far), 0))
        return tn__exp8_edge(x);
    return tn__exp8_near(x);
}

/* tn__exp8 on sixteen lanes for AVX-512 CPUs (TN_AVX512 functions; call
 * where tn__have_avx512()): the same reduction and polynomial, 2^(j/8)
 * from a sixteen-entry table (the eight twice: vpermps reads four bits of
 * t), 2^(j/8) (1 + q) rounded as tn__exp8_edge rounds it, and 2^m applied
 * by one vscalefps, which rounds once as tn__exp8_edge's two halves do and
 * is exact where tn__exp8's integer add is, so every float gives the same
 * bits. With eight lanes exp of 10^4 to 10^6 floats moved 20-22 GB/s at 1
 * thread, PyTorch's AVX-512 one 2.6x that at 10^5; then 50-55 (README). */
#define TN_AVX512 __attribute__((target("avx512f")))
static inline bool tn__have_avx512(void)
{
    return __builtin_cpu_supports("avx512f");
}
TN_AVX512 static inline __m512 tn__exp16(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(11.5415603271f), _mm512_set1_ps(12582912.0f));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(12582912.0f));
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.086669921875f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.65243050e-5f), r);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(TN_EXP8_C3), r, _mm512_set1_ps(TN_EXP8_C2));
    q = _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r);
    __m512 tab = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(TN_EXP8_TAB(0))));
    __m512 s = _mm512_permutexvar_ps(_mm512_castps_si512(t), tab);
    __m512 m = _mm512_roundscale_ps(_mm512_mul_ps(n, _mm512_set1_ps(0.125f)),
                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(_mm512_fmadd_ps(s, q, s), m);
}

/* gelu(x) = x/2 (1 + erf(x/sqrt 2)) for eight floats, erf(z) for |z| as
 * 1 - t P(t) e^(-z^2) with t = 1/(1 + p|z|) and P of degree 5 (Abramowitz
 * and Stegun 7.1.26, absolute error under 1.5e-7). For z < 0 the factor
 * 1 + erf(z) is t P(t) e^(-z^2) itself, without a cancellation. NaN stays
 * NaN, inf gives inf, -inf NaN (as the scalar formula). */
TN_AVX2 static inline __m256 tn__gelu8(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    __m256 a = _mm256_andnot_ps(sign, z);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    /* erfc(|z|), then 1 + erf(z): erfc(|z|) below 0, 2 - erfc(|z|) above */
    __m256 c = _mm256_mul_ps(p, tn__exp8(_mm256_xor_ps(sign, _mm256_mul_ps(z, z))));
    __m256 neg = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 f = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), c), c, neg);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), f);
}

#endif
