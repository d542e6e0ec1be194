/*
 * ops/cpu/nn_norm.c: CPU kernels of native_layer_norm and
 * native_batch_norm (training with PyTorch's running-statistics update, and
 * eval), native_group_norm, and their backward ops. layer_norm has a float32 path (float64 sums
 * per row, float32 in and out); everything else computes in float64 over
 * contiguous copies and rounds once into the input's dtype.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"

/* ------------------------------------------------------------ layer norm */

/* Rows (m) and row length (n) of a layer norm over normalized_shape, with
 * PyTorch's checks. */
static int ln_shape(const struct tn_tensor *input, const int64_t *ns, int ns_len,
                    const struct tn_tensor *weight, const struct tn_tensor *bias, int64_t *m,
                    int64_t *n)
{
    char a[256], b[256];
    int axis = input->ndim - ns_len;
    bool ok = ns_len >= 1 && axis >= 0;
    for (int i = 0; ok && i < ns_len; i++)
        ok = input->sizes[axis + i] == ns[i];
    if (ns_len < 1)
        return tn_set_error(TN_ESHAPE, "Expected normalized_shape to be at least 1-dimensional, "
                            "i.e., containing at least one element, but got normalized_shape = %s",
                            tn_shape_format(ns, ns_len, a, sizeof a));
    if (!ok) {
        /* "[*, 3]": the normalized shape after a star */
        char star[256] = "[*";
        for (int i = 0; i < ns_len; i++) {
            size_t l = strlen(star);
            snprintf(star + l, sizeof star - l, ", %lld", (long long)ns[i]);
        }
        strncat(star, "]", sizeof star - strlen(star) - 1);
        return tn_set_error(TN_ESHAPE, "Given normalized_shape=%s, expected input with shape %s, "
                            "but got input of size%s", tn_shape_format(ns, ns_len, a, sizeof a),
                            star, tn_shape_format(input->sizes, input->ndim, b, sizeof b));
    }
    const struct tn_tensor *wb[2] = {weight, bias};
    for (int k = 0; k < 2; k++) {
        const struct tn_tensor *t = wb[k];
        if (t && (t->ndim != ns_len || memcmp(t->sizes, ns, sizeof(int64_t) * (size_t)ns_len)))
            return tn_set_error(TN_ESHAPE, "Expected %s to be of same shape as normalized_shape, "
                                "but got %s of shape %s and normalized_shape = %s",
                                k ? "bias" : "weight", k ? "bias" : "weight",
                                tn_shape_format(t->sizes, t->ndim, a, sizeof a),
                                tn_shape_format(ns, ns_len, b, sizeof b));
    }
    *m = 1;
    for (int i = 0; i < axis; i++)
        *m *= input->sizes[i];
    *n = 1;
    for (int i = 0; i < ns_len; i++)
        *n *= ns[i];
    return tn__nn_check_float("LayerNormKernelImpl", input);
}

/* One row of a layer norm in type T: mean and 1/std in float64, then
 * x * rstd - mean * rstd with both products in T, as PyTorch's kernel (so a
 * row of one element, or of equal ones, gives exactly 0). */
#define TN_LN_ROW(SFX, T)                                                                      \
    static void ln_row_##SFX(const T *x, T *y, const T *w, const T *b, int64_t n, double eps,  \
                             T *mean, T *rstd)                                                 \
    {                                                                                          \
        double s = 0, q = 0;                                                                   \
        for (int64_t j = 0; j < n; j++)                                                        \
            s += x[j];                                                                         \
        double mu = s / (double)n;                                                             \
        for (int64_t j = 0; j < n; j++)                                                        \
            q += ((double)x[j] - mu) * ((double)x[j] - mu);                                    \
        double r = 1.0 / sqrt(q / (double)n + eps);                                            \
        T tm = (T)mu, tr = (T)r, sh = -(tm * tr);                                              \
        for (int64_t j = 0; j < n; j++) {                                                      \
            T v = x[j] * tr + sh;                                                              \
            y[j] = w ? (b ? v * w[j] + b[j] : v * w[j]) : (b ? v + b[j] : v);                  \
        }                                                                                      \
        *mean = tm;                                                                            \
        *rstd = tr;                                                                            \
    }
TN_LN_ROW(f32, float)
TN_LN_ROW(f64, double)

