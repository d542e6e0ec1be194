/*
 * ops/fft_avx2.c: the double Stockham passes of radix 4, 2, 3, 5 and the
 * plain DFT of 7 ... 31 (the powers of two, Bluestein's sub-plans and
 * mixed lengths) with AVX2, two complex values a vector, for the CPUs that
 * have it (checked once at run time). The same operations in the same
 * order as fft_exec.h's scalar pass (no FMA: the target is avx2 alone, so
 * nothing contracts), so the results are the scalar ones; the first pass
 * (ns = 1) skips its twiddles, all 1. Radix 3 and up come first, and every
 * ns is odd, only in odd lengths: those stay with the scalar passes.
 * The float passes (complex64) use FMA too, four values a vector with
 * twiddles laid out with their parts duplicated (fft_plan.c's twv), or two
 * (ns = 2 mod 4) from the packed ones. The loops over r are written out:
 * gcc -O2 kept the four vectors on the stack otherwise (1.9x slower).
 */
#include "ops/fft_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

#define AVX2 __attribute__((target("avx2")))

/* a w for two complex values each: [ar wr - ai wi, ai wr + ar wi] */
AVX2 static inline __m256d cmul(__m256d a, __m256d w)
{
    __m256d wr = _mm256_movedup_pd(w), wi = _mm256_permute_pd(w, 0xF);
    return _mm256_addsub_pd(_mm256_mul_pd(a, wr), _mm256_mul_pd(_mm256_permute_pd(a, 0x5), wi));
}

/* radix 4 in place on v[0..3] of vector type V (suffix S: pd or ps; SW
 * swaps each complex value's parts, HI picks the imaginary lanes): as
 * fft_exec.h's, (v1 - v3) * -i written as [vi1 - vi3, vr3 - vr1] */
#define BFLY4(V, S, SW, HI)                                                                    \
    V t0 = _mm256_add_##S(v[0], v[2]), t1 = _mm256_sub_##S(v[0], v[2]);                       \
    V t2 = _mm256_add_##S(v[1], v[3]);                                                         \
    V s1 = _mm256_permute_##S(v[1], SW), s3 = _mm256_permute_##S(v[3], SW);                   \
    V t3 = _mm256_sub_##S(_mm256_blend_##S(s1, s3, HI), _mm256_blend_##S(s3, s1, HI));        \
    v[0] = _mm256_add_##S(t0, t2), v[2] = _mm256_sub_##S(t0, t2);                              \
    v[1] = _mm256_add_##S(t1, t3), v[3] = _mm256_sub_##S(t1, t3)

AVX2 static inline void bfly4(__m256d *v) { BFLY4(__m256d, pd, 0x5, 0xA); }

/* a w from the twiddle table at wp, as cmulf's signature */
AVX2 static inline __m256d cmul_at(__m256d a, const double *wp) { return cmul(a, _mm256_loadu_pd(wp)); }

/* A radix-4 pass with ns > 1, VW values of k a vector, TS numbers of R in
 * the twiddle table per twiddle, in pass4 (double) and pass4f (float).
 * Written out, no loops over r: gcc -O2 kept v[] on the stack. */
#define PASS4_GENERAL(R, VW, TS, LOAD, STORE, CMUL, BFLY)                                      \
    for (int64_t b = 0; b < nb; b++) {                                                         \
        for (int64_t k = 0; k < ns; k += VW) {                                                 \
            const R *xk = x + 2 * (b * ns + k), *tk = tw + TS * k;                             \
            R *yk = y + 2 * (b * ns * 4 + k);                                                  \
            v[0] = LOAD(xk);                                                                   \
            v[1] = CMUL(LOAD(xk + 2 * q), tk + TS * ns);                                       \
            v[2] = CMUL(LOAD(xk + 4 * q), tk + 2 * TS * ns);                                   \
            v[3] = CMUL(LOAD(xk + 6 * q), tk + 3 * TS * ns);                                   \
            BFLY(v);                                                                           \
            STORE(yk, v[0]), STORE(yk + 2 * ns, v[1]);                                         \
            STORE(yk + 4 * ns, v[2]), STORE(yk + 6 * ns, v[3]);                                \
        }                                                                                      \
    }

