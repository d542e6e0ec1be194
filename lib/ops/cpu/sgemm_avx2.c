/*
 * ops/cpu/sgemm_avx2.c: small float32 products on AVX2 and FMA, without
 * OpenBLAS's packing of a and its pass over c that zeroes it (beta 0):
 * in a transformer block's training step (512 rows of tokens, 64..256
 * features; the heads' 32 x 16 @ 16 x 32) that packing and zeroing took a
 * third of OpenBLAS's time on a CPU without AVX-512 (issue 17). b is
 * packed whole into 16-column panels (K x 16, zero past N; K taken 128 at
 * a time, 128 KiB at most, in L2); then blocks of 6 rows x 16 columns of c
 * in 12 ymm accumulators, each k one row of a panel (two loads) and 6
 * broadcasts of a, a's 6 rows staying in L1 while the panels pass. a is
 * read in place, row-major or transposed (a(i, k) at a[i * ars + k * aks]).
 * Full panels store plainly: with masked stores everywhere (now only the
 * last panel's) the kernel ran 1.03x OpenBLAS's time on the block's
 * shapes on this AMD EPYC (512 x 64 x 64: 58 against 45 us). Each element is one
 * FMA chain over k in order within each 128 of K. The packing moves full
 * panels with plain loads (a row-major b) or 8 x 8 transposes in registers
 * (a transposed b), a scalar loop only for the last panel's columns and
 * K's last rows; a caller of many products (compile/bmm.c's batch) passes
 * the panels' scratch, allocated once (tn__sgemm_small_scratch). A caller
 * outside the pool (tn__sgemm's pool) has c's panels split over it, each
 * task packing its own panels into its own part of the scratch, from
 * TN_SGEMM_AVX2_TASK multiply-adds a task: on this EPYC at 2 threads
 * (load 7 on 2 cores, best of 2000) 64 x 128 x 64 in 2 tasks took 9.3-9.9
 * us against 11.4 on one thread, 2^16 a task (64^3 in 4) gained nothing.
 */
#include <config.h>

#include "ops/internal.h"

#include <stdlib.h>

#ifdef TN_HAVE_AVX2
#include <immintrin.h>

/* R rows of c's columns [0, w) (m0 and m1 the lanes of its two halves)
 * from b's panel p (row k at p + k * 16, zero past w) */
#define SG_BLOCK(R)                                                                            \
    TN_AVX2 static void sg_rows##R(bool full, __m256i m0, __m256i m1, int64_t K,              \
                                   const float *a,                                             \
                                   int64_t ars, int64_t aks, const float *p, float *c,         \
                                   int64_t ldc, bool add)                                      \
    {                                                                                          \
        __m256 acc[R][2];                                                                      \
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] =            \
            _mm256_setzero_ps();                                                               \
        for (int64_t k = 0; k < K; k++) {                                                      \
            __m256 b0 = _mm256_load_ps(p + k * 16), b1 = _mm256_load_ps(p + k * 16 + 8);       \
            const float *ak = a + k * aks;                                                     \
            _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)                                \
            {                                                                                  \
                __m256 x = _mm256_broadcast_ss(ak + r * ars);                                  \
                acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);                                 \
                acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);                                 \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)                                    \
        {                                                                                      \
            float *o = c + r * ldc;                                                            \
            if (full) { /* (masked stores are slow on AMD's cores before Zen 3) */             \
                if (add) {                                                                     \
                    acc[r][0] = _mm256_add_ps(_mm256_loadu_ps(o), acc[r][0]);                  \
                    acc[r][1] = _mm256_add_ps(_mm256_loadu_ps(o + 8), acc[r][1]);              \
                }                                                                              \
                _mm256_storeu_ps(o, acc[r][0]);                                                \
                _mm256_storeu_ps(o + 8, acc[r][1]);                                            \
                continue;                                                                      \
            }                                                                                  \
            if (add) {                                                                         \
                acc[r][0] = _mm256_add_ps(_mm256_maskload_ps(o, m0), acc[r][0]);               \
                acc[r][1] = _mm256_add_ps(_mm256_maskload_ps(o + 8, m1), acc[r][1]);           \
            }                                                                                  \
            _mm256_maskstore_ps(o, m0, acc[r][0]);                                             \
            _mm256_maskstore_ps(o + 8, m1, acc[r][1]);                                         \
        }                                                                                      \
    }
SG_BLOCK(6)
SG_BLOCK(4)
SG_BLOCK(2)
SG_BLOCK(1)