#ifdef TN_HAVE_AVX2
#include <immintrin.h>

/* ln_row_f32 in vectors: the row's sum and its squared deviations from the
 * mean in float64 over blocks of float32 lanes (the deviations taken from
 * the mean rounded to float32, corrected by n (mu - c)^2), then the same
 * x * rstd - mean * rstd, times weight, plus bias. */
TN_AVX2 static void ln_row_f32_avx2(const float *x, float *y, const float *w, const float *b,
                                    int64_t n, double eps, float *mean, float *rstd)
{
    double mu = tn__sum_f32_avx2(x, n) / (double)n;
    float c = (float)mu;
    double q = tn__sqdev_f32_avx2(x, n, c) - (double)n * (mu - c) * (mu - c);
    double r = 1.0 / sqrt((q > 0 ? q : 0) / (double)n + eps);
    float tr = (float)r, sh = -(c * tr);
    __m256 vr = _mm256_set1_ps(tr), vs = _mm256_set1_ps(sh);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), vr), vs);
        if (w)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + j));
        if (b)
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + j));
        _mm256_storeu_ps(y + j, v);
    }
    for (; j < n; j++) {
        float v = x[j] * tr + sh;
        y[j] = w ? (b ? v * w[j] + b[j] : v * w[j]) : (b ? v + b[j] : v);
    }
    *mean = c;
    *rstd = tr;
}
#endif

struct ln_job {
    const char *x;
    char *y, *mean, *rstd;
    const char *w, *b;
    int64_t n;
    double eps;
    bool f32;
};

static void ln_range(int64_t begin, int64_t end, void *ctx)
{
    const struct ln_job *j = ctx;
#ifdef TN_HAVE_AVX2
    if (j->f32 && tn__have_avx2()) {
        for (int64_t r = begin; r < end; r++)
            ln_row_f32_avx2((const float *)j->x + r * j->n, (float *)j->y + r * j->n,
                            (const float *)j->w, (const float *)j->b, j->n, j->eps,
                            (float *)j->mean + r, (float *)j->rstd + r);
        return;
    }
#endif
    for (int64_t r = begin; r < end; r++) {
        if (j->f32)
            ln_row_f32((const float *)j->x + r * j->n, (float *)j->y + r * j->n,
                       (const float *)j->w, (const float *)j->b, j->n, j->eps,
                       (float *)j->mean + r, (float *)j->rstd + r);
        else
            ln_row_f64((const double *)j->x + r * j->n, (double *)j->y + r * j->n,
                       (const double *)j->w, (const double *)j->b, j->n, j->eps,
                       (double *)j->mean + r, (double *)j->rstd + r);
    }
}


int tn__cpu_native_layer_norm(tn_keyset ks, const struct tn_tensor *input,
                              const int64_t *normalized_shape, int normalized_shape_len,
                              const struct tn_tensor *weight, const struct tn_tensor *bias,
                              double eps, struct tn_tensor **result0, struct tn_tensor **result1,
                              struct tn_tensor **result2)
{
    int64_t m, n;
    int rc = ln_shape(input, normalized_shape, normalized_shape_len, weight, bias, &m, &n);
    if (rc < 0)
        return rc;
    bool f32 = input->dtype == TN_FLOAT32;
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    int64_t ss[TN_MAX_DIMS];
    int axis = input->ndim - normalized_shape_len;
    memcpy(ss, input->sizes, sizeof(int64_t) * (size_t)axis);
    for (int i = axis; i < input->ndim; i++)
        ss[i] = 1;
    struct tn_tensor *x = tn__nn_as(input, ct), *w = tn__nn_as(weight, ct);
    struct tn_tensor *b = tn__nn_as(bias, ct);
    struct tn_tensor *y = tn_empty(input->sizes, input->ndim, ct);
    struct tn_tensor *mean = tn_empty(ss, input->ndim, ct), *rstd = tn_empty(ss, input->ndim, ct);
    if (!x || (weight && !w) || (bias && !b) || !y || !mean || !rstd) {
        tn__nn_drop(0, x, w, b, y);
        return tn__nn_drop(tn_last_status(), mean, rstd, NULL, NULL);
    }
    struct ln_job j = {tn_data(x), tn_data(y), tn_data(mean), tn_data(rstd),
                       w ? tn_data(w) : NULL, b ? tn_data(b) : NULL, n, eps, f32};
    tn_parallel_for(m, n >= 4096 ? 1 : 1 + 32768 / (n + 1), ln_range, &j);
    tn__nn_drop(0, x, w, b, NULL);
    *result0 = tn__nn_to(y, input->dtype);
    *result1 = tn__nn_to(mean, input->dtype);
    *result2 = tn__nn_to(rstd, input->dtype);
    if (!*result0 || !*result1 || !*result2) {
        rc = tn__nn_drop(tn_last_status(), *result0, *result1, *result2, NULL);
        *result0 = *result1 = *result2 = NULL;
        return rc;
    }
    return TN_OK;
}

