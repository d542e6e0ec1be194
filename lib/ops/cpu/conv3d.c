/*
 * ops/cpu/conv3d.c: the CPU kernels convolution and convolution_backward
 * are registered under. What nn_conv.c (the 1-D and 2-D kernels) does not
 * take is done here, over its entry points:
 *  - 3-D convolution (5-D input and weight): per kernel depth kd one 2-D
 *    convolution of the input's depth slices kd * dilation + od * stride
 *    (each output depth od a sample of the batch) with weight[:, :, kd],
 *    the KD results summed; its backward the 2-D backward per kd, the
 *    input gradients added back into those slices. bfloat16 and float16
 *    compute in float32 and round once, as PyTorch 2.x's mkldnn does.
 *  - transposed convolution of 3-D, and of any dims where an output
 *    padding reaches its stride (allowed while it stays under the
 *    dilation): the regular convolution's input gradient as nn_conv.c
 *    computes it, its grad_output (our input) padded with zeros to the
 *    regular convolution's output size.
 *  - bfloat16 transposed convolution on a CPU whose mkldnn does not run
 *    bfloat16 (no AVX-512 BW/VL/DQ), where PyTorch 2.x takes its slow
 *    kernel: transposed_half, in that kernel's roundings.
 *  - int64 transposed convolution (PyTorch 2.x computes it, wrapping on
 *    overflow): a direct loop, as nn_conv.c's int64 forward.
 * Everything else goes to tn__cpu_convolution(_backward) unchanged.
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"

static const int64_t zeros[TN_MAX_DIMS];

/* The dtype 3-D convolution computes in: int64 and float64 as they are,
 * float32 for the others. */
static enum tn_dtype compute_dtype(enum tn_dtype dt)
{
    return dt == TN_INT64 || dt == TN_FLOAT64 ? dt : TN_FLOAT32;
}

static bool half(enum tn_dtype dt)
{
    return dt == TN_BFLOAT16 || dt == TN_FLOAT16;
}

/* Whether PyTorch 2.x runs bfloat16 convolution on mkldnn on this CPU
 * (mkldnn_bf16_device_check: AVX-512 BW, VL and DQ; its AVX-NE-CONVERT
 * alternative is not looked for). Where not, its transposed one takes the
 * slow kernel (transposed_half), as 2.15 does on a CPU without AVX-512. */
static bool bf16_mkldnn_cpu(void)
{
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
}

/* A 3-D convolution's geometry, with PyTorch's checks and words. */
struct g3 {
    int64_t n, c, oc, in[3], k[3], s[3], p[3], d[3], out[3], groups;
};

static int geometry3(const struct tn_tensor *input, const struct tn_tensor *weight,
                     const int64_t *stride, int stride_len, const int64_t *padding,
                     int padding_len, const int64_t *dilation, int dilation_len, int64_t groups,
                     struct g3 *g)
{
    char a[128], b[128];
    if (input->ndim != 5)
        return tn_set_error(TN_ESHAPE, "Expected 5-dimensional input for 5-dimensional weight "
                            "%s, but got %d-dimensional input of size %s instead",
                            tn_shape_format(weight->sizes, 5, a, sizeof a), input->ndim,
                            tn_shape_format(input->sizes, input->ndim, b, sizeof b));
    if (groups <= 0)
        return tn_set_error(TN_EINVAL, "non-positive groups is not supported");
    g->n = input->sizes[0];
    g->c = input->sizes[1];
    g->oc = weight->sizes[0];
    g->groups = groups;
    if (g->c != weight->sizes[1] * groups)
        return tn_set_error(TN_ESHAPE, "Given groups=%lld, weight of size %s, expected input%s to "
                            "have %lld channels, but got %lld channels instead", (long long)groups,
                            tn_shape_format(weight->sizes, 5, a, sizeof a),
                            tn_shape_format(input->sizes, 5, b, sizeof b),
                            (long long)(weight->sizes[1] * groups), (long long)g->c);
    if (g->oc % groups)
        return tn_set_error(TN_ESHAPE, "Given groups=%lld, expected weight to be divisible by %lld "
                            "at dimension 0, but got weight of size %s instead", (long long)groups,
                            (long long)groups, tn_shape_format(weight->sizes, 5, a, sizeof a));
    int64_t e[3], ke[3];
    for (int i = 0; i < 3; i++) {
        g->in[i] = input->sizes[2 + i];
        g->k[i] = weight->sizes[2 + i];
        g->s[i] = tn__nn_param(stride, stride_len, i, 1);
        g->p[i] = tn__nn_param(padding, padding_len, i, 0);
        g->d[i] = tn__nn_param(dilation, dilation_len, i, 1);
        if (g->s[i] <= 0)
            return tn_set_error(TN_EINVAL, "non-positive stride is not supported");
        if (g->p[i] < 0)
            return tn_set_error(TN_EINVAL, "negative padding is not supported");
        if (g->d[i] <= 0)
            return tn_set_error(TN_EINVAL, "dilation should be greater than zero");
        e[i] = g->in[i] + 2 * g->p[i];
        ke[i] = g->d[i] * (g->k[i] - 1) + 1;
    }
    if (e[0] < ke[0] || e[1] < ke[1] || e[2] < ke[2])
        return tn_set_error(TN_ESHAPE, "Calculated padded input size per channel: (%lld x %lld x "
                            "%lld). Kernel size: (%lld x %lld x %lld). Kernel size can't be "
                            "greater than actual input size", (long long)e[0], (long long)e[1],
                            (long long)e[2], (long long)ke[0], (long long)ke[1],
                            (long long)ke[2]);
    for (int i = 0; i < 3; i++)
        g->out[i] = (e[i] - ke[i]) / g->s[i] + 1;
    if (weight->dtype != input->dtype)
        return tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                            tn_dtype_info(input->dtype)->c10_name,
                            tn_dtype_info(weight->dtype)->c10_name);
    if (input->dtype != TN_INT64 && !tn_dtype_is_floating(input->dtype))
        return tn__nn_check_float("slow_conv3d_cpu", input);
    return TN_OK;
}

