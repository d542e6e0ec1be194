/*
 * ops/binary.c: the device-independent half of the elementwise binary ops:
 * the meta functions of the structured out= overloads (broadcast shape,
 * result dtype, PyTorch's argument checks) and the Scalar overloads, which
 * decompose into the Tensor ones (CompositeImplicitAutograd).
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

enum tn_dtype tn__binary_dtype(const struct tn_tensor *a, const struct tn_tensor *b)
{
    const struct tn_tensor *ts[2];
    struct tn_scalar ss[2];
    int nt = 0, ns = 0;
    const struct tn_tensor *in[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if ((in[i]->flags & TN_TENSOR_WRAPPED_NUMBER) && in[i]->ndim == 0)
            ss[ns++] = tn_item(in[i]);
        else
            ts[nt++] = in[i];
    }
    return tn_result_type(ts, nt, ss, ns);
}

struct tn_tensor *tn__wrapped_scalar(struct tn_scalar s)
{
    /* a Python float wraps as a double, as PyTorch's wrapped numbers do (the
     * flag keeps it from deciding the result's dtype) */
    struct tn_tensor *t = tn_scalar_tensor(s, s.kind == TN_SCALAR_FLOAT ? TN_FLOAT64 : TN_DTYPE_UNSET);
    if (t)
        t->flags |= TN_TENSOR_WRAPPED_NUMBER;
    return t;
}

/* The broadcast shape and the common dtype into m. */
static int binary_meta(const struct tn_tensor *a, const struct tn_tensor *b, struct tn_meta *m)
{
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++)
        same = a->sizes[i] == b->sizes[i];
    if (same) { /* the common case: nothing to broadcast */
        m->ndim = a->ndim;
        for (int i = 0; i < a->ndim; i++)
            m->sizes[i] = a->sizes[i];
    } else {
        int nd = tn_broadcast_shapes(a->sizes, a->ndim, b->sizes, b->ndim, m->sizes);
        if (nd < 0)
            return tn_last_status();
        m->ndim = nd;
    }
    const struct tn_tensor *in[2] = {a, b};
    tn__meta_iter_layout(m, in, 2);
    /* two tensors of one dtype promote to it (neither a wrapped number) */
    if (a->dtype == b->dtype && !((a->flags | b->flags) & TN_TENSOR_WRAPPED_NUMBER)) {
        m->dtype = a->dtype;
        return TN_OK;
    }
    m->dtype = tn__binary_dtype(a, b);
    return m->dtype == TN_DTYPE_UNSET ? tn_last_status() : TN_OK;
}

/* PyTorch's alpha_check. */
static int alpha_check(enum tn_dtype dt, struct tn_scalar alpha)
{
    if (alpha.kind == TN_SCALAR_INT) /* the checks below pass an integer alpha */
        return TN_OK;
    if (alpha.kind == TN_SCALAR_BOOL && dt != TN_BOOL)
        return tn_set_error(TN_EINVAL, "Boolean alpha only supported for Boolean results.");
    if (!tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt) &&
        !(alpha.kind == TN_SCALAR_INT || alpha.kind == TN_SCALAR_BOOL))
        return tn_set_error(TN_EINVAL, "For integral input tensors, argument alpha must not be a "
                            "floating point number.");
    if (!tn_dtype_is_complex(dt) && alpha.kind == TN_SCALAR_COMPLEX)
        return tn_set_error(TN_EINVAL, "For non-complex input tensors, argument alpha must not be "
                            "a complex number.");
    return TN_OK;
}

int tn__meta_add_out(const struct tn_tensor *self, const struct tn_tensor *other,
                     struct tn_scalar alpha, struct tn_meta *m)
{
    int rc = binary_meta(self, other, m);
    return rc < 0 ? rc : alpha_check(m->dtype, alpha);
}

int tn__meta_sub_out(const struct tn_tensor *self, const struct tn_tensor *other,
                     struct tn_scalar alpha, struct tn_meta *m)
{
    if (self->dtype == TN_BOOL && other->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Subtraction, the `-` operator, with two bool tensors is "
                            "not supported. Use the `^` or `logical_xor()` operator instead.");
    if (self->dtype == TN_BOOL || other->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Subtraction, the `-` operator, with a bool tensor is not "
                            "supported. If you are trying to invert a mask, use the `~` or "
                            "`logical_not()` operator instead.");
    return tn__meta_add_out(self, other, alpha, m);
}