AVX2 static void pass4(int64_t n, int64_t ns, const double *tw, const double *x, double *y)
{
    int64_t q = n / 4, nb = q / ns;
    __m256d v[4];
    if (ns == 1) { /* b pairs: y[4b + r] */
        for (int64_t b = 0; b < q; b += 2) {
            const double *xk = x + 2 * b;
            v[0] = _mm256_loadu_pd(xk), v[1] = _mm256_loadu_pd(xk + 2 * q);
            v[2] = _mm256_loadu_pd(xk + 4 * q), v[3] = _mm256_loadu_pd(xk + 6 * q);
            bfly4(v);
            _mm256_storeu_pd(y + 8 * b, _mm256_permute2f128_pd(v[0], v[1], 0x20));
            _mm256_storeu_pd(y + 8 * b + 4, _mm256_permute2f128_pd(v[2], v[3], 0x20));
            _mm256_storeu_pd(y + 8 * b + 8, _mm256_permute2f128_pd(v[0], v[1], 0x31));
            _mm256_storeu_pd(y + 8 * b + 12, _mm256_permute2f128_pd(v[2], v[3], 0x31));
        }
        return;
    }
    PASS4_GENERAL(double, 2, 2, _mm256_loadu_pd, _mm256_storeu_pd, cmul_at, bfly4);
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

/* radix 3 and 5 on v[] of vector type V (suffix S, SW as BFLY4; NI: -0
 * in the imaginary lanes), fft_exec.h's butterflies: the same operations
 * in the same order, the products by -i h written as a swap of the parts,
 * a product by the constants and a sign flip (both exact); P: _mm256,
 * or _mm for the float passes of two values a vector. */
#define BFLY3(P, V, S, SW, NI)                                                                 \
    const V h = P##_xor_##S(P##_set1_##S(0.86602540378443864676), NI);                         \
    V t = P##_add_##S(v[1], v[2]);                                                             \
    V m = P##_sub_##S(v[0], P##_mul_##S(P##_set1_##S(0.5), t));                                \
    V d = P##_mul_##S(P##_permute_##S(P##_sub_##S(v[1], v[2]), SW), h);                        \
    v[0] = P##_add_##S(v[0], t);                                                               \
    v[1] = P##_add_##S(m, d), v[2] = P##_sub_##S(m, d)

#define BFLY5(P, V, S, SW, NI)                                                                 \
    const V c1 = P##_set1_##S(0.30901699437494742410);                                         \
    const V c2 = P##_set1_##S(-0.80901699437494742410);                                        \
    const V s1 = P##_set1_##S(0.95105651629515357212);                                         \
    const V s2 = P##_set1_##S(0.58778525229247312917);                                         \
    V b1 = P##_add_##S(v[1], v[4]), b2 = P##_add_##S(v[2], v[3]);                              \
    V d1 = P##_sub_##S(v[1], v[4]), d2 = P##_sub_##S(v[2], v[3]);                              \
    V t1 = P##_add_##S(P##_add_##S(v[0], P##_mul_##S(c1, b1)), P##_mul_##S(c2, b2));           \
    V t2 = P##_add_##S(P##_add_##S(v[0], P##_mul_##S(c2, b1)), P##_mul_##S(c1, b2));           \
    V p1 = P##_add_##S(P##_mul_##S(s1, d1), P##_mul_##S(s2, d2));                              \
    V p2 = P##_sub_##S(P##_mul_##S(s2, d1), P##_mul_##S(s1, d2));                              \
    V u1 = P##_xor_##S(P##_permute_##S(p1, SW), NI);                                           \
    V u2 = P##_xor_##S(P##_permute_##S(p2, SW), NI);                                           \
    v[0] = P##_add_##S(v[0], P##_add_##S(b1, b2));                                             \
    v[1] = P##_add_##S(t1, u1), v[4] = P##_sub_##S(t1, u1);                                    \
    v[2] = P##_add_##S(t2, u2), v[3] = P##_sub_##S(t2, u2)

#define NI_PD _mm256_set_pd(-0.0, 0.0, -0.0, 0.0)

AVX2 static inline void bfly3(__m256d *v) { BFLY3(_mm256, __m256d, pd, 0x5, NI_PD); }
AVX2 static inline void bfly5(__m256d *v) { BFLY5(_mm256, __m256d, pd, 0x5, NI_PD); }

/* A radix-3 or radix-5 pass with ns > 1 (VW values of k a vector, TS
 * numbers of R in the twiddle table per twiddle), the loads and stores
 * written out as PASS4_GENERAL's. */
#define PASS_LD(r, LOAD, CMUL, TS) v[r] = CMUL(LOAD(xk + 2 * (r) * q), tk + (r) * TS * ns)
#define PASS_ST(r, STORE) STORE(yk + 2 * (r) * ns, v[r])
#define PASS_ODD(R, VW, TS, LOAD, STORE, CMUL, RAD, BFLY)                                      \
    for (int64_t b = 0; b < nb; b++) {                                                         \
        for (int64_t k = 0; k < ns; k += VW) {                                                 \
            const R *xk = x + 2 * (b * ns + k), *tk = tw + TS * k;                             \
            R *yk = y + 2 * (b * ns * RAD + k);                                                \
            v[0] = LOAD(xk);                                                                   \
            PASS_LD(1, LOAD, CMUL, TS), PASS_LD(2, LOAD, CMUL, TS);                            \
            if (RAD == 5)                                                                      \
                PASS_LD(3, LOAD, CMUL, TS), PASS_LD(4, LOAD, CMUL, TS);                        \
            BFLY(v);                                                                           \
            PASS_ST(0, STORE), PASS_ST(1, STORE), PASS_ST(2, STORE);                           \
            if (RAD == 5)                                                                      \
                PASS_ST(3, STORE), PASS_ST(4, STORE);                                          \
        }                                                                                      \
    }

/* pass3 and pass5 (N3, N5) over vectors V of R: PASS_ODD's loops. */
#define ODD_PASSES(ATTR, R, V, VW, TS, LOAD, STORE, CMUL, B3, B5, N3, N5)                      \
    ATTR static void N3(int64_t n, int64_t ns, const R *tw, const R *x, R *y)                  \
    {                                                                                          \
        int64_t q = n / 3, nb = q / ns;                                                        \
        V v[5]; /* 5: PASS_ODD names v[3] and v[4] in its dead branch */                       \
        PASS_ODD(R, VW, TS, LOAD, STORE, CMUL, 3, B3);                                         \
    }                                                                                          \
    ATTR static void N5(int64_t n, int64_t ns, const R *tw, const R *x, R *y)                  \
    {                                                                                          \
        int64_t q = n / 5, nb = q / ns;                                                        \
        V v[5];                                                                                \
        PASS_ODD(R, VW, TS, LOAD, STORE, CMUL, 5, B5);                                         \
    }

ODD_PASSES(AVX2, double, __m256d, 2, 2, _mm256_loadu_pd, _mm256_storeu_pd, cmul_at, bfly3, bfly5,
           pass3, pass5)

/* The plain DFT of a radix above 5 (7 ... 31) with ns > 1, as fft_exec.h's
 * default butterfly: each output the sum over r from 0 of v[r] times the
 * root (rad of them after the pass's twiddles), in that order. VW values
 * of k a vector; TWIDDLE(r) the twiddled input r >= 1; ROOT(e) the root e
 * as a vector; CMUL(a, w) a w. */
#define PASS_DFT(R, V, VW, SETZERO, LOAD, STORE, ADD, CMUL, TWIDDLE, ROOT)                    \
    int64_t q = n / rad, nb = q / ns;                                                          \
    const R *roots = tw + 2 * ns * rad;                                                        \
    V v[32];                                                                                   \
    for (int64_t b = 0; b < nb; b++) {                                                         \
        for (int64_t k = 0; k < ns; k += VW) {                                                 \
            const R *xk = x + 2 * (b * ns + k);                                                \
            R *yk = y + 2 * (b * ns * rad + k);                                                \
            v[0] = LOAD(xk);                                                                   \
            for (int r = 1; r < rad; r++)                                                      \
                v[r] = TWIDDLE(r);                                                             \
            for (int o = 0; o < rad; o++) {                                                    \
                V sum = SETZERO();                                                             \
                for (int r = 0, e = 0; r < rad; r++, e = e + o >= rad ? e + o - rad : e + o)   \
                    sum = ADD(sum, CMUL(v[r], ROOT(e)));                                       \
                STORE(yk + 2 * o * ns, sum);                                                   \
            }                                                                                  \
        }                                                                                      \
    }

AVX2 static void passdft(int64_t n, int rad, int64_t ns, const double *tw, const double *x,
                         double *y)
{
#define TWIDDLE_D(r) cmul(_mm256_loadu_pd(xk + 2 * (r) * q), _mm256_loadu_pd(tw + 2 * ((r) * ns + k)))
#define ROOT_D(e) _mm256_broadcast_pd((const __m128d *)(roots + 2 * (e)))
    PASS_DFT(double, __m256d, 2, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd,
             _mm256_add_pd, cmul, TWIDDLE_D, ROOT_D);
#undef TWIDDLE_D
#undef ROOT_D
}

/* Contract in ops/fft_internal.h. */
int tn__fft_pass_avx2(int64_t n, int rad, int64_t ns, const double *tw, const double *tv,
                      const double *x, double *y)
{
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    /* vectors of two k (ns even) or, in the first pass, two b (n/rad even) */
    if (ns == 1 ? (n / rad) % 2 : ns % 2)
        return 0;
    if (rad == 4)
        pass4(n, ns, tw, x, y);
    else if (rad == 2)
        pass2(n, ns, tw, x, y);
    else if (rad == 3 && ns > 1)
        pass3(n, ns, tw, x, y);
    else if (rad == 5 && ns > 1)
        pass5(n, ns, tw, x, y);
    else if (rad > 5 && ns > 1)
        passdft(n, rad, ns, tw, x, y);
    else
        return 0;
    return 1;
}

/* The float passes: four complex values a vector. */
#define AVX2FMA __attribute__((target("avx2,fma")))
/* radix-4 passes with ns above this (twv's part of them over 256 KiB) read twf */
#define FFT_TWV_MAX 4096

/* a w, w's parts duplicated already (twv's layout, see fft_plan.c): one
 * shuffle and a fused multiply-add */
AVX2FMA static inline __m256 cmulf(__m256 a, const float *wv)
{
    __m256 wr = _mm256_loadu_ps(wv), wi = _mm256_loadu_ps(wv + 8);
    return _mm256_fmaddsub_ps(a, wr, _mm256_mul_ps(_mm256_permute_ps(a, 0xB1), wi));
}

/* a w for w's packed pairs [wr, wi, ...] (two shuffles more than cmulf) */
AVX2FMA static inline __m256 cmulf_pair(__m256 a, __m256 w)
{
    return _mm256_fmaddsub_ps(a, _mm256_moveldup_ps(w),
                              _mm256_mul_ps(_mm256_permute_ps(a, 0xB1), _mm256_movehdup_ps(w)));
}

/* the same from twf's packed pairs (half cmulf's bytes) */
AVX2FMA static inline __m256 cmulf_packed(__m256 a, const float *wp)
{
    return cmulf_pair(a, _mm256_loadu_ps(wp));
}

AVX2FMA static inline void bfly4f(__m256 *v) { BFLY4(__m256, ps, 0xB1, 0xAA); }

/* the 4 x 4 transpose of complex values (64-bit lanes) */
AVX2FMA static inline void transpose4(__m256 *v)
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

AVX2FMA static void pass4f(int64_t n, int64_t ns, const float *tw, const float *x, float *y)
{
    int64_t q = n / 4, nb = q / ns;
    __m256 v[4];
    if (ns == 1) { /* four b at a time: y[4b + r] */
        for (int64_t b = 0; b < q; b += 4) {
            const float *xk = x + 2 * b;
            v[0] = _mm256_loadu_ps(xk), v[1] = _mm256_loadu_ps(xk + 2 * q);
            v[2] = _mm256_loadu_ps(xk + 4 * q), v[3] = _mm256_loadu_ps(xk + 6 * q);
            bfly4f(v);
            transpose4(v);
            _mm256_storeu_ps(y + 8 * b, v[0]), _mm256_storeu_ps(y + 8 * b + 8, v[1]);
            _mm256_storeu_ps(y + 8 * b + 16, v[2]), _mm256_storeu_ps(y + 8 * b + 24, v[3]);
        }
        return;
    }
    PASS4_GENERAL(float, 4, 4, _mm256_loadu_ps, _mm256_storeu_ps, cmulf, bfly4f);
}

/* pass4f's ns > 1 loop over twf: for the large passes, where twv's
 * duplicated parts (16 bytes a twiddle) read more than the data itself */
AVX2FMA static void pass4f_packed(int64_t n, int64_t ns, const float *tw, const float *x, float *y)
{
    int64_t q = n / 4, nb = q / ns;
    __m256 v[4];
    PASS4_GENERAL(float, 4, 2, _mm256_loadu_ps, _mm256_storeu_ps, cmulf_packed, bfly4f);
}

AVX2FMA static void pass2f(int64_t n, int64_t ns, const float *tv, const float *x, float *y)
{
    int64_t q = n / 2, nb = q / ns;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 2 * b * ns;
        float *yb = y + 2 * b * ns * 2;
        for (int64_t k = 0; k < ns; k += 4) {
            __m256 a = _mm256_loadu_ps(xb + 2 * k);
            __m256 c = cmulf(_mm256_loadu_ps(xb + 2 * (k + q)), tv + 4 * (ns + k));
            _mm256_storeu_ps(yb + 2 * k, _mm256_add_ps(a, c));
            _mm256_storeu_ps(yb + 2 * (k + ns), _mm256_sub_ps(a, c));
        }
    }
}