/* The input's depth slices that kernel depth kd reads, od = 0..OD-1, as a
 * batch of 2-D images [N * OD, C, H, W] (a new tensor); xp is the input
 * padded in depth. */
static struct tn_tensor *depth_batch(const struct tn_tensor *xp, const struct g3 *g, int64_t kd)
{
    int64_t start = kd * g->d[0];
    struct tn_tensor *s = tn_slice(xp, 2, start, start + (g->out[0] - 1) * g->s[0] + 1, g->s[0]);
    struct tn_tensor *t = s ? tn_permute(s, (const int64_t[]){0, 2, 1, 3, 4}, 5) : NULL;
    struct tn_tensor *c = t ? tn_contiguous(t) : NULL;
    struct tn_tensor *r = c ? tn_reshape(c, TN_SHAPE(g->n * g->out[0], g->c, g->in[1], g->in[2]))
                            : NULL;
    tn__nn_drop(0, s, t, c, NULL);
    return r;
}

/* x (of dtype ct, contiguous) padded by p on both sides of depth (retained
 * itself when p is 0). */
static struct tn_tensor *pad_depth(const struct tn_tensor *x, int64_t p)
{
    if (!p)
        return tn_retain((struct tn_tensor *)x);
    const int64_t pad[6] = {0, 0, 0, 0, p, p};
    return tn_constant_pad_nd(x, pad, 6, tn_int(0));
}

/* [N * OD, C', H', W'] as [N, C', OD, H', W'] (a view) */
static struct tn_tensor *undepth(const struct tn_tensor *y, int64_t n, int64_t od)
{
    struct tn_tensor *v = tn_reshape(y, TN_SHAPE(n, od, y->sizes[1], y->sizes[2], y->sizes[3]));
    struct tn_tensor *p = v ? tn_permute(v, (const int64_t[]){0, 2, 1, 3, 4}, 5) : NULL;
    tn_release(v);
    return p;
}

static struct tn_tensor *conv3d_forward(const struct tn_tensor *input,
                                        const struct tn_tensor *weight,
                                        const struct tn_tensor *bias, const int64_t *stride,
                                        int stride_len, const int64_t *padding, int padding_len,
                                        const int64_t *dilation, int dilation_len, int64_t groups)
{
    struct g3 g;
    if (geometry3(input, weight, stride, stride_len, padding, padding_len, dilation,
                  dilation_len, groups, &g) < 0)
        return NULL;
    enum tn_dtype ct = compute_dtype(input->dtype);
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *b = tn__nn_as(bias, ct), *xp = x ? pad_depth(x, g.p[0]) : NULL;
    struct tn_tensor *sum = NULL, *r = NULL;
    if (!x || !w || (bias && !b) || !xp)
        goto done;
    for (int64_t kd = 0; kd < g.k[0]; kd++) {
        struct tn_tensor *xb = depth_batch(xp, &g, kd), *wk = tn_select(w, 2, kd), *y = NULL;
        if (xb && wk)
            y = tn_convolution(xb, wk, kd ? NULL : b, g.s + 1, 2, g.p + 1, 2, g.d + 1, 2, false,
                               zeros, 2, groups);
        tn__nn_drop(0, xb, wk, NULL, NULL);
        if (!y)
            goto done;
        if (!sum) {
            sum = y;
        } else {
            int rc = tn_add_(sum, y, tn_int(1));
            tn_release(y);
            if (rc < 0)
                goto done;
        }
    }
    struct tn_tensor *v = undepth(sum, g.n, g.out[0]);
    struct tn_tensor *c = v ? tn_contiguous(v) : NULL;
    tn_release(v);
    r = c ? tn__nn_to(c, input->dtype) : NULL;
done:
    tn__nn_drop(0, x, w, b, xp);
    tn_release(sum);
    return r;
}

