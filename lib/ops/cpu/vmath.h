/*
 * ops/cpu/vmath.h: math functions on eight float32 lanes for the AVX2
 * kernels (TN_AVX2 functions; include under TN_HAVE_AVX2), shared by
 * softmax.c and unary.c.
 */
#ifndef TN_OPS_CPU_VMATH_H
#define TN_OPS_CPU_VMATH_H

#include <immintrin.h>

#include "ops/internal.h"

/* e^x for eight floats: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts),
 * e^r by a degree-7 polynomial (Cephes' expf coefficients, within an ulp or
 * two of the correctly rounded value), times 2^n applied as two halves so
 * that results down in the subnormals round once and large x overflow to
 * inf. NaN stays NaN, -inf gives 0. */
TN_AVX2 static inline __m256 tn__exp8(__m256 x)
{
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
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
