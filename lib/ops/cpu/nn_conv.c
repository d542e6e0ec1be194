/*
 * ops/cpu/nn_conv.c: CPU kernels of convolution (1-D and 2-D, groups,
 * stride, padding, dilation, bias) and convolution_backward, by im2col and
 * OpenBLAS: per sample and group, the input's patches are laid out as a
 * (C/g * kh * kw, Ho * Wo) matrix that one gemm with the weight turns into
 * the output; backward runs the transposed products and col2im. The
 * batch splits into one range of samples per thread on the pool, each
 * range with its own one-sample patch matrix (it stays in cache). float32
 * and float64 (others are computed in float64 and rounded).  Transposed
 * convolution, at the end, runs as the regular one's products.
 */
#include <config.h>

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"
#include "ops/cpu/nn_conv.h"


/* Tensor::toString(), which PyTorch's mkldnn check prints: the legacy
 * type name of the first eight c10 scalar types, Byte to Double
 * ("torch.FloatTensor"), else "CPUBFloat16Type", "CPUBoolType". */
static const char *type_string(enum tn_dtype dt, char *buf, size_t len)
{
    const struct tn_dtype_info *d = tn_dtype_info(dt);
    if (d->scalar_type <= 7)
        snprintf(buf, len, "torch.%sTensor", d->c10_name);
    else
        snprintf(buf, len, "CPU%sType", d->c10_name);
    return buf;
}

/* Whether PyTorch 2.x's forward convolution takes its mkldnn backend
 * (ConvParams::use_mkldnn, with the input and weight seen as 2-D: a 1-D
 * one has height 1): bfloat16 and float16 inputs on a CPU that mkldnn runs
 * them on (AVX-512, as the fixtures' machine; elsewhere PyTorch takes its
 * slow kernel and words), float32 by the geometry (its thread count is
 * ours); never another dtype. n, chw: the input's batch and C*H*W. */
static bool conv_mkldnn(enum tn_dtype dt, int64_t n, int64_t chw, int64_t kh, int64_t kw,
                        bool strided, bool dilated, int64_t groups)
{
    if (dt == TN_BFLOAT16 || dt == TN_FLOAT16)
        return true;
    return dt == TN_FLOAT32 &&
           (strided || dilated || n >= 16 || kw != 1 || kh != 1 || tn_get_num_threads() > 1) &&
           (groups > 1 || (kw > 3 && kh > 3) || n > 1 || n * chw > 20480);
}

/* A weight (or, on mkldnn, a bias) of another dtype than the input's, in
 * the words of the backend PyTorch takes (conv_mkldnn): mkldnn's check, or
 * the slow kernel's, which reads the weight only. After the shape checks,
 * as in PyTorch. */
static int conv_types(const struct tn_tensor *input, const struct tn_tensor *weight,
                      const struct tn_tensor *bias, bool mkldnn)
{
    char a[48], b[48];
    if (!mkldnn)
        return weight->dtype == input->dtype
                   ? TN_OK
                   : tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                                  tn_dtype_info(input->dtype)->c10_name,
                                  tn_dtype_info(weight->dtype)->c10_name);
    const struct tn_tensor *p = weight->dtype != input->dtype ? weight : bias;
    if (!p || p->dtype == input->dtype)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "Input type (%s) and %s type (%s) should be the same or input "
                        "should be a MKLDNN tensor and %s is a dense tensor",
                        type_string(input->dtype, a, sizeof a), p == weight ? "weight" : "bias",
                        type_string(p->dtype, b, sizeof b), p == weight ? "weight" : "bias");
}

/* conv_mkldnn for a convolution of geometry g. */
static bool conv_mkldnn_g(enum tn_dtype dt, const struct conv *g)
{
    return conv_mkldnn(dt, g->n, g->c * g->h * g->w, g->kh, g->kw, g->sh != 1 || g->sw != 1,
                       g->dh != 1 || g->dw != 1, g->groups);
}

