/*
 * ops/unary.c: meta functions of the elementwise unary ops: the output has
 * the input's shape; floating ops give integer and bool inputs the default
 * float dtype, as PyTorch's unary float ops do.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/internal.h"

static int unary_meta(const struct tn_tensor *self, enum tn_dtype dtype, struct tn_meta *m)
{
    m->ndim = self->ndim;
    memcpy(m->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    m->dtype = dtype;
    tn__meta_iter_layout(m, &self, 1);
    return TN_OK;
}

static enum tn_dtype float_dtype(enum tn_dtype dt)
{
    return tn_dtype_is_integral(dt, true) ? tn_get_default_dtype() : dt;
}

int tn__meta_neg_out(const struct tn_tensor *self, struct tn_meta *m)
{
    if (self->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Negation, the `-` operator, on a bool tensor is not "
                            "supported. If you are trying to invert a mask, use the `~` or "
                            "`logical_not()` operator instead.");
    return unary_meta(self, self->dtype, m);
}

int tn__meta_abs_out(const struct tn_tensor *self, struct tn_meta *m)
{
    return unary_meta(self, tn__dtype_real(self->dtype), m);
}

#define TN_FLOAT_META(op)                                                                      \
    int tn__meta_##op##_out(const struct tn_tensor *self, struct tn_meta *m)                   \
    {                                                                                          \
        return unary_meta(self, float_dtype(self->dtype), m);                                  \
    }
TN_FLOAT_META(exp)
TN_FLOAT_META(log)
TN_FLOAT_META(sqrt)
TN_FLOAT_META(sin)
TN_FLOAT_META(cos)
TN_FLOAT_META(tanh)
TN_FLOAT_META(sigmoid)
TN_FLOAT_META(exp2)
TN_FLOAT_META(expm1)
TN_FLOAT_META(log2)
TN_FLOAT_META(log10)
TN_FLOAT_META(log1p)
TN_FLOAT_META(rsqrt)
TN_FLOAT_META(tan)
TN_FLOAT_META(asin)
TN_FLOAT_META(acos)
TN_FLOAT_META(atan)
TN_FLOAT_META(acosh)
TN_FLOAT_META(asinh)
TN_FLOAT_META(atanh)
TN_FLOAT_META(lgamma)
TN_FLOAT_META(digamma)
TN_FLOAT_META(sinh)
TN_FLOAT_META(cosh)
TN_FLOAT_META(erf)
TN_FLOAT_META(reciprocal)

/* --- rounding, sign, not, activations ------------------------------------
 * Their kernels check the dtype (cpu/unary.c, with PyTorch's kernel names);
 * the metas give the output dtype and the errors PyTorch raises before any
 * kernel runs. */

static int same_meta(const struct tn_tensor *self, struct tn_meta *m)
{
    return unary_meta(self, self->dtype, m);
}

int tn__meta_sign_out(const struct tn_tensor *self, struct tn_meta *m)
{
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "Unlike NumPy, torch.sign is not intended to support "
                            "complex numbers. Please use torch.sgn instead.");
    return same_meta(self, m);
}

/* sgn: sign's dtypes, and z / |z| for complex */
int tn__meta_sgn_out(const struct tn_tensor *self, struct tn_meta *m)
{
    return same_meta(self, m);
}

/* angle: real of complex, the default float dtype of integers and bool */
int tn__meta_angle_out(const struct tn_tensor *self, struct tn_meta *m)
{
    return unary_meta(self, tn__dtype_real(float_dtype(self->dtype)), m);
}

