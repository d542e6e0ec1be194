/*
 * optim/optim.c: SGD, Adam and AdamW as torch.optim's single-tensor
 * (foreach=False) code paths compute them on the CPU.
 *
 * PyTorch runs a step as a chain of tensor ops (mul_, add_, lerp_, addcmul_,
 * sqrt, div, addcdiv_), each rounding to the parameter's dtype.  The loops
 * below do the same chain per element, rounding after each op, so the result
 * is the same bits with one pass over memory instead of eight.  Where
 * PyTorch's AVX2 kernels fuse a multiply into an add the loops call fma:
 * vec::fmadd in add_ with alpha and in lerp_, and addcmul_'s
 * `self + value * t1 * t2`, which GCC contracts in both the vector and the
 * scalar lambda (its vector intrinsics are plain vector arithmetic to it);
 * 1.13 and 2.x agree on this (tests/fixtures/nn).  This file must not
 * contract anything itself: GCC does not under -std=c11, clang is told
 * below.
 */
#include "core/internal.h"
#include "optim/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

struct tn_sgd_options tn_sgd_defaults(void)
{
    return (struct tn_sgd_options){.lr = 1e-3};
}

struct tn_adam_options tn_adam_defaults(void)
{
    return (struct tn_adam_options){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

struct tn_adam_options tn_adamw_defaults(void)
{
    struct tn_adam_options o = tn_adam_defaults();
    o.weight_decay = 1e-2;
    return o;
}

/* Formats d as Python's repr(float) does ("1e-08", "-1.0", "0.001"), for
 * error messages that quote PyTorch's f-strings. */
const char *tn__py_float(double d, char *buf, size_t len)
{
    if (isnan(d))
        return snprintf(buf, len, "nan"), buf;
    if (isinf(d))
        return snprintf(buf, len, d < 0 ? "-inf" : "inf"), buf;
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, len, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    snprintf(buf, len, "%.*e", prec - 1, d);
    int exp10 = atoi(strchr(buf, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) {
        /* "1e-08": C's %e without a fraction is what Python writes */
        char *dot = strchr(buf, '.'), *e = strchr(buf, 'e');
        if (dot && e && prec == 1)
            memmove(dot, e, strlen(e) + 1);
        return buf;
    }
    int decimals = prec - 1 - exp10;
    snprintf(buf, len, "%.*f", decimals > 0 ? decimals : 0, d);
    if (!strchr(buf, '.'))
        strncat(buf, ".0", len - strlen(buf) - 1);
    return buf;
}

/* --------------------------------------------------------- construction */

static struct tn_optim *optim_new(enum tn_optim_kind kind, struct tn_tensor *const *params,
                                  int nparams)
{
    if (nparams <= 0) {
        tn_set_error(TN_EINVAL, "optimizer got an empty parameter list");
        return NULL;
    }
    for (int i = 0; i < nparams; i++) {
        if (!params[i] || !tn_dtype_is_floating(params[i]->dtype) ||
            params[i]->device.type != TN_DEVICE_CPU) {
            tn_set_error(TN_EDTYPE, "optimizer parameter %d: only floating-point CPU tensors "
                         "can be optimized", i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) {
                tn_set_error(TN_EINVAL, "some parameters appear in more than one parameter "
                             "group");
                return NULL;
            }
    }
    struct tn_optim *o = calloc(1, sizeof *o);
    if (!o || !(o->params = calloc((size_t)nparams, sizeof *o->params)) ||
        !(o->state = calloc((size_t)nparams, sizeof *o->state))) {
        tn_optim_free(o);
        tn_set_error(TN_ENOMEM, "out of memory creating an optimizer");
        return NULL;
    }
    o->kind = kind;
    o->n = nparams;
    for (int i = 0; i < nparams; i++)
        o->params[i] = tn_retain(params[i]);
    return o;
}

struct tn_optim *tn_sgd_new(struct tn_tensor *const *params, int nparams,
                            const struct tn_sgd_options *opts)
{
    struct tn_sgd_options d = opts ? *opts : tn_sgd_defaults();
    char b[40];
    if (d.lr < 0.0)
        return tn_set_error(TN_EINVAL, "Invalid learning rate: %s", tn__py_float(d.lr, b, sizeof b)),
               NULL;
    if (d.momentum < 0.0)
        return tn_set_error(TN_EINVAL, "Invalid momentum value: %s",
                            tn__py_float(d.momentum, b, sizeof b)),
               NULL;
    if (d.weight_decay < 0.0)
        return tn_set_error(TN_EINVAL, "Invalid weight_decay value: %s",
                            tn__py_float(d.weight_decay, b, sizeof b)),
               NULL;
    if (d.nesterov && (d.momentum <= 0 || d.dampening != 0))
        return tn_set_error(TN_EINVAL, "Nesterov momentum requires a momentum and zero dampening"),
               NULL;
    struct tn_optim *o = optim_new(TN_OPTIM_SGD, params, nparams);
    if (o)
        o->sgd = d;
    return o;
}

static struct tn_optim *adam_new(enum tn_optim_kind kind, struct tn_tensor *const *params,
                                 int nparams, struct tn_adam_options d)
{
    char b[40];
    if (!(d.lr >= 0.0))
        return tn_set_error(TN_EINVAL, "Invalid learning rate: %s", tn__py_float(d.lr, b, sizeof b)),
               NULL;
    if (!(d.eps >= 0.0))
        return tn_set_error(TN_EINVAL, "Invalid epsilon value: %s", tn__py_float(d.eps, b, sizeof b)),
               NULL;
    if (!(d.beta1 >= 0.0 && d.beta1 < 1.0))
        return tn_set_error(TN_EINVAL, "Invalid beta parameter at index 0: %s",
                            tn__py_float(d.beta1, b, sizeof b)),
               NULL;
    if (!(d.beta2 >= 0.0 && d.beta2 < 1.0))
        return tn_set_error(TN_EINVAL, "Invalid beta parameter at index 1: %s",
                            tn__py_float(d.beta2, b, sizeof b)),
               NULL;
    if (!(d.weight_decay >= 0.0))
        return tn_set_error(TN_EINVAL, "Invalid weight_decay value: %s",
                            tn__py_float(d.weight_decay, b, sizeof b)),
               NULL;
    struct tn_optim *o = optim_new(kind, params, nparams);
    if (o)
        o->adam = d;
    return o;
}

struct tn_optim *tn_adam_new(struct tn_tensor *const *params, int nparams,
                             const struct tn_adam_options *opts)
{
    return adam_new(TN_OPTIM_ADAM, params, nparams, opts ? *opts : tn_adam_defaults());
}

struct tn_optim *tn_adamw_new(struct tn_tensor *const *params, int nparams,
                              const struct tn_adam_options *opts)
{
    return adam_new(TN_OPTIM_ADAMW, params, nparams, opts ? *opts : tn_adamw_defaults());
}

static void state_clear(struct tn_optim_param_state *st)
{
    tn_release(st->momentum_buffer);
    tn_release(st->exp_avg);
    tn_release(st->exp_avg_sq);
    tn_release(st->max_exp_avg_sq);
    memset(st, 0, sizeof *st);
}

void tn_optim_free(struct tn_optim *o)
{
    if (!o)
        return;
    for (int i = 0; o->params && i < o->n; i++) {
        tn_release(o->params[i]);
        if (o->state)
            state_clear(&o->state[i]);
    }
    free(o->params);
    free(o->state);
    free(o);
}

void tn_optim_set_compat(struct tn_optim *o, enum tn_optim_compat compat) { o->compat = compat; }
enum tn_optim_kind tn_optim_kind(const struct tn_optim *o) { return o->kind; }
int tn_optim_nparams(const struct tn_optim *o) { return o->n; }

struct tn_tensor *tn_optim_param(const struct tn_optim *o, int i)
{
    TN_ASSERT(i >= 0 && i < o->n);
    return o->params[i];
}

const struct tn_sgd_options *tn_optim_sgd_options(const struct tn_optim *o)
{
    return o->kind == TN_OPTIM_SGD ? &o->sgd : NULL;
}

const struct tn_adam_options *tn_optim_adam_options(const struct tn_optim *o)
{
    return o->kind == TN_OPTIM_SGD ? NULL : &o->adam;
}

double tn_optim_get_lr(const struct tn_optim *o)
{
    return o->kind == TN_OPTIM_SGD ? o->sgd.lr : o->adam.lr;
}

void tn_optim_set_lr(struct tn_optim *o, double lr)
{
    if (o->kind == TN_OPTIM_SGD)
        o->sgd.lr = lr;
    else
        o->adam.lr = lr;
}

const struct tn_optim_param_state *tn_optim_state(const struct tn_optim *o, int i)
{
    TN_ASSERT(i >= 0 && i < o->n);
    return &o->state[i];
}

/* A new contiguous tensor of p's shape and dtype holding src's values, or
 * NULL (src NULL gives NULL without an error). */
static int state_copy(const struct tn_tensor *p, const struct tn_tensor *src, const char *what,
                      int i, struct tn_tensor **out)
{
    *out = NULL;
    if (!src)
        return 0;
    if (tn_numel(src) != tn_numel(p) || src->ndim != p->ndim ||
        memcmp(src->sizes, p->sizes, (size_t)p->ndim * sizeof(int64_t)) != 0)
        return tn_set_error(TN_ESHAPE, "optimizer state %s of parameter %d does not have the "
                            "parameter's shape", what, i);
    struct tn_tensor *t = tn_empty(p->sizes, p->ndim, p->dtype);
    if (!t)
        return tn_last_status();
    int rc = tn_copy_(t, src);
    if (rc) {
        tn_release(t);
        return rc;
    }
    *out = t;
    return 0;
}

int tn_optim_set_state(struct tn_optim *o, int i, const struct tn_optim_param_state *st)
{
    TN_ASSERT(i >= 0 && i < o->n);
    struct tn_optim_param_state n = {.initialized = st->initialized, .step = st->step};
    const struct tn_tensor *p = o->params[i];
    int rc;
    if ((rc = state_copy(p, st->momentum_buffer, "momentum_buffer", i, &n.momentum_buffer)) ||
        (rc = state_copy(p, st->exp_avg, "exp_avg", i, &n.exp_avg)) ||
        (rc = state_copy(p, st->exp_avg_sq, "exp_avg_sq", i, &n.exp_avg_sq)) ||
        (rc = state_copy(p, st->max_exp_avg_sq, "max_exp_avg_sq", i, &n.max_exp_avg_sq))) {
        state_clear(&n);
        return rc;
    }
    state_clear(&o->state[i]);
    o->state[i] = n;
    return 0;
}

void tn_optim_zero_grad(struct tn_optim *o, bool set_to_none)
{
    for (int i = 0; i < o->n; i++) {
        struct tn_tensor *p = o->params[i];
        if (!p->grad)
            continue;
        if (set_to_none) {
            tn_release(p->grad);
            p->grad = NULL;
        } else {
            tn_fill_(p->grad, tn_float(0.0));
        }
    }
}

/* -------------------------------------------------------------- kernels */

/* The per-dtype loops.  FMA is fmaf or fma; the scalar arguments are the
 * Python floats PyTorch passes, converted to T as its kernels convert them. */
#define TN_OPTIM_KERNELS(T, SUF, FMA, SQRT)                                                    \
    static T lerp_##SUF(T self, T end, T w)                                                    \
    {                                                                                          \
        return fabs((double)w) < 0.5 ? FMA(w, end - self, self) : FMA(w - 1, end - self, end); \
    }                                                                                          \
                                                                                               \
    static void sgd_##SUF(T *p, const T *g, T *buf, bool fresh, int64_t n,                     \
                          const struct tn_sgd_options *o)                                      \
    {                                                                                          \
        const T wd = (T)o->weight_decay, mom = (T)o->momentum;                                 \
        const T damp1 = (T)(1 - o->dampening);                                                 \
        const T alpha = (T)-o->lr;                                                             \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T d = o->maximize ? -g[i] : g[i];                                                  \
            if (o->weight_decay != 0)                                                          \
                d = FMA(p[i], wd, d);                                                          \
            if (o->momentum != 0) {                                                            \
                buf[i] = fresh ? d : FMA(d, damp1, buf[i] * mom);                              \
                d = o->nesterov ? FMA(buf[i], mom, d) : buf[i];                                \
            }                                                                                  \
            p[i] = FMA(d, alpha, p[i]);                                                        \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    static void adam_##SUF(T *p, const T *g, T *m, T *v, T *vmax, int64_t n,                   \
                           const struct adam_step *s)                                          \
    {                                                                                          \
        const T wd = (T)s->o->weight_decay, decay = (T)s->decay;                               \
        const T w1 = (T)(1 - s->o->beta1), b1 = (T)s->o->beta1;                                \
        const T b2 = (T)s->o->beta2, c2 = (T)(1 - s->o->beta2);                                \
        const T bc2 = (T)s->bc2_sqrt, eps = (T)s->o->eps, nstep = (T)(-s->step_size);          \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T gi = s->o->maximize ? -g[i] : g[i];                                              \
            T pi = p[i];                                                                       \
            if (s->o->weight_decay != 0) {                                                     \
                if (s->decoupled)                                                              \
                    pi = pi * decay;                                                           \
                else                                                                           \
                    gi = FMA(pi, wd, gi);                                                      \
            }                                                                                  \
            m[i] = s->torch1 ? FMA(gi, w1, m[i] * b1) : lerp_##SUF(m[i], gi, w1);              \
            T vb = v[i] * b2;                                                                  \
            v[i] = FMA(c2 * gi, gi, vb);                                                       \
            T sq = v[i];                                                                       \
            if (vmax) {                                                                        \
                vmax[i] = (isnan(vmax[i]) || vmax[i] > sq) && !isnan(sq) ? vmax[i] : sq;       \
                sq = vmax[i];                                                                  \
            }                                                                                  \
            T denom = SQRT(sq) / bc2 + eps;                                                    \
            p[i] = pi + nstep * m[i] / denom;                                                  \
        }                                                                                      \
    }

struct adam_step {
    const struct tn_adam_options *o;
    bool torch1, decoupled;
    double decay, step_size, bc2_sqrt;
};

TN_OPTIM_KERNELS(float, f32, fmaf, sqrtf)
TN_OPTIM_KERNELS(double, f64, fma, sqrt)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* adam_f32 eight elements at a time, without amsgrad: the same operations
 * in the same order (IEEE sqrt, div and fused multiply-add give the same
 * bits in vector and scalar form), several times faster than the scalar
 * loop's libm fmaf calls.  The last n % 8 elements go to adam_f32. */
__attribute__((target("avx2,fma"))) static int64_t
adam_f32_avx2(float *p, const float *g, float *m, float *v, int64_t n, const struct adam_step *s)
{
    const struct tn_adam_options *o = s->o;
    const __m256 wd = _mm256_set1_ps((float)o->weight_decay), decay = _mm256_set1_ps((float)s->decay);
    const float w1s = (float)(1 - o->beta1);
    const bool small = fabsf(w1s) < 0.5f;
    const __m256 w1 = _mm256_set1_ps(small ? w1s : w1s - 1), b1 = _mm256_set1_ps((float)o->beta1);
    const __m256 w1plain = _mm256_set1_ps(w1s);
    const __m256 b2 = _mm256_set1_ps((float)o->beta2), c2 = _mm256_set1_ps((float)(1 - o->beta2));
    const __m256 bc2 = _mm256_set1_ps((float)s->bc2_sqrt), eps = _mm256_set1_ps((float)o->eps);
    const __m256 nstep = _mm256_set1_ps((float)(-s->step_size));
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (o->maximize)
            gi = _mm256_xor_ps(gi, sign);
        if (o->weight_decay != 0) {
            if (s->decoupled)
                pi = _mm256_mul_ps(pi, decay);
            else
                gi = _mm256_fmadd_ps(pi, wd, gi);
        }
        __m256 mi = _mm256_loadu_ps(m + i);
        if (s->torch1)
            mi = _mm256_fmadd_ps(gi, w1plain, _mm256_mul_ps(mi, b1));
        else
            mi = _mm256_fmadd_ps(w1, _mm256_sub_ps(gi, mi), small ? mi : gi);
        __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(c2, gi), gi,
                                    _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
        pi = _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(nstep, mi), denom));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(p + i, pi);
    }
    return i;
}
#endif