/* Hands the float64 results back in `dtype`, NULL where the mask says so. */
static int three_out(struct tn_tensor *r[3], const bool *mask, enum tn_dtype dtype,
                     struct tn_tensor **o0, struct tn_tensor **o1, struct tn_tensor **o2)
{
    struct tn_tensor **o[3] = {o0, o1, o2};
    int rc = TN_OK;
    for (int i = 0; i < 3; i++) {
        *o[i] = NULL;
        if (!mask[i]) {
            tn_release(r[i]);
            continue;
        }
        if (r[i] && !(*o[i] = tn__nn_to(r[i], dtype)))
            rc = tn_last_status();
    }
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            tn_release(*o[i]);
            *o[i] = NULL;
        }
    return rc;
}

static int mask3(const bool *mask, int len)
{
    if (len != 3)
        return tn_set_error(TN_EINVAL, "output_mask must hold 3 bools, not %d", len);
    return TN_OK;
}

int tn__cpu_native_layer_norm_backward(tn_keyset ks, const struct tn_tensor *grad_out,
                                       const struct tn_tensor *input,
                                       const int64_t *normalized_shape, int normalized_shape_len,
                                       const struct tn_tensor *mean, const struct tn_tensor *rstd,
                                       const struct tn_tensor *weight,
                                       const struct tn_tensor *bias, const bool *output_mask,
                                       int output_mask_len, struct tn_tensor **result0,
                                       struct tn_tensor **result1, struct tn_tensor **result2)
{
    int64_t m, n;
    int rc = mask3(output_mask, output_mask_len);
    if (rc < 0 ||
        (rc = ln_shape(input, normalized_shape, normalized_shape_len, weight, bias, &m, &n)) < 0)
        return rc;
    struct tn_tensor *g = tn__nn_f64(grad_out), *x = tn__nn_f64(input), *mu = tn__nn_f64(mean);
    struct tn_tensor *rs = tn__nn_f64(rstd), *w = tn__nn_f64(weight);
    struct tn_tensor *r[3] = {tn__nn_zeros64(input->sizes, input->ndim),
                              weight ? tn__nn_zeros64(weight->sizes, weight->ndim) : NULL,
                              bias || weight ? tn__nn_zeros64(normalized_shape, normalized_shape_len)
                                             : NULL};
    if (!g || !x || !mu || !rs || (weight && !w) || !r[0] || (weight && !r[1]) ||
        ((bias || weight) && !r[2])) {
        tn__nn_drop(0, g, x, mu, rs);
        return tn__nn_drop(tn_last_status(), w, r[0], r[1], r[2]);
    }
    if (tn_numel(g) != m * n || tn_numel(mu) != m || tn_numel(rs) != m) {
        tn__nn_drop(0, g, x, mu, rs);
        tn__nn_drop(0, w, r[0], r[1], r[2]);
        return tn_set_error(TN_ESHAPE, "native_layer_norm_backward: grad_out, mean or rstd do "
                            "not fit the input");
    }
    const double *gp = tn_data(g), *xp = tn_data(x), *mp = tn_data(mu), *rp = tn_data(rs);
    const double *wp = w ? tn_data(w) : NULL;
    double *dx = tn_data(r[0]), *dw = r[1] ? tn_data(r[1]) : NULL, *db = r[2] ? tn_data(r[2]) : NULL;
    for (int64_t i = 0; i < m; i++) {
        const double *gr = gp + i * n, *xr = xp + i * n;
        double a = 0, c = 0;
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - mp[i]) * rp[i], gw = gr[j] * (wp ? wp[j] : 1);
            a += gw;
            c += gw * xh;
            if (dw)
                dw[j] += gr[j] * xh;
            if (db)
                db[j] += gr[j];
        }
        a /= (double)n;
        c /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - mp[i]) * rp[i], gw = gr[j] * (wp ? wp[j] : 1);
            dx[i * n + j] = rp[i] * (gw - a - xh * c);
        }
    }
    if (!bias && r[2]) { /* no bias: no grad for it */
        tn_release(r[2]);
        r[2] = NULL;
    }
    tn__nn_drop(0, g, x, mu, rs);
    tn_release(w);
    return three_out(r, output_mask, input->dtype, result0, result1, result2);
}