/* convolution_backward's check of a weight of another dtype, which only
 * its input gradient reads (a weight or bias gradient alone takes any
 * weight): the backend the forward would take (conv_mkldnn) decides, as in
 * PyTorch 2.x. mkldnn computes with a float32, bfloat16 or float16 weight
 * whatever the input's dtype and fails on others in its words (2.x's: 1.13
 * names no dtype); the slow kernel wants the input's dtype. */
static int conv_backward_types(const struct tn_tensor *input, const struct tn_tensor *weight,
                               bool mkldnn)
{
    enum tn_dtype w = weight->dtype;
    if (!mkldnn)
        return conv_types(input, weight, NULL, false);
    if (w == TN_FLOAT32 || w == TN_BFLOAT16 || w == TN_FLOAT16)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "itensor_view_from_dense expects float/bfloat16/half/int8/fp8 "
                        "tensor input%s", tn_dtype_info(w)->c10_name);
}

/* What conv_geometry checks the dtypes for: the forward (conv_types, bias
 * included), or convolution_backward with or without the input gradient
 * (conv_backward_types). */
enum conv_use { CONV_FORWARD, CONV_GRAD_INPUT, CONV_GRAD_WEIGHT };

/* The geometry of a convolution, with PyTorch's checks and words. 1-D
 * inputs (N, C, L) are 2-D with height 1. Returns 1 for a forward
 * convolution of an input without values, whose dtypes PyTorch does not
 * check (conv_empty). */
static int conv_geometry(const struct tn_tensor *input, const struct tn_tensor *weight,
                         const struct tn_tensor *bias, enum conv_use use, const int64_t *stride,
                         int stride_len, const int64_t *padding, int padding_len,
                         const int64_t *dilation, int dilation_len, int64_t groups,
                         struct conv *g)
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
    g->sh = hi < 0 ? 1 : tn__nn_param(stride, stride_len, hi, 1);
    g->sw = tn__nn_param(stride, stride_len, wi, 1);
    g->ph = hi < 0 ? 0 : tn__nn_param(padding, padding_len, hi, 0);
    g->pw = tn__nn_param(padding, padding_len, wi, 0);
    g->dh = hi < 0 ? 1 : tn__nn_param(dilation, dilation_len, hi, 1);
    g->dw = tn__nn_param(dilation, dilation_len, wi, 1);
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
    if (use == CONV_FORWARD && tn_numel(input) == 0)
        return 1;
    bool mkldnn = conv_mkldnn_g(input->dtype, g);
    int rc = use == CONV_FORWARD      ? conv_types(input, weight, bias, mkldnn)
             : use == CONV_GRAD_INPUT ? conv_backward_types(input, weight, mkldnn)
                                      : TN_OK;
    if (rc < 0 || input->dtype == TN_INT64) /* (2.x's slow_conv2d takes int64: conv_int64) */
        return rc;
    return tn__nn_check_float("slow_conv2d_cpu", input);
}

/* PyTorch's Empty backend, for an input without values once the shape
 * checks pass, before any dtype check: input.view(-1) times the weight's
 * first value (the flattened weight when it has none) viewed as the
 * output (sizes osz), plus bias[0] in place. So the result has that
 * product's dtype (int64 input, float32 weight: float32; float32 input,
 * float64 weight: float32) and a bias that does not cast to it fails as
 * add_ does. */
