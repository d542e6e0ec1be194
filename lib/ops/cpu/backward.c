/*
 * ops/cpu/backward.c: the backward ops autograd's formulas call, one fused
 * loop each where the formula would take several ops: threshold_backward
 * (relu), tanh_backward, sigmoid_backward (elementwise over two inputs of
 * one shape) and _softmax_backward_data, _log_softmax_backward_data (along
 * a dim). float32 and float64; float16 and bfloat16 through float32.
 */
#include <math.h>
#include <string.h>

#include "ops/internal.h"

enum bw_op { BW_THRESHOLD, BW_TANH, BW_SIGMOID };

struct bw_ctx {
    enum bw_op op;
    double threshold;
};

/* relu's backward over contiguous runs goes 16 bytes at a time: the
 * gradient where x > threshold or x is NaN, else 0 (a mask, no branch). */
#define TN_BW_LOOP(SFX, T)                                                                         \
    typedef T bw_vec_##SFX __attribute__((vector_size(16)));                                       \
    static int64_t threshold_run_##SFX(char *o, const char *g, const char *x, int64_t n, T thr)    \
    {                                                                                              \
        const int64_t L = 16 / sizeof(T);                                                          \
        bw_vec_##SFX t = {0}, gv, xv;                                                              \
        t += thr;                                                                                  \
        int64_t i = 0;                                                                             \
        for (; i + L <= n; i += L) {                                                               \
            memcpy(&gv, g + i * (int64_t)sizeof(T), 16);                                           \
            memcpy(&xv, x + i * (int64_t)sizeof(T), 16);                                           \
            __typeof__(xv <= t) keep = ~(xv <= t);                                                 \
            gv = (bw_vec_##SFX)((__typeof__(keep))gv & keep);                                      \
            memcpy(o + i * (int64_t)sizeof(T), &gv, 16);                                           \
        }                                                                                          \
        return i;                                                                                  \
    }                                                                                              \
    static void bw_loop_##SFX(char **p, const int64_t *st, int64_t n, void *arg)                   \
    {                                                                                              \
        const struct bw_ctx *c = arg;                                                              \
        char *o = p[0], *g = p[1], *x = p[2];                                                      \
        int64_t i = 0;                                                                             \
        if (c->op == BW_THRESHOLD && st[0] == sizeof(T) && st[1] == sizeof(T) &&                   \
            st[2] == sizeof(T)) {                                                                  \
            i = threshold_run_##SFX(o, g, x, n, (T)c->threshold);                                  \
            o += i * st[0], g += i * st[1], x += i * st[2];                                        \
        }                                                                                          \
        for (; i < n; i++, o += st[0], g += st[1], x += st[2]) {                                   \
            T gv = *(const T *)g, xv = *(const T *)x;                                              \
            T r;                                                                                   \
            switch (c->op) {                                                                       \
            case BW_THRESHOLD: r = xv <= (T)c->threshold ? (T)0 : gv; break;                      \
            case BW_TANH: r = gv * ((T)1 - xv * xv); break;                                        \
            default: r = gv * ((T)1 - xv) * xv; break;                                             \
            }                                                                                      \
            *(T *)o = r;                                                                           \
        }                                                                                          \
    }
TN_BW_LOOP(f32, float)
TN_BW_LOOP(f64, double)

static const char *const bw_names[] = {"threshold_backward_cpu", "tanh_backward_cpu",
                                       "sigmoid_backward_cpu"};

static bool same_shape(const struct tn_tensor *a, const struct tn_tensor *b)
{
    return a->ndim == b->ndim && !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim);
}

static struct tn_tensor *elementwise(enum bw_op op, const struct tn_tensor *grad,
                                     const struct tn_tensor *x, double threshold)
{
    if (!same_shape(grad, x)) {
        char a[256], b[256];
        tn_set_error(TN_ESHAPE, "%s: grad_output of shape %s and input of shape %s differ",
                     bw_names[op], tn_shape_format(grad->sizes, grad->ndim, a, sizeof a),
                     tn_shape_format(x->sizes, x->ndim, b, sizeof b));
        return NULL;
    }
    bool half = x->dtype == TN_FLOAT16 || x->dtype == TN_BFLOAT16;
    if (grad->dtype != x->dtype || (x->dtype != TN_FLOAT32 && x->dtype != TN_FLOAT64 && !half)) {
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", bw_names[op],
                     tn_dtype_info(grad->dtype != x->dtype ? grad->dtype : x->dtype)->c10_name);
        return NULL;
    }
    if (half) { /* in float32, rounded once, as PyTorch */
        struct tn_tensor *g32 = tn_to_dtype(grad, TN_FLOAT32), *x32 = tn_to_dtype(x, TN_FLOAT32);
        struct tn_tensor *r = g32 && x32 ? elementwise(op, g32, x32, threshold) : NULL;
        struct tn_tensor *o = r ? tn_to_dtype(r, x->dtype) : NULL;
        tn_release(g32);
        tn_release(x32);
        tn_release(r);
        return o;
    }
    struct tn_tensor *out = tn_empty_like(x, TN_DTYPE_UNSET);
    if (!out)
        return NULL;
    struct bw_ctx ctx = {op, threshold};
    char *base[3] = {tn_data(out), tn_data(grad), tn_data(x)};
    const int64_t *strides[3] = {out->strides, grad->strides, x->strides};
    size_t es = tn_dtype_size(x->dtype), el[3] = {es, es, es};
    struct tn_iter it;
    tn__iter_init(&it, 3, out->sizes, out->ndim, base, strides, el);
    tn__iter_run(&it, x->dtype == TN_FLOAT32 ? bw_loop_f32 : bw_loop_f64, &ctx, TN_PARALLEL_GRAIN);
    return out;
}