int tn__meta_mul_out(const struct tn_tensor *self, const struct tn_tensor *other,
                     struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

int tn__meta_div_out(const struct tn_tensor *self, const struct tn_tensor *other,
                     struct tn_meta *m)
{
    int rc = binary_meta(self, other, m);
    /* true division of integers gives the default float dtype */
    if (rc == 0 && tn_dtype_is_integral(m->dtype, true))
        m->dtype = tn_get_default_dtype();
    return rc;
}

int tn__meta_div_mode_out(const struct tn_tensor *self, const struct tn_tensor *other,
                          const char *rounding_mode, struct tn_meta *m)
{
    if (!rounding_mode)
        return tn__meta_div_out(self, other, m);
    if (strcmp(rounding_mode, "trunc") && strcmp(rounding_mode, "floor"))
        return tn_set_error(TN_EINVAL, "div expected rounding_mode to be one of None, 'trunc', or "
                            "'floor' but found '%s'", rounding_mode);
    return binary_meta(self, other, m);
}

#define TN_CMP_META(op)                                                                        \
    int tn__meta_##op##_out(const struct tn_tensor *self, const struct tn_tensor *other,       \
                            struct tn_meta *m)                                                 \
    {                                                                                          \
        int rc = binary_meta(self, other, m);                                                  \
        m->dtype = TN_BOOL;                                                                    \
        return rc;                                                                             \
    }
TN_CMP_META(eq)
TN_CMP_META(ne)
TN_CMP_META(lt)
TN_CMP_META(le)
TN_CMP_META(gt)
TN_CMP_META(ge)

/* --------------------------------------------- Scalar overloads (composite) */

struct tn_tensor *tn__composite_add_scalar(tn_keyset ks, const struct tn_tensor *self,
                                           struct tn_scalar other, struct tn_scalar alpha)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_add(self, o, alpha) : NULL;
    tn_release(o);
    return r;
}

int tn__composite_add_scalar_(tn_keyset ks, struct tn_tensor *self, struct tn_scalar other,
                              struct tn_scalar alpha)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    int rc = o ? tn_add_(self, o, alpha) : tn_last_status();
    tn_release(o);
    return rc;
}

/* pow.Tensor_Scalar: the exponent a wrapped number (pow(x, 2) of a float
 * tensor stays float; of an int tensor with 0.5, float). */
struct tn_tensor *tn__composite_pow_tensor_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                  struct tn_scalar exponent)
{
    if (!tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype) &&
        (exponent.kind == TN_SCALAR_INT || exponent.kind == TN_SCALAR_BOOL) &&
        tn_scalar_to_int64(exponent) < 0)
        return tn_set_error(TN_EINVAL, "Integers to negative integer powers are not allowed."),
               NULL;
    struct tn_tensor *o = tn__wrapped_scalar(exponent);
    struct tn_tensor *r = o ? tn_pow(self, o) : NULL;
    tn_release(o);
    return r;
}

/* op(self, other) with other a wrapped number. */
static struct tn_tensor *with_wrapped(struct tn_tensor *(*op)(const struct tn_tensor *,
                                                              const struct tn_tensor *),
                                      const struct tn_tensor *self, struct tn_scalar other)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? op(self, o) : NULL;
    tn_release(o);
    return r;
}

/* fmod.Scalar and remainder.Scalar: the divisor a wrapped number. */
struct tn_tensor *tn__composite_fmod_scalar(tn_keyset ks, const struct tn_tensor *self,
                                            struct tn_scalar other)
{
    return with_wrapped(tn_fmod, self, other);
}

struct tn_tensor *tn__composite_remainder_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                 struct tn_scalar other)
{
    return with_wrapped(tn_remainder, self, other);
}

/* min.other and max.other: torch.min(a, b) is minimum, torch.max maximum. */
struct tn_tensor *tn__composite_min_other(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *other)
{
    return tn_minimum(self, other);
}

struct tn_tensor *tn__composite_max_other(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *other)
{
    return tn_maximum(self, other);
}

struct tn_tensor *tn__composite_sub_scalar(tn_keyset ks, const struct tn_tensor *self,
                                           struct tn_scalar other, struct tn_scalar alpha)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_sub(self, o, alpha) : NULL;
    tn_release(o);
    return r;
}

/* rsub: other - alpha * self, PyTorch's sub with the operands swapped */
struct tn_tensor *tn__composite_rsub_tensor(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_tensor *other, struct tn_scalar alpha)
{
    return tn_sub(other, self, alpha);
}

struct tn_tensor *tn__composite_rsub_scalar(tn_keyset ks, const struct tn_tensor *self,
                                            struct tn_scalar other, struct tn_scalar alpha)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_sub(o, self, alpha) : NULL;
    tn_release(o);
    return r;
}

