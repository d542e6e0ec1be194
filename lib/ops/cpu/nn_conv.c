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

/* The output columns ox of a patch row whose input column x0 + ox * sw lies
 * inside the image: [*lo, *hi). */
static void valid_cols(const struct conv *g, int64_t x0, int64_t *lo, int64_t *hi)
{
    int64_t l = x0 >= 0 ? 0 : (-x0 + g->sw - 1) / g->sw;
    int64_t h = x0 > g->w - 1 ? 0 : (g->w - 1 - x0) / g->sw + 1;
    h = h < g->ow ? h : g->ow;
    *lo = l < h ? l : h;
    *hi = h;
}

/* im2col and col2im (accumulating) for one sample's group of channels; the
 * patch matrix's rows are ld elements apart (several samples side by side
 * make one wide matrix). Each patch row copies (or adds) the run of the
 * image row it covers and zeroes the padding around it. */
#define TN_CONV_COLS(SFX, T)                                                                   \
    static void add_run_##SFX(T *restrict d, const T *restrict v, int64_t n)                   \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                        \
            d[i] += v[i];                                                                      \
    }                                                                                          \
    static void im2col_##SFX(const struct conv *g, const T *x, T *cols, int64_t ld)            \
    {                                                                                          \
        for (int64_t c = 0; c < g->cg; c++)                                                    \
            for (int64_t i = 0; i < g->kh; i++)                                                \
                for (int64_t j = 0; j < g->kw; j++) {                                          \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * ld;                        \
                    int64_t x0 = -g->pw + j * g->dw, lo, hi;                                   \
                    valid_cols(g, x0, &lo, &hi);                                               \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                   \
                        int64_t y = oy * g->sh - g->ph + i * g->dh;                            \
                        T *r = row + oy * g->ow;                                               \
                        if (y < 0 || y >= g->h) {                                              \
                            memset(r, 0, sizeof(T) * (size_t)g->ow);                           \
                            continue;                                                          \
                        }                                                                      \
                        const T *xr = x + (c * g->h + y) * g->w;                               \
                        memset(r, 0, sizeof(T) * (size_t)lo);                                  \
                        if (g->sw == 1)                                                        \
                            memcpy(r + lo, xr + x0 + lo, sizeof(T) * (size_t)(hi - lo));       \
                        else                                                                   \
                            for (int64_t ox = lo; ox < hi; ox++)                               \
                                r[ox] = xr[x0 + ox * g->sw];                                   \
                        memset(r + hi, 0, sizeof(T) * (size_t)(g->ow - hi));                   \
                    }                                                                          \
                }                                                                              \
    }                                                                                          \
    static void col2im_##SFX(const struct conv *g, const T *cols, int64_t ld, T *x)            \
    {                                                                                          \
        for (int64_t c = 0; c < g->cg; c++)                                                    \
            for (int64_t i = 0; i < g->kh; i++)                                                \
                for (int64_t j = 0; j < g->kw; j++) {                                          \
                    const T *row = cols + ((c * g->kh + i) * g->kw + j) * ld;                  \
                    int64_t x0 = -g->pw + j * g->dw, lo, hi;                                   \
                    valid_cols(g, x0, &lo, &hi);                                               \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                   \
                        int64_t y = oy * g->sh - g->ph + i * g->dh;                            \
                        if (y < 0 || y >= g->h)                                                \
                            continue;                                                          \
                        T *xr = x + (c * g->h + y) * g->w;                                     \
                        const T *r = row + oy * g->ow;                                         \
                        if (g->sw == 1)                                                        \
                            add_run_##SFX(xr + x0 + lo, r + lo, hi - lo);                      \
                        else                                                                   \
                            for (int64_t ox = lo; ox < hi; ox++)                               \
                                xr[x0 + ox * g->sw] += r[ox];                                  \
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


/* A 1x1 convolution with stride 1 and no padding reads its input as the
 * patch matrix: no im2col. */
static bool conv_direct(const struct conv *g)
{
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* How many samples share one patch matrix, side by side: small images
 * (under 8192 output positions) make one product about 8192 wide, which
 * OpenBLAS splits over its threads better than many narrow ones, with the
 * matrix under 4M values. Large images go one at a time, with no copies. */
static int64_t conv_batch(const struct conv *g)
{
    int64_t hw = g->oh * g->ow, per = g->k * hw;
    if (conv_direct(g) || per <= 0)
        return 1;
    int64_t b = 8192 / hw, cap = ((int64_t)1 << 22) / per;
    b = b < cap ? b : cap;
    return b < 1 ? 1 : b > g->n ? g->n : b;
}

/* im2col (or col2im, back) of samples n0.. of group gr into (out of) the
 * patch matrix of rows ld apart, one sample per task on the thread pool. */
struct cols_job {
    const struct conv *g;
    bool f32, back;
    size_t es;
    char *img, *cols;
    int64_t n0, gr, ld;
};

static void cols_range(int64_t begin, int64_t end, void *ctx)
{
    const struct cols_job *j = ctx;
    const struct conv *g = j->g;
    for (int64_t s = begin; s < end; s++) {
        char *img = j->img + j->es * (size_t)(((j->n0 + s) * g->c + j->gr * g->cg) * g->h * g->w);
        char *cols = j->cols + j->es * (size_t)(s * g->oh * g->ow);
        if (j->back && j->f32)
            col2im_f32(g, (const float *)cols, j->ld, (float *)img);
        else if (j->back)
            col2im_f64(g, (const double *)cols, j->ld, (double *)img);
        else if (j->f32)
            im2col_f32(g, (const float *)img, (float *)cols, j->ld);
        else
            im2col_f64(g, (const double *)img, (double *)cols, j->ld);
    }
}

static void cols_run(const struct conv *g, bool f32, bool back, char *img, char *cols, int64_t n0,
                     int64_t nb, int64_t gr)
{
    struct cols_job j = {g, f32, back, f32 ? 4 : 8, img, cols, n0, gr, nb * g->oh * g->ow};
    int64_t per = g->k * g->oh * g->ow;
    tn_parallel_for(nb, per >= TN_PARALLEL_GRAIN ? 1 : TN_PARALLEL_GRAIN / (per + 1) + 1,
                    cols_range, &j);
}

/* Moves the (ocg, hw) blocks of samples n0..n0+nb-1, group gr, between a
 * (N, oc, hw) tensor and an (ocg, nb * hw) matrix (to_wide: into it). */
static void regroup(const struct conv *g, size_t es, char *t, char *wide, int64_t n0, int64_t nb,
                    int64_t gr, bool to_wide)
{
    int64_t hw = g->oh * g->ow;
    for (int64_t s = 0; s < nb; s++)
        for (int64_t o = 0; o < g->ocg; o++) {
            char *a = t + es * (size_t)(((n0 + s) * g->oc + gr * g->ocg + o) * hw);
            char *m = wide + es * (size_t)((o * nb + s) * hw);
            memcpy(to_wide ? m : a, to_wide ? a : m, es * (size_t)hw);
        }
}

/* The sum of n contiguous values, in float64. */
static double run_sum(bool f32, const void *p, int64_t n)
{
    double s = 0;
    if (!f32) {
        for (int64_t i = 0; i < n; i++)
            s += ((const double *)p)[i];
        return s;
    }
#ifdef TN_HAVE_AVX2
    if (tn__have_avx2())
        return tn__sum_f32_avx2(p, n);
#endif
    for (int64_t i = 0; i < n; i++)
        s += ((const float *)p)[i];
    return s;
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
    bool f32 = input->dtype == TN_FLOAT32, direct = conv_direct(&g);
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    size_t es = f32 ? 4 : 8;
    int64_t hw = g.oh * g.ow, osz[4] = {g.n, g.oc, g.oh, g.ow}, B = conv_batch(&g);
    if (input->ndim == 3)
        osz[2] = g.ow;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *b = tn__nn_as(bias, ct);
    struct tn_tensor *out = tn_empty(osz, input->ndim, ct);
    char *cols = direct ? NULL : malloc(es * (size_t)(g.k * hw * B > 0 ? g.k * hw * B : 1));
    char *wide = B > 1 ? malloc(es * (size_t)(g.ocg * hw * B > 0 ? g.ocg * hw * B : 1)) : NULL;
    if (!x || !w || (bias && !b) || !out || (!direct && !cols) || (B > 1 && !wide)) {
        if ((!direct && !cols) || (B > 1 && !wide))
            tn_set_error(TN_ENOMEM, "convolution: out of memory for %lld patch values",
                         (long long)(g.k * hw * B));
        free(cols);
        free(wide);
        tn__nn_drop(0, x, w, b, out);
        return NULL;
    }
    char *xp = tn_data(x), *wp = tn_data(w), *op = tn_data(out);
    for (int64_t n0 = 0; n0 < g.n; n0 += B) {
        int64_t nb = g.n - n0 < B ? g.n - n0 : B;
        for (int64_t gr = 0; gr < g.groups; gr++) {
            const char *src = cols, *wg = wp + es * (size_t)(gr * g.ocg * g.k);
            if (direct)
                src = xp + es * (size_t)((n0 * g.c + gr * g.cg) * hw);
            else
                cols_run(&g, f32, false, xp, cols, n0, nb, gr);
            if (nb == 1) {
                gemm(f32, false, false, g.ocg, hw, g.k, wg, g.k, src, hw, 0.0,
                     op + es * (size_t)((n0 * g.oc + gr * g.ocg) * hw), hw);
            } else {
                gemm(f32, false, false, g.ocg, nb * hw, g.k, wg, g.k, src, nb * hw, 0.0, wide,
                     nb * hw);
                regroup(&g, es, op, wide, n0, nb, gr, false);
            }
        }
    }
    free(cols);
    free(wide);
    if (b) {
        const char *bp = tn_data(b);
        for (int64_t r = 0; r < g.n * g.oc; r++) {
            if (f32) {
                float *d = (float *)(void *)op + r * hw, v = ((const float *)bp)[r % g.oc];
                for (int64_t i = 0; i < hw; i++)
                    d[i] += v;
            } else {
                double *d = (double *)(void *)op + r * hw, v = ((const double *)bp)[r % g.oc];
                for (int64_t i = 0; i < hw; i++)
                    d[i] += v;
            }
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
    int64_t hw = g.oh * g.ow, B = conv_batch(&g);
    if (tn_numel(grad_output) != g.n * g.oc * hw)
        return tn_set_error(TN_ESHAPE, "convolution_backward: grad_output holds %lld values, the "
                            "convolution gives %lld", (long long)tn_numel(grad_output),
                            (long long)(g.n * g.oc * hw));
    bool f32 = input->dtype == TN_FLOAT32, direct = conv_direct(&g);
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    size_t es = f32 ? 4 : 8;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *go = tn__nn_as(grad_output, ct);
    struct tn_tensor *gi = output_mask[0] ? tn_zeros(input->sizes, input->ndim, ct) : NULL;
    struct tn_tensor *gw = output_mask[1] ? tn_zeros(weight->sizes, weight->ndim, ct) : NULL;
    struct tn_tensor *gb = output_mask[2] ? tn_zeros(&g.oc, 1, ct) : NULL;
    char *cols = direct ? NULL : malloc(es * (size_t)(g.k * hw * B > 0 ? g.k * hw * B : 1));
    char *wide = B > 1 ? malloc(es * (size_t)(g.ocg * hw * B > 0 ? g.ocg * hw * B : 1)) : NULL;
    if (!x || !w || !go || (output_mask[0] && !gi) || (output_mask[1] && !gw) ||
        (output_mask[2] && !gb) || (!direct && !cols) || (B > 1 && !wide)) {
        if ((!direct && !cols) || (B > 1 && !wide))
            tn_set_error(TN_ENOMEM, "convolution_backward: out of memory");
        free(cols);
        free(wide);
        tn__nn_drop(0, x, w, go, gi);
        return tn__nn_drop(tn_last_status(), gw, gb, NULL, NULL);
    }
    char *xp = tn_data(x), *wp = tn_data(w), *gp = tn_data(go);
    for (int64_t n0 = 0; n0 < g.n && (gi || gw); n0 += B) {
        int64_t nb = g.n - n0 < B ? g.n - n0 : B, ld = nb * hw;
        for (int64_t gr = 0; gr < g.groups; gr++) {
            size_t xo = (size_t)((n0 * g.c + gr * g.cg) * g.h * g.w);
            const char *gs = wide, *ws = wp + es * (size_t)(gr * g.ocg * g.k);
            if (nb == 1)
                gs = gp + es * (size_t)((n0 * g.oc + gr * g.ocg) * hw);
            else
                regroup(&g, es, gp, wide, n0, nb, gr, true);
            if (gw) { /* dW += gout (ocg, nb hw) @ cols^T (nb hw, k) */
                const char *src = direct ? xp + es * xo : cols;
                if (!direct)
                    cols_run(&g, f32, false, xp, cols, n0, nb, gr);
                gemm(f32, false, true, g.ocg, g.k, ld, gs, ld, src, ld, 1.0,
                     (char *)tn_data(gw) + es * (size_t)(gr * g.ocg * g.k), g.k);
            }
            if (gi && direct) { /* the input's channels of this group: W^T @ gout */
                gemm(f32, true, false, g.k, hw, g.ocg, ws, g.k, gs, hw, 0.0,
                     (char *)tn_data(gi) + es * xo, hw);
            } else if (gi) { /* cols = W^T (k, ocg) @ gout (ocg, nb hw), then col2im */
                gemm(f32, true, false, g.k, ld, g.ocg, ws, g.k, gs, ld, 0.0, cols, ld);
                cols_run(&g, f32, true, tn_data(gi), cols, n0, nb, gr);
            }
        }
    }
    free(cols);
    free(wide);
    if (gb)
        for (int64_t o = 0; o < g.oc; o++) {
            double t = 0;
            for (int64_t n = 0; n < g.n; n++)
                t += run_sum(f32, gp + es * (size_t)((n * g.oc + o) * hw), hw);
            if (f32)
                ((float *)tn_data(gb))[o] = (float)t;
            else
                ((double *)tn_data(gb))[o] = t;
        }
    (void)bias_sizes;
    (void)bias_sizes_len;
    tn__nn_drop(0, x, w, go, NULL);
    *result0 = tn__nn_to(gi, input->dtype);
    *result1 = tn__nn_to(gw, input->dtype);
    *result2 = tn__nn_to(gb, input->dtype);
    return TN_OK;
}
