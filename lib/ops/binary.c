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
    struct tn_tensor *t = tn_scalar_tensor(s, TN_DTYPE_UNSET);
    if (t)
        t->flags |= TN_TENSOR_WRAPPED_NUMBER;
    return t;
}

/* The broadcast shape and the common dtype into m. */
static int binary_meta(const struct tn_tensor *a, const struct tn_tensor *b, struct tn_meta *m)
{
    int nd = tn_broadcast_shapes(a->sizes, a->ndim, b->sizes, b->ndim, m->sizes);
    if (nd < 0)
        return tn_last_status();
    m->ndim = nd;
    m->dtype = tn__binary_dtype(a, b);
    return m->dtype == TN_DTYPE_UNSET ? tn_last_status() : TN_OK;
}

/* PyTorch's alpha_check. */
static int alpha_check(enum tn_dtype dt, struct tn_scalar alpha)
{
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

struct tn_tensor *tn__composite_sub_scalar(tn_keyset ks, const struct tn_tensor *self,
                                           struct tn_scalar other, struct tn_scalar alpha)
{
    struct tn_tensor *o = tn__wrapped_scalar(other);
    struct tn_tensor *r = o ? tn_sub(self, o, alpha) : NULL;
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