static struct tn_tensor *conv_empty(const struct tn_tensor *input, const struct tn_tensor *weight,
                                    const struct tn_tensor *bias, const int64_t *osz, int ndim)
{
    int64_t all = -1;
    struct tn_tensor *wf = tn_reshape(weight, &all, 1);
    struct tn_tensor *w0 = wf && tn_numel(wf) > 0 ? tn_select(wf, 0, 0) : NULL;
    const struct tn_tensor *ops[2] = {input, w0 ? w0 : wf};
    enum tn_dtype dt = wf && (w0 || !tn_numel(wf)) ? tn_result_type(ops, 2, NULL, 0)
                                                   : TN_DTYPE_UNSET;
    struct tn_tensor *out = dt != TN_DTYPE_UNSET ? tn_empty(osz, ndim, dt) : NULL;
    struct tn_tensor *b0 = out && bias && tn_numel(bias) ? tn_select(bias, 0, 0) : NULL;
    if (out && b0 && tn_add_(out, b0, tn_int(1)) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn__nn_drop(0, wf, w0, b0, NULL);
    return out;
}

/* int64 convolution, as PyTorch 2.x computes it (integer products and sums,
 * wrapping on overflow): a direct loop, these being small and rare. x, w
 * and b contiguous int64; out (N, OC, OH, OW). */
static void conv_int64(const struct conv *g, const int64_t *x, const int64_t *w, const int64_t *b,
                       int64_t *out)
{
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oc = 0; oc < g->oc; oc++) {
            int64_t c0 = oc / g->ocg * g->cg;
            for (int64_t oy = 0; oy < g->oh; oy++)
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    uint64_t acc = b ? (uint64_t)b[oc] : 0;
                    for (int64_t ci = 0; ci < g->cg; ci++)
                        for (int64_t ky = 0; ky < g->kh; ky++) {
                            int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                            if (iy < 0 || iy >= g->h)
                                continue;
                            for (int64_t kx = 0; kx < g->kw; kx++) {
                                int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                                if (ix < 0 || ix >= g->w)
                                    continue;
                                acc += (uint64_t)x[((n * g->c + c0 + ci) * g->h + iy) * g->w + ix] *
                                       (uint64_t)w[((oc * g->cg + ci) * g->kh + ky) * g->kw + kx];
                            }
                        }
                    out[((n * g->oc + oc) * g->oh + oy) * g->ow + ox] = (int64_t)acc;
                }
        }
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
 * patch matrix's rows are ld elements apart. Each patch row copies (or
 * adds) the run of the image row it covers and zeroes the padding around
 * it; the runs are short (an image row), so they move in 16-byte vectors
 * inline rather than through memcpy calls. */
#define TN_CONV_COLS(SFX, T)                                                                   \
    typedef T vec_##SFX __attribute__((vector_size(16)));                                      \
    static inline void run_##SFX(T *restrict d, const T *restrict v, int64_t n, bool add)      \
    {                                                                                          \
        const int64_t L = 16 / sizeof(T);                                                      \
        int64_t i = 0;                                                                         \
        for (; i + L <= n; i += L) {                                                           \
            vec_##SFX a, b;                                                                    \
            memcpy(&b, v + i, 16);                                                             \
            if (add) {                                                                         \
                memcpy(&a, d + i, 16);                                                         \
                b += a;                                                                        \
            }                                                                                  \
            memcpy(d + i, &b, 16);                                                             \
        }                                                                                      \
        for (; i < n; i++)                                                                     \
            d[i] = add ? d[i] + v[i] : v[i];                                                   \
    }                                                                                          \
    static inline void zeros_##SFX(T *d, int64_t n)                                            \
    {                                                                                          \
        if (n > 8)                                                                             \
            memset(d, 0, sizeof(T) * (size_t)n);                                               \
        else                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                    \
                d[i] = 0;                                                                      \
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
                            zeros_##SFX(r, g->ow);                                             \
                            continue;                                                          \
                        }                                                                      \
                        const T *xr = x + (c * g->h + y) * g->w;                               \
                        zeros_##SFX(r, lo);                                                    \
                        if (g->sw == 1)                                                        \
                            run_##SFX(r + lo, xr + x0 + lo, hi - lo, false);                   \
                        else                                                                   \
                            for (int64_t ox = lo; ox < hi; ox++)                               \
                                r[ox] = xr[x0 + ox * g->sw];                                   \
                        zeros_##SFX(r + hi, g->ow - hi);                                       \
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
                            run_##SFX(xr + x0 + lo, r + lo, hi - lo, true);                    \
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

