/*
 * autograd/formulas.c: the hand-written helpers that formulas in
 * schemas/derivatives.yaml call where an expression would be long. Each is
 * written with the public ops, so what it computes records a graph of its
 * own under create_graph (second derivatives). Each returns a new tensor or
 * NULL with an error; arguments are borrowed.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"
#include "ops/internal.h"

/* Releases n tensors (NULL is fine): the ends of the helpers below. */
static void drop(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        tn_release(va_arg(ap, struct tn_tensor *));
    va_end(ap);
}

static bool all_dims(const int64_t *dim, int dim_len) { return !dim || dim_len == 0; }

/* Which dims of an ndim-dim tensor dim names (all for NULL or []). */
static int reduced_dims(const int64_t *dim, int dim_len, int ndim, bool *mask)
{
    memset(mask, 0, sizeof(bool) * TN_MAX_DIMS);
    if (all_dims(dim, dim_len)) {
        for (int d = 0; d < ndim; d++)
            mask[d] = true;
        return TN_OK;
    }
    for (int i = 0; i < dim_len; i++) {
        int d = tn_wrap_dim(dim[i], ndim);
        if (d < 0)
            return tn_last_status();
        mask[d] = true;
    }
    return TN_OK;
}

/* How many elements of `sizes` a reduction over dim folds into each
 * result, or -1 with the error of a bad dim. */
static int64_t reduced_count(const int64_t *sizes, int ndim, const int64_t *dim, int dim_len)
{
    bool mask[TN_MAX_DIMS];
    if (reduced_dims(dim, dim_len, ndim, mask) < 0)
        return -1;
    int64_t count = 1;
    for (int d = 0; d < ndim; d++)
        if (mask[d])
            count *= sizes[d];
    return count;
}

/* grad of a reduction's result, with the reduced dims back as size 1. */
static struct tn_tensor *restore_dims(const struct tn_tensor *grad, int ndim, const int64_t *dim,
                                      int dim_len, bool keepdim)
{
    bool mask[TN_MAX_DIMS];
    if (reduced_dims(dim, dim_len, ndim, mask) < 0)
        return NULL;
    if (keepdim || ndim == 0)
        return tn_retain((struct tn_tensor *)grad);
    int64_t shape[TN_MAX_DIMS];
    for (int d = 0, k = 0; d < ndim; d++)
        shape[d] = mask[d] ? 1 : grad->sizes[k++];
    return tn_reshape(grad, shape, ndim);
}

struct tn_tensor *tn__sum_to(const struct tn_tensor *grad, const int64_t *sizes, int ndim)
{
    int lead = grad->ndim - ndim;
    int64_t dims[TN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < grad->ndim; d++)
        if (d < lead || (sizes[d - lead] == 1 && grad->sizes[d] != 1))
            dims[n++] = d;
    if (!n)
        return tn_reshape(grad, sizes, ndim);
    struct tn_tensor *s = tn_sum_dim_intlist(grad, dims, n, true, TN_DTYPE_UNSET);
    if (!s)
        return NULL;
    struct tn_tensor *r = tn_reshape(s, sizes, ndim);
    tn_release(s);
    return r;
}

struct tn_tensor *tn__sum_backward(const struct tn_tensor *grad, const int64_t *sizes, int ndim,
                                   const int64_t *dim, int dim_len, bool keepdim)
{
    struct tn_tensor *g = restore_dims(grad, ndim, dim, dim_len, keepdim);
    if (!g)
        return NULL;
    struct tn_tensor *r = tn_expand(g, sizes, ndim);
    tn_release(g);
    return r;
}

struct tn_tensor *tn__mean_backward(const struct tn_tensor *grad, const int64_t *sizes, int ndim,
                                    const int64_t *dim, int dim_len, bool keepdim)
{
    int64_t count = reduced_count(sizes, ndim, dim, dim_len);
    if (count < 0)
        return NULL;
    struct tn_tensor *s = tn__sum_backward(grad, sizes, ndim, dim, dim_len, keepdim);
    if (!s)
        return NULL;
    struct tn_tensor *r = tn_div_scalar(s, tn_int(count));
    tn_release(s);
    return r;
}

/* mean()'s: grad spread over every element, divided by their count */
struct tn_tensor *tn__mean_all_bw(const struct tn_tensor *grad, const int64_t *sizes, int ndim)
{
    return tn__mean_backward(grad, sizes, ndim, NULL, 0, false);
}

