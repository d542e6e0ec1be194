/*
 * ops/fft_avx2.c: the double Stockham passes of radix 4 and 2 (the powers
 * of two, and Bluestein's sub-plans) with AVX2, two complex values a
 * vector, for the CPUs that have it (checked once at run time). The same
 * operations in the same order as fft_exec.h's scalar pass (no FMA: the
 * target is avx2 alone, so nothing contracts), so the results are the
 * scalar ones; the first pass (ns = 1) skips its twiddles, all 1.
 * ns = 1: 1.4-2x the scalar pass over the whole transform, see the commit.
 */
#include "ops/fft_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* a w for two complex values each: [ar wr - ai wi, ai wr + ar wi] */
AVX2 static inline __m256d cmul(__m256d a, __m256d w)
{
    __m256d wr = _mm256_movedup_pd(w), wi = _mm256_permute_pd(w, 0xF);
    return _mm256_addsub_pd(_mm256_mul_pd(a, wr), _mm256_mul_pd(_mm256_permute_pd(a, 0x5), wi));
}

/* radix 4 in place on v[0..3]: as fft_exec.h's, (v1 - v3) * -i written as
 * [vi1 - vi3, vr3 - vr1] */
AVX2 static inline void bfly4(__m256d *v)
{
    __m256d t0 = _mm256_add_pd(v[0], v[2]), t1 = _mm256_sub_pd(v[0], v[2]);
    __m256d t2 = _mm256_add_pd(v[1], v[3]);
    __m256d s1 = _mm256_permute_pd(v[1], 0x5), s3 = _mm256_permute_pd(v[3], 0x5);
    __m256d t3 = _mm256_sub_pd(_mm256_blend_pd(s1, s3, 0xA), _mm256_blend_pd(s3, s1, 0xA));
    v[0] = _mm256_add_pd(t0, t2), v[2] = _mm256_sub_pd(t0, t2);
    v[1] = _mm256_add_pd(t1, t3), v[3] = _mm256_sub_pd(t1, t3);
}

AVX2 static void pass4(int64_t n, int64_t ns, const double *tw, const double *x, double *y)
{
    int64_t q = n / 4, nb = q / ns;
    __m256d v[4];
    if (ns == 1) { /* b pairs: y[4b + r] */
        for (int64_t b = 0; b < q; b += 2) {
            for (int r = 0; r < 4; r++)
                v[r] = _mm256_loadu_pd(x + 2 * (b + r * q));
            bfly4(v);
            _mm256_storeu_pd(y + 8 * b, _mm256_permute2f128_pd(v[0], v[1], 0x20));
            _mm256_storeu_pd(y + 8 * b + 4, _mm256_permute2f128_pd(v[2], v[3], 0x20));
            _mm256_storeu_pd(y + 8 * b + 8, _mm256_permute2f128_pd(v[0], v[1], 0x31));
            _mm256_storeu_pd(y + 8 * b + 12, _mm256_permute2f128_pd(v[2], v[3], 0x31));
        }
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const double *xb = x + 2 * b * ns;
        double *yb = y + 2 * b * ns * 4;
        for (int64_t k = 0; k < ns; k += 2) {
            v[0] = _mm256_loadu_pd(xb + 2 * k);
            for (int r = 1; r < 4; r++)
                v[r] = cmul(_mm256_loadu_pd(xb + 2 * (k + r * q)), _mm256_loadu_pd(tw + 2 * (r * ns + k)));
            bfly4(v);
            for (int r = 0; r < 4; r++)
                _mm256_storeu_pd(yb + 2 * (k + r * ns), v[r]);
        }
    }
}

AVX2 static void pass2(int64_t n, int64_t ns, const double *tw, const double *x, double *y)
{
    int64_t q = n / 2, nb = q / ns;
    if (ns == 1) { /* b pairs: y[2b + r] */
        for (int64_t b = 0; b < q; b += 2) {
            __m256d a = _mm256_loadu_pd(x + 2 * b), c = _mm256_loadu_pd(x + 2 * (b + q));
            __m256d y0 = _mm256_add_pd(a, c), y1 = _mm256_sub_pd(a, c);
            _mm256_storeu_pd(y + 4 * b, _mm256_permute2f128_pd(y0, y1, 0x20));
            _mm256_storeu_pd(y + 4 * b + 4, _mm256_permute2f128_pd(y0, y1, 0x31));
        }
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const double *xb = x + 2 * b * ns;
        double *yb = y + 2 * b * ns * 2;
        for (int64_t k = 0; k < ns; k += 2) {
            __m256d a = _mm256_loadu_pd(xb + 2 * k);
            __m256d c = cmul(_mm256_loadu_pd(xb + 2 * (k + q)), _mm256_loadu_pd(tw + 2 * (ns + k)));
            _mm256_storeu_pd(yb + 2 * k, _mm256_add_pd(a, c));
            _mm256_storeu_pd(yb + 2 * (k + ns), _mm256_sub_pd(a, c));
        }
    }
}

