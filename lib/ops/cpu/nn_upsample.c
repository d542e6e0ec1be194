/*
 * ops/cpu/nn_upsample.c: CPU kernels of upsample_nearest2d and
 * upsample_bilinear2d and their backward ops (the .vec front ends F.interpolate
 * calls are in lib/ops/conv.c).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

/* ------------------------------------------------ upsample_nearest2d/bilinear2d
 * Over (N, C, H, W) as N*C planes of float or double. Source indices and
 * weights are computed as PyTorch's CPU kernels compute them: nearest in
 * float (floorf(dst * scale)), bilinear in the dtype's accumulation type
 * (float for float32), so that the picked pixels and weights agree. */

/* PyTorch's upsample_2d_common_check of input_size (the input's sizes in
 * the forward) and output_size. */
static int up_check(const int64_t *input_size, int input_len, const int64_t *output_size,
                    int output_len)
{
    if (output_len != 2)
        return tn_set_error(TN_EINVAL, "It is expected output_size equals to 2, but got size %d",
                            output_len);
    if (input_len != 4)
        return tn_set_error(TN_EINVAL, "It is expected input_size equals to 4, but got size %d",
                            input_len);
    if (input_size[2] <= 0 || input_size[3] <= 0 || output_size[0] <= 0 || output_size[1] <= 0)
        return tn_set_error(TN_EINVAL, "Input and output sizes should be greater than 0, but "
                            "got input (H: %lld, W: %lld) output (H: %lld, W: %lld)",
                            (long long)input_size[2], (long long)input_size[3],
                            (long long)output_size[0], (long long)output_size[1]);
    return TN_OK;
}

/* PyTorch's compute_scales_value: 1/scale when one is given, else in/out */
#define UP_SCALE(T, scale, in, out)                                                            \
    ((scale) && *(scale) > 0 ? (T)(1.0 / *(scale)) : (T)(in) / (T)(out))

static int64_t nearest_src(int64_t dst, int64_t in, int64_t out, const double *scale)
{
    if (in == out)
        return dst;
    if (out == 2 * in)
        return dst >> 1;
    float s = UP_SCALE(float, scale, in, out);
    int64_t i = (int64_t)floorf((float)dst * s);
    return i < in - 1 ? i : in - 1;
}

/* one axis of bilinear: the two source indices and their weights */
#define UP_LINEAR(T)                                                                           \
    static void linear_src_##T(int64_t dst, int64_t in, int64_t out, bool align,               \
                               const double *scale, int64_t *i0, int64_t *i1, T *l0, T *l1)    \
    {                                                                                          \
        T s = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)                            \
                    : UP_SCALE(T, scale, in, out);                                             \
        T real = align ? s * (T)dst : s * ((T)dst + (T)0.5) - (T)0.5;                          \
        if (!align && real < 0)                                                                \
            real = 0;                                                                          \
        *i0 = (int64_t)real;                                                                   \
        *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);                                                    \
        *l1 = real - (T)*i0;                                                                   \
        *l0 = (T)1 - *l1;                                                                      \
    }
UP_LINEAR(float)
UP_LINEAR(double)

/* forward (bw false: src planes ih x iw -> dst oh x ow) or backward (bw:
 * the gradient of the output scattered back onto the input) of one mode,
 * over the dtype T: the source rows and columns of each output row and
 * column (and their weights) computed once, then the planes on the thread
 * pool, each independent of the others. */