/* amax/amin: the gradient shared evenly between the elements that tie
 * for the extreme, as PyTorch's scale_grad_by_count. */
struct tn_tensor *tn__amax_backward(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    const struct tn_tensor *result, const int64_t *dim,
                                    int dim_len, bool keepdim)
{
    struct tn_tensor *g = NULL, *r = NULL, *mask = NULL, *cnt = NULL;
    STEP(g, restore_dims(grad, self->ndim, dim, dim_len, keepdim));
    STEP(r, restore_dims(result, self->ndim, dim, dim_len, keepdim));
    STEP(mask, tn_eq(self, r));
    int64_t all[TN_MAX_DIMS];
    for (int d = 0; d < self->ndim; d++)
        all[d] = d;
    STEP(cnt, all_dims(dim, dim_len)
                  ? tn_sum_dim_intlist(mask, all, self->ndim, true, grad->dtype)
                  : tn_sum_dim_intlist(mask, dim, dim_len, true, grad->dtype));
    STEP(g, tn_div(g, cnt));
    STEP(g, tn_mul(g, mask));
    drop(3, r, mask, cnt);
    return g;
fail:
    drop(4, g, r, mask, cnt);
    return NULL;
}

struct tn_tensor *tn__aminmax_bw(const struct tn_tensor *grad_min, const struct tn_tensor *grad_max,
                                 const struct tn_tensor *self, const struct tn_tensor *min,
                                 const struct tn_tensor *max, const int64_t *dim, bool keepdim)
{
    int n = dim && self->ndim ? 1 : 0;
    struct tn_tensor *a = tn__amax_backward(grad_min, self, min, dim, n, keepdim);
    struct tn_tensor *b = a ? tn__amax_backward(grad_max, self, max, dim, n, keepdim) : NULL;
    struct tn_tensor *r = b ? tn_add(a, b, tn_int(1)) : NULL;
    drop(2, a, b);
    return r;
}

/* max() and min(): amax's rule over every element (PyTorch's
 * evenly_distribute_backward) */
struct tn_tensor *tn__evenly_distribute_bw(const struct tn_tensor *grad,
                                           const struct tn_tensor *self,
                                           const struct tn_tensor *result)
{
    return tn__amax_backward(grad, self, result, NULL, 0, false);
}

/* var.correction: 2 (self - mean) / (N - correction) times grad (restored
 * to self's dims), N the count of elements reduced into each result */
struct tn_tensor *tn__var_backward(const struct tn_tensor *grad, const struct tn_tensor *self,
                                   const int64_t *dim, int dim_len,
                                   const struct tn_scalar *correction, bool keepdim)
{
    int64_t n = reduced_count(self->sizes, self->ndim, dim, dim_len);
    if (n < 0)
        return NULL;
    double c = correction ? tn_scalar_to_double(*correction) : 1.0;
    struct tn_tensor *g = NULL, *mean = NULL, *d = NULL;
    STEP(g, restore_dims(grad, self->ndim, dim, dim_len, keepdim));
    STEP(mean, tn_mean_dim(self, dim, dim_len, true, TN_DTYPE_UNSET));
    STEP(d, tn_sub(self, mean, tn_int(1)));
    STEP(d, tn_mul_scalar(d, tn_float(2.0 / (double)(n - c))));
    STEP(g, tn_mul(g, d));
    drop(2, mean, d);
    return g;
fail:
    drop(3, g, mean, d);
    return NULL;
}

/* std.correction: var's gradient of grad / (2 result) */
struct tn_tensor *tn__std_backward(const struct tn_tensor *result, const struct tn_tensor *grad,
                                   const struct tn_tensor *self, const int64_t *dim,
                                   int dim_len, const struct tn_scalar *correction, bool keepdim)
{
    struct tn_tensor *h = NULL, *g = NULL;
    STEP(h, tn_mul_scalar(result, tn_int(2)));
    STEP(h, tn_div(grad, h));
    STEP(g, tn__var_backward(h, self, dim, dim_len, correction, keepdim));
    drop(1, h);
    return g;
fail:
    drop(2, h, g);
    return NULL;
}

/* the second derivative of softmax, for `output` of _softmax_backward_data:
 * grad (grad_output - sum(grad_output output)) - grad_output sum(grad output) */