#define NI_PS _mm256_castsi256_ps(_mm256_set_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0))

AVX2FMA static inline void bfly3f(__m256 *v) { BFLY3(_mm256, __m256, ps, 0xB1, NI_PS); }
AVX2FMA static inline void bfly5f(__m256 *v) { BFLY5(_mm256, __m256, ps, 0xB1, NI_PS); }

ODD_PASSES(AVX2FMA, float, __m256, 4, 4, _mm256_loadu_ps, _mm256_storeu_ps, cmulf, bfly3f, bfly5f,
           pass3f, pass5f)

/* the complex value at p as a vector of four copies (__m64: may alias) */
AVX2FMA static inline __m256 bcast_pairf(const float *p)
{
    __m128 w = _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)p);
    return _mm256_castpd_ps(_mm256_broadcastsd_pd(_mm_castps_pd(w)));
}

AVX2FMA static void passdftf(int64_t n, int rad, int64_t ns, const float *tw, const float *tv,
                             const float *x, float *y)
{
#define TWIDDLE_F(r) cmulf(_mm256_loadu_ps(xk + 2 * (r) * q), tv + 4 * ((r) * ns + k))
#define ROOT_F(e) bcast_pairf(roots + 2 * (e))
    PASS_DFT(float, __m256, 4, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps,
             _mm256_add_ps, cmulf_pair, TWIDDLE_F, ROOT_F);
#undef TWIDDLE_F
#undef ROOT_F
}

