/*
 * ops/cpu/nn_conv.c: CPU kernels of convolution (1-D and 2-D, groups,
 * stride, padding, dilation, bias) and convolution_backward, by im2col and
 * OpenBLAS: per sample and group, the input's patches are laid out as a
 * (C/g * kh * kw, Ho * Wo) matrix that one gemm with the weight turns into
 * the output; backward runs the transposed products and col2im. float32
 * and float64 (others are computed in float64 and rounded).
 */
#include <config.h>

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

struct conv {
    int64_t n, c, h, w;     /* input */
    int64_t oc, kh, kw;     /* weight (oc, c / groups, kh, kw) */
    int64_t oh, ow, groups;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t cg, ocg, k;     /* channels per group in and out, patch length */
};

/* One value of an int[] argument for a spatial dim: PyTorch expands a
 * single value to every dim. */
static int64_t param(const int64_t *v, int len, int i, int64_t def)
{
    return len <= 0 ? def : v[len == 1 ? 0 : i];
}

/* The geometry of a convolution, with PyTorch's checks and words. 1-D
 * inputs (N, C, L) are 2-D with height 1. */
static int conv_geometry(const struct tn_tensor *input, const struct tn_tensor *weight,
                         const int64_t *stride, int stride_len, const int64_t *padding,
                         int padding_len, const int64_t *dilation, int dilation_len,
                         int64_t groups, struct conv *g)
{
    char a[128], b[128];
    if (weight->ndim != 3 && weight->ndim != 4)
        return tn_set_error(TN_ESHAPE, "convolution: expected a 3-D or 4-D weight, got %s",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a));
    if (input->ndim != weight->ndim)
        return tn_set_error(TN_ESHAPE, "Expected %d-dimensional input for %d-dimensional weight "
                            "%s, but got %d-dimensional input of size %s instead", weight->ndim,
                            weight->ndim, tn_shape_format(weight->sizes, weight->ndim, a, sizeof a),
                            input->ndim, tn_shape_format(input->sizes, input->ndim, b, sizeof b));
    int sd = weight->ndim - 2; /* spatial dims */
    if (groups <= 0)
        return tn_set_error(TN_EINVAL, "non-positive groups is not supported");
    bool two = sd == 2;
    g->n = input->sizes[0];
    g->c = input->sizes[1];
    g->h = two ? input->sizes[2] : 1;
    g->w = input->sizes[two ? 3 : 2];
    g->oc = weight->sizes[0];
    g->kh = two ? weight->sizes[2] : 1;
    g->kw = weight->sizes[two ? 3 : 2];
    g->groups = groups;
    if (g->c != weight->sizes[1] * groups)
        return tn_set_error(TN_ESHAPE, "Given groups=%lld, weight of size %s, expected input%s to "
                            "have %lld channels, but got %lld channels instead", (long long)groups,
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a),
                            tn_shape_format(input->sizes, input->ndim, b, sizeof b),
                            (long long)(weight->sizes[1] * groups), (long long)g->c);
    if (g->oc % groups)
        return tn_set_error(TN_ESHAPE, "Given groups=%lld, expected weight to be divisible by %lld "
                            "at dimension 0, but got weight of size %s instead", (long long)groups,
                            (long long)groups, tn_shape_format(weight->sizes, weight->ndim, a, sizeof a));
    int hi = two ? 0 : -1, wi = two ? 1 : 0;
    g->sh = hi < 0 ? 1 : param(stride, stride_len, hi, 1);
    g->sw = param(stride, stride_len, wi, 1);
    g->ph = hi < 0 ? 0 : param(padding, padding_len, hi, 0);
    g->pw = param(padding, padding_len, wi, 0);
    g->dh = hi < 0 ? 1 : param(dilation, dilation_len, hi, 1);
    g->dw = param(dilation, dilation_len, wi, 1);
    if (g->sh <= 0 || g->sw <= 0)
        return tn_set_error(TN_EINVAL, "non-positive stride is not supported");
    if (g->ph < 0 || g->pw < 0)
        return tn_set_error(TN_EINVAL, "negative padding is not supported");
    if (g->dh <= 0 || g->dw <= 0)
        return tn_set_error(TN_EINVAL, "dilation should be greater than zero");
    int64_t eh = g->h + 2 * g->ph, ew = g->w + 2 * g->pw;
    int64_t kh = g->dh * (g->kh - 1) + 1, kw = g->dw * (g->kw - 1) + 1;
    if (eh < kh || ew < kw) {
        if (two)
            return tn_set_error(TN_ESHAPE, "Calculated padded input size per channel: (%lld x "
                                "%lld). Kernel size: (%lld x %lld). Kernel size can't be greater "
                                "than actual input size", (long long)eh, (long long)ew,
                                (long long)kh, (long long)kw);
        return tn_set_error(TN_ESHAPE, "Calculated padded input size per channel: (%lld). Kernel "
                            "size: (%lld). Kernel size can't be greater than actual input size",
                            (long long)ew, (long long)kw);
    }
    g->oh = (eh - kh) / g->sh + 1;
    g->ow = (ew - kw) / g->sw + 1;
    g->cg = g->c / groups;
    g->ocg = g->oc / groups;
    g->k = g->cg * g->kh * g->kw;
    return tn__nn_check_float("slow_conv2d_cpu", input);
}