/* p's gradient as a contiguous tensor of p's shape and dtype (a new
 * reference), or NULL with an error. */
static struct tn_tensor *grad_of(const struct tn_tensor *p, int i)
{
    const struct tn_tensor *g = p->grad;
    if (g->dtype != p->dtype || g->ndim != p->ndim ||
        memcmp(g->sizes, p->sizes, (size_t)p->ndim * sizeof(int64_t)) != 0) {
        tn_set_error(TN_ESHAPE, "optimizer parameter %d: its .grad does not have the "
                     "parameter's shape and dtype", i);
        return NULL;
    }
    return tn_contiguous(g);
}

static int check_param(const struct tn_tensor *p, int i)
{
    if (p->dtype != TN_FLOAT32 && p->dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "optimizer parameter %d: %s parameters are not supported "
                            "(float32 and float64 are)", i, tn_dtype_name(p->dtype));
    if (!tn_is_contiguous(p))
        return tn_set_error(TN_EINVAL, "optimizer parameter %d is not contiguous", i);
    return 0;
}

static struct tn_tensor *zeros_of(const struct tn_tensor *p)
{
    return tn_zeros(p->sizes, p->ndim, p->dtype);
}

static int sgd_step(struct tn_optim *o, int i, struct tn_tensor *p, struct tn_tensor *g)
{
    struct tn_optim_param_state *st = &o->state[i];
    bool fresh = false;
    if (o->sgd.momentum != 0 && !st->momentum_buffer) {
        if (!(st->momentum_buffer = zeros_of(p)))
            return tn_last_status();
        fresh = true;
    }
    st->initialized = true;
    void *buf = st->momentum_buffer ? tn_data(st->momentum_buffer) : NULL;
    if (p->dtype == TN_FLOAT32)
        sgd_f32(tn_data(p), tn_data(g), buf, fresh, tn_numel(p), &o->sgd);
    else
        sgd_f64(tn_data(p), tn_data(g), buf, fresh, tn_numel(p), &o->sgd);
    p->storage->version++;
    return 0;
}