/* The same passes two values a vector (__m128), for ns = 2 mod 4 (lengths
 * 2 mod 4, or r2c's halves of them): twf's packed twiddles. */
#define NI_PS2 _mm_castsi128_ps(_mm_set_epi32(INT32_MIN, 0, INT32_MIN, 0))

AVX2FMA static inline __m128 cmulf2_pair(__m128 a, __m128 w)
{
    return _mm_fmaddsub_ps(a, _mm_moveldup_ps(w), _mm_mul_ps(_mm_permute_ps(a, 0xB1), _mm_movehdup_ps(w)));
}

AVX2FMA static inline __m128 cmulf2_packed(__m128 a, const float *wp)
{
    return cmulf2_pair(a, _mm_loadu_ps(wp));
}

AVX2FMA static inline __m128 bcast_pairf2(const float *p)
{
    __m128 w = _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)p);
    return _mm_movelh_ps(w, w);
}

AVX2FMA static inline void bfly3f2(__m128 *v) { BFLY3(_mm, __m128, ps, 0xB1, NI_PS2); }
AVX2FMA static inline void bfly5f2(__m128 *v) { BFLY5(_mm, __m128, ps, 0xB1, NI_PS2); }

ODD_PASSES(AVX2FMA, float, __m128, 2, 2, _mm_loadu_ps, _mm_storeu_ps, cmulf2_packed, bfly3f2,
           bfly5f2, pass3f2, pass5f2)