/* im2col and col2im (accumulating) for one sample's group of channels. */
#define TN_CONV_COLS(SFX, T)                                                                   \
    static void im2col_##SFX(const struct conv *g, const T *x, T *cols)                        \
    {                                                                                          \
        int64_t hw = g->oh * g->ow;                                                            \
        for (int64_t c = 0; c < g->cg; c++)                                                    \
            for (int64_t i = 0; i < g->kh; i++)                                                \
                for (int64_t j = 0; j < g->kw; j++) {                                          \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * hw;                        \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                   \
                        int64_t y = oy * g->sh - g->ph + i * g->dh;                            \
                        T *r = row + oy * g->ow;                                               \
                        if (y < 0 || y >= g->h) {                                              \
                            memset(r, 0, sizeof(T) * (size_t)g->ow);                           \
                            continue;                                                          \
                        }                                                                      \
                        const T *xr = x + (c * g->h + y) * g->w;                               \
                        int64_t x0 = -g->pw + j * g->dw;                                       \
                        if (g->sw == 1 && x0 >= 0 && x0 + g->ow <= g->w) {                     \
                            memcpy(r, xr + x0, sizeof(T) * (size_t)g->ow);                     \
                            continue;                                                          \
                        }                                                                      \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                               \
                            int64_t xx = x0 + ox * g->sw;                                      \
                            r[ox] = xx >= 0 && xx < g->w ? xr[xx] : (T)0;                      \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
    }                                                                                          \
    static void col2im_##SFX(const struct conv *g, const T *cols, T *x)                        \
    {                                                                                          \
        int64_t hw = g->oh * g->ow;                                                            \
        for (int64_t c = 0; c < g->cg; c++)                                                    \
            for (int64_t i = 0; i < g->kh; i++)                                                \
                for (int64_t j = 0; j < g->kw; j++) {                                          \
                    const T *row = cols + ((c * g->kh + i) * g->kw + j) * hw;                  \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                   \
                        int64_t y = oy * g->sh - g->ph + i * g->dh;                            \
                        if (y < 0 || y >= g->h)                                                \
                            continue;                                                          \
                        T *xr = x + (c * g->h + y) * g->w;                                     \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                               \
                            int64_t xx = ox * g->sw - g->pw + j * g->dw;                       \
                            if (xx >= 0 && xx < g->w)                                          \
                                xr[xx] += row[oy * g->ow + ox];                                \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
    }
TN_CONV_COLS(f32, float)
TN_CONV_COLS(f64, double)

/* C = alpha op(A) op(B) + beta C, row-major, in float or double */
static void gemm(bool f32, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    enum CBLAS_TRANSPOSE tra = ta ? CblasTrans : CblasNoTrans, trb = tb ? CblasTrans : CblasNoTrans;
    if (f32)
        cblas_sgemm(CblasRowMajor, tra, trb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, tra, trb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb,
                    beta, c, (int)ldc);
}


struct tn_tensor *tn__cpu_convolution(tn_keyset ks, const struct tn_tensor *input,
                                      const struct tn_tensor *weight, const struct tn_tensor *bias,
                                      const int64_t *stride, int stride_len,
                                      const int64_t *padding, int padding_len,
                                      const int64_t *dilation, int dilation_len, bool transposed,
                                      const int64_t *output_padding, int output_padding_len,
                                      int64_t groups)
{
    struct conv g;
    if (transposed) /* (lib/ops/cpu/nn_more.c) */
        return tn__nn_conv_transposed(input, weight, bias, stride, stride_len, padding,
                                      padding_len, dilation, dilation_len, output_padding,
                                      output_padding_len, groups);
    if (conv_geometry(input, weight, stride, stride_len, padding, padding_len, dilation,
                      dilation_len, groups, &g) < 0)
        return NULL;
    bool f32 = input->dtype == TN_FLOAT32;
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    size_t es = f32 ? 4 : 8;
    int64_t hw = g.oh * g.ow, osz[4] = {g.n, g.oc, g.oh, g.ow};
    if (input->ndim == 3)
        osz[2] = g.ow;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *b = tn__nn_as(bias, ct);
    struct tn_tensor *out = tn_empty(osz, input->ndim, ct);
    void *cols = malloc(es * (size_t)(g.k * hw > 0 ? g.k * hw : 1));
    if (!x || !w || (bias && !b) || !out || !cols) {
        if (!cols)
            tn_set_error(TN_ENOMEM, "convolution: out of memory for %lld patch values",
                         (long long)(g.k * hw));
        free(cols);
        tn__nn_drop(0, x, w, b, out);
        return NULL;
    }
    char *xp = tn_data(x), *wp = tn_data(w), *op = tn_data(out);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t gr = 0; gr < g.groups; gr++) {
            const char *xs = xp + es * (size_t)((n * g.c + gr * g.cg) * g.h * g.w);
            char *os = op + es * (size_t)((n * g.oc + gr * g.ocg) * hw);
            if (f32)
                im2col_f32(&g, (const float *)xs, cols);
            else
                im2col_f64(&g, (const double *)xs, cols);
            gemm(f32, false, false, g.ocg, hw, g.k, wp + es * (size_t)(gr * g.ocg * g.k), g.k,
                 cols, hw, 0.0, os, hw);
        }
    free(cols);
    if (b) {
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t o = 0; o < g.oc; o++) {
                int64_t at = (n * g.oc + o) * hw;
                if (f32)
                    for (int64_t i = 0; i < hw; i++)
                        ((float *)op)[at + i] += ((const float *)tn_data(b))[o];
                else
                    for (int64_t i = 0; i < hw; i++)
                        ((double *)op)[at + i] += ((const double *)tn_data(b))[o];
            }
    }
    tn__nn_drop(0, x, w, b, NULL);
    return tn__nn_to(out, input->dtype);
}

