/*
 * ops/cpu/nn_conv.h: what the convolution kernel files (nn_conv.c, the
 * im2col and GEMM path; nn_conv_dw.c, the direct depthwise kernel) share:
 * a convolution's geometry.
 */
#ifndef TN_OPS_CPU_NN_CONV_H
#define TN_OPS_CPU_NN_CONV_H

#include <stdbool.h>
#include <stdint.h>

/* 8-float vectors' shuffles: the even and the odd lanes of a:b, and a
 * and b interleaved (low half, high half), and 4-float ones' even and odd
 * lanes, for gcc and clang. */
#if defined(__clang__)
#define TN_EVEN8(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define TN_ODD8(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#define TN_ZIPLO8(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define TN_ZIPHI8(a, b) __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#define TN_EVEN4(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define TN_ODD4(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7)
#else
#define TN_EVEN8(a, b) __builtin_shuffle(a, b, (v8i){0, 2, 4, 6, 8, 10, 12, 14})
#define TN_ODD8(a, b) __builtin_shuffle(a, b, (v8i){1, 3, 5, 7, 9, 11, 13, 15})
#define TN_ZIPLO8(a, b) __builtin_shuffle(a, b, (v8i){0, 8, 1, 9, 2, 10, 3, 11})
#define TN_ZIPHI8(a, b) __builtin_shuffle(a, b, (v8i){4, 12, 5, 13, 6, 14, 7, 15})
#define TN_EVEN4(a, b) __builtin_shuffle(a, b, (v4i){0, 2, 4, 6})
#define TN_ODD4(a, b) __builtin_shuffle(a, b, (v4i){1, 3, 5, 7})
#endif
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

struct conv {
    int64_t n, c, h, w;     /* input */
    int64_t oc, kh, kw;     /* weight (oc, c / groups, kh, kw) */
    int64_t oh, ow, groups;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t cg, ocg, k;     /* channels per group in and out, patch length */
};

/* Depthwise float32 forward (one input and one output channel a group):
 * out (n, c, oh, ow) from x (n, c, h, w), w (c, 1, kh, kw), b (c) or NULL,
 * on the thread pool. TN_OK, or TN_ENOMEM for its scratch. */
int tn__conv_depthwise_f32(const struct conv *g, const float *x, const float *w,
                           const float *b, float *out);

/* Input row xr (w values) into the two phase rows of stride 2, r0 and r1
 * (qw values each): padded column x + pw is phase (x + pw) % 2, column
 * (x + pw) / 2 (nn_conv_dw.c). Columns no input lands on are left as they
 * were. */
void tn__conv_split2(float *r0, float *r1, const float *xr, int64_t w, int64_t pw, int64_t qw);

/* Whether a convolution is a 3x3 at stride 1 the Winograd kernel takes
 * (groups 1, no dilation, 16 channels or more in and out), and that
 * kernel (nn_conv_wino.c), float32 forward as tn__conv_depthwise_f32. */
bool tn__conv_wino_fits(const struct conv *g);
int tn__conv_wino_f32(const struct conv *g, const float *x, const float *w, const float *b,
                      float *out);

/* The longest inner dimension tn__gemm_smallk_f32 takes. */
#define TN_GEMM_SMALLK_MAX 256

/* C (m x n, rows ldc apart) = A (m x k, lda) B (k x n, ldb), plus bias[i]
 * on row i when bias is not NULL, float32, k <= TN_GEMM_SMALLK_MAX, on
 * the calling thread (nn_conv_pw.c). */
void tn__gemm_smallk_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias);

/* Whether a convolution is a 1x1 without padding with at most
 * TN_GEMM_SMALLK_MAX input channels a group (when strided, with a weight
 * of at most 64 Ki values a group, and not one tn__conv_flat_fits takes),
 * and its kernel: per sample and group
 * one tn__gemm_smallk_f32 of the weight and the input (strided: its
 * positions gathered 64 at a time), on the thread pool, float32 forward
 * as tn__conv_depthwise_f32. */
bool tn__conv_pw_fits(const struct conv *g);
int tn__conv_pw_f32(const struct conv *g, const float *x, const float *w, const float *b,
                    float *out);

/* Whether a convolution is grouped (not depthwise) at stride 1 without
 * dilation with patches of at most TN_GEMM_SMALLK_MAX values, and its
 * kernel (implicit GEMM over a padded copy of each group, nn_conv_pw.c),
 * float32 forward as tn__conv_depthwise_f32. */
bool tn__conv_grouped_fits(const struct conv *g);
int tn__conv_grouped_f32(const struct conv *g, const float *x, const float *w, const float *b,
                         float *out);

/* Whether a convolution is of groups 1 at stride 1 or 2 (both ways)
 * without dilation, not 1x1, with an output of at most 1 Mi values a
 * sample on the padded width (halved at stride 2), or a strided 1x1
 * without padding at batch 2+ whose output plane is not whole tiles of 16
 * positions, and its kernel (flat implicit GEMM over a padded copy of the
 * input, split into its four phase planes at stride 2, subsampled for a
 * 1x1, its tiles across the samples of a chunk, nn_conv_pw.c), float32
 * forward as tn__conv_depthwise_f32. */
bool tn__conv_flat_fits(const struct conv *g);
int tn__conv_flat_f32(const struct conv *g, const float *x, const float *w, const float *b,
                      float *out);

#endif