static int conv3d_backward(const struct tn_tensor *grad_output, const struct tn_tensor *input,
                           const struct tn_tensor *weight, const int64_t *stride, int stride_len,
                           const int64_t *padding, int padding_len, const int64_t *dilation,
                           int dilation_len, int64_t groups, const bool *mask,
                           struct tn_tensor **r0, struct tn_tensor **r1, struct tn_tensor **r2)
{
    struct g3 g;
    *r0 = *r1 = *r2 = NULL;
    int rc = geometry3(input, weight, stride, stride_len, padding, padding_len, dilation,
                       dilation_len, groups, &g);
    if (rc < 0 || (rc = tn__nn_check_float("slow_conv3d_cpu", input)) < 0)
        return rc;
    int64_t want = g.n * g.oc * g.out[0] * g.out[1] * g.out[2];
    if (tn_numel(grad_output) != want)
        return tn_set_error(TN_ESHAPE, "convolution_backward: grad_output holds %lld values, the "
                            "convolution gives %lld", (long long)tn_numel(grad_output),
                            (long long)want);
    enum tn_dtype ct = compute_dtype(input->dtype);
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *go = tn__nn_as(grad_output, ct), *xp = x ? pad_depth(x, g.p[0]) : NULL;
    struct tn_tensor *go5 = NULL, *gob = NULL, *gxp = NULL, *gw = NULL, *gb = NULL;
    if (!x || !w || !go || !xp)
        goto fail;
    struct tn_tensor *gv = tn_reshape(go, TN_SHAPE(g.n, g.oc, g.out[0], g.out[1], g.out[2]));
    struct tn_tensor *gt = gv ? tn_permute(gv, (const int64_t[]){0, 2, 1, 3, 4}, 5) : NULL;
    go5 = gv;
    gob = gt ? tn_contiguous(gt) : NULL;
    tn_release(gt);
    struct tn_tensor *gr = gob ? tn_reshape(gob, TN_SHAPE(g.n * g.out[0], g.oc, g.out[1],
                                                          g.out[2]))
                               : NULL;
    tn_release(gob);
    gob = gr;
    if (!gob)
        goto fail;
    if (mask[0] && !(gxp = tn_zeros(xp->sizes, 5, ct)))
        goto fail;
    if (mask[1] && !(gw = tn_zeros(weight->sizes, 5, ct)))
        goto fail;
    for (int64_t kd = 0; (mask[0] || mask[1]) && kd < g.k[0]; kd++) {
        struct tn_tensor *xb = depth_batch(xp, &g, kd), *wk = tn_select(w, 2, kd);
        struct tn_tensor *gi = NULL, *gwk = NULL, *gbk = NULL;
        const bool m[3] = {mask[0], mask[1], false};
        rc = xb && wk ? tn_convolution_backward(gob, xb, wk, NULL, 0, g.s + 1, 2, g.p + 1, 2,
                                                g.d + 1, 2, false, zeros, 2, groups, m, 3, &gi,
                                                &gwk, &gbk)
                      : tn_last_status();
        tn__nn_drop(0, xb, wk, gbk, NULL);
        if (rc >= 0 && gi) {
            int64_t start = kd * g.d[0];
            struct tn_tensor *u = undepth(gi, g.n, g.out[0]);
            struct tn_tensor *dst = tn_slice(gxp, 2, start, start + (g.out[0] - 1) * g.s[0] + 1,
                                             g.s[0]);
            rc = u && dst ? tn_add_(dst, u, tn_int(1)) : tn_last_status();
            tn__nn_drop(0, u, dst, NULL, NULL);
        }
        if (rc >= 0 && gwk) {
            struct tn_tensor *dst = tn_select(gw, 2, kd);
            rc = dst ? tn_copy_(dst, gwk) : tn_last_status();
            tn_release(dst);
        }
        tn__nn_drop(0, gi, gwk, NULL, NULL);
        if (rc < 0)
            goto fail;
    }
    if (mask[2] && !(gb = tn_sum_dim_intlist(go5, (const int64_t[]){0, 2, 3, 4}, 4, false,
                                             TN_DTYPE_UNSET)))
        goto fail;
    if (gxp) {
        struct tn_tensor *s = tn_slice(gxp, 2, g.p[0], g.p[0] + g.in[0], 1);
        struct tn_tensor *c = s ? tn_contiguous(s) : NULL;
        tn_release(s);
        tn_release(gxp);
        gxp = c;
        if (!gxp)
            goto fail;
    }
    tn__nn_drop(0, x, w, go, xp);
    tn__nn_drop(0, go5, gob, NULL, NULL);
    *r0 = tn__nn_to(gxp, input->dtype);
    *r1 = tn__nn_to(gw, input->dtype);
    *r2 = tn__nn_to(gb, input->dtype);
    if ((mask[0] && !*r0) || (mask[1] && !*r1) || (mask[2] && !*r2)) {
        rc = tn_last_status();
        tn__nn_drop(0, *r0, *r1, *r2, NULL);
        *r0 = *r1 = *r2 = NULL;
        return rc;
    }
    return TN_OK;
fail:
    rc = tn_last_status();
    tn__nn_drop(0, x, w, go, xp);
    tn__nn_drop(0, go5, gob, gxp, gw);
    tn_release(gb);
    return rc < 0 ? rc : TN_EINVAL;
}