/* The batch is cut into R fixed ranges of samples, R = min(N, threads)
 * (1 for convolutions under about 64k multiply-adds): range r is
 * [r N / R, (r + 1) N / R), run as one task on the thread pool with its
 * own patch matrix (one sample's, k x hw, small enough to stay in cache)
 * and its own partial weight gradient, which are summed in range order
 * afterwards, so that results do not depend on which thread ran what. */
static int64_t conv_ranges(const struct conv *g)
{
    int64_t t = tn_get_num_threads(), macs = g->n * g->oc * g->k * g->oh * g->ow;
    if (g->n <= 1 || t <= 1 || macs < ((int64_t)1 << 16))
        return 1;
    return g->n < t ? g->n : t;
}

/* What the ranges of one forward or backward share; scratch holds, per
 * range, a patch matrix then (backward) a partial weight gradient. */
struct conv_job {
    const struct conv *g;
    bool f32;
    size_t es;
    int64_t ranges, per; /* scratch values per range */
    const char *x, *w, *b, *go;
    char *out, *gi, *gw, *scratch;
};

/* im2col (or, back, col2im) of sample s's group gr to or from cols */
static void conv_cols(const struct conv_job *j, bool back, char *img, int64_t s, int64_t gr,
                      char *cols)
{
    const struct conv *g = j->g;
    img += j->es * (size_t)((s * g->c + gr * g->cg) * g->h * g->w);
    int64_t hw = g->oh * g->ow;
    if (back && j->f32)
        col2im_f32(g, (const float *)(void *)cols, hw, (float *)(void *)img);
    else if (back)
        col2im_f64(g, (const double *)(void *)cols, hw, (double *)(void *)img);
    else if (j->f32)
        im2col_f32(g, (const float *)(void *)img, (float *)(void *)cols, hw);
    else
        im2col_f64(g, (const double *)(void *)img, (double *)(void *)cols, hw);
}

/* rows x n values at d, each row its bias value */
static void fill_rows(bool f32, char *d, const char *b, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            if (f32)
                ((float *)(void *)d)[r * n + i] = ((const float *)(const void *)b)[r];
            else
                ((double *)(void *)d)[r * n + i] = ((const double *)(const void *)b)[r];
}

/* The samples of range r: [*s0, *s1) */
static void range_of(const struct conv_job *j, int64_t r, int64_t *s0, int64_t *s1)
{
    *s0 = r * j->g->n / j->ranges;
    *s1 = (r + 1) * j->g->n / j->ranges;
}

/* Forward: per sample and group, out = W (ocg, k) @ cols (k, hw) (+ bias,
 * written first so that the product adds to it). */
static void conv_forward_range(int64_t begin, int64_t end, void *ctx)
{
    const struct conv_job *j = ctx;
    const struct conv *g = j->g;
    int64_t hw = g->oh * g->ow, s0, s1;
    size_t es = j->es;
    for (int64_t r = begin; r < end; r++) {
        char *cols = j->scratch + es * (size_t)(r * j->per);
        range_of(j, r, &s0, &s1);
        for (int64_t s = s0; s < s1; s++)
            for (int64_t gr = 0; gr < g->groups; gr++) {
                const char *src = cols;
                char *dst = j->out + es * (size_t)((s * g->oc + gr * g->ocg) * hw);
                if (conv_direct(g))
                    src = j->x + es * (size_t)((s * g->c + gr * g->cg) * hw);
                else
                    conv_cols(j, false, (char *)j->x, s, gr, cols);
                if (j->b)
                    fill_rows(j->f32, dst, j->b + es * (size_t)(gr * g->ocg), g->ocg, hw);
                gemm(j->f32, false, false, g->ocg, hw, g->k, j->w + es * (size_t)(gr * g->ocg * g->k),
                     g->k, src, hw, j->b ? 1.0 : 0.0, dst, hw);
            }
    }
}