struct tn_tensor *tn__composite_mul_scalar(tn_keyset ks, const struct tn_tensor *self,
                                           struct tn_scalar other)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_mul(self, o) : NULL;
    tn_release(o);
    return r;
}

struct tn_tensor *tn__composite_div_scalar(tn_keyset ks, const struct tn_tensor *self,
                                           struct tn_scalar other)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_div(self, o) : NULL;
    tn_release(o);
    return r;
}

/* true_divide: div's alias */
struct tn_tensor *tn__composite_true_divide_tensor(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_tensor *other)
{
    return tn_div(self, other);
}

struct tn_tensor *tn__composite_true_divide_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                   struct tn_scalar other)
{
    return tn_div_scalar(self, other);
}

/* subtract: sub's alias */
struct tn_tensor *tn__composite_subtract_tensor(tn_keyset ks, const struct tn_tensor *self,
                                                const struct tn_tensor *other,
                                                struct tn_scalar alpha)
{
    return tn_sub(self, other, alpha);
}

struct tn_tensor *tn__composite_subtract_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                struct tn_scalar other, struct tn_scalar alpha)
{
    return tn_sub_scalar(self, other, alpha);
}

struct tn_tensor *tn__composite_div_scalar_mode(tn_keyset ks, const struct tn_tensor *self,
                                                struct tn_scalar other, const char *rounding_mode)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_div_mode(self, o, rounding_mode) : NULL;
    tn_release(o);
    return r;
}

/* floor_divide is div with rounding_mode='floor' (as PyTorch's since 1.13) */
struct tn_tensor *tn__composite_floor_divide(tn_keyset ks, const struct tn_tensor *self,
                                             const struct tn_tensor *other)
{
    return tn_div_mode(self, other, "floor");
}

struct tn_tensor *tn__composite_floor_divide_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                    struct tn_scalar other)
{
    return tn__composite_div_scalar_mode(ks, self, other, "floor");
}

/* divide: PyTorch's alias of div in its four overloads (what torch.divide
 * exports as), each the div overload of the same arguments */
struct tn_tensor *tn__composite_divide(tn_keyset ks, const struct tn_tensor *self,
                                       const struct tn_tensor *other)
{
    return tn_div(self, other);
}

struct tn_tensor *tn__composite_divide_scalar(tn_keyset ks, const struct tn_tensor *self,
                                              struct tn_scalar other)
{
    return tn_div_scalar(self, other);
}

struct tn_tensor *tn__composite_divide_mode(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_tensor *other,
                                            const char *rounding_mode)
{
    return tn_div_mode(self, other, rounding_mode);
}

struct tn_tensor *tn__composite_divide_scalar_mode(tn_keyset ks, const struct tn_tensor *self,
                                                   struct tn_scalar other,
                                                   const char *rounding_mode)
{
    return tn_div_scalar_mode(self, other, rounding_mode);
}

#define TN_CMP_SCALAR(op)                                                                      \
    struct tn_tensor *tn__composite_##op##_scalar(tn_keyset ks, const struct tn_tensor *self,  \
                                                  struct tn_scalar other)                      \
    {                                                                                          \
        struct tn_tensor *o = tn__wrapped_scalar(other);                                       \
        struct tn_tensor *r = o ? tn_##op(self, o) : NULL;                                     \
        tn_release(o);                                                                         \
        return r;                                                                              \
    }
TN_CMP_SCALAR(eq)
TN_CMP_SCALAR(ne)
TN_CMP_SCALAR(lt)
TN_CMP_SCALAR(le)
TN_CMP_SCALAR(gt)
TN_CMP_SCALAR(ge)
/* bitwise_*.Scalar: .Tensor with the wrapped number (PyTorch's own form) */
TN_CMP_SCALAR(bitwise_and)
TN_CMP_SCALAR(bitwise_or)
TN_CMP_SCALAR(bitwise_xor)

/* ------------------------------------------------------ more binary ops */

static int no_complex(const char *op, const struct tn_tensor *a, const struct tn_tensor *b)
{
    if (tn_dtype_is_complex(a->dtype) || tn_dtype_is_complex(b->dtype))
        return tn_set_error(TN_EDTYPE, "%s not implemented for complex tensors.", op);
    return TN_OK;
}

int tn__meta_maximum_out(const struct tn_tensor *self, const struct tn_tensor *other,
                         struct tn_meta *m)
{
    int rc = no_complex("maximum", self, other);
    return rc < 0 ? rc : binary_meta(self, other, m);
}

int tn__meta_minimum_out(const struct tn_tensor *self, const struct tn_tensor *other,
                         struct tn_meta *m)
{
    int rc = no_complex("minimum", self, other);
    return rc < 0 ? rc : binary_meta(self, other, m);
}