/* ------------------------------------------------ transposed convolution */

/* (nn_internal.h) */
int tn__conv_transposed_shape(const struct tn_tensor *input, const struct tn_tensor *weight,
                              const int64_t *stride, int stride_len, const int64_t *padding,
                              int padding_len, const int64_t *dilation, int dilation_len,
                              const int64_t *output_padding, int output_padding_len,
                              int64_t groups, int64_t *osz, int64_t *ext, bool *extra)
{
    char a[128], b[128];
    int sd = weight->ndim - 2;
    if (weight->ndim < 3 || weight->ndim > 5)
        return tn_set_error(TN_ESHAPE, "convolution: expected a 3-D, 4-D or 5-D weight, got %s",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a));
    if (input->ndim != weight->ndim || groups <= 0 || input->sizes[1] != weight->sizes[0])
        return tn_set_error(TN_ESHAPE, "Given transposed=1, weight of size %s, expected input%s "
                            "to have %lld channels, but got %lld channels instead",
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a),
                            tn_shape_format(input->sizes, input->ndim, b, sizeof b),
                            (long long)weight->sizes[0],
                            (long long)(input->ndim > 1 ? input->sizes[1] : 0));
    if (weight->sizes[0] % groups)
        return tn_set_error(TN_ESHAPE, "Given groups=%lld, expected weight to be divisible by %lld "
                            "at dimension 0, but got weight of size %s instead", (long long)groups,
                            (long long)groups,
                            tn_shape_format(weight->sizes, weight->ndim, a, sizeof a));
    osz[0] = input->sizes[0];
    osz[1] = weight->sizes[1] * groups;
    *extra = false;
    for (int i = 0; i < sd; i++) {
        int64_t s = tn__nn_param(stride, stride_len, i, 1);
        int64_t p = tn__nn_param(padding, padding_len, i, 0);
        int64_t d = tn__nn_param(dilation, dilation_len, i, 1);
        int64_t op = tn__nn_param(output_padding, output_padding_len, i, 0);
        if (s <= 0)
            return tn_set_error(TN_EINVAL, "non-positive stride is not supported");
        if (d <= 0)
            return tn_set_error(TN_EINVAL, "dilation should be greater than zero");
        if (p < 0)
            return tn_set_error(TN_EINVAL, "negative padding is not supported");
        if (op < 0 || (op >= s && op >= d))
            return tn_set_error(TN_EINVAL, "output padding must be smaller than either stride or "
                                "dilation, but got output_padding: %lld, stride: %lld, dilation: "
                                "%lld", (long long)op, (long long)s, (long long)d);
        osz[2 + i] = (input->sizes[2 + i] - 1) * s - 2 * p + d * (weight->sizes[2 + i] - 1) +
                     op + 1;
        if (osz[2 + i] <= 0)
            return tn_set_error(TN_ESHAPE, "Given input size per channel: %lld, calculated output "
                                "size per channel: %lld. Output size is too small",
                                (long long)input->sizes[2 + i], (long long)osz[2 + i]);
        ext[i] = op / s;
        *extra |= ext[i] > 0;
    }
    return TN_OK;
}

/* x padded on the right of each spatial dim by ext[i] zeros (x itself,
 * retained, without any) */
static struct tn_tensor *pad_right(const struct tn_tensor *x, const int64_t *ext)
{
    int sd = x->ndim - 2;
    int64_t pad[2 * TN_MAX_DIMS] = {0};
    bool any = false;
    for (int i = 0; i < sd; i++) {
        pad[2 * (sd - 1 - i) + 1] = ext[i];
        any |= ext[i] > 0;
    }
    return any ? tn_constant_pad_nd(x, pad, 2 * sd, tn_int(0))
               : tn_retain((struct tn_tensor *)x);
}

/* A transposed convolution of 1 to 3 spatial dims seen as 3 (leading
 * ones): input, kernel and output sizes, stride, padding, dilation. */
struct tgeo {
    int64_t in[3], k[3], out[3], s[3], p[3], d[3];
};

