/*
 * ops/cpu/vmath.h: math functions on eight float32 lanes for the AVX2
 * kernels (TN_AVX2 functions; include under TN_HAVE_AVX2), shared by
 * softmax.c and unary.c.
 */
#ifndef TN_OPS_CPU_VMATH_H
#define TN_OPS_CPU_VMATH_H

#include <immintrin.h>

#include "ops/internal.h"

/* n = round(x log2 e) for the vectors of type T with intrinsics MM##_...
 * (_mm256, _mm512): one FMA onto the shifter 1.5 * 2^23, whose ulp is 1,
 * rounds x log2 e to the nearest integer (ties to even) as t, n = t -
 * 1.5 * 2^23, and t's low mantissa bits hold n (|n| < 2^22), so that
 * t << 23 (as integers) is n in the exponent field. */
#define TN_EXP_REDUCE(MM, T, x, t, n)                                                              \
    T t = MM##_fmadd_ps(x, MM##_set1_ps(1.44269504088896341f), MM##_set1_ps(12582912.0f));         \
    T n = MM##_sub_ps(t, MM##_set1_ps(12582912.0f))

/* p = e^r, r = x - n ln2 (ln2 in two parts, the first exact in n ln2),
 * |r| <= ln2/2: 1 + r + r^2 q(r) with q of degree 4, a minimax fit of the
 * relative error (3.6e-9, 0.03 ulp at 1; bench/ops/expfit.py made the
 * coefficients), so that p is within an ulp of e^r. */
#define TN_EXP_POLY(MM, T, x, n, p)                                                                \
    T r_ = MM##_fnmadd_ps(n, MM##_set1_ps(0.693359375f), x);                                       \
    r_ = MM##_fnmadd_ps(n, MM##_set1_ps(-2.12194440e-4f), r_);                                     \
    T p = MM##_set1_ps(1.3814540580e-3f);                                                          \
    p = MM##_fmadd_ps(p, r_, MM##_set1_ps(8.3687454462e-3f));                                      \
    p = MM##_fmadd_ps(p, r_, MM##_set1_ps(4.1668388993e-2f));                                      \
    p = MM##_fmadd_ps(p, r_, MM##_set1_ps(1.6666521132e-1f));                                      \
    p = MM##_fmadd_ps(p, r_, MM##_set1_ps(4.9999994040e-1f));                                      \
    p = MM##_fmadd_ps(p, MM##_mul_ps(r_, r_), MM##_add_ps(r_, MM##_set1_ps(1.0f)))

/* tn__exp8 for vectors with a lane of |x| > 86 or NaN: x clamped to
 * [-104, 89] (NaN stays NaN: -inf gives 0, inf inf), and 2^n applied as
 * two halves 2^(n/2) 2^(n - n/2), so that results down in the subnormals
 * round once and large x overflow to inf. */
TN_AVX2 __attribute__((noinline)) static __m256 tn__exp8_edge(__m256 x)
{
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    TN_EXP_REDUCE(_mm256, __m256, x, t, n);
    TN_EXP_POLY(_mm256, __m256, x, n, p);
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    (void)t;
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* e^x for eight floats: x = n ln2 + r (TN_EXP_REDUCE), e^r by TN_EXP_POLY
 * (within 1.25 ulp of e^x in all, as Sleef's expf that PyTorch uses, over
 * every float: tests/unit/test_ops_unary.c), times 2^n by an integer add
 * of n into p's exponent: p is in [0.7, 1.42] and, with |x| <= 86, |n| <=
 * 124, so the result is normal and the add exact. Vectors with a lane
 * outside (large, subnormal or zero results, infinities, NaN) take
 * tn__exp8_edge, which gives the same bits for the other lanes. NaN stays
 * NaN, -inf gives 0. The integer add and the shifter's n take 15
 * instructions against 23 for the clamp, vroundps, the degree-7
 * polynomial and the two scale multiplies before: exp of 25,000 floats in
 * L1 1.3-1.5x as fast (20-30 GB/s against 16-19, loaded machine). */
TN_AVX2 static inline __m256 tn__exp8(__m256 x)
{
    __m256 far = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(86.0f),
                               _CMP_NLE_UQ);
    if (__builtin_expect(!_mm256_testz_ps(far, far), 0))
        return tn__exp8_edge(x);
    TN_EXP_REDUCE(_mm256, __m256, x, t, n);
    TN_EXP_POLY(_mm256, __m256, x, n, p);
    return _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}

/* tn__exp8 on sixteen lanes for AVX-512 CPUs (TN_AVX512 functions; call
 * where tn__have_avx512()): the same reduction and polynomial, and 2^n
 * applied by one vscalefps, which rounds once as tn__exp8's two halves do
 * and is exact where its integer add is, so every float gives the same
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
    TN_EXP_REDUCE(_mm512, __m512, x, t, n);
    TN_EXP_POLY(_mm512, __m512, x, n, p);
    (void)t;
    return _mm512_scalef_ps(p, n);
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