AVX2FMA static void passdftf2(int64_t n, int rad, int64_t ns, const float *tw, const float *x,
                              float *y)
{
#define TWIDDLE_F2(r) cmulf2_packed(_mm_loadu_ps(xk + 2 * (r) * q), tw + 2 * ((r) * ns + k))
#define ROOT_F2(e) bcast_pairf2(roots + 2 * (e))
    PASS_DFT(float, __m128, 2, _mm_setzero_ps, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps,
             cmulf2_pair, TWIDDLE_F2, ROOT_F2);
#undef TWIDDLE_F2
#undef ROOT_F2
}

/* Contract in ops/fft_internal.h. */
int tn__fft_pass_avx2_f(int64_t n, int rad, int64_t ns, const float *tw, const float *tv,
                        const float *x, float *y)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0;
    if (rad == 4 && ns > FFT_TWV_MAX && ns % 4 == 0)
        pass4f_packed(n, ns, tw, x, y);
    else if (rad == 4 && (ns == 1 ? (n / 4) % 4 == 0 : ns % 4 == 0))
        pass4f(n, ns, tv, x, y);
    else if (rad == 2 && ns % 4 == 0)
        pass2f(n, ns, tv, x, y);
    else if (rad == 3 && ns % 4 == 0)
        pass3f(n, ns, tv, x, y);
    else if (rad == 5 && ns % 4 == 0)
        pass5f(n, ns, tv, x, y);
    else if (rad > 5 && ns % 4 == 0)
        passdftf(n, rad, ns, tw, tv, x, y);
    else if (rad == 3 && ns % 4 == 2)
        pass3f2(n, ns, tw, x, y);
    else if (rad == 5 && ns % 4 == 2)
        pass5f2(n, ns, tw, x, y);
    else if (rad > 5 && ns % 4 == 2)
        passdftf2(n, rad, ns, tw, x, y);
    else
        return 0;
    return 1;
}

