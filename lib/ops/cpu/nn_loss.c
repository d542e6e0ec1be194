/*
 * ops/cpu/nn_loss.c: CPU kernels of nll_loss_forward and nll_loss_backward
 * (class indices over (N, C) or (C) log-probabilities, class weights,
 * ignore_index, PyTorch's checks and words), mse_loss and its backward,
 * binary_cross_entropy and its backward, smooth_l1_loss and its backward.
 * Sums run in float64 and round once into the input's dtype.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"

/* PyTorch's checks of nll_loss_forward, in its order; *n and *c receive the
 * batch size (1 without a batch dim) and the class count. */
static int nll_check(const struct tn_tensor *self, const struct tn_tensor *target,
                     const struct tn_tensor *weight, int64_t *n, int64_t *c)
{
    char a[128], b[128];
    if (self->ndim < 1 || self->ndim > 2)
        return tn_set_error(TN_ESHAPE, "input tensor should be 1D or 2D");
    if (target->ndim > 1)
        return tn_set_error(TN_ESHAPE, "0D or 1D target tensor expected, multi-target not "
                            "supported");
    bool no_batch = self->ndim == 1 && target->ndim == 0;
    if (!no_batch && (target->ndim == 0 || self->sizes[0] != target->sizes[0]))
        return tn_set_error(TN_ESHAPE, "size mismatch (got input: %s, target: %s)",
                            tn_shape_format(self->sizes, self->ndim, a, sizeof a),
                            tn_shape_format(target->sizes, target->ndim, b, sizeof b));
    *c = self->sizes[self->ndim - 1];
    *n = no_batch ? 1 : self->sizes[0];
    if (weight && (weight->ndim != 1 || tn_numel(weight) != *c))
        return tn_set_error(TN_ESHAPE, "weight tensor should be defined either for all %lld "
                            "classes or no classes but got weight tensor of shape: %s",
                            (long long)*c, tn_shape_format(weight->sizes, weight->ndim, a, sizeof a));
    if (target->dtype != TN_INT64 && target->dtype != TN_UINT8) /* (2.x's words) */
        return tn_set_error(TN_EDTYPE, "expected target dtype to be Long or Byte, but got %s",
                            tn_dtype_info(target->dtype)->c10_name);
    return tn__nn_check_float("nll_loss_out_frame", self);
}

/* The targets as int64, each checked against the class count. */
static struct tn_tensor *nll_targets(const struct tn_tensor *target, int64_t c, int64_t ignore)
{
    struct tn_tensor *t64 = tn_to_dtype(target, TN_INT64), *t = t64 ? tn_contiguous(t64) : NULL;
    tn_release(t64);
    if (!t)
        return NULL;
    const int64_t *tp = tn_data(t);
    for (int64_t i = 0; i < tn_numel(t); i++)
        if (tp[i] != ignore && (tp[i] < 0 || tp[i] >= c)) {
            tn_set_error(TN_EINVAL, "Target %lld is out of bounds.", (long long)tp[i]);
            tn_release(t);
            return NULL;
        }
    return t;
}

#define NLL_LEVELS 8 /* PyTorch's cascade_sum_num_levels */