#define UP_KERNEL(T)                                                                           \
    struct up_job_##T {                                                                        \
        bool bilinear, bw;                                                                     \
        const T *src;                                                                          \
        T *dst;                                                                                \
        int64_t ih, iw, oh, ow;                                                                \
        const int64_t *yi, *xi; /* y0, y1 of row y at 2y, 2y + 1; x0, x1 likewise */           \
        const T *yl, *xl;       /* their weights */                                            \
    };                                                                                         \
    static void up_planes_##T(int64_t pb, int64_t pe, void *arg)                               \
    {                                                                                          \
        const struct up_job_##T *j = arg;                                                      \
        int64_t ih = j->ih, iw = j->iw, oh = j->oh, ow = j->ow;                                \
        for (int64_t p = pb; p < pe; p++)                                                      \
            for (int64_t y = 0; y < oh; y++) {                                                 \
                int64_t y0 = j->yi[2 * y], y1 = j->yi[2 * y + 1];                              \
                T a0 = j->yl[2 * y], a1 = j->yl[2 * y + 1];                                    \
                for (int64_t x = 0; x < ow; x++) {                                             \
                    int64_t x0 = j->xi[2 * x], x1 = j->xi[2 * x + 1];                          \
                    T b0 = j->xl[2 * x], b1 = j->xl[2 * x + 1];                                \
                    int64_t ip = p * ih * iw, op = p * oh * ow + y * ow + x;                   \
                    if (!j->bw) {                                                              \
                        const T *s = j->src + ip;                                              \
                        j->dst[op] = j->bilinear                                               \
                                         ? a0 * (b0 * s[y0 * iw + x0] + b1 * s[y0 * iw + x1])  \
                                               + a1 * (b0 * s[y1 * iw + x0] +                  \
                                                       b1 * s[y1 * iw + x1])                   \
                                         : s[y0 * iw + x0];                                    \
                    } else if (j->bilinear) {                                                  \
                        T g = j->src[op], *d = j->dst + ip;                                    \
                        d[y0 * iw + x0] += a0 * b0 * g;                                        \
                        d[y0 * iw + x1] += a0 * b1 * g;                                        \
                        d[y1 * iw + x0] += a1 * b0 * g;                                        \
                        d[y1 * iw + x1] += a1 * b1 * g;                                        \
                    } else {                                                                   \
                        j->dst[ip + y0 * iw + x0] += j->src[op];                               \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
    }                                                                                          \
    /* the source index pair and weights of each of the n output positions */                 \
    static void up_table_##T(bool bilinear, int64_t in, int64_t n, bool align,                 \
                             const double *scale, int64_t *idx, T *w)                          \
    {                                                                                          \
        for (int64_t k = 0; k < n; k++) {                                                      \
            w[2 * k] = 1, w[2 * k + 1] = 0;                                                    \
            if (bilinear)                                                                      \
                linear_src_##T(k, in, n, align, scale, &idx[2 * k], &idx[2 * k + 1],           \
                               &w[2 * k], &w[2 * k + 1]);                                      \
            else                                                                               \
                idx[2 * k] = idx[2 * k + 1] = nearest_src(k, in, n, scale);                    \
        }                                                                                      \
    }                                                                                          \
    static int up_##T(bool bilinear, bool bw, const T *src, T *dst, int64_t planes,            \
                      int64_t ih, int64_t iw, int64_t oh, int64_t ow, bool align,              \
                      const double *sh, const double *sw)                                      \
    {                                                                                          \
        int64_t *idx = malloc(sizeof *idx * (size_t)(2 * (oh + ow)) + 1);                      \
        T *w = malloc(sizeof *w * (size_t)(2 * (oh + ow)) + 1);                                \
        if (!idx || !w) {                                                                      \
            free(idx);                                                                         \
            free(w);                                                                           \
            return tn_set_error(TN_ENOMEM, "upsample: out of memory");                         \
        }                                                                                      \
        up_table_##T(bilinear, ih, oh, align, sh, idx, w);                                     \
        up_table_##T(bilinear, iw, ow, align, sw, idx + 2 * oh, w + 2 * oh);                   \
        struct up_job_##T j = {bilinear, bw, src, dst, ih, iw, oh, ow,                         \
                               idx, idx + 2 * oh, w, w + 2 * oh};                              \
        tn_parallel_for(planes, tn__grain_of(oh * ow), up_planes_##T, &j);                     \
        free(idx);                                                                             \
        free(w);                                                                               \
        return TN_OK;                                                                          \
    }
UP_KERNEL(float)
UP_KERNEL(double)