/* Backward: per sample and group, dW += gout (ocg, hw) @ cols^T (hw, k)
 * into the range's own weight gradient (range 0: the result itself, the
 * others: scratch), and cols = W^T (k, ocg) @ gout (ocg, hw) scattered
 * into the input's gradient by col2im over zeroed channels. */
static void conv_backward_range(int64_t begin, int64_t end, void *ctx)
{
    const struct conv_job *j = ctx;
    const struct conv *g = j->g;
    int64_t hw = g->oh * g->ow, s0, s1;
    size_t es = j->es;
    bool direct = conv_direct(g);
    for (int64_t r = begin; r < end; r++) {
        char *cols = j->scratch + es * (size_t)(r * j->per);
        char *dw = r == 0 ? j->gw : cols + es * (size_t)(direct ? 0 : g->k * hw);
        if (j->gw && r > 0)
            memset(dw, 0, es * (size_t)(g->oc * g->k));
        range_of(j, r, &s0, &s1);
        for (int64_t s = s0; s < s1; s++)
            for (int64_t gr = 0; gr < g->groups; gr++) {
                const char *gs = j->go + es * (size_t)((s * g->oc + gr * g->ocg) * hw);
                const char *ws = j->w + es * (size_t)(gr * g->ocg * g->k);
                size_t xo = es * (size_t)((s * g->c + gr * g->cg) * g->h * g->w);
                if (j->gw) {
                    const char *src = direct ? j->x + xo : cols;
                    if (!direct)
                        conv_cols(j, false, (char *)j->x, s, gr, cols);
                    gemm(j->f32, false, true, g->ocg, g->k, hw, gs, hw, src, hw, 1.0,
                         dw + es * (size_t)(gr * g->ocg * g->k), g->k);
                }
                if (j->gi && direct) {
                    gemm(j->f32, true, false, g->k, hw, g->ocg, ws, g->k, gs, hw, 0.0, j->gi + xo, hw);
                } else if (j->gi) {
                    gemm(j->f32, true, false, g->k, hw, g->ocg, ws, g->k, gs, hw, 0.0, cols, hw);
                    memset(j->gi + xo, 0, es * (size_t)(g->cg * g->h * g->w));
                    conv_cols(j, true, j->gi, s, gr, cols);
                }
            }
    }
}

/* Runs fn over the job's ranges: on the pool with OpenBLAS single-threaded
 * inside it (tn__blas_parallel_for); one range runs here, the products
 * threaded by OpenBLAS. */
static void conv_run(struct conv_job *j, tn_range_fn fn)
{
    if (j->ranges > 1) {
        tn__blas_parallel_for(j->ranges, 1, fn, j);
    } else {
        openblas_set_num_threads(tn_get_num_threads());
        fn(0, 1, j);
    }
}

/* Depthwise: one input and one output channel a group, float32 (float16
 * and bfloat16 compute in it): the direct kernel of nn_conv_dw.c rather
 * than an im2col and a one-row GEMM call per channel, which took 4x
 * PyTorch's time on efficientnet_b0's 112x112 stride-2 layer
 * (bench/ops/conv.sh). */