/* ------------------------------------------------------------ batch norm */

/* input as (N, C, S): the channel count and the sizes around it. */
static int bn_dims(const struct tn_tensor *input, int64_t *nb, int64_t *c, int64_t *s)
{
    if (input->ndim < 2)
        return tn_set_error(TN_ESHAPE, "batch_norm: expected an input of 2 or more dims "
                            "(N, C, ...), got %d", input->ndim);
    *nb = input->sizes[0];
    *c = input->sizes[1];
    *s = 1;
    for (int i = 2; i < input->ndim; i++)
        *s *= input->sizes[i];
    return tn__nn_check_float("batch_norm", input);
}

/* Per-channel value v[ch] of an optional (C) tensor, or `def`. */
static double chan(const double *v, int64_t ch, double def) { return v ? v[ch] : def; }

/* running statistic `stat` = v, its storage's version left as it was */
static int update_stat(const struct tn_tensor *stat, const struct tn_tensor *v)
{
    struct tn_tensor *t = (struct tn_tensor *)stat;
    uint64_t version = t->storage->version;
    int rc = tn_copy_(t, v);
    t->storage->version = version;
    return rc;
}

/* Evaluation mode on float32: y = x a + sh per channel, a and sh from the
 * running statistics in float64, the pass over x in float32 (vectorised)
 * rather than through float64 copies, which made batch norm 27-47% of
 * efficientnet_b0's and mobilenet_v3_small's time in the interpreter
 * (issue 27, bench/models/cnn.sh). */
static int bn_eval_f32(const struct tn_tensor *input, const struct tn_tensor *weight,
                       const struct tn_tensor *bias, const struct tn_tensor *running_mean,
                       const struct tn_tensor *running_var, double eps, int64_t nb, int64_t c,
                       int64_t s, struct tn_tensor **r)
{
    struct tn_tensor *x = tn__nn_as(input, TN_FLOAT32), *w = tn__nn_f64(weight);
    struct tn_tensor *b = tn__nn_f64(bias), *rm = tn__nn_f64(running_mean);
    struct tn_tensor *rv = tn__nn_f64(running_var);
    struct tn_tensor *y = tn_empty(input->sizes, input->ndim, TN_FLOAT32);
    r[1] = tn_empty(TN_SHAPE(0), TN_FLOAT32);
    r[2] = tn_empty(TN_SHAPE(0), TN_FLOAT32);
    if (!x || (weight && !w) || (bias && !b) || !rm || !rv || !y || !r[1] || !r[2]) {
        tn__nn_drop(0, x, w, b, rm);
        tn__nn_drop(0, rv, y, r[1], r[2]);
        return tn_last_status();
    }
    const double *wp = w ? tn_data(w) : NULL, *bp = b ? tn_data(b) : NULL;
    const double *rmp = tn_data(rm), *rvp = tn_data(rv);
    const float *xp = tn_data(x);
    float *yp = tn_data(y);
    for (int64_t ch = 0; ch < c; ch++) {
        double a = chan(wp, ch, 1) / sqrt(rvp[ch] + eps);
        float af = (float)a, sf = (float)(chan(bp, ch, 0) - rmp[ch] * a);
        for (int64_t i = 0; i < nb; i++) {
            const float *xr = xp + (i * c + ch) * s;
            float *yr = yp + (i * c + ch) * s;
            for (int64_t k = 0; k < s; k++)
                yr[k] = xr[k] * af + sf;
        }
    }
    tn__nn_drop(0, x, w, b, rm);
    tn_release(rv);
    r[0] = y;
    return TN_OK;
}

/* Training mode's statistics of channel ch: the mean and 1/sqrt(biased
 * variance + eps), summed in float64 in the order of the float64 path below
 * (samples, then positions), and the running statistics' update. X is the
 * input's element type (float32 values widen exactly, so both paths give the
 * same bits). */