struct tn_tensor *tn__softmax_double_bw(const struct tn_tensor *grad,
                                        const struct tn_tensor *grad_output,
                                        const struct tn_tensor *output, int64_t dim)
{
    struct tn_tensor *a = NULL, *s = NULL, *b = NULL;
    STEP(a, tn_mul(grad_output, output));
    STEP(s, tn_sum_dim_intlist(a, &dim, 1, true, TN_DTYPE_UNSET));
    STEP(a, tn_sub(grad_output, s, tn_int(1)));
    STEP(a, tn_mul(grad, a));
    STEP(b, tn_mul(grad, output));
    STEP(s, tn_sum_dim_intlist(b, &dim, 1, true, TN_DTYPE_UNSET));
    STEP(b, tn_mul(grad_output, s));
    STEP(a, tn_sub(a, b, tn_int(1)));
    drop(2, s, b);
    return a;
fail:
    drop(3, a, s, b);
    return NULL;
}

/* _log_softmax_backward_data is not symmetric in grad_output: its
 * transpose is grad - sum(grad exp(output)) */
struct tn_tensor *tn__log_softmax_grad_output_bw(const struct tn_tensor *grad,
                                                 const struct tn_tensor *output, int64_t dim)
{
    struct tn_tensor *e = NULL;
    STEP(e, tn_exp(output));
    STEP(e, tn_mul(grad, e));
    STEP(e, tn_sum_dim_intlist(e, &dim, 1, true, TN_DTYPE_UNSET));
    STEP(e, tn_sub(grad, e, tn_int(1)));
    return e;
fail:
    tn_release(e);
    return NULL;
}

/* the same for log_softmax: -grad exp(output) sum(grad_output) */
struct tn_tensor *tn__log_softmax_double_bw(const struct tn_tensor *grad,
                                            const struct tn_tensor *grad_output,
                                            const struct tn_tensor *output, int64_t dim)
{
    struct tn_tensor *s = NULL, *e = NULL;
    STEP(s, tn_sum_dim_intlist(grad_output, &dim, 1, true, TN_DTYPE_UNSET));
    STEP(e, tn_exp(output));
    STEP(e, tn_mul(e, s));
    STEP(e, tn_mul(grad, e));
    STEP(e, tn_neg(e));
    tn_release(s);
    return e;
fail:
    drop(2, s, e);
    return NULL;
}

struct tn_tensor *tn__zeros(const struct tn_tensor *like)
{
    return tn_zeros_like(like, TN_DTYPE_UNSET);
}

struct tn_tensor *tn__scale(const struct tn_tensor *t, struct tn_scalar s)
{
    if ((s.kind == TN_SCALAR_INT && s.v.i == 1) || (s.kind == TN_SCALAR_FLOAT && s.v.f == 1.0))
        return tn_retain((struct tn_tensor *)t);
    return tn_mul_scalar(t, s);
}

/* grad where mask holds, else 0 */
static struct tn_tensor *masked(const struct tn_tensor *grad, struct tn_tensor *mask)
{
    if (!mask)
        return NULL;
    struct tn_tensor *r = tn_mul(grad, mask);
    tn_release(mask);
    return r;
}

