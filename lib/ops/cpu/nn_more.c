/*
 * ops/cpu/nn_more.c: CPU kernels of the nn ops added after nn_loss.c,
 * nn_norm.c, nn_conv.c and nn_pool.c: smooth_l1_loss and its backward,
 * native_group_norm and its backward. The losses are written over the
 * elementwise ops, which broadcast, promote and serve every floating dtype;
 * group_norm loops in float64 and rounds once.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

static int check_beta(double beta)
{
    if (beta < 0)
        return tn_set_error(TN_EINVAL, "smooth_l1_loss does not support negative values "
                            "for beta.");
    return TN_OK;
}

/* |d| < beta ? 0.5 * d * d / beta : |d| - 0.5 * beta, elementwise; beta 0
 * is l1_loss, as in PyTorch. */
struct tn_tensor *tn__cpu_smooth_l1_loss(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *target, int64_t reduction,
                                         double beta)
{
    if (check_beta(beta) < 0 || tn__nn_check_loss_dtype("smooth_l1_cpu", self, target) < 0)
        return NULL;
    if (beta == 0)
        return tn_l1_loss(self, target, reduction);
    struct tn_keep k = {0};
    struct tn_tensor *d, *a, *h, *hz, *q, *l, *c, *e, *r;
    TN_KEEP(&k, d, tn_sub(self, target, tn_int(1)));
    TN_KEEP(&k, a, tn_abs(d));
    TN_KEEP(&k, h, tn__nn_scale(a, 0.5));
    TN_KEEP(&k, hz, tn_mul(h, a));
    TN_KEEP(&k, q, tn_div_scalar(hz, tn_float(beta)));
    TN_KEEP(&k, l, tn__nn_plus(a, -0.5 * beta));
    TN_KEEP(&k, c, tn_lt_scalar(a, tn_float(beta)));
    TN_KEEP(&k, e, tn_where_self(c, q, l));
    TN_KEEP(&k, r, tn__nn_reduce_loss(e, reduction));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* grad_output * norm * (|d| >= beta ? (d > 0 ? 1 : -1) : d / beta), with
 * norm 1/numel(self) for the mean: PyTorch's vectorised comparisons, so
 * that d = 0 with beta = 0 gets -1 and a negative beta the sign, as there
 * (its backward does not check beta). */
struct tn_tensor *tn__cpu_smooth_l1_loss_backward(tn_keyset ks,
                                                  const struct tn_tensor *grad_output,
                                                  const struct tn_tensor *self,
                                                  const struct tn_tensor *target,
                                                  int64_t reduction, double beta)
{
    struct tn_keep k = {0};
    struct tn_tensor *d, *q, *pm, *z, *a, *big, *s, *g;
    TN_KEEP(&k, d, tn_sub(self, target, tn_int(1)));
    TN_KEEP(&k, q, tn_div_scalar(d, tn_float(beta)));
    TN_KEEP(&k, pm, tn_sign(d));
    TN_KEEP(&k, z, tn_eq_scalar(d, tn_int(0)));
    TN_KEEP(&k, pm, tn_masked_fill_scalar(pm, z, tn_int(-1)));
    TN_KEEP(&k, a, tn_abs(d));
    TN_KEEP(&k, big, tn_ge_scalar(a, tn_float(beta)));
    TN_KEEP(&k, s, tn_where_self(big, pm, q));
    TN_KEEP(&k, g, tn_mul(s, grad_output));
    if (reduction == TN_REDUCTION_MEAN)
        TN_KEEP(&k, g, tn__nn_scale(g, 1.0 / (double)tn_numel(self)));
    return tn__keep_out(&k, g);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* native_group_norm over input (N, C, *) viewed as N x group blocks of
 * C/group * HxW contiguous elements: biased variance, rstd =
 * 1/sqrt(var + eps), then the per-channel weight and bias; mean and rstd
 * come back as (N, group). Float64 accumulation, rounded once. */
int tn__cpu_native_group_norm(tn_keyset ks, const struct tn_tensor *input,
                              const struct tn_tensor *weight, const struct tn_tensor *bias,
                              int64_t N, int64_t C, int64_t HxW, int64_t group, double eps,
                              struct tn_tensor **result0, struct tn_tensor **result1,
                              struct tn_tensor **result2)
{
    if (group <= 0 || C % group || tn_numel(input) != N * C * HxW)
        return tn_set_error(TN_ESHAPE, "Expected number of channels in input to be divisible "
                            "by num_groups, but got C=%lld and num_groups=%lld",
                            (long long)C, (long long)group);
    int rc = tn__nn_check_float("GroupNormKernelImpl", input);
    if (rc < 0)
        return rc;
    int64_t ng[2] = {N, group}, m = C / group * HxW;
    struct tn_tensor *x = tn__nn_f64(input), *w = tn__nn_f64(weight), *b = tn__nn_f64(bias);
    struct tn_tensor *y = tn__nn_zeros64(input->sizes, input->ndim);
    struct tn_tensor *mu = tn__nn_zeros64(ng, 2), *rs = tn__nn_zeros64(ng, 2);
    if (!x || (weight && !w) || (bias && !b) || !y || !mu || !rs) {
        tn__nn_drop(0, y, mu, rs, NULL);
        return tn__nn_drop(tn_last_status(), x, w, b, NULL);
    }
    const double *xp = tn_data(x), *wp = w ? tn_data(w) : NULL, *bp = b ? tn_data(b) : NULL;
    double *yp = tn_data(y), *mp = tn_data(mu), *rp = tn_data(rs);
    for (int64_t i = 0; i < N * group; i++) {
        const double *xi = xp + i * m;
        double s = 0, v = 0;
        for (int64_t j = 0; j < m; j++)
            s += xi[j];
        double mean = m ? s / (double)m : NAN;
        for (int64_t j = 0; j < m; j++)
            v += (xi[j] - mean) * (xi[j] - mean);
        double r = 1.0 / sqrt(v / (double)m + eps);
        mp[i] = mean;
        rp[i] = r;
        for (int64_t j = 0; j < m; j++) {
            int64_t c = (i % group) * (C / group) + j / HxW;
            double o = (xi[j] - mean) * r;
            yp[i * m + j] = o * (wp ? wp[c] : 1.0) + (bp ? bp[c] : 0.0);
        }
    }
    tn__nn_drop(0, x, w, b, NULL);
    *result0 = tn__nn_to(y, input->dtype);
    *result1 = tn__nn_to(mu, input->dtype);
    *result2 = tn__nn_to(rs, input->dtype);
    if (!*result0 || !*result1 || !*result2) {
        tn__nn_drop(0, *result0, *result1, *result2, NULL);
        *result0 = *result1 = *result2 = NULL;
        return tn_last_status();
    }
    return TN_OK;
}

/* native_group_norm_backward: with g = dy * weight[c] and xhat = (x -
 * mean) * rstd over a block of m elements, dx = rstd * (g - mean(g) -
 * xhat * mean(g * xhat)); dweight[c] = sum(dy * xhat), dbias[c] = sum(dy)
 * over N and HxW. Unasked results stay NULL. */
int tn__cpu_native_group_norm_backward(tn_keyset ks, const struct tn_tensor *grad_out,
                                       const struct tn_tensor *input,
                                       const struct tn_tensor *mean,
                                       const struct tn_tensor *rstd,
                                       const struct tn_tensor *weight, int64_t N, int64_t C,
                                       int64_t HxW, int64_t group, const bool *output_mask,
                                       int output_mask_len, struct tn_tensor **result0,
                                       struct tn_tensor **result1, struct tn_tensor **result2)
{
    *result0 = *result1 = *result2 = NULL;
    if (group <= 0 || C % group || tn_numel(input) != N * C * HxW ||
        tn_numel(grad_out) != tn_numel(input) || tn_numel(mean) != N * group ||
        tn_numel(rstd) != N * group)
        return tn_set_error(TN_ESHAPE, "native_group_norm_backward: shapes of grad_out, input, "
                            "mean and rstd do not fit N=%lld, C=%lld, HxW=%lld, group=%lld",
                            (long long)N, (long long)C, (long long)HxW, (long long)group);
    int64_t m = C / group * HxW;
    struct tn_tensor *x = tn__nn_f64(input), *dy = tn__nn_f64(grad_out), *mu = tn__nn_f64(mean);
    struct tn_tensor *rs = tn__nn_f64(rstd), *w = tn__nn_f64(weight);
    struct tn_tensor *dx = tn__nn_zeros64(input->sizes, input->ndim);
    struct tn_tensor *dw = tn__nn_zeros64(&C, 1), *db = tn__nn_zeros64(&C, 1);
    if (!x || !dy || !mu || !rs || (weight && !w) || !dx || !dw || !db) {
        tn__nn_drop(0, dx, dw, db, w);
        return tn__nn_drop(tn_last_status(), x, dy, mu, rs);
    }
    const double *xp = tn_data(x), *gp = tn_data(dy), *mp = tn_data(mu), *rp = tn_data(rs);
    const double *wp = w ? tn_data(w) : NULL;
    double *dxp = tn_data(dx), *dwp = tn_data(dw), *dbp = tn_data(db);
    for (int64_t i = 0; i < N * group; i++) {
        double sg = 0, sgx = 0;
        for (int64_t j = 0; j < m; j++) {
            int64_t c = (i % group) * (C / group) + j / HxW, e = i * m + j;
            double xh = (xp[e] - mp[i]) * rp[i], g = gp[e] * (wp ? wp[c] : 1.0);
            sg += g;
            sgx += g * xh;
            dwp[c] += gp[e] * xh;
            dbp[c] += gp[e];
        }
        for (int64_t j = 0; j < m; j++) {
            int64_t c = (i % group) * (C / group) + j / HxW, e = i * m + j;
            double xh = (xp[e] - mp[i]) * rp[i], g = gp[e] * (wp ? wp[c] : 1.0);
            dxp[e] = rp[i] * (g - sg / (double)m - xh * sgx / (double)m);
        }
    }
    tn__nn_drop(0, x, dy, mu, rs);
    tn_release(w);
    bool want[3] = {output_mask_len > 0 && output_mask[0], output_mask_len > 1 && output_mask[1],
                    output_mask_len > 2 && output_mask[2]};
    struct tn_tensor *all[3] = {dx, dw, db}, **out[3] = {result0, result1, result2};
    int rc = TN_OK;
    for (int i = 0; i < 3; i++) {
        if (!want[i]) {
            tn_release(all[i]);
            continue;
        }
        if (!(*out[i] = tn__nn_to(all[i], input->dtype)))
            rc = tn_last_status();
    }
    if (rc < 0)
        tn__nn_drop(0, *result0, *result1, *result2, NULL);
    if (rc < 0)
        *result0 = *result1 = *result2 = NULL;
    return rc;
}

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

/* --------------------------------------------------- transposed convolution
 * convolution(transposed=True) as the regular convolution's products:
 * its output is the input gradient of the convolution whose output is
 * `input` (weight (C_in, C_out / groups, k...) read as that convolution's
 * (oc, c / groups, k...)), its input gradient that convolution itself, its
 * weight gradient that convolution's weight gradient with the two
 * activations swapped. nn_conv.c hands transposed calls here. */

static int64_t tparam(const int64_t *v, int len, int i, int64_t def)
{
    return len <= 0 ? def : v[len == 1 ? 0 : i];
}

struct tn_tensor *tn__nn_conv_transposed(const struct tn_tensor *input,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias, const int64_t *stride,
                                         int stride_len, const int64_t *padding, int padding_len,
                                         const int64_t *dilation, int dilation_len,
                                         const int64_t *output_padding, int output_padding_len,
                                         int64_t groups)
{
    char a[128], b[128];
    if (weight->ndim != 3 && weight->ndim != 4)
        return tn_set_error(TN_ESHAPE, "convolution: expected a 3-D or 4-D weight, got %s",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a)), NULL;
    if (input->ndim != weight->ndim || groups <= 0 || input->sizes[1] != weight->sizes[0])
        return tn_set_error(TN_ESHAPE, "Given transposed=1, weight of size %s, expected input%s "
                            "to have %lld channels, but got %lld channels instead",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a),
                            tn_shape_format(input->sizes, input->ndim, b, sizeof b),
                            (long long)weight->sizes[0],
                            (long long)(input->ndim > 1 ? input->sizes[1] : 0)), NULL;
    int64_t osz[4] = {input->sizes[0], weight->sizes[1] * groups};
    for (int i = 0; i < input->ndim - 2; i++)
        osz[2 + i] = (input->sizes[2 + i] - 1) * tparam(stride, stride_len, i, 1) -
                     2 * tparam(padding, padding_len, i, 0) +
                     tparam(dilation, dilation_len, i, 1) * (weight->sizes[2 + i] - 1) +
                     tparam(output_padding, output_padding_len, i, 0) + 1;
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
    int64_t bsz[4] = {1, tn_numel(bias), 1, 1};
    struct tn_tensor *bv = tn_reshape(bias, bsz, input->ndim);
    struct tn_tensor *out = bv ? tn_add(r[0], bv, tn_int(1)) : NULL;
    tn__nn_drop(0, bv, r[0], NULL, NULL);
    return out;
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