static void tgeo_fill(struct tgeo *t, const struct tn_tensor *input,
                      const struct tn_tensor *weight, const int64_t *stride, int stride_len,
                      const int64_t *padding, int padding_len, const int64_t *dilation,
                      int dilation_len, const int64_t *osz)
{
    int sd = input->ndim - 2, off = 3 - sd;
    for (int i = 0; i < 3; i++) {
        int j = i - off;
        t->in[i] = j < 0 ? 1 : input->sizes[2 + j];
        t->k[i] = j < 0 ? 1 : weight->sizes[2 + j];
        t->out[i] = j < 0 ? 1 : osz[2 + j];
        t->s[i] = j < 0 ? 1 : tn__nn_param(stride, stride_len, j, 1);
        t->p[i] = j < 0 ? 0 : tn__nn_param(padding, padding_len, j, 0);
        t->d[i] = j < 0 ? 1 : tn__nn_param(dilation, dilation_len, j, 1);
    }
}

/* int64 transposed convolution: every input value times the weight added
 * where the kernel puts it (wrapping, as PyTorch 2.x's integer loop);
 * input (N, C, spatial), weight (C, OCg, k...), 1 to 3 spatial dims seen as
 * 3 with leading ones. */
static struct tn_tensor *transposed_int64(const struct tn_tensor *input,
                                          const struct tn_tensor *weight,
                                          const struct tn_tensor *bias, const int64_t *stride,
                                          int stride_len, const int64_t *padding, int padding_len,
                                          const int64_t *dilation, int dilation_len,
                                          const int64_t *osz, int64_t groups)
{
    struct tgeo t;
    tgeo_fill(&t, input, weight, stride, stride_len, padding, padding_len, dilation,
              dilation_len, osz);
    const int64_t *in = t.in, *k = t.k, *out = t.out, *s = t.s, *p = t.p, *d = t.d;
    if (weight->dtype != TN_INT64)
        return tn_set_error(TN_EDTYPE, "expected scalar type Long but found %s",
                            tn_dtype_info(weight->dtype)->c10_name), NULL;
    struct tn_tensor *xi = tn__nn_as(input, TN_INT64), *wi = tn__nn_as(weight, TN_INT64);
    struct tn_tensor *bi = tn__nn_as(bias, TN_INT64), *o = tn_zeros(osz, input->ndim, TN_INT64);
    if (!xi || !wi || (bias && !bi) || !o) {
        tn__nn_drop(0, xi, wi, bi, o);
        return NULL;
    }
    const int64_t *x = tn_data(xi), *w = tn_data(wi);
    uint64_t *r = tn_data(o);
    int64_t n = input->sizes[0], c = input->sizes[1], cg = c / groups, ocg = weight->sizes[1];
    int64_t oc = ocg * groups, isp = in[0] * in[1] * in[2], osp = out[0] * out[1] * out[2];
    int64_t ksp = k[0] * k[1] * k[2];
    for (int64_t b = 0; b < n; b++)
        for (int64_t ci = 0; ci < c; ci++) {
            int64_t gr = ci / cg;
            const int64_t *xc = x + (b * c + ci) * isp;
            for (int64_t o2 = 0; o2 < ocg; o2++) {
                const int64_t *wc = w + (ci * ocg + o2) * ksp;
                uint64_t *rc = r + (b * oc + gr * ocg + o2) * osp;
                for (int64_t i0 = 0; i0 < in[0]; i0++)
                    for (int64_t i1 = 0; i1 < in[1]; i1++)
                        for (int64_t i2 = 0; i2 < in[2]; i2++) {
                            uint64_t v = (uint64_t)xc[(i0 * in[1] + i1) * in[2] + i2];
                            for (int64_t k0 = 0; k0 < k[0]; k0++) {
                                int64_t y0 = i0 * s[0] - p[0] + k0 * d[0];
                                if (y0 < 0 || y0 >= out[0])
                                    continue;
                                for (int64_t k1 = 0; k1 < k[1]; k1++) {
                                    int64_t y1 = i1 * s[1] - p[1] + k1 * d[1];
                                    if (y1 < 0 || y1 >= out[1])
                                        continue;
                                    for (int64_t k2 = 0; k2 < k[2]; k2++) {
                                        int64_t y2 = i2 * s[2] - p[2] + k2 * d[2];
                                        if (y2 < 0 || y2 >= out[2])
                                            continue;
                                        rc[(y0 * out[1] + y1) * out[2] + y2] +=
                                            v * (uint64_t)wc[(k0 * k[1] + k1) * k[2] + k2];
                                    }
                                }
                            }
                        }
            }
        }
    if (bi) {
        const int64_t *bv = tn_data(bi);
        for (int64_t b = 0; b < n; b++)
            for (int64_t o2 = 0; o2 < oc; o2++)
                for (int64_t i = 0; i < osp; i++)
                    r[(b * oc + o2) * osp + i] += (uint64_t)bv[o2];
    }
    tn__nn_drop(0, xi, wi, bi, NULL);
    return o;
}