struct tn_tensor *tn__gelu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                              const char *approximate)
{
    struct tn_tensor *a = NULL, *b = NULL, *c = NULL;
    if (approximate && !strcmp(approximate, "tanh")) {
        const double k = sqrt(2.0 / M_PI), k3 = 0.044715;
        /* inner = k (x + k3 x^3); t = tanh(inner);
         * d = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 k3 x^2) */
        STEP(a, tn_mul(self, self));                          /* x^2 */
        STEP(b, tn_mul_scalar(a, tn_float(k3)));
        STEP(b, tn_add_scalar(b, tn_float(1), tn_int(1)));    /* 1 + k3 x^2 */
        STEP(b, tn_mul(b, self));
        STEP(b, tn_mul_scalar(b, tn_float(k)));               /* inner */
        STEP(b, tn_tanh(b));                                  /* t */
        STEP(c, tn_mul(b, b));
        STEP(c, tn_sub_scalar(c, tn_float(1), tn_int(1)));
        STEP(c, tn_neg(c));                                   /* 1 - t^2 */
        STEP(a, tn_mul_scalar(a, tn_float(3 * k3)));
        STEP(a, tn_add_scalar(a, tn_float(1), tn_int(1)));    /* 1 + 3 k3 x^2 */
        STEP(c, tn_mul(c, a));
        STEP(c, tn_mul(c, self));
        STEP(c, tn_mul_scalar(c, tn_float(0.5 * k)));
        STEP(b, tn_add_scalar(b, tn_float(1), tn_int(1)));
        STEP(b, tn_mul_scalar(b, tn_float(0.5)));
        STEP(b, tn_add(b, c, tn_int(1)));
    } else {
        /* Phi(x) + x phi(x) */
        STEP(a, tn_mul_scalar(self, tn_float(M_SQRT1_2)));
        STEP(a, tn_erf(a));
        STEP(a, tn_add_scalar(a, tn_float(1), tn_int(1)));
        STEP(a, tn_mul_scalar(a, tn_float(0.5)));
        STEP(c, tn_mul(self, self));
        STEP(c, tn_mul_scalar(c, tn_float(-0.5)));
        STEP(c, tn_exp(c));
        STEP(c, tn_mul(c, self));
        STEP(c, tn_mul_scalar(c, tn_float(0.5 * M_2_SQRTPI * M_SQRT1_2)));
        STEP(b, tn_add(a, c, tn_int(1)));
    }
    STEP(b, tn_mul(grad, b));
    drop(2, a, c);
    return b;
fail:
    drop(3, a, b, c);
    return NULL;
}

/* silu: s (1 + x (1 - s)), s = sigmoid(x) */
struct tn_tensor *tn__silu_bw(const struct tn_tensor *grad, const struct tn_tensor *self)
{
    struct tn_tensor *s = NULL, *a = NULL;
    STEP(s, tn_sigmoid(self));
    STEP(a, tn_sub_scalar(s, tn_float(1), tn_int(1)));
    STEP(a, tn_mul(a, self));
    STEP(a, tn_sub_scalar(a, tn_float(1), tn_int(1)));
    STEP(a, tn_mul(a, s));
    STEP(a, tn_mul(grad, a));
    STEP(a, tn_neg(a));
    tn_release(s);
    return a;
fail:
    drop(2, s, a);
    return NULL;
}

/* angle (PyTorch's angle_backward): grad * i z / |z|^2 for a complex z, 0
 * where z is 0; zeros for a real self */
struct tn_tensor *tn__angle_bw(const struct tn_tensor *grad, const struct tn_tensor *self)
{
    if (!tn_dtype_is_complex(self->dtype))
        return tn_zeros_like(self, self->dtype);
    struct tn_tensor *a = NULL, *r = NULL, *z = NULL;
    STEP(r, tn_abs(self));
    STEP(r, tn_mul(r, r));
    STEP(a, tn_mul(grad, self));
    STEP(a, tn_mul_scalar(a, tn_complex(0, 1)));
    STEP(a, tn_div(a, r));
    STEP(z, tn_eq_scalar(self, tn_int(0)));
    struct tn_tensor *out = tn_masked_fill_scalar(a, z, tn_int(0));
    drop(3, a, r, z);
    return out;
fail:
    drop(3, a, r, z);
    return NULL;
}

/* mish: tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x) */
struct tn_tensor *tn__mish_bw(const struct tn_tensor *grad, const struct tn_tensor *self)
{
    struct tn_tensor *t = NULL, *a = NULL, *s = NULL;
    STEP(t, tn_softplus(self, tn_int(1), tn_int(20)));
    STEP(t, tn_tanh(t));
    STEP(a, tn_mul(t, t));
    STEP(a, tn_sub_scalar(a, tn_float(1), tn_int(1)));
    STEP(s, tn_sigmoid(self));
    STEP(s, tn_mul(s, self));
    STEP(a, tn_mul(a, s));
    STEP(a, tn_sub(t, a, tn_int(1)));
    STEP(a, tn_mul(grad, a));
    drop(2, t, s);
    return a;
fail:
    drop(3, t, a, s);
    return NULL;
}

/* grad, tied to self in the graph while one is recorded (create_graph):
 * threshold_backward(grad, self, -inf) is grad wherever self > -inf, and
 * its derivative for self is zeros. PyTorch's leaky_relu_backward and
 * hardtanh_backward are ops whose derivative for self is zeros, so their
 * first gradient requires grad and a second one through it is zeros; the
 * masks and where of the helpers below alone would leave no path to self
 * (the second grad would fail). Nothing extra without a graph. */