int tn__cpu_nll_loss_forward(tn_keyset ks, const struct tn_tensor *self,
                             const struct tn_tensor *target, const struct tn_tensor *weight,
                             int64_t reduction, int64_t ignore_index, struct tn_tensor **output,
                             struct tn_tensor **total_weight)
{
    int64_t n, c;
    int rc = nll_check(self, target, weight, &n, &c);
    if (rc < 0)
        return rc;
    struct tn_tensor *t = nll_targets(target, c, ignore_index), *x = tn__nn_f64(self);
    struct tn_tensor *w = tn__nn_f64(weight);
    bool none = reduction == TN_REDUCTION_NONE && self->ndim == 2;
    struct tn_tensor *out = tn__nn_zeros64(&n, none ? 1 : 0), *tw = tn__nn_zeros64(NULL, 0);
    if (!t || !x || (weight && !w) || !out || !tw) {
        tn_release(out);
        tn_release(tw);
        return tn__nn_drop(tn_last_status(), t, x, w, NULL);
    }
    const int64_t *tp = tn_data(t);
    const double *xp = tn_data(x), *wp = w ? tn_data(w) : NULL;
    double *op = tn_data(out), wsum = 0, sum = 0;
    enum tn_dtype dt = self->dtype;
    if (none || self->ndim == 1) {
        for (int64_t i = 0; i < n; i++) {
            if (tp[i] == ignore_index)
                continue;
            double wi = wp ? wp[tp[i]] : 1.0, l = tn__round_to(-(wi * xp[i * c + tp[i]]), dt);
            if (none)
                op[i] = l;
            sum += l;
            wsum += wi;
        }
    } else {
        /* PyTorch's cascade sum in the input's dtype (nll_loss_out_frame):
         * bfloat16 rounds after every step, and so must we to give its
         * values; the loss of element i subtracted from level 0, whose
         * levels carry up at every multiple of 2^(level_power*(j+1)) */
        double lsum[NLL_LEVELS] = {0}, psum[NLL_LEVELS] = {0};
        int64_t ignored = 0, power = 0;
        while (((int64_t)1 << power) < n)
            power++;
        power = power / NLL_LEVELS > 4 ? power / NLL_LEVELS : 4;
        int64_t mask = ((int64_t)1 << power) - 1;
        for (int64_t i = 0; i < n; i++) {
            if (tp[i] == ignore_index) {
                ignored++;
                continue;
            }
            double xi = xp[i * c + tp[i]];
            if (wp) {
                lsum[0] = tn__round_to(lsum[0] - tn__round_to(xi * wp[tp[i]], dt), dt);
                psum[0] = tn__round_to(psum[0] + wp[tp[i]], dt);
            } else {
                lsum[0] = tn__round_to(lsum[0] - xi, dt);
            }
            for (int j = 0; j + 1 < NLL_LEVELS && (i & (mask << (j * power))) == 0; j++) {
                lsum[j + 1] = tn__round_to(lsum[j + 1] + lsum[j], dt);
                psum[j + 1] = tn__round_to(psum[j + 1] + psum[j], dt);
                lsum[j] = psum[j] = 0;
            }
        }
        wsum = wp ? 0 : tn__round_to((double)(n - ignored), dt);
        for (int j = 0; j < NLL_LEVELS; j++) {
            sum = tn__round_to(sum + lsum[j], dt);
            if (wp)
                wsum = tn__round_to(wsum + psum[j], dt);
        }
    }
    if (!none)
        op[0] = reduction == TN_REDUCTION_MEAN ? sum / wsum : sum;
    /* (reduction none leaves total_weight 0, as PyTorch does) */
    ((double *)tn_data(tw))[0] = none ? 0 : wsum;
    tn__nn_drop(0, t, x, w, NULL);
    *output = tn__nn_to(out, self->dtype);
    *total_weight = tn__nn_to(tw, self->dtype);
    if (!*output || !*total_weight) {
        tn_release(*output);
        tn_release(*total_weight);
        *output = *total_weight = NULL;
        return tn_last_status();
    }
    return TN_OK;
}