#define TN_BN_STATS(X)                                                                           \
    static void bn_stats_##X(const X *xp, int64_t nb, int64_t c, int64_t s, int64_t ch,          \
                             enum tn_dtype half, double momentum, double eps, double *rmp,       \
                             double *rvp, double *mu, double *inv)                               \
    {                                                                                            \
        int64_t cnt = nb * s;                                                                    \
        double sum = 0, q = 0;                                                                   \
        for (int64_t i = 0; i < nb; i++)                                                         \
            for (int64_t k = 0; k < s; k++)                                                      \
                sum += xp[(i * c + ch) * s + k];                                                 \
        *mu = cnt ? sum / (double)cnt : NAN;                                                     \
        for (int64_t i = 0; i < nb; i++)                                                         \
            for (int64_t k = 0; k < s; k++) {                                                    \
                double d = xp[(i * c + ch) * s + k] - *mu;                                       \
                q += d * d;                                                                      \
            }                                                                                    \
        if (half != TN_DTYPE_UNSET) {                                                            \
            /* PyTorch's batch_norm_cpu_collect_stats for float16 and                            \
             * bfloat16 stores the mean and the sum of squares in the input's                    \
             * dtype: the invstd (of that dtype too), the output and the                         \
             * running statistics come from the rounded ones */                                   \
            *mu = tn__round16((float)*mu, half);                                                 \
            q = tn__round16((float)q, half);                                                     \
        }                                                                                        \
        *inv = 1.0 / sqrt(q / (double)cnt + eps);                                                \
        if (half != TN_DTYPE_UNSET)                                                              \
            *inv = tn__round16((float)*inv, half);                                               \
        /* PyTorch's update: the unbiased variance into running_var */                           \
        if (rmp)                                                                                 \
            rmp[ch] = (1 - momentum) * rmp[ch] + momentum * *mu;                                 \
        if (rvp)                                                                                 \
            rvp[ch] = (1 - momentum) * rvp[ch] + momentum * q / (double)(cnt - 1);               \
    }
TN_BN_STATS(float)
TN_BN_STATS(double)

/* Training mode on float32: the float64 path's arithmetic, element by
 * element, reading the float32 input and rounding each result to float32
 * as the float64 path's final conversion does (the same bits), without its
 * float64 copies of the input and output: batch norm was 60% of the CNN's
 * forward in bench/compile/train.sh. The saved mean and invstd stay float64
 * (r[1], r[2]) for three_out to round. */
static int bn_train_f32(const struct tn_tensor *input, const double *wp, const double *bp,
                        double *rmp, double *rvp, double momentum, double eps, int64_t nb,
                        int64_t c, int64_t s, struct tn_tensor **r)
{
    struct tn_tensor *x = tn__nn_as(input, TN_FLOAT32);
    r[0] = tn_empty(input->sizes, input->ndim, TN_FLOAT32);
    r[1] = tn__nn_zeros64(TN_SHAPE(c));
    r[2] = tn__nn_zeros64(TN_SHAPE(c));
    if (!x || !r[0] || !r[1] || !r[2]) {
        tn_release(x);
        int rc = tn__nn_drop(tn_last_status(), r[0], r[1], r[2], NULL);
        r[0] = r[1] = r[2] = NULL;
        return rc;
    }
    const float *xp = tn_data(x);
    float *yp = tn_data(r[0]);
    double *smp = tn_data(r[1]), *sip = tn_data(r[2]);
    for (int64_t ch = 0; ch < c; ch++) {
        double mu, inv;
        bn_stats_float(xp, nb, c, s, ch, TN_DTYPE_UNSET, momentum, eps, rmp, rvp, &mu, &inv);
        smp[ch] = mu;
        sip[ch] = inv;
        double a = inv * chan(wp, ch, 1), sh = chan(bp, ch, 0) - mu * a;
        for (int64_t i = 0; i < nb; i++) {
            const float *xr = xp + (i * c + ch) * s;
            float *yr = yp + (i * c + ch) * s;
            for (int64_t k = 0; k < s; k++)
                yr[k] = (float)(xr[k] * a + sh);
        }
    }
    tn_release(x);
    return TN_OK;
}