static struct tn_tensor *linked(const struct tn_tensor *grad, const struct tn_tensor *self)
{
    if (!tn_is_grad_enabled() || !self->requires_grad)
        return tn_retain((struct tn_tensor *)grad);
    return tn_threshold_backward(grad, self, tn_float(-INFINITY));
}

struct tn_tensor *tn__leaky_relu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    struct tn_scalar slope)
{
    struct tn_tensor *m = NULL, *g2 = NULL, *g1 = NULL;
    STEP(m, tn_gt_scalar(self, tn_int(0)));
    STEP(g2, tn_mul_scalar(grad, slope));
    STEP(g1, linked(grad, self));
    STEP(g2, tn_where_self(m, g1, g2));
    drop(2, m, g1);
    return g2;
fail:
    drop(3, m, g2, g1);
    return NULL;
}

struct tn_tensor *tn__hardtanh_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  struct tn_scalar lo, struct tn_scalar hi)
{
    struct tn_tensor *a = NULL, *b = NULL;
    STEP(a, tn_gt_scalar(self, lo));
    STEP(b, tn_lt_scalar(self, hi));
    STEP(a, tn_logical_and(a, b));
    STEP(b, linked(grad, self));
    struct tn_tensor *r = masked(b, a);
    tn_release(b);
    return r;
fail:
    drop(2, a, b);
    return NULL;
}

/* elu(x) = scale x for x > 0, else scale alpha (exp(input_scale x) - 1) */
struct tn_tensor *tn__elu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                             struct tn_scalar alpha, struct tn_scalar scale,
                             struct tn_scalar input_scale)
{
    double a = tn_scalar_to_double(alpha), s = tn_scalar_to_double(scale),
           is = tn_scalar_to_double(input_scale);
    struct tn_tensor *m = NULL, *neg = NULL, *pos = NULL;
    STEP(m, tn_gt_scalar(self, tn_int(0)));
    STEP(neg, tn_mul_scalar(self, tn_float(is)));
    STEP(neg, tn_exp(neg));
    STEP(neg, tn_mul_scalar(neg, tn_float(is * a * s)));
    STEP(neg, tn_mul(grad, neg));
    STEP(pos, tn_mul_scalar(grad, tn_float(s)));
    STEP(pos, tn_where_self(m, pos, neg));
    drop(2, m, neg);
    return pos;
fail:
    drop(3, m, neg, pos);
    return NULL;
}

/* softplus: grad sigmoid(beta x), or grad where beta x > threshold */
struct tn_tensor *tn__softplus_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  struct tn_scalar beta, struct tn_scalar threshold)
{
    struct tn_tensor *bx = NULL, *m = NULL, *s = NULL;
    STEP(bx, tn_mul_scalar(self, beta));
    STEP(m, tn_gt_scalar(bx, threshold));
    STEP(s, tn_sigmoid(bx));
    STEP(s, tn_mul(grad, s));
    STEP(s, tn_where_self(m, grad, s));
    drop(2, bx, m);
    return s;
fail:
    drop(3, bx, m, s);
    return NULL;
}

/* maximum/minimum: the gradient goes to the larger (smaller) operand, half
 * to each on a tie. which: 0 for self, 1 for other; sign 1 for maximum. */
struct tn_tensor *tn__minmax_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                const struct tn_tensor *other, int which, int sign)
{
    const struct tn_tensor *a = which ? other : self, *b = which ? self : other;
    struct tn_tensor *win = NULL, *tie = NULL, *w = NULL;
    STEP(win, sign > 0 ? tn_gt(a, b) : tn_lt(a, b));
    STEP(tie, tn_eq(a, b));
    STEP(w, tn_mul_scalar(tie, tn_float(0.5)));
    STEP(w, tn_add(w, win, tn_int(1)));
    STEP(w, tn_mul(grad, w));
    drop(2, win, tie);
    return w;
fail:
    drop(3, win, tie, w);
    return NULL;
}