int tn__meta_remainder_out(const struct tn_tensor *self, const struct tn_tensor *other,
                           struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

int tn__meta_fmod_out(const struct tn_tensor *self, const struct tn_tensor *other,
                      struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

int tn__meta_pow_out(const struct tn_tensor *self, const struct tn_tensor *exponent,
                     struct tn_meta *m)
{
    return binary_meta(self, exponent, m);
}

int tn__meta_atan2_out(const struct tn_tensor *self, const struct tn_tensor *other,
                       struct tn_meta *m)
{
    return tn__meta_div_out(self, other, m); /* integers give the default float */
}

int tn__meta_bitwise_and_out(const struct tn_tensor *self, const struct tn_tensor *other,
                             struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

int tn__meta_bitwise_or_out(const struct tn_tensor *self, const struct tn_tensor *other,
                            struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

int tn__meta_bitwise_xor_out(const struct tn_tensor *self, const struct tn_tensor *other,
                             struct tn_meta *m)
{
    return binary_meta(self, other, m);
}

TN_CMP_META(logical_and)
TN_CMP_META(logical_or)
TN_CMP_META(logical_xor)

/* --- addcmul, addcdiv, lerp: decompositions --------------------------------- */

/* value as the result dtype takes it: an integral result truncates a float
 * value, as PyTorch's Scalar::to<int64_t> does. */
static struct tn_scalar value_for(enum tn_dtype dt, struct tn_scalar v)
{
    if (tn_dtype_is_integral(dt, true) && v.kind == TN_SCALAR_FLOAT)
        return tn_int((int64_t)v.v.f);
    return v;
}

/* PyTorch computes addcmul, addcdiv and lerp of bfloat16 and float16 in
 * float32 and rounds once: the decompositions below run on float32 copies
 * (through _to_copy, so gradients flow) and round their result. */
static bool reduced_float(enum tn_dtype dt)
{
    return dt == TN_BFLOAT16 || dt == TN_FLOAT16;
}

static struct tn_tensor *as_dtype(const struct tn_tensor *t, enum tn_dtype dt)
{
    return t ? tn_underscore_to_copy(t, dt, NULL, NULL, NULL, false, NULL) : NULL;
}

typedef struct tn_tensor *(*tern_fn)(const struct tn_tensor *, const struct tn_tensor *,
                                     const struct tn_tensor *, const void *);

/* f(a, b, c, arg) on float32 copies of a, b and c (c may be NULL), rounded
 * to dt. */
static struct tn_tensor *in_float32(tern_fn f, enum tn_dtype dt, const struct tn_tensor *a,
                                    const struct tn_tensor *b, const struct tn_tensor *c,
                                    const void *arg)
{
    struct tn_tensor *fa = as_dtype(a, TN_FLOAT32), *fb = fa ? as_dtype(b, TN_FLOAT32) : NULL;
    struct tn_tensor *fc = c && fb ? as_dtype(c, TN_FLOAT32) : NULL;
    struct tn_tensor *r = fb && (fc || !c) ? f(fa, fb, fc, arg) : NULL, *o = as_dtype(r, dt);
    tn_release(fa);
    tn_release(fb);
    tn_release(fc);
    tn_release(r);
    return o;
}

static struct tn_tensor *addc(bool div, const struct tn_tensor *self, const struct tn_tensor *t1,
                              const struct tn_tensor *t2, struct tn_scalar value);

static struct tn_tensor *addcmul_f(const struct tn_tensor *a, const struct tn_tensor *b,
                                   const struct tn_tensor *c, const void *value)
{
    return addc(false, a, b, c, *(const struct tn_scalar *)value);
}

static struct tn_tensor *addcdiv_f(const struct tn_tensor *a, const struct tn_tensor *b,
                                   const struct tn_tensor *c, const void *value)
{
    return addc(true, a, b, c, *(const struct tn_scalar *)value);
}

/* self + value * (tensor1 op tensor2), op mul or true division. */
static struct tn_tensor *addc(bool div, const struct tn_tensor *self, const struct tn_tensor *t1,
                              const struct tn_tensor *t2, struct tn_scalar value)
{
    const struct tn_tensor *all[3] = {self, t1, t2};
    enum tn_dtype dt = tn_result_type(all, 3, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    if (dt == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for 'Bool'",
                            div ? "addcdiv_cpu_out" : "addcmul_cpu_out"), NULL;
    if (reduced_float(dt))
        return in_float32(div ? addcdiv_f : addcmul_f, dt, self, t1, t2, &value);
    struct tn_tensor *p = div ? tn_div(t1, t2) : tn_mul(t1, t2);
    if (!p)
        return NULL;
    struct tn_tensor *r = tn_add(self, p, value_for(dt, value));
    tn_release(p);
    return r;
}

struct tn_tensor *tn__composite_addcmul(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *tensor1,
                                        const struct tn_tensor *tensor2, struct tn_scalar value)
{
    return addc(false, self, tensor1, tensor2, value);
}

struct tn_tensor *tn__composite_addcdiv(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *tensor1,
                                        const struct tn_tensor *tensor2, struct tn_scalar value)
{
    if (tn_dtype_is_integral(tensor1->dtype, true) && tn_dtype_is_integral(tensor2->dtype, true))
        return tn_set_error(TN_EDTYPE,
                            "Integer division with addcdiv is no longer supported, and in a future  "
                            "release addcdiv will perform a true division of tensor1 and tensor2. "
                            "The historic addcdiv behavior can be implemented as (input + value * "
                            "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and "
                            "as (input + value * tensor1 / tensor2) for float inputs. The future "
                            "addcdiv behavior is just the latter implementation: (input + value * "
                            "tensor1 / tensor2), for all dtypes."), NULL;
    return addc(true, self, tensor1, tensor2, value);
}

/* The C++ type name PyTorch's lerp prints for a dtype (caffe2::TypeMeta). */
const char *tn__dtype_meta_name(enum tn_dtype dt)
{
    static const char *const names[TN_NUM_DTYPES] = {
        [TN_FLOAT32] = "float", [TN_FLOAT64] = "double", [TN_FLOAT16] = "c10::Half",
        [TN_BFLOAT16] = "c10::BFloat16", [TN_INT64] = "long int", [TN_INT32] = "int",
        [TN_INT16] = "short int", [TN_INT8] = "signed char", [TN_UINT8] = "unsigned char",
        [TN_BOOL] = "bool", [TN_COMPLEX64] = "c10::complex<float>",
        [TN_COMPLEX128] = "c10::complex<double>"};
    return names[dt];
}

static int lerp_check(const struct tn_tensor *self, const struct tn_tensor *other,
                      const char *what, const char *kernel)
{
    if (other && other->dtype != self->dtype)
        return tn_set_error(TN_EDTYPE, "expected dtype %s for `%s` but got dtype %s",
                            tn__dtype_meta_name(self->dtype), what,
                            tn__dtype_meta_name(other->dtype));
    if (!other && !tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                            tn_dtype_info(self->dtype)->c10_name);
    return TN_OK;
}

static struct tn_tensor *lerp_scalar_f(const struct tn_tensor *a, const struct tn_tensor *b,
                                       const struct tn_tensor *c, const void *weight)
{
    return tn__composite_lerp_scalar(0, a, b, *(const struct tn_scalar *)weight);
}

static struct tn_tensor *lerp_tensor_f(const struct tn_tensor *a, const struct tn_tensor *b,
                                       const struct tn_tensor *c, const void *unused)
{
    return tn__composite_lerp_tensor(0, a, b, c);
}

/* self + weight * (end - self) */
struct tn_tensor *tn__composite_lerp_scalar(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_tensor *end, struct tn_scalar weight)
{
    if (lerp_check(self, end, "end", NULL) < 0 || lerp_check(self, NULL, NULL, "lerp_kernel_scalar") < 0)
        return NULL;
    if (reduced_float(self->dtype))
        return in_float32(lerp_scalar_f, self->dtype, self, end, NULL, &weight);
    struct tn_tensor *d = tn_sub(end, self, tn_int(1));
    struct tn_tensor *r = d ? tn_add(self, d, weight) : NULL;
    tn_release(d);
    return r;
}

struct tn_tensor *tn__composite_lerp_tensor(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_tensor *end,
                                            const struct tn_tensor *weight)
{
    if (lerp_check(self, end, "end", NULL) < 0 || lerp_check(self, weight, "weight", NULL) < 0 ||
        lerp_check(self, NULL, NULL, "lerp_kernel_tensor") < 0)
        return NULL;
    if (reduced_float(self->dtype))
        return in_float32(lerp_tensor_f, self->dtype, self, end, weight, NULL);
    struct tn_tensor *d = tn_sub(end, self, tn_int(1));
    struct tn_tensor *wd = d ? tn_mul(weight, d) : NULL;
    struct tn_tensor *r = wd ? tn_add(self, wd, tn_int(1)) : NULL;
    tn_release(d);
    tn_release(wd);
    return r;
}
