/*
 * ops/cpu/nn_conv.h: what the convolution kernel files (nn_conv.c, the
 * im2col and GEMM path; nn_conv_dw.c, the direct depthwise kernel) share:
 * a convolution's geometry.
 */
#ifndef TN_OPS_CPU_NN_CONV_H
#define TN_OPS_CPU_NN_CONV_H

#include <stdint.h>

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

#endif