/* Contract in ops/fft_internal.h. */
AVX2FMA static int64_t r2c_split(const float *z, const float *w, float *dst, int64_t m, float sc)
{
    const __m256 half = _mm256_set1_ps(0.5f), scale = _mm256_set1_ps(sc);
    const __m256 odd = _mm256_castsi256_ps(_mm256_set_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0,
                                                            INT32_MIN, 0)); /* the imaginary parts' signs */
    int64_t k = 1;
    for (; k + 3 < m; k += 4) {
        __m256 zk = _mm256_loadu_ps(z + 2 * k);
        /* Z[m-k], Z[m-k-1], Z[m-k-2], Z[m-k-3], conjugated */
        __m256d zm = _mm256_castps_pd(_mm256_loadu_ps(z + 2 * (m - k - 3)));
        __m256 c = _mm256_xor_ps(_mm256_castpd_ps(_mm256_permute4x64_pd(zm, 0x1B)), odd);
        __m256 e = _mm256_mul_ps(_mm256_add_ps(zk, c), half);
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(zk, c), half);       /* [-oi, or] */
        __m256 o = _mm256_xor_ps(_mm256_permute_ps(d, 0xB1), odd);  /* [or, oi] */
        __m256 wv = _mm256_loadu_ps(w + 2 * k);
        __m256 wo = _mm256_fmaddsub_ps(o, _mm256_moveldup_ps(wv),
                                       _mm256_mul_ps(_mm256_permute_ps(o, 0xB1), _mm256_movehdup_ps(wv)));
        _mm256_storeu_ps(dst + 2 * k, _mm256_mul_ps(_mm256_add_ps(e, wo), scale));
    }
    return k;
}