struct tn_tensor *tn__cpu_threshold_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                             const struct tn_tensor *self,
                                             struct tn_scalar threshold)
{
    (void)ks;
    return elementwise(BW_THRESHOLD, grad_output, self, tn_scalar_to_double(threshold));
}

struct tn_tensor *tn__cpu_tanh_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                        const struct tn_tensor *output)
{
    (void)ks;
    return elementwise(BW_TANH, grad_output, output, 0);
}

struct tn_tensor *tn__cpu_sigmoid_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                           const struct tn_tensor *output)
{
    (void)ks;
    return elementwise(BW_SIGMOID, grad_output, output, 0);
}

/* ------------------------------------------------- softmax, log_softmax */

/* grad_input along `dim` of contiguous g and y (outer x n x inner):
 * softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g). */
#define TN_SOFTMAX_BW(SFX, T, EXP)                                                                 \
    static void softmax_bw_##SFX(T *o, const T *g, const T *y, int64_t outer, int64_t n,           \
                                 int64_t inner, bool log)                                          \
    {                                                                                              \
        for (int64_t a = 0; a < outer; a++)                                                        \
            for (int64_t b = 0; b < inner; b++) {                                                  \
                const int64_t base = a * n * inner + b;                                            \
                T s = 0;                                                                           \
                for (int64_t k = 0; k < n; k++)                                                    \
                    s += log ? g[base + k * inner] : g[base + k * inner] * y[base + k * inner];    \
                for (int64_t k = 0; k < n; k++) {                                                  \
                    const int64_t i = base + k * inner;                                            \
                    o[i] = log ? g[i] - EXP(y[i]) * s : y[i] * (g[i] - s);                         \
                }                                                                                  \
            }                                                                                      \
    }
TN_SOFTMAX_BW(f32, float, expf)
TN_SOFTMAX_BW(f64, double, exp)

static struct tn_tensor *softmax_backward(const struct tn_tensor *grad,
                                          const struct tn_tensor *output, int64_t dim,
                                          enum tn_dtype input_dtype, bool log)
{
    const char *name = log ? "log_softmax_backward_data" : "softmax_backward_data";
    int d = tn_wrap_dim(dim, output->ndim);
    if (d < 0)
        return NULL;
    if (!same_shape(grad, output)) {
        tn_set_error(TN_ESHAPE, "%s: grad_output and output differ in shape", name);
        return NULL;
    }
    bool half = output->dtype == TN_FLOAT16 || output->dtype == TN_BFLOAT16;
    if (grad->dtype != output->dtype ||
        (output->dtype != TN_FLOAT32 && output->dtype != TN_FLOAT64 && !half)) {
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", name,
                     tn_dtype_info(output->dtype)->c10_name);
        return NULL;
    }
    (void)input_dtype; /* half_to_float is not supported: input_dtype is the output's */
    /* float16 and bfloat16 compute in float32 and round once, as PyTorch */
    enum tn_dtype ct = half ? TN_FLOAT32 : output->dtype;
    struct tn_tensor *g = tn_to_dtype(grad, ct), *y = tn_to_dtype(output, ct);
    struct tn_tensor *gc = g ? tn_contiguous(g) : NULL, *yc = y ? tn_contiguous(y) : NULL;
    tn_release(g);
    tn_release(y);
    g = gc;
    y = yc;
    struct tn_tensor *out = g && y ? tn_empty(output->sizes, output->ndim, ct) : NULL;
    if (out) {
        int64_t outer = 1, inner = 1, n = output->ndim ? output->sizes[d] : 1;
        for (int i = 0; i < d; i++)
            outer *= output->sizes[i];
        for (int i = d + 1; i < output->ndim; i++)
            inner *= output->sizes[i];
        if (ct == TN_FLOAT32)
            softmax_bw_f32(tn_data(out), tn_data(g), tn_data(y), outer, n, inner, log);
        else
            softmax_bw_f64(tn_data(out), tn_data(g), tn_data(y), outer, n, inner, log);
    }
    tn_release(g);
    tn_release(y);
    if (out && ct != output->dtype) {
        struct tn_tensor *r = tn_to_dtype(out, output->dtype);
        tn_release(out);
        out = r;
    }
    return out;
}

struct tn_tensor *tn__cpu_softmax_backward_data(tn_keyset ks, const struct tn_tensor *grad_output,
                                                const struct tn_tensor *output, int64_t dim,
                                                enum tn_dtype input_dtype)
{
    (void)ks;
    return softmax_backward(grad_output, output, dim, input_dtype, false);
}

struct tn_tensor *tn__cpu_log_softmax_backward_data(tn_keyset ks,
                                                    const struct tn_tensor *grad_output,
                                                    const struct tn_tensor *output, int64_t dim,
                                                    enum tn_dtype input_dtype)
{
    (void)ks;
    return softmax_backward(grad_output, output, dim, input_dtype, true);
}