struct tn_tensor *tn__cpu_nll_loss_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                            const struct tn_tensor *self,
                                            const struct tn_tensor *target,
                                            const struct tn_tensor *weight, int64_t reduction,
                                            int64_t ignore_index,
                                            const struct tn_tensor *total_weight)
{
    int64_t n, c;
    if (nll_check(self, target, weight, &n, &c) < 0)
        return NULL;
    bool none = reduction == TN_REDUCTION_NONE && self->ndim == 2;
    if (tn_numel(grad_output) != (none ? n : 1)) {
        tn_set_error(TN_ESHAPE, "Expected a tensor of dimension 1 and tensor.size[0] == %lld but "
                     "got: dimension %d and tensor.size[0] == %lld", (long long)n, grad_output->ndim,
                     (long long)(grad_output->ndim ? grad_output->sizes[0] : 1));
        return NULL;
    }
    struct tn_tensor *t = nll_targets(target, c, ignore_index), *g = tn__nn_f64(grad_output);
    struct tn_tensor *w = tn__nn_f64(weight), *tw = tn__nn_f64(total_weight);
    struct tn_tensor *gi = tn__nn_zeros64(self->sizes, self->ndim);
    if (!t || !g || (weight && !w) || !tw || !gi) {
        tn_release(gi);
        tn__nn_drop(0, t, g, w, tw);
        return NULL;
    }
    const int64_t *tp = tn_data(t);
    const double *gp = tn_data(g), *wp = w ? tn_data(w) : NULL;
    double *ip = tn_data(gi), scale = reduction == TN_REDUCTION_MEAN ? ((double *)tn_data(tw))[0] : 1;
    for (int64_t i = 0; i < n; i++) {
        if (tp[i] == ignore_index)
            continue;
        double wi = wp ? wp[tp[i]] : 1.0;
        ip[i * c + tp[i]] = -wi * (none ? gp[i] : gp[0]) / (none ? 1 : scale);
    }
    tn__nn_drop(0, t, g, w, tw);
    return tn__nn_to(gi, self->dtype);
}

struct tn_tensor *tn__cpu_mse_loss(tn_keyset ks, const struct tn_tensor *self,
                                   const struct tn_tensor *target, int64_t reduction)
{
    if (tn__nn_check_loss_dtype("mse_cpu", self, target) < 0)
        return NULL;
    struct tn_tensor *d = tn_sub(self, target, tn_int(1)), *sq = d ? tn_mul(d, d) : NULL;
    struct tn_tensor *r = sq ? tn__nn_reduce_loss(sq, reduction) : NULL;
    tn__nn_drop(0, d, sq, NULL, NULL);
    return r;
}

struct tn_tensor *tn__cpu_mse_loss_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                            const struct tn_tensor *self,
                                            const struct tn_tensor *target, int64_t reduction)
{
    double norm = reduction == TN_REDUCTION_MEAN ? 2.0 / (double)tn_numel(self) : 2.0;
    struct tn_tensor *d = tn_sub(self, target, tn_int(1));
    struct tn_tensor *s = d ? tn__nn_scale(d, (norm)) : NULL;
    struct tn_tensor *r = s ? tn_mul(s, grad_output) : NULL;
    tn__nn_drop(0, d, s, NULL, NULL);
    return r;
}

/* ------------------------------------------------- binary_cross_entropy */

/* float32 in float32 (PyTorch's own arithmetic, and 4x faster than
 * through float64), the other dtypes in float64, rounded once */
static enum tn_dtype bce_ctype(const struct tn_tensor *self)
{
    return self->dtype == TN_FLOAT32 ? TN_FLOAT32 : TN_FLOAT64;
}

/* A contiguous copy of `t` in ct (squeezed first with `squeeze`) broadcast
 * to (sizes, nd), with the checks of PyTorch's TensorIterator (shapes, then
 * t's dtype against `dtype`: the BCE kernels take no promotion). */