/* bfloat16 and float16 transposed convolution where PyTorch 2.x takes its
 * slow kernel (an output padding that reaches its stride keeps mkldnn
 * off), in its roundings: per sample and group the columns weight^T x
 * input computed in float32 and rounded to the dtype, then added into the
 * output (col2im/col2vol: channel, kernel offset, input position in that
 * order) with each sum rounded, then the bias with one rounding more.
 * Dims as transposed_int64's. */
static struct tn_tensor *transposed_half(const struct tn_tensor *input,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias, const int64_t *stride,
                                         int stride_len, const int64_t *padding, int padding_len,
                                         const int64_t *dilation, int dilation_len,
                                         const int64_t *osz, int64_t groups)
{
    enum tn_dtype dt = input->dtype;
    struct tgeo t;
    tgeo_fill(&t, input, weight, stride, stride_len, padding, padding_len, dilation,
              dilation_len, osz);
    const int64_t *in = t.in, *k = t.k, *out = t.out, *s = t.s, *p = t.p, *d = t.d;
    if (weight->dtype != dt || (bias && bias->dtype != dt))
        return tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                            tn_dtype_info(dt)->c10_name,
                            tn_dtype_info(weight->dtype != dt ? weight->dtype
                                                              : bias->dtype)->c10_name), NULL;
    struct tn_tensor *xf = tn__nn_as(input, TN_FLOAT32), *wf = tn__nn_as(weight, TN_FLOAT32);
    struct tn_tensor *bf = tn__nn_as(bias, TN_FLOAT32), *o = tn_zeros(osz, input->ndim, TN_FLOAT32);
    int64_t n = input->sizes[0], c = input->sizes[1], cg = c / groups, ocg = weight->sizes[1];
    int64_t oc = ocg * groups, isp = in[0] * in[1] * in[2], osp = out[0] * out[1] * out[2];
    int64_t ksp = k[0] * k[1] * k[2];
    int64_t ncol = isp > 0 ? isp : 1;
    struct tn_tensor *col = tn_empty(&ncol, 1, TN_FLOAT32);
    if (!xf || !wf || (bias && !bf) || !o || !col) {
        tn__nn_drop(0, xf, wf, bf, o);
        tn_release(col);
        return NULL;
    }
    const float *x = tn_data(xf), *w = tn_data(wf);
    float *r = tn_data(o), *cl = tn_data(col);
    for (int64_t b = 0; b < n; b++)
        for (int64_t gr = 0; gr < groups; gr++)
            for (int64_t o2 = 0; o2 < ocg; o2++) {
                float *rc = r + (b * oc + gr * ocg + o2) * osp;
                for (int64_t kk = 0; kk < ksp; kk++) {
                    int64_t k0 = kk / (k[1] * k[2]), k1 = kk / k[2] % k[1], k2 = kk % k[2];
                    for (int64_t l = 0; l < isp; l++) { /* the column of (o2, kk) */
                        float acc = 0;
                        for (int64_t ci = 0; ci < cg; ci++)
                            acc += w[((gr * cg + ci) * ocg + o2) * ksp + kk] *
                                   x[(b * c + gr * cg + ci) * isp + l];
                        cl[l] = tn__round16(acc, dt);
                    }
                    for (int64_t i0 = 0; i0 < in[0]; i0++) {
                        int64_t y0 = i0 * s[0] - p[0] + k0 * d[0];
                        if (y0 < 0 || y0 >= out[0])
                            continue;
                        for (int64_t i1 = 0; i1 < in[1]; i1++) {
                            int64_t y1 = i1 * s[1] - p[1] + k1 * d[1];
                            if (y1 < 0 || y1 >= out[1])
                                continue;
                            for (int64_t i2 = 0; i2 < in[2]; i2++) {
                                int64_t y2 = i2 * s[2] - p[2] + k2 * d[2];
                                if (y2 < 0 || y2 >= out[2])
                                    continue;
                                float *dst = rc + (y0 * out[1] + y1) * out[2] + y2;
                                *dst = tn__round16(*dst + cl[(i0 * in[1] + i1) * in[2] + i2], dt);
                            }
                        }
                    }
                }
                if (bf)
                    for (int64_t i = 0; i < osp; i++)
                        rc[i] = tn__round16(rc[i] + ((const float *)tn_data(bf))[gr * ocg + o2],
                                            dt);
            }
    tn__nn_drop(0, xf, wf, bf, col);
    return tn__nn_to(o, dt);
}