int tn__cpu_native_batch_norm(tn_keyset ks, const struct tn_tensor *input,
                              const struct tn_tensor *weight, const struct tn_tensor *bias,
                              const struct tn_tensor *running_mean,
                              const struct tn_tensor *running_var, bool training, double momentum,
                              double eps, struct tn_tensor **result0, struct tn_tensor **result1,
                              struct tn_tensor **result2)
{
    int64_t nb, c, s;
    int rc = bn_dims(input, &nb, &c, &s);
    if (rc < 0)
        return rc;
    if (!training && (!running_mean || !running_var))
        return tn_set_error(TN_EINVAL, "running_mean and running_var must be defined in "
                            "evaluation mode");
    if (!training && input->dtype == TN_FLOAT32) {
        struct tn_tensor *r[3] = {NULL};
        if ((rc = bn_eval_f32(input, weight, bias, running_mean, running_var, eps, nb, c, s,
                              r)) < 0)
            return rc;
        *result0 = r[0];
        *result1 = r[1];
        *result2 = r[2];
        /* PyTorch's batch_norm_cpu: the output as input's suggest_memory_format */
        return tn__channels_last_outs(TN_OK, tn__strides_like_channels_last(input, 4), result0,
                                      result1, result2);
    }
    bool f32 = training && input->dtype == TN_FLOAT32;
    /* statistics of the input's dtype (PyTorch's mixed type, a float32
     * weight, bias or running statistic, keeps them in float32) */
    enum tn_dtype half =
        (input->dtype == TN_BFLOAT16 || input->dtype == TN_FLOAT16) &&
                (!weight || weight->dtype == input->dtype) && (!bias || bias->dtype == input->dtype) &&
                (!running_mean || running_mean->dtype == input->dtype) &&
                (!running_var || running_var->dtype == input->dtype)
            ? input->dtype
            : TN_DTYPE_UNSET;
    struct tn_tensor *x = f32 ? NULL : tn__nn_f64(input), *w = tn__nn_f64(weight);
    struct tn_tensor *b = tn__nn_f64(bias);
    struct tn_tensor *rm = tn__nn_f64(running_mean), *rv = tn__nn_f64(running_var);
    struct tn_tensor *r[3] = {NULL};
    if (!f32) {
        r[0] = tn__nn_zeros64(input->sizes, input->ndim);
        r[1] = tn__nn_zeros64(TN_SHAPE(training ? c : 0));
        r[2] = tn__nn_zeros64(TN_SHAPE(training ? c : 0));
    }
    if ((!f32 && (!x || !r[0] || !r[1] || !r[2])) || (weight && !w) || (bias && !b) ||
        (running_mean && !rm) || (running_var && !rv)) {
        tn__nn_drop(0, x, w, b, rm);
        tn__nn_drop(0, rv, r[0], r[1], r[2]);
        return tn_last_status();
    }
    const double *wp = w ? tn_data(w) : NULL, *bp = b ? tn_data(b) : NULL;
    double *rmp = rm ? tn_data(rm) : NULL, *rvp = rv ? tn_data(rv) : NULL;
    if (f32) {
        rc = bn_train_f32(input, wp, bp, rmp, rvp, momentum, eps, nb, c, s, r);
    } else {
        const double *xp = tn_data(x);
        double *yp = tn_data(r[0]), *smp = tn_data(r[1]), *sip = tn_data(r[2]);
        for (int64_t ch = 0; ch < c; ch++) {
            double mu, inv;
            if (training) {
                bn_stats_double(xp, nb, c, s, ch, half, momentum, eps, rmp, rvp, &mu, &inv);
                smp[ch] = mu;
                sip[ch] = inv;
            } else {
                mu = rmp[ch];
                inv = 1.0 / sqrt(rvp[ch] + eps);
            }
            double a = inv * chan(wp, ch, 1), sh = chan(bp, ch, 0) - mu * a;
            for (int64_t i = 0; i < nb; i++)
                for (int64_t k = 0; k < s; k++)
                    yp[(i * c + ch) * s + k] = xp[(i * c + ch) * s + k] * a + sh;
        }
    }
    /* the running statistics are updated in place, as PyTorch does, and as
     * its kernel without counting a version: a graph that saved them (for
     * evaluation mode's backward) stays valid when batch norm runs again
     * before backward */
    if (rc >= 0 && training && running_mean)
        rc = update_stat(running_mean, rm);
    if (rc >= 0 && training && running_var)
        rc = update_stat(running_var, rv);
    tn__nn_drop(0, x, w, b, rm);
    tn_release(rv);
    if (rc < 0)
        return tn__nn_drop(rc, r[0], r[1], r[2], NULL);
    static const bool all[3] = {true, true, true};
    return tn__channels_last_outs(three_out(r, all, input->dtype, result0, result1, result2),
                                  tn__strides_like_channels_last(input, 4), result0, result1,
                                  result2);
}