/* Contract in ops/fft_internal.h. */
int tn__fft_pass_avx2(int64_t n, int rad, int64_t ns, const double *tw, const double *x, double *y)
{
    if (!__builtin_cpu_supports("avx2") || (rad != 4 && rad != 2))
        return 0;
    /* vectors of two k (ns even) or, in the first pass, two b (n/rad even) */
    if (ns == 1 ? (n / rad) % 2 : ns % 2)
        return 0;
    if (rad == 4)
        pass4(n, ns, tw, x, y);
    else
        pass2(n, ns, tw, x, y);
    return 1;
}

/* The float passes: four complex values a vector. */
AVX2 static inline __m256 cmulf(__m256 a, __m256 w)
{
    __m256 wr = _mm256_moveldup_ps(w), wi = _mm256_movehdup_ps(w);
    return _mm256_addsub_ps(_mm256_mul_ps(a, wr), _mm256_mul_ps(_mm256_permute_ps(a, 0xB1), wi));
}

AVX2 static inline void bfly4f(__m256 *v)
{
    __m256 t0 = _mm256_add_ps(v[0], v[2]), t1 = _mm256_sub_ps(v[0], v[2]);
    __m256 t2 = _mm256_add_ps(v[1], v[3]);
    __m256 s1 = _mm256_permute_ps(v[1], 0xB1), s3 = _mm256_permute_ps(v[3], 0xB1);
    __m256 t3 = _mm256_sub_ps(_mm256_blend_ps(s1, s3, 0xAA), _mm256_blend_ps(s3, s1, 0xAA));
    v[0] = _mm256_add_ps(t0, t2), v[2] = _mm256_sub_ps(t0, t2);
    v[1] = _mm256_add_ps(t1, t3), v[3] = _mm256_sub_ps(t1, t3);
}

/* the 4 x 4 transpose of complex values (64-bit lanes) */
AVX2 static inline void transpose4(__m256 *v)
{
    __m256d a = _mm256_castps_pd(v[0]), b = _mm256_castps_pd(v[1]);
    __m256d c = _mm256_castps_pd(v[2]), d = _mm256_castps_pd(v[3]);
    __m256d t0 = _mm256_unpacklo_pd(a, b), t1 = _mm256_unpackhi_pd(a, b);
    __m256d t2 = _mm256_unpacklo_pd(c, d), t3 = _mm256_unpackhi_pd(c, d);
    v[0] = _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x20));
    v[1] = _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x20));
    v[2] = _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x31));
    v[3] = _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x31));
}

AVX2 static void pass4f(int64_t n, int64_t ns, const float *tw, const float *x, float *y)
{
    int64_t q = n / 4, nb = q / ns;
    __m256 v[4];
    if (ns == 1) { /* four b at a time: y[4b + r] */
        for (int64_t b = 0; b < q; b += 4) {
            for (int r = 0; r < 4; r++)
                v[r] = _mm256_loadu_ps(x + 2 * (b + r * q));
            bfly4f(v);
            transpose4(v);
            for (int j = 0; j < 4; j++)
                _mm256_storeu_ps(y + 8 * (b + j), v[j]);
        }
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 2 * b * ns;
        float *yb = y + 2 * b * ns * 4;
        for (int64_t k = 0; k < ns; k += 4) {
            v[0] = _mm256_loadu_ps(xb + 2 * k);
            for (int r = 1; r < 4; r++)
                v[r] = cmulf(_mm256_loadu_ps(xb + 2 * (k + r * q)), _mm256_loadu_ps(tw + 2 * (r * ns + k)));
            bfly4f(v);
            for (int r = 0; r < 4; r++)
                _mm256_storeu_ps(yb + 2 * (k + r * ns), v[r]);
        }
    }
}

AVX2 static void pass2f(int64_t n, int64_t ns, const float *tw, const float *x, float *y)
{
    int64_t q = n / 2, nb = q / ns;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 2 * b * ns;
        float *yb = y + 2 * b * ns * 2;
        for (int64_t k = 0; k < ns; k += 4) {
            __m256 a = _mm256_loadu_ps(xb + 2 * k);
            __m256 c = cmulf(_mm256_loadu_ps(xb + 2 * (k + q)), _mm256_loadu_ps(tw + 2 * (ns + k)));
            _mm256_storeu_ps(yb + 2 * k, _mm256_add_ps(a, c));
            _mm256_storeu_ps(yb + 2 * (k + ns), _mm256_sub_ps(a, c));
        }
    }
}

/* Contract in ops/fft_internal.h. */
int tn__fft_pass_avx2_f(int64_t n, int rad, int64_t ns, const float *tw, const float *x, float *y)
{
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    if (rad == 4 && (ns == 1 ? (n / 4) % 4 == 0 : ns % 4 == 0))
        pass4f(n, ns, tw, x, y);
    else if (rad == 2 && ns % 4 == 0)
        pass2f(n, ns, tw, x, y);
    else
        return 0;
    return 1;
}

#else
int tn__fft_pass_avx2_f(int64_t n, int rad, int64_t ns, const float *tw, const float *x, float *y)
{
    return 0;
}

int tn__fft_pass_avx2(int64_t n, int rad, int64_t ns, const double *tw, const double *x, double *y)
{
    return 0;
}
#endif