/* clamp: grad where min <= x <= max */
struct tn_tensor *tn__clamp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                               const struct tn_scalar *min, const struct tn_scalar *max)
{
    struct tn_tensor *m = NULL, *b = NULL;
    STEP(m, tn_ones_like(self, TN_BOOL));
    if (min) {
        STEP(b, tn_ge_scalar(self, *min));
        STEP(m, tn_logical_and(m, b));
    }
    if (max) {
        STEP(b, tn_le_scalar(self, *max));
        STEP(m, tn_logical_and(m, b));
    }
    tn_release(b);
    return masked(grad, m);
fail:
    drop(2, m, b);
    return NULL;
}

/* logit: grad / (x (1 - x)) inside [eps, 1 - eps] and 0 outside it, as
 * PyTorch's infinitely_differentiable_logit_backward; without eps, NaN
 * outside [0, 1]. */
struct tn_tensor *tn__logit_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                               const double *eps)
{
    double lo = eps ? *eps : 0.0, hi = 1.0 - lo;
    struct tn_tensor *m = NULL, *b = NULL, *d = NULL, *r = NULL;
    STEP(m, tn_ge_scalar(self, tn_float(lo)));
    STEP(b, tn_le_scalar(self, tn_float(hi)));
    STEP(m, tn_logical_and(m, b));
    STEP(d, tn_neg(self));
    STEP(d, tn_add_scalar(d, tn_int(1), tn_int(1)));
    STEP(d, tn_mul(self, d));
    STEP(r, tn_div(grad, d));
    STEP(r, tn_where_scalarother(m, r, tn_float(eps ? 0.0 : NAN)));
    drop(3, m, b, d);
    return r;
fail:
    drop(4, m, b, d, r);
    return NULL;
}

/* div with a rounding mode: a step function (zero gradient) unless None */
struct tn_tensor *tn__div_mode_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  const struct tn_tensor *other, const char *mode, int which)
{
    if (mode)
        return tn_zeros_like(which ? other : self, grad->dtype);
    if (!which)
        return tn_div(grad, other);
    struct tn_tensor *a = NULL;
    STEP(a, tn_mul(grad, self));
    STEP(a, tn_div(a, other));
    STEP(a, tn_div(a, other));
    STEP(a, tn_neg(a));
    return a;
fail:
    tn_release(a);
    return NULL;
}

/* cumsum: the reversed cumulative sum, sum(grad) - cumsum(grad) + grad */
struct tn_tensor *tn__cumsum_bw(const struct tn_tensor *grad, int64_t dim)
{
    if (grad->ndim == 0)
        return tn_retain((struct tn_tensor *)grad);
    struct tn_tensor *s = NULL, *c = NULL;
    STEP(s, tn_sum_dim_intlist(grad, &dim, 1, true, TN_DTYPE_UNSET));
    STEP(c, tn_cumsum(grad, dim, TN_DTYPE_UNSET));
    STEP(s, tn_sub(s, c, tn_int(1)));
    STEP(s, tn_add(s, grad, tn_int(1)));
    tn_release(c);
    return s;
fail:
    drop(2, s, c);
    return NULL;
}

/* logcumsumexp: PyTorch's logcumsumexp_backward (real dtypes): the positive
 * and the negative parts of grad in log space, each reverse-logcumsumexp'd
 * after subtracting result, plus self, exponentiated */
static struct tn_tensor *rev_lcse(const struct tn_tensor *x, int64_t dim)
{
    struct tn_tensor *f = tn_flip(x, &dim, 1), *c = f ? tn_logcumsumexp(f, dim) : NULL;
    struct tn_tensor *r = c ? tn_flip(c, &dim, 1) : NULL;
    tn_release(f), tn_release(c);
    return r;
}

static struct tn_tensor *lcse_part(const struct tn_tensor *grad, const struct tn_tensor *logabs,
                                   const struct tn_tensor *self, const struct tn_tensor *result,
                                   int64_t dim, bool positive)
{
    double lowest = grad->dtype == TN_FLOAT64   ? -DBL_MAX
                    : grad->dtype == TN_FLOAT32 ? -FLT_MAX
                    : grad->dtype == TN_FLOAT16 ? -65504.0
                                                : -3.3895313892515355e38;
    struct tn_tensor *m = NULL, *p = NULL;
    STEP(m, positive ? tn_gt_scalar(grad, tn_int(0)) : tn_lt_scalar(grad, tn_int(0)));
    STEP(p, tn_where_scalarother(m, logabs, tn_float(lowest)));
    STEP(p, tn_sub(p, result, tn_int(1)));
    STEP(p, rev_lcse(p, dim));
    STEP(p, tn_add(p, self, tn_int(1)));
    STEP(p, tn_exp(p));
    tn_release(m);
    return p;
fail:
    drop(2, m, p);
    return NULL;
}

