/*
 * ops/compare.c: isclose, logaddexp and logaddexp2 as decompositions into
 * other ops, with PyTorch's checks, words and rounding.
 */
#include <config.h>

#include <math.h>

#include "ops/nn_internal.h"

/* at::isclose: self == other, or (equal_nan) both NaN, or a finite
 * |self - other| <= atol + |rtol * other|, computed in self's dtype (bool and
 * integers in the default float dtype) with PyTorch's rounding between steps. */
struct tn_tensor *tn__composite_isclose(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *other, double rtol, double atol,
                                        bool equal_nan)
{
    (void)ks;
    if (self->dtype != other->dtype) {
        tn_set_error(TN_EDTYPE, "%s did not match %s", tn_dtype_info(self->dtype)->c10_name,
                     tn_dtype_info(other->dtype)->c10_name);
        return NULL;
    }
    if (!(rtol >= 0)) {
        tn_set_error(TN_EINVAL, "rtol must be greater than or equal to zero, but got %g", rtol);
        return NULL;
    }
    if (!(atol >= 0)) {
        tn_set_error(TN_EINVAL, "atol must be greater than or equal to zero, but got %g", atol);
        return NULL;
    }
    bool fl = tn_dtype_is_floating(self->dtype);
    struct tn_keep k = {0};
    struct tn_tensor *close, *t1, *t2, *cs, *co, *allowed, *actual;
    TN_KEEP(&k, close, tn_eq(self, other));
    if (equal_nan && fl) {
        TN_KEEP(&k, t1, tn_isnan(self));
        TN_KEEP(&k, t2, tn_isnan(other));
        TN_KEEP(&k, t1, tn_logical_and(t1, t2));
        TN_KEEP(&k, close, tn_logical_or(close, t1));
    }
    if (rtol == 0 && atol == 0)
        return tn__keep_out(&k, close);
    /* integers too, so that a difference never wraps */
    enum tn_dtype cd = fl || tn_dtype_is_complex(self->dtype) ? self->dtype
                                                              : tn_get_default_dtype();
    TN_KEEP(&k, cs, tn_to_dtype(self, cd));
    TN_KEEP(&k, co, tn_to_dtype(other, cd));
    TN_KEEP(&k, t1, tn_mul_scalar(co, tn_float(rtol)));
    TN_KEEP(&k, t1, tn_abs(t1));
    TN_KEEP(&k, allowed, tn_add_scalar(t1, tn_float(atol), tn_int(1)));
    TN_KEEP(&k, t1, tn_sub(cs, co, tn_int(1)));
    TN_KEEP(&k, actual, tn_abs(t1));
    TN_KEEP(&k, t1, tn_le(actual, allowed)); /* false where actual is NaN */
    TN_KEEP(&k, t2, tn_isinf(actual));
    TN_KEEP(&k, t2, tn_logical_not(t2));
    TN_KEEP(&k, t1, tn_logical_and(t1, t2));
    TN_KEEP(&k, close, tn_logical_or(close, t1));
    return tn__keep_out(&k, close);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* max(a, b) + log1p(base^-|a - b|) / ln(base), and a itself where a is
 * infinite and equal to b (PyTorch's kernel), in float32 for bfloat16 and
 * float16 with one rounding at the end as PyTorch 2.x's kernel does. */
static struct tn_tensor *logaddexp_base(const char *kernel, const struct tn_tensor *self,
                                        const struct tn_tensor *other, bool base2)
{
    const struct tn_tensor *ts[2] = {self, other};
    enum tn_dtype dt = tn_result_type(ts, 2, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    if (tn__nn_check_dtype(kernel, dt, tn_dtype_is_floating(dt)) < 0)
        return NULL;
    enum tn_dtype cd = (dt == TN_BFLOAT16 || dt == TN_FLOAT16) ? TN_FLOAT32 : dt;
    struct tn_keep k = {0};
    struct tn_tensor *a, *b, *t, *m, *c, *r;
    TN_KEEP(&k, a, tn_to_dtype(self, cd));
    TN_KEEP(&k, b, tn_to_dtype(other, cd));
    TN_KEEP(&k, t, tn_sub(a, b, tn_int(1)));
    TN_KEEP(&k, t, tn_abs(t));
    TN_KEEP(&k, t, tn_neg(t));
    TN_KEEP(&k, t, base2 ? tn_exp2(t) : tn_exp(t));
    TN_KEEP(&k, t, tn_log1p(t));
    if (base2)
        TN_KEEP(&k, t, tn_mul_scalar(t, tn_float(1.0 / M_LN2)));
    TN_KEEP(&k, m, tn_maximum(a, b));
    TN_KEEP(&k, r, tn_add(m, t, tn_int(1)));
    TN_KEEP(&k, c, tn_isinf(a));
    TN_KEEP(&k, t, tn_eq(a, b));
    TN_KEEP(&k, c, tn_logical_and(c, t));
    TN_KEEP(&k, r, tn_where_self(c, a, r));
    TN_KEEP(&k, r, tn_to_dtype(r, dt));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_logaddexp(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *other)
{
    (void)ks;
    return logaddexp_base("logaddexp_cpu", self, other, false);
}

struct tn_tensor *tn__composite_logaddexp2(tn_keyset ks, const struct tn_tensor *self,
                                           const struct tn_tensor *other)
{
    (void)ks;
    return logaddexp_base("logaddexp2_cpu", self, other, true);
}