static bool conv_depthwise(const struct conv *g)
{
    return g->groups > 1 && g->cg == 1 && g->ocg == 1;
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
    bool cl = tn__conv_channels_last(input, weight); /* the result's layout */
    if (transposed) /* (below) */
        return tn__channels_last_if(
            tn__nn_conv_transposed(input, weight, bias, stride, stride_len, padding, padding_len,
                                   dilation, dilation_len, output_padding, output_padding_len,
                                   groups),
            cl);
    int rc = conv_geometry(input, weight, bias, CONV_FORWARD, stride, stride_len, padding,
                           padding_len, dilation, dilation_len, groups, &g);
    if (rc < 0)
        return NULL;
    /* float16 and bfloat16 compute in float32 and round once, as 2.x */
    bool f32 = input->dtype != TN_FLOAT64, direct = conv_direct(&g);
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    int64_t hw = g.oh * g.ow, osz[4] = {g.n, g.oc, g.oh, g.ow}, R = conv_ranges(&g);
    int64_t per = direct ? 0 : g.k * hw, nscratch = R * per > 0 ? R * per : 1;
    if (input->ndim == 3)
        osz[2] = g.ow;
    if (rc == 1)
        return conv_empty(input, weight, bias, osz, input->ndim);
    if (input->dtype == TN_INT64) {
        struct tn_tensor *xi = tn__nn_as(input, TN_INT64), *wi = tn__nn_as(weight, TN_INT64);
        struct tn_tensor *bi = tn__nn_as(bias, TN_INT64), *oi = tn_empty(osz, input->ndim, TN_INT64);
        if (xi && wi && (!bias || bi) && oi)
            conv_int64(&g, tn_data(xi), tn_data(wi), bi ? tn_data(bi) : NULL, tn_data(oi));
        else
            tn_release(oi), oi = NULL;
        tn__nn_drop(0, xi, wi, bi, NULL);
        return oi ? tn__channels_last_if(oi, cl) : NULL;
    }
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *b = tn__nn_as(bias, ct);
    struct tn_tensor *out = tn_empty(osz, input->ndim, ct);
    struct tn_tensor *scratch = tn_empty(&nscratch, 1, ct);
    if (!x || !w || (bias && !b) || !out || !scratch) {
        tn__nn_drop(0, x, w, b, out);
        tn_release(scratch);
        return NULL;
    }
    struct conv_job j = {&g, f32, f32 ? 4 : 8, R, per, tn_data(x), tn_data(w),
                         b ? tn_data(b) : NULL, NULL, tn_data(out), NULL, NULL, tn_data(scratch)};
    if (f32 && conv_depthwise(&g))
        rc = tn__conv_depthwise_f32(&g, tn_data(x), tn_data(w), b ? tn_data(b) : NULL,
                                    tn_data(out));
    else if (f32 && tn__conv_pw_fits(&g))
        rc = tn__conv_pw_f32(&g, tn_data(x), tn_data(w), b ? tn_data(b) : NULL, tn_data(out));
    else if (f32 && tn__conv_grouped_fits(&g))
        rc = tn__conv_grouped_f32(&g, tn_data(x), tn_data(w), b ? tn_data(b) : NULL,
                                  tn_data(out));
    else if (f32 && tn__conv_wino_fits(&g))
        rc = tn__conv_wino_f32(&g, tn_data(x), tn_data(w), b ? tn_data(b) : NULL, tn_data(out));
    else if (f32 && tn__conv_flat_fits(&g))
        rc = tn__conv_flat_f32(&g, tn_data(x), tn_data(w), b ? tn_data(b) : NULL, tn_data(out));
    else
        conv_run(&j, conv_forward_range);
    tn_release(scratch);
    tn__nn_drop(0, x, w, b, NULL);
    if (rc < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__channels_last_if(tn__nn_to(out, input->dtype), cl);
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
    if (transposed) /* (below) */
        return tn__channels_last_outs(
            tn__nn_conv_transposed_backward(grad_output, input, weight, stride, stride_len,
                                            padding, padding_len, dilation, dilation_len,
                                            output_padding, output_padding_len, groups,
                                            output_mask, result0, result1, result2),
            tn__conv_channels_last(input, weight), result0, result1, result2);
    int rc = conv_geometry(input, weight, NULL, output_mask[0] ? CONV_GRAD_INPUT : CONV_GRAD_WEIGHT,
                           stride, stride_len, padding, padding_len, dilation, dilation_len,
                           groups, &g);
    if (rc < 0 || (rc = tn__nn_check_float("slow_conv2d_cpu", input)) < 0) /* (no int64 grads) */
        return rc;
    int64_t hw = g.oh * g.ow;
    if (tn_numel(grad_output) != g.n * g.oc * hw)
        return tn_set_error(TN_ESHAPE, "convolution_backward: grad_output holds %lld values, the "
                            "convolution gives %lld", (long long)tn_numel(grad_output),
                            (long long)(g.n * g.oc * hw));
    /* float16 and bfloat16 compute in float32 and round once, as 2.x */
    bool f32 = input->dtype != TN_FLOAT64, direct = conv_direct(&g);
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    size_t es = f32 ? 4 : 8;
    int64_t R = conv_ranges(&g), per = (direct ? 0 : g.k * hw) + (R > 1 ? g.oc * g.k : 0);
    int64_t nscratch = R * per > 0 ? R * per : 1;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *go = tn__nn_as(grad_output, ct);
    struct tn_tensor *gi = output_mask[0] ? tn_empty(input->sizes, input->ndim, ct) : NULL;
    /* mkldnn's backward gives the weight's gradient with the bias's, asked for or not */
    bool want_w = output_mask[1] || (output_mask[2] && conv_mkldnn_g(input->dtype, &g));
    struct tn_tensor *gw = want_w ? tn_zeros(weight->sizes, weight->ndim, ct) : NULL;
    struct tn_tensor *gb = output_mask[2] ? tn_zeros(&g.oc, 1, ct) : NULL;
    struct tn_tensor *scratch = tn_empty(&nscratch, 1, ct);
    if (!x || !w || !go || (output_mask[0] && !gi) || (want_w && !gw) ||
        (output_mask[2] && !gb) || !scratch) {
        tn__nn_drop(0, x, w, go, gi);
        tn_release(scratch);
        return tn__nn_drop(tn_last_status(), gw, gb, NULL, NULL);
    }
    char *gp = tn_data(go);
    struct conv_job j = {&g, f32, es, R, per, tn_data(x), tn_data(w), NULL, gp, NULL,
                         gi ? tn_data(gi) : NULL, gw ? tn_data(gw) : NULL, tn_data(scratch)};
    if (gi || gw)
        conv_run(&j, conv_backward_range);
    for (int64_t r = 1; gw && r < R; r++) { /* the ranges' partial weight gradients, in order */
        const char *part = j.scratch + es * (size_t)(r * per + (direct ? 0 : g.k * hw));
        for (int64_t i = 0; i < g.oc * g.k; i++)
            if (f32)
                ((float *)tn_data(gw))[i] += ((const float *)(const void *)part)[i];
            else
                ((double *)tn_data(gw))[i] += ((const double *)(const void *)part)[i];
    }
    tn_release(scratch);
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
    return tn__channels_last_outs(TN_OK, tn__conv_channels_last(input, weight), result0, result1,
                                  result2);
}

/* --------------------------------------------------- transposed convolution
 * convolution(transposed=True) as the regular convolution's products:
 * its output is the input gradient of the convolution whose output is
 * `input` (weight (C_in, C_out / groups, k...) read as that convolution's
 * (oc, c / groups, k...)), its input gradient that convolution itself, its
 * weight gradient that convolution's weight gradient with the two
 * activations swapped. nn_conv.c hands transposed calls here. */

struct tn_tensor *tn__nn_conv_transposed(const struct tn_tensor *input,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias, const int64_t *stride,
                                         int stride_len, const int64_t *padding, int padding_len,
                                         const int64_t *dilation, int dilation_len,
                                         const int64_t *output_padding, int output_padding_len,
                                         int64_t groups)
{
    char a[128];
    int64_t osz[TN_MAX_DIMS], ext[3];
    bool extra;
    if (weight->ndim != 3 && weight->ndim != 4)
        return tn_set_error(TN_ESHAPE, "convolution: expected a 3-D or 4-D weight, got %s",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a)), NULL;
    if (tn__conv_transposed_shape(input, weight, stride, stride_len, padding, padding_len,
                                  dilation, dilation_len, output_padding, output_padding_len,
                                  groups, osz, ext, &extra) < 0)
        return NULL;
    /* mkldnn takes a transposed convolution as a forward one (one whose
     * output padding reaches its stride is conv3d.c's, never here) */
    bool strided = false, dilated = false;
    int64_t chw = input->sizes[1];
    for (int i = 0; i < input->ndim - 2; i++) {
        strided |= tn__nn_param(stride, stride_len, i, 1) != 1;
        dilated |= tn__nn_param(dilation, dilation_len, i, 1) != 1;
        chw *= input->sizes[2 + i];
    }
    if (tn_numel(input) == 0)
        return conv_empty(input, weight, bias, osz, input->ndim);
    if (conv_types(input, weight, bias,
                   conv_mkldnn(input->dtype, input->sizes[0], chw,
                               input->ndim == 4 ? weight->sizes[2] : 1,
                               weight->sizes[input->ndim - 1], strided, dilated, groups)) < 0)
        return NULL;
    struct tn_tensor *shape = tn_zeros(osz, input->ndim, input->dtype), *r[3] = {NULL};
    bool mask[3] = {true, false, false};
    if (!shape || tn_convolution_backward(input, shape, weight, NULL, 0, stride, stride_len,
                                          padding, padding_len, dilation, dilation_len, false,
                                          output_padding, output_padding_len, groups, mask, 3,
                                          &r[0], &r[1], &r[2]) < 0) {
        tn_release(shape);
        return NULL;
    }
    tn_release(shape);
    if (!bias)
        return r[0];
    /* added in place, as PyTorch 2.x's slow kernel does: a bias of another
     * dtype (taken off mkldnn) leaves the input's dtype, the sum rounded once */
    int64_t bsz[4] = {1, tn_numel(bias), 1, 1};
    struct tn_tensor *bv = tn_reshape(bias, bsz, input->ndim);
    int rc = bv ? tn_add_(r[0], bv, tn_int(1)) : tn_last_status();
    tn_release(bv);
    if (rc < 0) {
        tn_release(r[0]);
        return NULL;
    }
    return r[0];
}