struct tn_tensor *tn__logcumsumexp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                      const struct tn_tensor *result, int64_t dim)
{
    if (grad->ndim == 0 || tn_numel(grad) == 0)
        return tn_retain((struct tn_tensor *)grad);
    struct tn_tensor *la = NULL, *pos = NULL, *neg = NULL;
    STEP(la, tn_abs(grad));
    STEP(la, tn_log(la));
    STEP(pos, lcse_part(grad, la, self, result, dim, true));
    STEP(neg, lcse_part(grad, la, self, result, dim, false));
    STEP(pos, tn_sub(pos, neg, tn_int(1)));
    drop(2, la, neg);
    return pos;
fail:
    drop(3, la, pos, neg);
    return NULL;
}

/* polygamma(n, x): grad * polygamma(n + 1, x) */
struct tn_tensor *tn__polygamma_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  int64_t n)
{
    struct tn_tensor *p = tn_polygamma(n + 1, self), *r = NULL;
    if (p) {
        r = tn_mul(grad, p);
        tn_release(p);
    }
    return r;
}

/* pow(self, exponent) for self: grad exponent self^(exponent-1), 0 where
 * exponent is 0 */
struct tn_tensor *tn__pow_self_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  const struct tn_tensor *exponent)
{
    struct tn_tensor *e1 = NULL, *p = NULL, *z = NULL;
    if ((exponent->flags & TN_TENSOR_WRAPPED_NUMBER) && tn_dtype_is_floating(exponent->dtype)) {
        /* a Python float: exponent - 1 as a float64 wrapped number too
         * (the two scalars' difference would promote to the default
         * float32, and pow(x, 1/3)'s gradient lose digits at float64) */
        STEP(e1, tn_scalar_tensor(tn_float(tn_item_double(exponent) - 1), TN_FLOAT64));
        e1->flags |= TN_TENSOR_WRAPPED_NUMBER;
    } else {
        STEP(e1, tn_sub_scalar(exponent, tn_int(1), tn_int(1)));
    }
    STEP(p, tn_pow(self, e1));
    STEP(p, tn_mul(p, exponent));
    STEP(p, tn_mul(grad, p));
    STEP(z, tn_ne_scalar(exponent, tn_int(0)));
    STEP(e1, tn_zeros_like(p, TN_DTYPE_UNSET));
    STEP(e1, tn_where_self(z, p, e1));
    drop(2, p, z);
    return e1;
fail:
    drop(3, e1, p, z);
    return NULL;
}

/* pow.Tensor_Scalar for self: pow.Tensor_Tensor's formula with the
 * exponent a wrapped number, as the op computes (so x ** 2 differentiates
 * as before it had an entry, bit for bit); PyTorch's pow_backward: grad
 * exponent self^(exponent-1), 0 for exponent 0 */
struct tn_tensor *tn__pow_scalar_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    struct tn_scalar exponent)
{
    struct tn_tensor *e = tn__wrapped_scalar(exponent);
    struct tn_tensor *r = e ? tn__pow_self_bw(grad, self, e) : NULL;
    tn_release(e);
    return r;
}

/* pow for exponent: grad result log(self), 0 where self is 0 and exponent
 * is not negative (PyTorch's pow_backward_exponent: -inf at 0 with a
 * negative exponent, NaN with a NaN one) */
struct tn_tensor *tn__pow_exp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                 const struct tn_tensor *exponent,
                                 const struct tn_tensor *result)
{
    struct tn_tensor *l = NULL, *m = NULL, *z = NULL;
    STEP(l, tn_log(self));
    STEP(l, tn_mul(l, result));
    STEP(l, tn_mul(grad, l));
    STEP(m, tn_eq_scalar(self, tn_int(0)));
    STEP(z, tn_ge_scalar(exponent, tn_int(0)));
    STEP(m, tn_logical_and(m, z));
    STEP(z, tn_zeros_like(l, TN_DTYPE_UNSET));
    STEP(z, tn_where_self(m, z, l));
    drop(2, l, m);
    return z;
fail:
    drop(3, l, m, z);
    return NULL;
}