int64_t tn__fft_r2c_split_avx2_f(const float *z, const float *w, float *dst, int64_t m, float sc)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 1;
    return r2c_split(z, w, dst, m, sc);
}

/* Contract in ops/fft_internal.h. */
AVX2 static int64_t c2r_join(const float *x, const double *w, double *z, int64_t m)
{
    const __m256d odd = _mm256_set_pd(-0.0, 0.0, -0.0, 0.0);
    int64_t k = 1;
    for (; k + 1 < m; k += 2) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * k));
        __m256d xm = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * (m - k - 1))); /* X[m-k-1], X[m-k] */
        __m256d b = _mm256_xor_pd(_mm256_permute2f128_pd(xm, xm, 0x01), odd);
        __m256d s = _mm256_add_pd(a, b), d = _mm256_sub_pd(a, b);
        __m256d wv = _mm256_loadu_pd(w + 2 * k);
        /* t = conj(w) d = [wr dr + wi di, wr di - wi dr] */
        __m256d p1 = _mm256_mul_pd(d, _mm256_movedup_pd(wv));
        __m256d p2 = _mm256_mul_pd(_mm256_permute_pd(d, 0x5), _mm256_permute_pd(wv, 0xF));
        __m256d t = _mm256_addsub_pd(p1, _mm256_xor_pd(p2, _mm256_set1_pd(-0.0)));
        /* [sr - ti, -(si + tr)] */
        __m256d r = _mm256_addsub_pd(s, _mm256_permute_pd(t, 0x5));
        _mm256_storeu_pd(z + 2 * k, _mm256_xor_pd(r, odd));
    }
    return k;
}

int64_t tn__fft_c2r_join_avx2_f(const float *x, const double *w, double *z, int64_t m)
{
    return __builtin_cpu_supports("avx2") ? c2r_join(x, w, z, m) : 1;
}

#else
int64_t tn__fft_c2r_join_avx2_f(const float *x, const double *w, double *z, int64_t m)
{
    return 1;
}

int64_t tn__fft_r2c_split_avx2_f(const float *z, const float *w, float *dst, int64_t m, float sc)
{
    return 1;
}

int tn__fft_pass_avx2_f(int64_t n, int rad, int64_t ns, const float *tw, const float *tv,
                        const float *x, float *y)
{
    return 0;
}

int tn__fft_pass_avx2(int64_t n, int rad, int64_t ns, const double *tw, const double *tv,
                      const double *x, double *y)
{
    return 0;
}
#endif