static int adam_step(struct tn_optim *o, int i, struct tn_tensor *p, struct tn_tensor *g)
{
    struct tn_optim_param_state *st = &o->state[i];
    if (!st->exp_avg) {
        st->step = 0;
        if (!(st->exp_avg = zeros_of(p)) || !(st->exp_avg_sq = zeros_of(p)))
            return tn_last_status();
    }
    if (o->adam.amsgrad && !st->max_exp_avg_sq && !(st->max_exp_avg_sq = zeros_of(p)))
        return tn_last_status();
    st->initialized = true;
    /* the step count is a float32 tensor in PyTorch: step_t += 1 rounds */
    st->step = (float)(st->step + 1);
    const struct tn_adam_options *a = &o->adam;
    bool torch1 = o->compat == TN_OPTIM_TORCH1;
    double bc1 = 1 - pow(a->beta1, st->step), bc2 = 1 - pow(a->beta2, st->step);
    struct adam_step s = {
        .o = a,
        .torch1 = torch1,
        .decoupled = o->kind == TN_OPTIM_ADAMW,
        .decay = 1 - a->lr * a->weight_decay,
        .step_size = a->lr / bc1,
        /* 2.x: bias_correction2 ** 0.5; 1.13: math.sqrt(bias_correction2) */
        .bc2_sqrt = torch1 ? sqrt(bc2) : pow(bc2, 0.5),
    };
    void *vmax = a->amsgrad ? tn_data(st->max_exp_avg_sq) : NULL;
    int64_t done = 0, n = tn_numel(p);
#if defined(__x86_64__) && defined(__GNUC__)
    if (p->dtype == TN_FLOAT32 && !vmax && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        done = adam_f32_avx2(tn_data(p), tn_data(g), tn_data(st->exp_avg),
                             tn_data(st->exp_avg_sq), n, &s);
#endif
    if (p->dtype == TN_FLOAT32)
        adam_f32((float *)tn_data(p) + done, (const float *)tn_data(g) + done,
                 (float *)tn_data(st->exp_avg) + done, (float *)tn_data(st->exp_avg_sq) + done,
                 vmax, n - done, &s);
    else
        adam_f64(tn_data(p), tn_data(g), tn_data(st->exp_avg), tn_data(st->exp_avg_sq), vmax,
                 tn_numel(p), &s);
    p->storage->version++;
    return 0;
}

int tn_optim_step(struct tn_optim *o)
{
    for (int i = 0; i < o->n; i++) {
        struct tn_tensor *p = o->params[i];
        if (!p->grad)
            continue;
        int rc = check_param(p, i);
        if (rc)
            return rc;
        struct tn_tensor *g = grad_of(p, i);
        if (!g)
            return tn_last_status();
        rc = o->kind == TN_OPTIM_SGD ? sgd_step(o, i, p, g) : adam_step(o, i, p, g);
        tn_release(g);
        if (rc)
            return rc;
    }
    return 0;
}