static struct tn_tensor *bce_operand(const struct tn_tensor *t, bool squeeze, const int64_t *sizes,
                                     int nd, enum tn_dtype dtype, enum tn_dtype ct)
{
    int64_t b[TN_MAX_DIMS];
    char x[128], y[128];
    struct tn_tensor *s = squeeze ? tn_squeeze(t) : tn_retain((struct tn_tensor *)t), *e = NULL;
    if (!s)
        return NULL;
    int n = tn_broadcast_shapes(sizes, nd, s->sizes, s->ndim, b);
    if (n >= 0 && (n != nd || memcmp(b, sizes, sizeof(int64_t) * (size_t)nd) != 0))
        n = tn_set_error(TN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s",
                         tn_shape_format(sizes, nd, x, sizeof x),
                         tn_shape_format(b, n, y, sizeof y));
    if (n >= 0 && t->dtype != dtype)
        n = tn_set_error(TN_EDTYPE, "Found dtype %s but expected %s",
                         tn_dtype_info(t->dtype)->c10_name, tn_dtype_info(dtype)->c10_name);
    struct tn_tensor *f = n >= 0 ? tn__nn_as(s, ct) : NULL;
    if (f)
        e = tn_expand(f, sizes, nd);
    struct tn_tensor *r = e ? tn_contiguous(e) : NULL;
    tn__nn_drop(0, s, e, f, NULL);
    return r;
}

/* self's sizes without its ones: PyTorch runs both kernels over squeezed
 * operands, so that an input (3, 1) pairs with a target (3) or (1, 3). */
static int bce_squeezed(const struct tn_tensor *self, int64_t *sizes)
{
    int n = 0;
    for (int d = 0; d < self->ndim; d++)
        if (self->sizes[d] != 1)
            sizes[n++] = self->sizes[d];
    return n;
}

/* The loss elementwise (log1p(-x), as 2.x writes it; 1.13's log(1 - x)
 * differs in the last digits), each logarithm clamped at -100, times the
 * weight w (or NULL); a negative status with PyTorch's words for an input
 * or target outside [0, 1]. And the gradient: g (x - t) / max((1 - x) x,
 * eps) times the weight, over norm. */
#define TN_BCE(SFX, T, LOG, LOG1P, MAX)                                                        \
    static int bce_loss_##SFX(int64_t n, const T *x, const T *t, const T *w, T *l)            \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T v = x[i], y = t[i];                                                              \
            if (!(v >= 0 && v <= 1) || !(y >= 0 && y <= 1))                                    \
                return tn_set_error(TN_EINVAL, "all elements of %s should be between 0 and 1", \
                                    !(v >= 0 && v <= 1) ? "input" : "target");                 \
            l[i] = (y - 1) * MAX(LOG1P(-v), (T)-100) - y * MAX(LOG(v), (T)-100);               \
            if (w)                                                                             \
                l[i] *= w[i];                                                                  \
        }                                                                                      \
        return TN_OK;                                                                          \
    }                                                                                          \
    static void bce_grad_##SFX(int64_t n, const T *g, const T *x, const T *t, const T *w,      \
                               T eps, T norm, T *gi)                                           \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                      \
            gi[i] = g[i] * (x[i] - t[i]) / MAX((1 - x[i]) * x[i], eps);                        \
            if (w)                                                                             \
                gi[i] *= w[i];                                                                 \
            gi[i] /= norm;                                                                     \
        }                                                                                      \
    }
TN_BCE(f32, float, logf, log1pf, fmaxf)
TN_BCE(f64, double, log, log1p, fmax)

/* The loss before its reduction, in bce_ctype; NULL with PyTorch's errors. */
static struct tn_tensor *bce_elementwise(const struct tn_tensor *self,
                                         const struct tn_tensor *target,
                                         const struct tn_tensor *weight)
{
    int64_t sq[TN_MAX_DIMS];
    int nsq = bce_squeezed(self, sq);
    enum tn_dtype ct = bce_ctype(self);
    struct tn_tensor *t = bce_operand(target, true, sq, nsq, self->dtype, ct);
    struct tn_tensor *w = t && weight ? bce_operand(weight, false, self->sizes, self->ndim,
                                                    weight->dtype, ct)
                                      : NULL;
    struct tn_tensor *x = t && (!weight || w) &&
                          tn__nn_check_float("binary_cross_entropy", self) == 0
                              ? tn__nn_as(self, ct) : NULL;
    /* (x may be self itself: the loss goes to a tensor of its own) */
    struct tn_tensor *l = x ? tn_empty(self->sizes, self->ndim, ct) : NULL;
    if (!l)
        return tn__nn_drop(0, t, w, x, NULL), NULL;
    const void *wp = w ? tn_data(w) : NULL;
    int rc = ct == TN_FLOAT32 ? bce_loss_f32(tn_numel(x), tn_data(x), tn_data(t), wp, tn_data(l))
                              : bce_loss_f64(tn_numel(x), tn_data(x), tn_data(t), wp, tn_data(l));
    tn__nn_drop(0, t, w, x, NULL);
    if (rc < 0) {
        tn_release(l);
        return NULL;
    }
    return l;
}

