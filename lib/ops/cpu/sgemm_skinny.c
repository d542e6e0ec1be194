/*
 * ops/cpu/sgemm_skinny.c: float32 products of a few rows by a linear
 * layer's weight, transposed ([N, K] row-major), on AVX2 and FMA.
 * OpenBLAS's sgemm packs that weight into panels (sgemm_incopy), reading
 * it and writing a copy, for only M rows of work: in convnext_tiny on a
 * 64x64 image (the last stages' MLPs, 16 and 4 rows by 1536x384 and
 * 3072x768 weights) the packing alone was 40% of the run on this AMD EPYC
 * without AVX-512, more than the products. Here each weight row is read
 * once, in place, against 4 rows of a at a time: tiles of 4 rows of a x 3
 * weight rows in 12 ymm accumulators along k (3 weight and 1 a vector in
 * the other 4 registers), summed across lanes at the end (another order
 * than BLAS's: float32 tolerance), the weight rows prefetched SKINNY_PF
 * floats ahead. compile/skinny.c is the AVX-512 kernel of a compiled
 * program's long-k products. On this EPYC, 1 thread, 16 weights out of
 * cache, CPU time a product against OpenBLAS's (load 11 on 2 cores):
 * M 4 K 768 N 3072 0.73 ms against 1.15-1.31, M 4 K 3072 N 768 0.44-0.45
 * against 0.90-0.97, M 16 K 384 N 1536 0.38-0.40 against 0.49-0.50,
 * M 64 K 768 N 192 0.24-0.26 against 0.32-0.48.
 */
#include <config.h>

#include "ops/internal.h"

/* The shapes it takes: 2 to SKINNY_MMAX rows (one is sgemv's), k from
 * SKINNY_KMIN (each tile's sums across lanes amortised), n from
 * SKINNY_NMIN (a weight worth the pool's split). */
#define SKINNY_MMAX 64
#define SKINNY_KMIN 128
#define SKINNY_NMIN 32
#define SKINNY_PF 128 /* 0.67-0.89 of the time without on 3 shapes above, one even */

#ifdef TN_HAVE_AVX2
#include <immintrin.h>

struct skinny {
    const float *a, *w;
    float *c;
    int64_t M, K, N, lda, ldw, ldc;
    bool add;
};

/* the lane sums of a, b, c and d */
TN_AVX2 static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* out[j][i] = a[i] . w[j] over K for R rows of a, lda apart (R a constant
 * where it is inlined, so the loops unroll into registers), and 3 weight
 * rows */
TN_AVX2 __attribute__((always_inline)) static inline void
tile(int R, const float *a, int64_t lda, const float *const w[3], int64_t K, __m256i tail,
     float out[3][4])
{
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 3
        for (int j = 0; j < 3; j++)
            acc[i][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
#if SKINNY_PF
        _mm_prefetch((const char *)(w[0] + k + SKINNY_PF), _MM_HINT_T0);
        _mm_prefetch((const char *)(w[1] + k + SKINNY_PF), _MM_HINT_T0);
        _mm_prefetch((const char *)(w[2] + k + SKINNY_PF), _MM_HINT_T0);
#endif
        __m256 w0 = _mm256_loadu_ps(w[0] + k), w1 = _mm256_loadu_ps(w[1] + k),
               w2 = _mm256_loadu_ps(w[2] + k);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256 x = _mm256_loadu_ps(a + i * lda + k);
            acc[i][0] = _mm256_fmadd_ps(x, w0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(x, w1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(x, w2, acc[i][2]);
        }
    }
    if (k < K) {
        __m256 w0 = _mm256_maskload_ps(w[0] + k, tail), w1 = _mm256_maskload_ps(w[1] + k, tail),
               w2 = _mm256_maskload_ps(w[2] + k, tail);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256 x = _mm256_maskload_ps(a + i * lda + k, tail);
            acc[i][0] = _mm256_fmadd_ps(x, w0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(x, w1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(x, w2, acc[i][2]);
        }
    }
#pragma GCC unroll 3
    for (int j = 0; j < 3; j++)
        _mm_storeu_ps(out[j], hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]));
}

#define SKINNY_TILE(R)                                                                         \
    TN_AVX2 static void tile##R(const float *a, int64_t lda, const float *const w[3],         \
                                int64_t K, __m256i tail, float out[3][4])                      \
    {                                                                                          \
        tile(R, a, lda, w, K, tail, out);                                                      \
    }
SKINNY_TILE(1)
SKINNY_TILE(2)
SKINNY_TILE(3)
SKINNY_TILE(4)

/* columns [3 * b0, 3 * b1) of c, every row; a tile's missing weight rows
 * repeat its first one and are not stored */
TN_AVX2 static void columns(int64_t b0, int64_t b1, void *ctx)
{
    static void (*const tiles[5])(const float *, int64_t, const float *const[3], int64_t,
                                  __m256i, float[3][4]) = {NULL, tile1, tile2, tile3, tile4};
    const struct skinny *s = ctx;
    /* the lanes of k's last, partial vector */
    __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(s->K % 8)),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t n = 3 * b0; n < 3 * b1 && n < s->N; n += 3) {
        const float *w[3];
        int nj = s->N - n < 3 ? (int)(s->N - n) : 3;
        for (int j = 0; j < 3; j++)
            w[j] = s->w + (j < nj ? n + j : n) * s->ldw;
        for (int64_t m = 0; m < s->M; m += 4) {
            int R = s->M - m < 4 ? (int)(s->M - m) : 4;
            float out[3][4];
            tiles[R](s->a + m * s->lda, s->lda, w, s->K, tail, out);
            for (int i = 0; i < R; i++) {
                float *c = s->c + (m + i) * s->ldc + n;
                for (int j = 0; j < nj; j++)
                    c[j] = s->add ? c[j] + out[j][i] : out[j][i];
            }
        }
    }
}
#endif

bool tn__sgemm_skinny(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *w, int64_t ldw, float *c, int64_t ldc, bool add, bool pool)
{
#ifdef TN_HAVE_AVX2
    if (!tn__have_avx2() || M < 2 || M > SKINNY_MMAX || K < SKINNY_KMIN ||
        N < SKINNY_NMIN)
        return false;
    struct skinny s = {.a = a, .w = w, .c = c, .M = M, .K = K, .N = N, .lda = lda, .ldw = ldw,
                       .ldc = ldc, .add = add};
    /* 48 weight rows a task at least (36 KiB at K 192) */
    if (pool)
        tn__blas_parallel_for((N + 2) / 3, 16, columns, &s);
    else
        columns(0, (N + 2) / 3, &s);
    return true;
#else
    (void)M, (void)N, (void)K, (void)a, (void)lda, (void)w, (void)ldw, (void)c, (void)ldc;
    (void)add, (void)pool;
    return false;
#endif
}