int tn__cpu_convolution_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                 const struct tn_tensor *input, const struct tn_tensor *weight,
                                 const int64_t *bias_sizes, int bias_sizes_len,
                                 const int64_t *stride, int stride_len, const int64_t *padding,
                                 int padding_len, const int64_t *dilation, int dilation_len,
                                 bool transposed, const int64_t *output_padding,
                                 int output_padding_len, int64_t groups, const bool *output_mask,
                                 int output_mask_len, struct tn_tensor **result0,
                                 struct tn_tensor **result1, struct tn_tensor **result2)
{
    struct conv g;
    *result0 = *result1 = *result2 = NULL;
    if (output_mask_len != 3)
        return tn_set_error(TN_EINVAL, "output_mask must hold 3 bools, not %d", output_mask_len);
    if (transposed) /* (lib/ops/cpu/nn_more.c) */
        return tn__nn_conv_transposed_backward(grad_output, input, weight, stride, stride_len,
                                               padding, padding_len, dilation, dilation_len,
                                               output_padding, output_padding_len, groups,
                                               output_mask, result0, result1, result2);
    int rc = conv_geometry(input, weight, stride, stride_len, padding, padding_len, dilation,
                           dilation_len, groups, &g);
    if (rc < 0)
        return rc;
    int64_t hw = g.oh * g.ow;
    if (tn_numel(grad_output) != g.n * g.oc * hw)
        return tn_set_error(TN_ESHAPE, "convolution_backward: grad_output holds %lld values, the "
                            "convolution gives %lld", (long long)tn_numel(grad_output),
                            (long long)(g.n * g.oc * hw));
    bool f32 = input->dtype == TN_FLOAT32;
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    size_t es = f32 ? 4 : 8;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *go = tn__nn_as(grad_output, ct);
    struct tn_tensor *gi = output_mask[0] ? tn_zeros(input->sizes, input->ndim, ct) : NULL;
    struct tn_tensor *gw = output_mask[1] ? tn_zeros(weight->sizes, weight->ndim, ct) : NULL;
    struct tn_tensor *gb = output_mask[2] ? tn_zeros(&g.oc, 1, ct) : NULL;
    void *cols = malloc(es * (size_t)(g.k * hw > 0 ? g.k * hw : 1));
    if (!x || !w || !go || (output_mask[0] && !gi) || (output_mask[1] && !gw) ||
        (output_mask[2] && !gb) || !cols) {
        if (!cols)
            tn_set_error(TN_ENOMEM, "convolution_backward: out of memory");
        free(cols);
        tn__nn_drop(0, x, w, go, gi);
        return tn__nn_drop(tn_last_status(), gw, gb, NULL, NULL);
    }
    char *xp = tn_data(x), *wp = tn_data(w), *gp = tn_data(go);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t gr = 0; gr < g.groups; gr++) {
            size_t xo = (size_t)((n * g.c + gr * g.cg) * g.h * g.w);
            const char *gs = gp + es * (size_t)((n * g.oc + gr * g.ocg) * hw);
            const char *ws = wp + es * (size_t)(gr * g.ocg * g.k);
            if (gw) { /* dW += gout (ocg, hw) @ cols^T (hw, k) */
                if (f32)
                    im2col_f32(&g, (const float *)xp + xo, cols);
                else
                    im2col_f64(&g, (const double *)xp + xo, cols);
                gemm(f32, false, true, g.ocg, g.k, hw, gs, hw, cols, hw, 1.0,
                     (char *)tn_data(gw) + es * (size_t)(gr * g.ocg * g.k), g.k);
            }
            if (gi) { /* cols = W^T (k, ocg) @ gout (ocg, hw), then col2im */
                gemm(f32, true, false, g.k, hw, g.ocg, ws, g.k, gs, hw, 0.0, cols, hw);
                if (f32)
                    col2im_f32(&g, cols, (float *)tn_data(gi) + xo);
                else
                    col2im_f64(&g, cols, (double *)tn_data(gi) + xo);
            }
        }
    free(cols);
    if (gb)
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t o = 0; o < g.oc; o++) {
                int64_t at = (n * g.oc + o) * hw;
                for (int64_t i = 0; i < hw; i++) {
                    if (f32)
                        ((float *)tn_data(gb))[o] += ((const float *)gp)[at + i];
                    else
                        ((double *)tn_data(gb))[o] += ((const double *)gp)[at + i];
                }
            }
    (void)bias_sizes;
    (void)bias_sizes_len;
    tn__nn_drop(0, x, w, go, NULL);
    *result0 = tn__nn_to(gi, input->dtype);
    *result1 = tn__nn_to(gw, input->dtype);
    *result2 = tn__nn_to(gb, input->dtype);
    return TN_OK;
}