/* The transposed convolutions nn_conv.c does not take (see the top). */
static struct tn_tensor *transposed_forward(const struct tn_tensor *input,
                                            const struct tn_tensor *weight,
                                            const struct tn_tensor *bias, const int64_t *stride,
                                            int stride_len, const int64_t *padding,
                                            int padding_len, const int64_t *dilation,
                                            int dilation_len, const int64_t *output_padding,
                                            int output_padding_len, int64_t groups,
                                            const int64_t *osz, const int64_t *ext)
{
    bool extra = false;
    for (int i = 0; i < input->ndim - 2; i++)
        extra |= ext[i] > 0;
    if (half(input->dtype) && (extra || (input->dtype == TN_BFLOAT16 && !bf16_mkldnn_cpu())))
        return transposed_half(input, weight, bias, stride, stride_len, padding, padding_len,
                               dilation, dilation_len, osz, groups);
    if (input->dtype == TN_INT64)
        return transposed_int64(input, weight, bias, stride, stride_len, padding, padding_len,
                                dilation, dilation_len, osz, groups);
    /* mkldnn's deconvolution (3-D, half precision) computes in float32
     * and rounds once, the bias with it; the others as nn_conv.c's slow
     * path, the bias added in place */
    enum tn_dtype ct = input->ndim == 5 || half(input->dtype) ? compute_dtype(input->dtype)
                                                              : input->dtype;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *xp = x ? pad_right(x, ext) : NULL;
    struct tn_tensor *shape = tn_zeros(osz, input->ndim, ct), *r[3] = {NULL};
    const bool mask[3] = {true, false, false};
    int rc = xp && w && shape ? tn_convolution_backward(xp, shape, w, NULL, 0, stride, stride_len,
                                                        padding, padding_len, dilation,
                                                        dilation_len, false, zeros, 1, groups,
                                                        mask, 3, &r[0], &r[1], &r[2])
                              : tn_last_status();
    tn__nn_drop(0, x, w, xp, shape);
    if (rc < 0)
        return NULL;
    if (bias) {
        int64_t bsz[5] = {1, tn_numel(bias), 1, 1, 1};
        struct tn_tensor *bv = tn_reshape(bias, bsz, input->ndim);
        rc = bv ? tn_add_(r[0], bv, tn_int(1)) : tn_last_status();
        tn_release(bv);
        if (rc < 0) {
            tn_release(r[0]);
            return NULL;
        }
    }
    return tn__nn_to(r[0], input->dtype);
}

static int transposed_backward(const struct tn_tensor *grad_output,
                               const struct tn_tensor *input, const struct tn_tensor *weight,
                               const int64_t *stride, int stride_len, const int64_t *padding,
                               int padding_len, const int64_t *dilation, int dilation_len,
                               int64_t groups, const int64_t *ext, const bool *mask,
                               struct tn_tensor **r0, struct tn_tensor **r1,
                               struct tn_tensor **r2)
{
    int sd = input->ndim - 2, rc = TN_OK;
    *r0 = *r1 = *r2 = NULL;
    if (mask[0]) {
        struct tn_tensor *y = tn_convolution(grad_output, weight, NULL, stride, stride_len,
                                             padding, padding_len, dilation, dilation_len, false,
                                             zeros, 1, groups);
        for (int i = 0; y && i < sd; i++)
            if (y->sizes[2 + i] != input->sizes[2 + i]) {
                struct tn_tensor *s = tn_slice(y, 2 + i, 0, input->sizes[2 + i], 1);
                tn_release(y);
                y = s;
            }
        *r0 = y ? tn_contiguous(y) : NULL;
        tn_release(y);
        if (!*r0)
            return tn_last_status();
    }
    if (mask[1]) {
        struct tn_tensor *xp = pad_right(input, ext), *a = NULL, *c = NULL;
        const bool m[3] = {false, true, false};
        rc = xp ? tn_convolution_backward(xp, grad_output, weight, NULL, 0, stride, stride_len,
                                          padding, padding_len, dilation, dilation_len, false,
                                          zeros, 1, groups, m, 3, &a, r1, &c)
                : tn_last_status();
        tn__nn_drop(0, xp, a, c, NULL);
        if (rc < 0)
            goto fail;
    }
    if (mask[2]) {
        int64_t dims[4] = {0, 2, 3, 4};
        if (!(*r2 = tn_sum_dim_intlist(grad_output, dims, grad_output->ndim - 1, false,
                                       TN_DTYPE_UNSET))) {
            rc = tn_last_status();
            goto fail;
        }
    }
    return TN_OK;
fail:
    tn__nn_drop(0, *r0, *r1, NULL, NULL);
    *r0 = *r1 = NULL;
    return rc;
}

/* Whether this file takes a transposed convolution (see the top): 3-D,
 * int64 with values, bfloat16 with values off mkldnn (bf16_mkldnn_cpu),
 * or an output padding that reaches its stride. */