int tn__cpu_native_batch_norm_backward(
    tn_keyset ks, const struct tn_tensor *grad_out, const struct tn_tensor *input,
    const struct tn_tensor *weight, const struct tn_tensor *running_mean,
    const struct tn_tensor *running_var, const struct tn_tensor *save_mean,
    const struct tn_tensor *save_invstd, bool train, double eps, const bool *output_mask,
    int output_mask_len, struct tn_tensor **result0, struct tn_tensor **result1,
    struct tn_tensor **result2)
{
    int64_t nb, c, s;
    int rc = mask3(output_mask, output_mask_len);
    if (rc < 0 || (rc = bn_dims(input, &nb, &c, &s)) < 0)
        return rc;
    const struct tn_tensor *mean_t = train ? save_mean : running_mean;
    const struct tn_tensor *var_t = train ? save_invstd : running_var;
    if (!mean_t || !var_t || tn_numel(mean_t) != c || tn_numel(var_t) != c)
        return tn_set_error(TN_EINVAL, "native_batch_norm_backward: the %s statistics must "
                            "hold %lld values", train ? "saved" : "running", (long long)c);
    struct tn_tensor *g = tn__nn_f64(grad_out), *x = tn__nn_f64(input), *w = tn__nn_f64(weight);
    struct tn_tensor *mt = tn__nn_f64(mean_t), *vt = tn__nn_f64(var_t);
    struct tn_tensor *r[3] = {tn__nn_zeros64(input->sizes, input->ndim), tn__nn_zeros64(&c, 1),
                              tn__nn_zeros64(&c, 1)};
    if (!g || !x || (weight && !w) || !mt || !vt || !r[0] || !r[1] || !r[2] ||
        tn_numel(g) != tn_numel(x)) {
        if (g && x && tn_numel(g) != tn_numel(x))
            tn_set_error(TN_ESHAPE, "native_batch_norm_backward: grad_out does not fit the input");
        tn__nn_drop(0, g, x, w, mt);
        tn__nn_drop(0, vt, r[0], r[1], r[2]);
        return tn_last_status();
    }
    const double *gp = tn_data(g), *xp = tn_data(x), *wp = w ? tn_data(w) : NULL;
    const double *mp = tn_data(mt), *vp = tn_data(vt);
    double *dx = tn_data(r[0]), *dw = tn_data(r[1]), *db = tn_data(r[2]);
    double cnt = (double)(nb * s);
    for (int64_t ch = 0; ch < c; ch++) {
        double mu = mp[ch], inv = train ? vp[ch] : 1.0 / sqrt(vp[ch] + eps), sg = 0, sgx = 0;
        for (int64_t i = 0; i < nb; i++)
            for (int64_t k = 0; k < s; k++) {
                int64_t at = (i * c + ch) * s + k;
                sg += gp[at];
                sgx += gp[at] * (xp[at] - mu) * inv;
            }
        dw[ch] = sgx;
        db[ch] = sg;
        double wc = chan(wp, ch, 1);
        for (int64_t i = 0; i < nb; i++)
            for (int64_t k = 0; k < s; k++) {
                int64_t at = (i * c + ch) * s + k;
                double xh = (xp[at] - mu) * inv;
                dx[at] = train ? wc * inv * (gp[at] - sg / cnt - xh * sgx / cnt)
                               : gp[at] * wc * inv;
            }
    }
    tn__nn_drop(0, g, x, w, mt);
    tn_release(vt);
    /* grad_input as input's suggest_memory_format (batch_norm_backward_cpu) */
    return tn__channels_last_outs(three_out(r, output_mask, input->dtype, result0, result1,
                                            result2),
                                  tn__strides_like_channels_last(input, 4), result0, result1,
                                  result2);
}

/* ------------------------------------------------------------ group norm */

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