/* the shared body: in is the input (forward) or grad_output (backward) */
static struct tn_tensor *upsample(bool bilinear, bool bw, const struct tn_tensor *in,
                                  const int64_t *osz, int olen, const int64_t *isz, int ilen,
                                  bool align, const double *sh, const double *sw)
{
    if (up_check(isz, ilen, osz, olen) < 0)
        return NULL;
    if (!bw && isz[1] * isz[2] * isz[3] == 0) { /* an empty batch only */
        char a[128];
        tn_set_error(TN_ESHAPE, "Non-empty 4D data tensor expected but got a tensor with sizes "
                     "%s", tn_shape_format(isz, 4, a, sizeof a));
        return NULL;
    }
    /* (2.x's kernel names; nearest also copies uint8 images, exactly,
     * through float32; 2.x's fixed-point uint8 bilinear is not ours) */
    const char *kernel = bilinear ? "upsample_bilinear2d_channels_last"
                                  : "upsample_nearest2d_channels_last";
    bool half = in->dtype == TN_FLOAT16 || in->dtype == TN_BFLOAT16 ||
                (in->dtype == TN_UINT8 && !bilinear && !bw);
    if (in->dtype != TN_FLOAT32 && in->dtype != TN_FLOAT64 && !half) {
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                     tn_dtype_info(in->dtype)->c10_name);
        return NULL;
    }
    int64_t planes = isz[0] * isz[1];
    if (bw) { /* (the forward's input is isz itself) */
        int64_t want[4] = {isz[0], isz[1], osz[0], osz[1]};
        if (in->ndim != 4) {
            tn_set_error(TN_ESHAPE, "Expected grad_output to be a tensor of dimension 4 but got: "
                         "dimension %d", in->ndim);
            return NULL;
        }
        for (int d = 0; d < 4; d++)
            if (in->sizes[d] != want[d]) {
                tn_set_error(TN_ESHAPE, "Expected grad_output to have the same shape as output; "
                             "output.size(%d) = %lld but got grad_output.size(%d) = %lld", d,
                             (long long)want[d], d, (long long)in->sizes[d]);
                return NULL;
            }
    }
    int64_t out_sizes[4] = {isz[0], isz[1], bw ? isz[2] : osz[0], bw ? isz[3] : osz[1]};
    /* float16 and bfloat16 compute in float32 and round once at the end,
     * as PyTorch 2.x's kernels (1.13 rounded every step of bfloat16) */
    enum tn_dtype ct = half ? TN_FLOAT32 : in->dtype;
    struct tn_tensor *c = tn__nn_as(in, ct), *r = c ? tn_empty(out_sizes, 4, ct) : NULL;
    if (!r) {
        tn_release(c);
        return NULL;
    }
    if (bw)
        tn_fill_(r, tn_int(0));
    int rc = ct == TN_FLOAT32 ? up_float(bilinear, bw, tn_data(c), tn_data(r), planes, isz[2],
                                         isz[3], osz[0], osz[1], align, sh, sw)
                              : up_double(bilinear, bw, tn_data(c), tn_data(r), planes, isz[2],
                                          isz[3], osz[0], osz[1], align, sh, sw);
    tn_release(c);
    if (rc < 0) {
        tn_release(r);
        return NULL;
    }
    return tn__nn_to(r, in->dtype);
}

struct tn_tensor *tn__cpu_upsample_nearest2d(tn_keyset ks, const struct tn_tensor *self,
                                             const int64_t *output_size, int output_size_len,
                                             const double *scales_h, const double *scales_w)
{
    return upsample(false, false, self, output_size, output_size_len, self->sizes, self->ndim,
                    false, scales_h, scales_w);
}

struct tn_tensor *tn__cpu_upsample_nearest2d_backward(
    tn_keyset ks, const struct tn_tensor *grad_output, const int64_t *output_size,
    int output_size_len, const int64_t *input_size, int input_size_len, const double *scales_h,
    const double *scales_w)
{
    return upsample(false, true, grad_output, output_size, output_size_len, input_size,
                    input_size_len, false, scales_h, scales_w);
}

struct tn_tensor *tn__cpu_upsample_bilinear2d(tn_keyset ks, const struct tn_tensor *self,
                                              const int64_t *output_size, int output_size_len,
                                              bool align_corners, const double *scales_h,
                                              const double *scales_w)
{
    return upsample(true, false, self, output_size, output_size_len, self->sizes, self->ndim,
                    align_corners, scales_h, scales_w);
}

struct tn_tensor *tn__cpu_upsample_bilinear2d_backward(
    tn_keyset ks, const struct tn_tensor *grad_output, const int64_t *output_size,
    int output_size_len, const int64_t *input_size, int input_size_len, bool align_corners,
    const double *scales_h, const double *scales_w)
{
    return upsample(true, true, grad_output, output_size, output_size_len, input_size,
                    input_size_len, align_corners, scales_h, scales_w);
}