#define TN_NOCOMPLEX_META(op)                                                                  \
    int tn__meta_##op##_out(const struct tn_tensor *self, struct tn_meta *m)                   \
    {                                                                                          \
        if (tn_dtype_is_complex(self->dtype))                                                       \
            return tn_set_error(TN_EDTYPE, #op " is not supported for complex inputs");        \
        return same_meta(self, m);                                                             \
    }
TN_NOCOMPLEX_META(floor)
TN_NOCOMPLEX_META(ceil)
TN_NOCOMPLEX_META(trunc)

#define TN_SAME_META(op)                                                                       \
    int tn__meta_##op##_out(const struct tn_tensor *self, struct tn_meta *m)                   \
    {                                                                                          \
        return same_meta(self, m);                                                             \
    }
TN_SAME_META(round)
TN_SAME_META(frac)
TN_SAME_META(bitwise_not)
TN_SAME_META(silu)
TN_SAME_META(mish)
TN_FLOAT_META(erfinv)

int tn__meta_logical_not_out(const struct tn_tensor *self, struct tn_meta *m)
{
    return unary_meta(self, TN_BOOL, m);
}

int tn__meta_gelu_out(const struct tn_tensor *self, const char *approximate, struct tn_meta *m)
{
    if (!approximate || (strcmp(approximate, "none") != 0 && strcmp(approximate, "tanh") != 0))
        return tn_set_error(TN_EINVAL, "approximate argument must be either none or tanh.");
    return same_meta(self, m);
}

int tn__meta_leaky_relu_out(const struct tn_tensor *self, struct tn_scalar negative_slope,
                            struct tn_meta *m)
{
    return same_meta(self, m);
}

int tn__meta_hardtanh_out(const struct tn_tensor *self, struct tn_scalar min_val,
                          struct tn_scalar max_val, struct tn_meta *m)
{
    if (self->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Bool inputs not supported for hardtanh");
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "clamp is not supported for complex types");
    return same_meta(self, m);
}

int tn__meta_elu_out(const struct tn_tensor *self, struct tn_scalar alpha, struct tn_scalar scale,
                     struct tn_scalar input_scale, struct tn_meta *m)
{
    return same_meta(self, m);
}

int tn__meta_softplus_out(const struct tn_tensor *self, struct tn_scalar beta,
                          struct tn_scalar threshold, struct tn_meta *m)
{
    return same_meta(self, m);
}

int tn__meta_logit_out(const struct tn_tensor *self, const double *eps, struct tn_meta *m)
{
    return unary_meta(self, float_dtype(self->dtype), m);
}

int tn__meta_polygamma_out(int64_t n, const struct tn_tensor *self, struct tn_meta *m)
{
    if (n < 0)
        return tn_set_error(TN_EINVAL, "polygamma(n, x) does not support negative n.");
    return unary_meta(self, float_dtype(self->dtype), m);
}

int tn__meta_nan_to_num_out(const struct tn_tensor *self, const double *nan, const double *posinf,
                            const double *neginf, struct tn_meta *m)
{
    return same_meta(self, m);
}

/* clamp: self promoted with the bounds given (an int tensor clamped to 2.5
 * becomes float), as PyTorch's result_type does. */
int tn__meta_clamp_out(const struct tn_tensor *self, const struct tn_scalar *min,
                       const struct tn_scalar *max, struct tn_meta *m)
{
    if (!min && !max)
        return tn_set_error(TN_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not be None");
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "clamp is not supported for complex types");
    struct tn_scalar s[2];
    int n = 0;
    if (min)
        s[n++] = *min;
    if (max)
        s[n++] = *max;
    enum tn_dtype dt = tn_result_type(&self, 1, s, n);
    if (dt == TN_DTYPE_UNSET)
        return tn_last_status();
    return unary_meta(self, dt, m);
}

/* hardsigmoid(x) = hardtanh(x + 3, 0, 6) / 6 and hardswish(x) = x *
 * hardtanh(x + 3, 0, 6) / 6, in the order of PyTorch's kernels (so the same
 * bits); floating dtypes only, as its hardsigmoid_cpu and hardswish_cpu. */
static struct tn_tensor *hard_common(tn_keyset ks, const char *kernel,
                                     const struct tn_tensor *self, bool swish)
{
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    /* contiguous float32 on the CPU with no graph to record: one pass */
    if (self->dtype == TN_FLOAT32 && self->device.type == TN_DEVICE_CPU &&
        tn_is_contiguous(self) && !(ks & TN_KEYSET(TN_KEY_AUTOGRAD))) {
        struct tn_tensor *r = tn_empty(self->sizes, self->ndim, TN_FLOAT32);
        if (r)
            tn__cpu_hard_f32(tn_data(self), tn_data(r), tn_numel(self), swish);
        return r;
    }
    struct tn_tensor *s = tn_add_scalar(self, tn_int(3), tn_int(1));
    struct tn_tensor *h = s ? tn_hardtanh(s, tn_int(0), tn_int(6)) : NULL;
    tn_release(s);
    if (h && swish) {
        struct tn_tensor *m = tn_mul(self, h);
        tn_release(h);
        h = m;
    }
    struct tn_tensor *r = h ? tn_div_scalar(h, tn_int(6)) : NULL;
    tn_release(h);
    return r;
}

struct tn_tensor *tn__composite_hardsigmoid(tn_keyset ks, const struct tn_tensor *self)
{
    return hard_common(ks, "hardsigmoid_cpu", self, false);
}

struct tn_tensor *tn__composite_hardswish(tn_keyset ks, const struct tn_tensor *self)
{
    return hard_common(ks, "hardswish_cpu", self, true);
}

/* torch.special.erfinv is erfinv. */
struct tn_tensor *tn__composite_special_erfinv(tn_keyset ks, const struct tn_tensor *self)
{
    return tn_erfinv(self);
}

/* torch.special.polygamma is polygamma. */
struct tn_tensor *tn__composite_special_polygamma(tn_keyset ks, int64_t n,
                                                 const struct tn_tensor *self)
{
    return tn_polygamma(n, self);
}

/* clamp_min(self, min): clamp with no upper bound. */
struct tn_tensor *tn__composite_clamp_min(tn_keyset ks, const struct tn_tensor *self,
                                          struct tn_scalar min)
{
    return tn_clamp(self, &min, NULL);
}

/* clamp_min.Tensor and clamp_max.Tensor (how torch.export writes
 * torch.clamp_min/clamp_max with a tensor bound): clamp.Tensor with one
 * bound. */
struct tn_tensor *tn__composite_clamp_min_tensor(tn_keyset ks, const struct tn_tensor *self,
                                                 const struct tn_tensor *min)
{
    return tn__composite_clamp_tensor(ks, self, min, NULL);
}

struct tn_tensor *tn__composite_clamp_max_tensor(tn_keyset ks, const struct tn_tensor *self,
                                                 const struct tn_tensor *max)
{
    return tn__composite_clamp_tensor(ks, self, NULL, max);
}

/* where.ScalarOther: the scalar promotes as a wrapped number does
 * (int64 tensor, 3.5: float32), then joins as a 0-dim tensor of that dtype
 * (which where.self's promotion keeps). */
struct tn_tensor *tn__composite_where_scalarother(tn_keyset ks, const struct tn_tensor *condition,
                                                  const struct tn_tensor *self,
                                                  struct tn_scalar other)
{
    enum tn_dtype dt = tn_result_type(&self, 1, &other, 1);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    struct tn_tensor *o = tn_empty_on(NULL, 0, dt, self->device);
    if (o && tn_fill_(o, other) < 0) {
        tn_release(o);
        o = NULL;
    }
    struct tn_tensor *r = o ? tn_where_self(condition, self, o) : NULL;
    tn_release(o);
    return r;
}

/* clamp.Tensor: min(max(self, min), max) with tensor bounds, broadcast and
 * promoted together (maximum and minimum do both, and propagate NaN as
 * PyTorch's clamp does). */
struct tn_tensor *tn__composite_clamp_tensor(tn_keyset ks, const struct tn_tensor *self,
                                             const struct tn_tensor *min,
                                             const struct tn_tensor *max)
{
    if (!min && !max)
        return tn_set_error(TN_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not "
                            "be None"), NULL;
    if (tn_dtype_is_complex(self->dtype) || (min && tn_dtype_is_complex(min->dtype)) ||
        (max && tn_dtype_is_complex(max->dtype)))
        return tn_set_error(TN_EDTYPE, "clamp is not supported for complex types"), NULL;
    if (min && max && self->dtype == TN_BOOL && min->dtype == TN_BOOL && max->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "\"clamp_cpu\" not implemented for 'Bool'"), NULL;
    struct tn_tensor *lo = min ? tn_maximum(self, min) : tn_retain((struct tn_tensor *)self);
    if (!lo || !max)
        return lo;
    struct tn_tensor *r = tn_minimum(lo, max);
    tn_release(lo);
    return r;
}

/* round.decimals as PyTorch's round_decimals kernel: nearbyint(x * 10^d) /
 * 10^d, or for d < 0 nearbyint(x / 10^-d) * 10^-d, with 10^d and every step
 * in the dtype's opmath type (float for float16 and bfloat16: one rounding
 * to the dtype at the end). */
struct tn_tensor *tn__composite_round_decimals(tn_keyset ks, const struct tn_tensor *self,
                                               int64_t decimals)
{
    (void)ks;
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"round_decimals\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    bool half = self->dtype == TN_FLOAT16 || self->dtype == TN_BFLOAT16;
    bool neg = decimals < 0;
    double p = pow(10.0, (double)(neg ? -decimals : decimals));
    struct tn_scalar ten = tn_float(self->dtype == TN_FLOAT64 ? p : (double)(float)p);
    struct tn_tensor *x = half ? tn_to_dtype(self, TN_FLOAT32) : tn_retain((struct tn_tensor *)self);
    struct tn_tensor *a = x ? (neg ? tn_div_scalar(x, ten) : tn_mul_scalar(x, ten)) : NULL;
    struct tn_tensor *b = a ? tn_round(a) : NULL;
    struct tn_tensor *c = b ? (neg ? tn_mul_scalar(b, ten) : tn_div_scalar(b, ten)) : NULL;
    struct tn_tensor *r = !c ? NULL : half ? tn_to_dtype(c, self->dtype) : tn_retain(c);
    tn_release(x);
    tn_release(a);
    tn_release(b);
    tn_release(c);
    return r;
}