static bool transposed_here(const struct tn_tensor *input, const struct tn_tensor *weight,
                            const struct tn_tensor *bias, const int64_t *stride, int stride_len,
                            const int64_t *output_padding, int output_padding_len, bool forward)
{
    if (weight->ndim < 3 || weight->ndim > 5 || input->ndim != weight->ndim)
        return false;
    if (weight->ndim == 5 || (forward && input->dtype == TN_INT64 && tn_numel(input) > 0))
        return true;
    if (forward && input->dtype == TN_BFLOAT16 && tn_numel(input) > 0 && !bf16_mkldnn_cpu())
        return true;
    /* a half-precision one with a bias: mkldnn adds it before its one
     * rounding (nn_conv.c adds it to the rounded result) */
    if (forward && bias && half(input->dtype) && weight->dtype == input->dtype &&
        bias->dtype == input->dtype && tn_numel(input) > 0)
        return true;
    for (int i = 0; i < weight->ndim - 2; i++) {
        int64_t s = tn__nn_param(stride, stride_len, i, 1);
        if (s > 0 && tn__nn_param(output_padding, output_padding_len, i, 0) >= s)
            return true;
    }
    return false;
}

/* ----------------------------------------------------- the registrations */

struct tn_tensor *tn__cpu_convolution_nd(tn_keyset ks, const struct tn_tensor *input,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias, const int64_t *stride,
                                         int stride_len, const int64_t *padding, int padding_len,
                                         const int64_t *dilation, int dilation_len,
                                         bool transposed, const int64_t *output_padding,
                                         int output_padding_len, int64_t groups)
{
    if (weight->ndim == 5 && !transposed)
        return conv3d_forward(input, weight, bias, stride, stride_len, padding, padding_len,
                              dilation, dilation_len, groups);
    if (transposed && transposed_here(input, weight, bias, stride, stride_len, output_padding,
                                      output_padding_len, true)) {
        int64_t osz[TN_MAX_DIMS], ext[3];
        bool extra;
        if (tn__conv_transposed_shape(input, weight, stride, stride_len, padding, padding_len,
                                      dilation, dilation_len, output_padding, output_padding_len,
                                      groups, osz, ext, &extra) < 0)
            return NULL;
        if (tn_numel(input) == 0) /* (3-D: no values, nothing to compute) */
            return tn_zeros(osz, input->ndim, input->dtype);
        return transposed_forward(input, weight, bias, stride, stride_len, padding, padding_len,
                                  dilation, dilation_len, output_padding, output_padding_len,
                                  groups, osz, ext);
    }
    return tn__cpu_convolution(ks, input, weight, bias, stride, stride_len, padding, padding_len,
                               dilation, dilation_len, transposed, output_padding,
                               output_padding_len, groups);
}

int tn__cpu_convolution_backward_nd(tn_keyset ks, const struct tn_tensor *grad_output,
                                    const struct tn_tensor *input,
                                    const struct tn_tensor *weight, const int64_t *bias_sizes,
                                    int bias_sizes_len, const int64_t *stride, int stride_len,
                                    const int64_t *padding, int padding_len,
                                    const int64_t *dilation, int dilation_len, bool transposed,
                                    const int64_t *output_padding, int output_padding_len,
                                    int64_t groups, const bool *output_mask,
                                    int output_mask_len, struct tn_tensor **result0,
                                    struct tn_tensor **result1, struct tn_tensor **result2)
{
    *result0 = *result1 = *result2 = NULL;
    if (output_mask_len != 3)
        return tn_set_error(TN_EINVAL, "output_mask must hold 3 bools, not %d", output_mask_len);
    if (weight->ndim == 5 && !transposed)
        return conv3d_backward(grad_output, input, weight, stride, stride_len, padding,
                               padding_len, dilation, dilation_len, groups, output_mask, result0,
                               result1, result2);
    if (transposed && transposed_here(input, weight, NULL, stride, stride_len, output_padding,
                                      output_padding_len, false)) {
        int64_t osz[TN_MAX_DIMS], ext[3];
        bool extra;
        int rc = tn__conv_transposed_shape(input, weight, stride, stride_len, padding,
                                           padding_len, dilation, dilation_len, output_padding,
                                           output_padding_len, groups, osz, ext, &extra);
        if (rc < 0 || (rc = tn__nn_check_float(weight->ndim == 5 ? "slow_conv_transpose3d_cpu"
                                                                  : "slow_conv_transpose2d_cpu",
                                               input)) < 0)
            return rc;
        return transposed_backward(grad_output, input, weight, stride, stride_len, padding,
                                   padding_len, dilation, dilation_len, groups, ext, output_mask,
                                   result0, result1, result2);
    }
    return tn__cpu_convolution_backward(ks, grad_output, input, weight, bias_sizes,
                                        bias_sizes_len, stride, stride_len, padding, padding_len,
                                        dilation, dilation_len, transposed, output_padding,
                                        output_padding_len, groups, output_mask, output_mask_len,
                                        result0, result1, result2);
}
