/*
 * compile/skinny.c: a compiled program's float32 matrix product with few
 * rows (a linear layer over a handful of tokens: ViT on a small image, a
 * decoder step) by a linear layer's weight, transposed ([N, K] row-major).
 * OpenBLAS's sgemm packs the weight into panels, reading it and writing a
 * copy, for only M rows of work; here each weight row is read once,
 * straight from memory, against up to 4 rows of a kept in L1: blocks of
 * 4 weight rows x R rows of a in 4R zmm accumulators along k, then summed
 * across lanes (another order than BLAS's: float32 tolerance). A long k
 * (an MLP's second layer) is where this wins.
 */
#include "compile/internal.h"

/* Where it wins (bench/compile/bench_skinny; 1 thread, weights out of cache,
 * against libtensor's OpenBLAS sgemm, best of 6 on a loaded machine): K
 * 3072 N 768 at 0.55-0.62 of sgemm's time for M 5, 0.37 for M 3, 0.77 for
 * M 8; K 2048 N 512, 0.56; K 3072 N 3072, 0.54; but K 768 or 1536 about
 * even (0.96-1.16), M 8 at K 768 1.4 and M 16 1.7 slower, and one row is
 * sgemv's, faster still. */
#define SKINNY_MAX_ROWS 8
#define SKINNY_MIN_K 2048

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

struct skinny {
    const float *a, *w;
    float *c;
    int64_t M, K, N, lda, ldw;
};

/* out[i][j] = a[i] . w[j] over K for R rows of a (R a constant where it
 * is inlined, so the loops unroll into registers) */
__attribute__((target("avx512f"), always_inline)) static inline void
block(int R, const float *const a[4], const float *const w[4], int64_t K, float out[4][4])
{
    __m512 acc[4][4];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wv[4];
        for (int j = 0; j < 4; j++)
            wv[j] = _mm512_loadu_ps(w[j] + k);
        for (int i = 0; i < R; i++) {
            __m512 av = _mm512_loadu_ps(a[i] + k);
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_fmadd_ps(av, wv[j], acc[i][j]);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 wv[4];
        for (int j = 0; j < 4; j++)
            wv[j] = _mm512_maskz_loadu_ps(m, w[j] + k);
        for (int i = 0; i < R; i++) {
            __m512 av = _mm512_maskz_loadu_ps(m, a[i] + k);
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_fmadd_ps(av, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 4; j++)
            out[i][j] = _mm512_reduce_add_ps(acc[i][j]);
}

#define SKINNY_BLOCK(R)                                                                        \
    __attribute__((target("avx512f"))) static void block##R(                                 \
        const float *const a[4], const float *const w[4], int64_t K, float out[4][4])        \
    {                                                                                          \
        block(R, a, w, K, out);                                                                \
    }
SKINNY_BLOCK(1)
SKINNY_BLOCK(2)
SKINNY_BLOCK(3)
SKINNY_BLOCK(4)

/* columns [4 * b0, 4 * b1) of c; a block's missing columns repeat its
 * first one and are not stored */
static void columns(int64_t b0, int64_t b1, void *ctx)
{
    static void (*const blocks[5])(const float *const[4], const float *const[4], int64_t,
                                   float[4][4]) = {NULL, block1, block2, block3, block4};
    const struct skinny *s = ctx;
    for (int64_t n = 4 * b0; n < 4 * b1 && n < s->N; n += 4) {
        const float *w[4];
        for (int j = 0; j < 4; j++)
            w[j] = s->w + (n + j < s->N ? n + j : n) * s->ldw;
        for (int64_t m = 0; m < s->M; m += 4) {
            int R = s->M - m < 4 ? (int)(s->M - m) : 4;
            const float *a[4];
            float out[4][4];
            for (int i = 0; i < R; i++)
                a[i] = s->a + (m + i) * s->lda;
            blocks[R](a, w, s->K, out);
            for (int i = 0; i < R; i++)
                for (int j = 0; j < 4 && n + j < s->N; j++)
                    s->c[(m + i) * s->N + n + j] = out[i][j];
        }
    }
}
#endif

struct tn_tensor *tn__skinny_mm(const struct tn_tensor *a, const struct tn_tensor *b)
{
#if defined(__x86_64__) && defined(__GNUC__)
    int64_t M = a->sizes[0], K = a->sizes[1], N = b->sizes[1];
    if (a->dtype != TN_FLOAT32 || b->dtype != TN_FLOAT32 || M < 2 || M > SKINNY_MAX_ROWS ||
        K < SKINNY_MIN_K || N < 64 || a->strides[1] != 1 || b->strides[0] != 1 || a->strides[0] < K ||
        b->strides[1] < K || !__builtin_cpu_supports("avx512f"))
        return NULL;
    struct tn_tensor *c = tn_empty((int64_t[]){M, N}, 2, TN_FLOAT32);
    if (!c)
        return NULL;
    struct skinny s = {.a = tn_data(a), .w = tn_data(b), .c = tn_data(c), .M = M, .K = K,
                       .N = N, .lda = a->strides[0], .ldw = b->strides[1]};
    /* 16 weight rows (48 KiB at K = 768) a task at least */
    tn_parallel_for((N + 3) / 4, 4, columns, &s);
    return c;
#else
    (void)a;
    (void)b;
    return NULL;
#endif
}