/* the lanes of the first n (clamped to 0..8) of 8 */
TN_AVX2 static __m256i lanes(int64_t n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 rows of 8 floats at s (rows ld apart) transposed into p's 8 rows
 * (16 apart): p[k * 16 + r] = s[r * ld + k] */
TN_AVX2 static void transpose8(const float *s, int64_t ld, float *p)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(s + i * ld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_store_ps(p + i * 16, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_store_ps(p + (i + 4) * 16, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

/* b's columns as 16-column panels, K x 16 each (panel j at pk + j * K * 16,
 * zero past N): rows ldb apart would share a few L1 sets (ldb 256: 4 of
 * 64), and a transposed b's columns are its rows */
TN_AVX2 static void pack_b(int64_t N, int64_t K, const float *b, int64_t ldb, bool bt, float *pk)
{
    for (int64_t j = 0; j < N; j += 16) {
        int64_t w = N - j < 16 ? N - j : 16;
        float *p = pk + j * K;
        if (bt) {
            int64_t k0 = 0;
            if (w == 16) /* 8 x 8 blocks through registers */
                for (; k0 + 8 <= K; k0 += 8)
                    for (int64_t jj = 0; jj < 16; jj += 8)
                        transpose8(b + (j + jj) * ldb + k0, ldb, p + k0 * 16 + jj);
            for (int64_t jj = 0; jj < 16; jj++) {
                const float *col = b + (j + jj) * ldb;
                for (int64_t k = k0; k < K; k++)
                    p[k * 16 + jj] = jj < w ? col[k] : 0.0f;
            }
        } else if (w == 16) {
            for (int64_t k = 0; k < K; k++) {
                _mm256_store_ps(p + k * 16, _mm256_loadu_ps(b + k * ldb + j));
                _mm256_store_ps(p + k * 16 + 8, _mm256_loadu_ps(b + k * ldb + j + 8));
            }
        } else {
            for (int64_t k = 0; k < K; k++) {
                _mm256_store_ps(p + k * 16, _mm256_maskload_ps(b + k * ldb + j, lanes(w)));
                _mm256_store_ps(p + k * 16 + 8, _mm256_maskload_ps(b + k * ldb + j + 8, lanes(w - 8)));
            }
        }
    }
}

/* R rows of c from row i, every panel: a's R rows stay in L1 while the
 * panels pass (all of them in L2: at most 128 x 256 floats) */
#define SG_ROWS(R)                                                                             \
    for (; i + R <= M; i += R)                                                                 \
        for (int64_t j = 0; j < N; j += 16)                                                    \
            sg_rows##R(N - j >= 16, m0, m1, K, a + i * ars, ars, aks, pk + j * K,               \
                       c + i * ldc + j, ldc, add);

TN_AVX2 static void sgemm_avx2(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars,
                               int64_t aks, const float *b, int64_t ldb, bool bt, float *c,
                               int64_t ldc, bool add, float *pk)
{
    pack_b(N, K, b, ldb, bt, pk);
    __m256i m0 = lanes(N % 16), m1 = lanes(N % 16 - 8);
    int64_t i = 0;
    SG_ROWS(6)
    SG_ROWS(4)
    SG_ROWS(2)
    SG_ROWS(1)
}
#endif

/* whether the kernel takes an M x N x K product */
static bool takes(int64_t M, int64_t N, int64_t K)
{
#ifdef TN_HAVE_AVX2
    return tn__have_avx2() && !__builtin_cpu_supports("avx512f") && M >= 1 && N >= 1 &&
           K >= 1 && M * N * K <= TN_SGEMM_AVX2_MAX && N <= TN_SGEMM_AVX2_NMAX;
#else
    (void)M, (void)N, (void)K;
    return false;
#endif
}

size_t tn__sgemm_small_scratch(int64_t M, int64_t N, int64_t K)
{
    if (!takes(M, N, K))
        return 0;
    int64_t k = K < TN_SGEMM_AVX2_KMAX ? K : TN_SGEMM_AVX2_KMAX;
    return (size_t)(k * ((N + 15) / 16 * 16)) * sizeof(float);
}

#ifdef TN_HAVE_AVX2
struct small {
    int64_t M, N, K, ars, aks, ldb, ldc;
    const float *a, *b;
    float *c, *pk;
    bool bt, add;
};

/* c's columns of 16-column panels [begin, end), over all of K: k in chunks
 * of the panels' rows, each after the first added to c; the panels packed
 * into this range's own part of the scratch (its columns at the full
 * chunk's rows: a shorter last chunk of one range must not reach into the
 * next range's panels of a longer one) */
static void panels(int64_t begin, int64_t end, void *ctx)
{
    const struct small *s = ctx;
    int64_t j0 = begin * 16, n = (end * 16 < s->N ? end * 16 : s->N) - j0;
    float *pk = s->pk + j0 * (s->K < TN_SGEMM_AVX2_KMAX ? s->K : TN_SGEMM_AVX2_KMAX);
    for (int64_t k = 0; k < s->K; k += TN_SGEMM_AVX2_KMAX) {
        int64_t kc = s->K - k < TN_SGEMM_AVX2_KMAX ? s->K - k : TN_SGEMM_AVX2_KMAX;
        sgemm_avx2(s->M, n, kc, s->a + k * s->aks, s->ars, s->aks,
                   s->bt ? s->b + j0 * s->ldb + k : s->b + k * s->ldb + j0, s->ldb, s->bt,
                   s->c + j0, s->ldc, s->add || k > 0, pk);
    }
}
#endif

bool tn__sgemm_small(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t aks,
                     const float *b, int64_t ldb, bool bt, float *c, int64_t ldc, bool add,
                     float *scratch, bool pool)
{
#ifdef TN_HAVE_AVX2
    size_t size = tn__sgemm_small_scratch(M, N, K);
    if (!size)
        return false;
    float *pk = scratch ? scratch : aligned_alloc(32, size);
    if (!pk)
        return false;
    struct small s = {.M = M, .N = N, .K = K, .ars = ars, .aks = aks, .ldb = ldb, .ldc = ldc,
                      .a = a, .b = b, .c = c, .pk = pk, .bt = bt, .add = add};
    int64_t np = (N + 15) / 16, per = M * 16 * K; /* a panel's multiply-adds */
    if (pool) /* inline below two tasks' worth */
        tn_parallel_for(np, (TN_SGEMM_AVX2_TASK + per - 1) / per, panels, &s);
    else
        panels(0, np, &s);
    if (!scratch)
        free(pk);
    return true;
#else
    (void)M, (void)N, (void)K, (void)a, (void)ars, (void)aks, (void)b, (void)ldb, (void)bt;
    (void)c, (void)ldc, (void)add, (void)scratch, (void)pool;
    return false;
#endif
}