int tn__nn_conv_transposed_backward(const struct tn_tensor *grad_output,
                                    const struct tn_tensor *input,
                                    const struct tn_tensor *weight, const int64_t *stride,
                                    int stride_len, const int64_t *padding, int padding_len,
                                    const int64_t *dilation, int dilation_len,
                                    const int64_t *output_padding, int output_padding_len,
                                    int64_t groups, const bool *output_mask,
                                    struct tn_tensor **result0, struct tn_tensor **result1,
                                    struct tn_tensor **result2)
{
    *result0 = *result1 = *result2 = NULL;
    if (output_mask[0] &&
        !(*result0 = tn_convolution(grad_output, weight, NULL, stride, stride_len, padding,
                                    padding_len, dilation, dilation_len, false, output_padding,
                                    output_padding_len, groups)))
        return tn_last_status();
    if (output_mask[1]) {
        struct tn_tensor *r0 = NULL, *r2 = NULL;
        bool mask[3] = {false, true, false};
        int rc = tn_convolution_backward(input, grad_output, weight, NULL, 0, stride, stride_len,
                                         padding, padding_len, dilation, dilation_len, false,
                                         output_padding, output_padding_len, groups, mask, 3,
                                         &r0, result1, &r2);
        tn__nn_drop(0, r0, r2, NULL, NULL);
        if (rc < 0) {
            tn_release(*result0);
            *result0 = NULL;
            return rc;
        }
    }
    if (output_mask[2]) {
        int64_t dims[3] = {0, 2, 3};
        if (!(*result2 = tn_sum_dim_intlist(grad_output, dims, grad_output->ndim - 1, false,
                                            TN_DTYPE_UNSET))) {
            tn__nn_drop(0, *result0, *result1, NULL, NULL);
            *result0 = *result1 = NULL;
            return tn_last_status();
        }
    }
    return TN_OK;
}