struct tn_tensor *tn__cpu_binary_cross_entropy(tn_keyset ks, const struct tn_tensor *self,
                                               const struct tn_tensor *target,
                                               const struct tn_tensor *weight, int64_t reduction)
{
    struct tn_tensor *l = bce_elementwise(self, target, weight);
    struct tn_tensor *r = l ? tn__nn_reduce_loss(l, reduction) : NULL;
    tn_release(l);
    return tn__nn_to(r, self->dtype);
}

/* grad * (x - t) / max((1 - x) * x, EPSILON) times the weight, over the
 * element count for the mean; EPSILON is PyTorch's float 1e-12 rounded to
 * the input's dtype (0 in float16, where x = 0 or 1 then gives NaN or
 * infinity as there). No range check, as in PyTorch; grad_output's dtype
 * is the one expected of the others, as in its TensorIterator. */
struct tn_tensor *tn__cpu_binary_cross_entropy_backward(tn_keyset ks,
                                                        const struct tn_tensor *grad_output,
                                                        const struct tn_tensor *self,
                                                        const struct tn_tensor *target,
                                                        const struct tn_tensor *weight,
                                                        int64_t reduction)
{
    int64_t sq[TN_MAX_DIMS];
    int nsq = bce_squeezed(self, sq);
    enum tn_dtype ct = bce_ctype(self);
    if (self->dtype != grad_output->dtype) {
        tn_set_error(TN_EDTYPE, "Found dtype %s but expected %s",
                     tn_dtype_info(self->dtype)->c10_name,
                     tn_dtype_info(grad_output->dtype)->c10_name);
        return NULL;
    }
    if (tn__nn_check_float("binary_cross_entropy_backward", self) < 0)
        return NULL;
    struct tn_tensor *g = bce_operand(grad_output, true, sq, nsq, self->dtype, ct);
    struct tn_tensor *t = g ? bce_operand(target, true, sq, nsq, self->dtype, ct) : NULL;
    struct tn_tensor *w = t && weight ? bce_operand(weight, false, self->sizes, self->ndim,
                                                    weight->dtype, ct)
                                      : NULL;
    struct tn_tensor *x = t && (!weight || w) ? tn__nn_as(self, ct) : NULL;
    struct tn_tensor *gi = x ? tn_empty(self->sizes, self->ndim, ct) : NULL;
    struct tn_tensor *e = gi ? tn_full(NULL, 0, tn_float((float)1e-12), self->dtype) : NULL;
    if (!e) {
        tn_release(gi);
        tn__nn_drop(0, g, t, w, x);
        return NULL;
    }
    double eps = tn_item_double(e), n = reduction == TN_REDUCTION_MEAN ? (double)tn_numel(x) : 1;
    const void *wp = w ? tn_data(w) : NULL;
    if (ct == TN_FLOAT32)
        bce_grad_f32(tn_numel(x), tn_data(g), tn_data(x), tn_data(t), wp, (float)eps, (float)n,
                     tn_data(gi));
    else
        bce_grad_f64(tn_numel(x), tn_data(g), tn_data(x), tn_data(t), wp, eps, n, tn_data(gi));
    tn__nn_drop(0, g, t, w, e);
    tn_release(x);
    return tn__nn_to(gi, self->dtype);
}

/* -------------------------------------------------------- smooth_l1_loss
 * Written over the elementwise ops, which broadcast, promote and serve
 * every floating dtype. */

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
