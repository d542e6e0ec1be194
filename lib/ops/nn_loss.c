/*
 * ops/nn_loss.c: the device-independent half of the losses: the reduction
 * every loss applies, and the CompositeImplicitAutograd decompositions
 * PyTorch has (nll_loss over any number of dims, cross_entropy with class
 * probabilities and label smoothing, binary_cross_entropy_with_logits,
 * l1_loss, margin_ranking_loss, poisson_nll_loss), and nll_loss's total
 * weight recomputed for its backward.
 */
#include <config.h>

#include <string.h>

#include "ops/nn_internal.h"

/* x itself (retained) for reduction none, else its mean or sum: PyTorch's
 * apply_loss_reduction. */
struct tn_tensor *tn__nn_reduce_loss(struct tn_tensor *x, int64_t reduction)
{
    if (reduction == TN_REDUCTION_MEAN)
        return tn_mean(x, TN_DTYPE_UNSET);
    if (reduction == TN_REDUCTION_SUM)
        return tn_sum(x, TN_DTYPE_UNSET);
    return tn_retain(x);
}

/* PyTorch's decomposition: |self - target| reduced; autograd goes through
 * sub and abs. */
struct tn_tensor *tn__composite_l1_loss(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *target, int64_t reduction)
{
    struct tn_tensor *d = tn_sub(self, target, tn_int(1)), *a = d ? tn_abs(d) : NULL;
    struct tn_tensor *r = a ? tn__nn_reduce_loss(a, reduction) : NULL;
    tn__nn_drop(0, d, a, NULL, NULL);
    return r;
}

/* margin_ranking_loss as PyTorch's: max(0, -target (input1 - input2) +
 * margin), reduced */
struct tn_tensor *tn__composite_margin_ranking_loss(tn_keyset ks, const struct tn_tensor *input1,
                                                    const struct tn_tensor *input2,
                                                    const struct tn_tensor *target, double margin,
                                                    int64_t reduction)
{
    (void)ks;
    struct tn_keep k = {0};
    struct tn_tensor *d, *t, *r;
    TN_KEEP(&k, d, tn_sub(input1, input2, tn_int(1)));
    TN_KEEP(&k, t, tn_neg(target));
    TN_KEEP(&k, r, tn_mul(t, d));
    TN_KEEP(&k, r, tn_add_scalar(r, tn_float(margin), tn_int(1)));
    TN_KEEP(&k, r, tn_clamp_min(r, tn_int(0)));
    TN_KEEP(&k, r, tn__nn_reduce_loss(r, reduction));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* poisson_nll_loss as PyTorch's: exp(input) - target input for a log
 * input, else input - target log(input + eps); with full, Stirling's term
 * target log(target) - target + log(2 pi target) / 2 added where target > 1;
 * reduced */
struct tn_tensor *tn__composite_poisson_nll_loss(tn_keyset ks, const struct tn_tensor *input,
                                                 const struct tn_tensor *target, bool log_input,
                                                 bool full, double eps, int64_t reduction)
{
    (void)ks;
    struct tn_keep k = {0};
    struct tn_tensor *a, *b, *r;
    if (log_input) {
        TN_KEEP(&k, a, tn_exp(input));
        TN_KEEP(&k, b, tn_mul(target, input));
    } else {
        TN_KEEP(&k, a, tn_retain((struct tn_tensor *)input));
        TN_KEEP(&k, b, tn_add_scalar(input, tn_float(eps), tn_int(1)));
        TN_KEEP(&k, b, tn_log(b));
        TN_KEEP(&k, b, tn_mul(target, b));
    }
    TN_KEEP(&k, r, tn_sub(a, b, tn_int(1)));
    if (full) {
        struct tn_tensor *t, *l, *small;
        TN_KEEP(&k, l, tn_log(target));
        TN_KEEP(&k, t, tn_mul(target, l));
        TN_KEEP(&k, t, tn_sub(t, target, tn_int(1)));
        TN_KEEP(&k, l, tn_mul_scalar(target, tn_float(2 * 3.14159265358979323846)));
        TN_KEEP(&k, l, tn_log(l));
        TN_KEEP(&k, l, tn_mul_scalar(l, tn_float(0.5)));
        TN_KEEP(&k, t, tn_add(t, l, tn_int(1)));
        TN_KEEP(&k, small, tn_le_scalar(target, tn_int(1)));
        TN_KEEP(&k, t, tn_masked_fill_scalar(t, small, tn_int(0)));
        TN_KEEP(&k, r, tn_add(r, t, tn_int(1)));
    }
    TN_KEEP(&k, r, tn__nn_reduce_loss(r, reduction));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* kl_div as PyTorch's: exp(target) (target - self) for a log target, else
 * xlogy(target, target) - target self (0 where target is 0), reduced */
struct tn_tensor *tn__composite_kl_div(tn_keyset ks, const struct tn_tensor *self,
                                       const struct tn_tensor *target, int64_t reduction,
                                       bool log_target)
{
    struct tn_keep k = {0};
    struct tn_tensor *a, *b, *r;
    if (log_target) {
        TN_KEEP(&k, a, tn_exp(target));
        TN_KEEP(&k, b, tn_sub(target, self, tn_int(1)));
        TN_KEEP(&k, r, tn_mul(a, b));
    } else {
        /* xlogy(t, t): t log t, 0 at t = 0 (log of 1 there, so that the
         * branch where leaves out has no inf to make a NaN gradient) */
        struct tn_tensor *z, *one, *tl, *xl, *ts;
        TN_KEEP(&k, z, tn_eq_scalar(target, tn_int(0)));
        TN_KEEP(&k, one, tn_ones_like(target, TN_DTYPE_UNSET));
        TN_KEEP(&k, tl, tn_where_self(z, one, target));
        TN_KEEP(&k, tl, tn_log(tl));
        TN_KEEP(&k, xl, tn_mul(target, tl));
        TN_KEEP(&k, ts, tn_mul(target, self));
        TN_KEEP(&k, r, tn_sub(xl, ts, tn_int(1)));
    }
    TN_KEEP(&k, r, tn__nn_reduce_loss(r, reduction));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* ---------------------------------------------------------------- losses */

/* nll_loss_nd: nll_loss over (N, C, d1, ...) too: classes moved last and
 * flattened to (N*d1*..., C), the result of reduction none shaped as the
 * target. */
struct tn_tensor *tn__composite_nll_loss_nd(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *target,
                                         const struct tn_tensor *weight, int64_t reduction,
                                         int64_t ignore_index)
{
    struct tn_keep k = {0};
    struct tn_tensor *x, *t, *out, *tw = NULL, *r;
    if (self->ndim <= 2) {
        x = (struct tn_tensor *)self;
        t = (struct tn_tensor *)target;
    } else {
        int64_t perm[TN_MAX_DIMS];
        perm[0] = 0;
        for (int i = 2; i < self->ndim; i++)
            perm[i - 1] = i;
        perm[self->ndim - 1] = 1;
        if (target->ndim != self->ndim - 1 || target->sizes[0] != self->sizes[0] ||
            memcmp(target->sizes + 1, self->sizes + 2, sizeof(int64_t) * (size_t)(self->ndim - 2))) {
            char a[128], b[128];
            int64_t want[TN_MAX_DIMS];
            want[0] = self->sizes[0];
            memcpy(want + 1, self->sizes + 2, sizeof(int64_t) * (size_t)(self->ndim - 2));
            tn_set_error(TN_ESHAPE, "Expected target size %s, got %s",
                         tn_shape_format(want, self->ndim - 1, a, sizeof a),
                         tn_shape_format(target->sizes, target->ndim, b, sizeof b));
            return NULL;
        }
        struct tn_tensor *p;
        TN_KEEP(&k, p, tn_permute(self, perm, self->ndim));
        TN_KEEP(&k, x, tn_reshape(p, TN_SHAPE(-1, self->sizes[1])));
        TN_KEEP(&k, t, tn_reshape(target, TN_SHAPE(-1)));
    }
    if (tn__redispatch_nll_loss_forward(ks, x, t, weight, reduction, ignore_index, &out, &tw) < 0)
        goto fail;
    tn__keep(&k, out);
    tn__keep(&k, tw);
    r = out;
    if (self->ndim > 2 && reduction == TN_REDUCTION_NONE)
        TN_KEEP(&k, r, tn_reshape(out, target->sizes, target->ndim));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* nll_loss: 1-D or 2-D input only (nll_loss_forward's checks) */
struct tn_tensor *tn__composite_nll_loss(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *target,
                                         const struct tn_tensor *weight, int64_t reduction,
                                         int64_t ignore_index)
{
    struct tn_tensor *out, *tw;
    if (tn__redispatch_nll_loss_forward(ks, self, target, weight, reduction, ignore_index, &out,
                                       &tw) < 0)
        return NULL;
    tn_release(tw);
    return out;
}

/* weight (C) shaped to broadcast along dim 1 of an n-dim input */
static struct tn_tensor *class_view(const struct tn_tensor *w, int ndim)
{
    int64_t s[TN_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        s[i] = 1;
    s[ndim == 1 ? 0 : 1] = tn_numel(w);
    return tn_reshape(w, s, ndim);
}

static struct tn_tensor *reduce(struct tn_keep *k, struct tn_tensor *x, int64_t reduction)
{
    if (reduction == TN_REDUCTION_MEAN)
        return tn__keep(k, tn_mean(x, TN_DTYPE_UNSET));
    if (reduction == TN_REDUCTION_SUM)
        return tn__keep(k, tn_sum(x, TN_DTYPE_UNSET));
    return x;
}

/* cross_entropy with class probabilities as the target */
static struct tn_tensor *ce_probs(struct tn_keep *k, const struct tn_tensor *logp,
                                  const struct tn_tensor *target, const struct tn_tensor *weight,
                                  int64_t reduction, double ls)
{
    int cd = logp->ndim == 1 ? 0 : 1;
    int64_t c = logp->sizes[cd];
    char a[128], b[128];
    if (logp->ndim != target->ndim ||
        memcmp(logp->sizes, target->sizes, sizeof(int64_t) * (size_t)logp->ndim)) {
        tn_set_error(TN_ESHAPE, "Expected input batch_size (%lld) to match target batch_size "
                     "(%lld).", (long long)logp->sizes[0], (long long)target->sizes[0]);
        (void)a, (void)b;
        return NULL;
    }
    struct tn_tensor *t = (struct tn_tensor *)target, *p, *s, *l;
    if (ls > 0) {
        struct tn_tensor *t1;
        TN_KEEP(k, t1, tn__nn_scale(target, (1 - ls)));
        TN_KEEP(k, t, tn__nn_plus(t1, ls / (double)c));
    }
    TN_KEEP(k, p, tn_mul(logp, t));
    if (weight) {
        struct tn_tensor *wv;
        TN_KEEP(k, wv, class_view(weight, logp->ndim));
        TN_KEEP(k, p, tn_mul(p, wv));
    }
    int64_t d = cd;
    TN_KEEP(k, s, tn_sum_dim_intlist(p, &d, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(k, l, tn_neg(s));
    if (reduction == TN_REDUCTION_MEAN) {
        struct tn_tensor *sum;
        TN_KEEP(k, sum, tn_sum(l, TN_DTYPE_UNSET));
        return tn__keep(k, tn__nn_scale(sum, (c / (double)tn_numel(logp))));
    }
    return reduce(k, l, reduction);
fail:
    return NULL;
}

/* PyTorch's label smoothing over class indices: (1 - ls) * nll + ls / C *
 * the mean (or sum) of -sum_c w_c logp_c over the targets not ignored. */
static struct tn_tensor *ce_smooth(tn_keyset ks, struct tn_keep *k, const struct tn_tensor *logp,
                                   const struct tn_tensor *target, const struct tn_tensor *weight,
                                   int64_t reduction, int64_t ignore, double ls)
{
    int cd = logp->ndim == 1 ? 0 : 1;
    int64_t c = logp->sizes[cd], d = cd;
    struct tn_tensor *nll, *p = (struct tn_tensor *)logp, *s, *keep, *keepf, *sm, *ret, *a, *b;
    TN_KEEP(k, nll, tn__redispatch_nll_loss_nd(ks, logp, target, weight, reduction, ignore));
    if (weight) {
        struct tn_tensor *wv;
        TN_KEEP(k, wv, class_view(weight, logp->ndim));
        TN_KEEP(k, p, tn_mul(logp, wv));
    }
    TN_KEEP(k, s, tn_sum_dim_intlist(p, &d, 1, false, TN_DTYPE_UNSET));
    TN_KEEP(k, keep, tn_ne_scalar(target, tn_int(ignore)));
    TN_KEEP(k, keepf, tn_to_dtype(keep, logp->dtype));
    TN_KEEP(k, sm, tn_mul(s, keepf));
    TN_KEEP(k, sm, tn_neg(sm));
    if (reduction == TN_REDUCTION_MEAN) {
        struct tn_tensor *num, *den;
        TN_KEEP(k, num, tn_sum(sm, TN_DTYPE_UNSET));
        if (weight) {
            /* the weights of the targets not ignored */
            struct tn_tensor *zero, *safe, *flat, *wt;
            TN_KEEP(k, zero, tn_zeros_like(target, TN_DTYPE_UNSET));
            TN_KEEP(k, safe, tn_where_self(keep, target, zero));
            TN_KEEP(k, flat, tn_reshape(safe, TN_SHAPE(-1)));
            TN_KEEP(k, wt, tn_index_select(weight, 0, flat));
            TN_KEEP(k, wt, tn_reshape(wt, target->sizes, target->ndim));
            TN_KEEP(k, wt, tn_mul(wt, keepf));
            TN_KEEP(k, den, tn_sum(wt, TN_DTYPE_UNSET));
        } else {
            TN_KEEP(k, den, tn_sum(keepf, TN_DTYPE_UNSET));
        }
        TN_KEEP(k, ret, tn_div(num, den));
    } else {
        ret = reduce(k, sm, reduction);
        if (!ret)
            goto fail;
    }
    TN_KEEP(k, a, tn__nn_scale(nll, (1 - ls)));
    TN_KEEP(k, b, tn__nn_scale(ret, (ls / (double)c)));
    return tn__keep(k, tn_add(a, b, tn_int(1)));
fail:
    return NULL;
}

struct tn_tensor *tn__composite_cross_entropy_loss(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_tensor *target,
                                                   const struct tn_tensor *weight,
                                                   int64_t reduction, int64_t ignore_index,
                                                   double label_smoothing)
{
    struct tn_keep k = {0};
    struct tn_tensor *logp, *r;
    if (label_smoothing < 0 || label_smoothing > 1) {
        tn_set_error(TN_EINVAL, "label_smoothing must be between 0.0 and 1.0. Got: %g",
                     label_smoothing);
        return NULL;
    }
    TN_KEEP(&k, logp, tn_log_softmax_int(self, self->ndim == 1 ? 0 : 1, TN_DTYPE_UNSET));
    if (tn_dtype_is_floating(target->dtype))
        r = ce_probs(&k, logp, target, weight, reduction, label_smoothing);
    else if (label_smoothing > 0)
        r = ce_smooth(ks, &k, logp, target, weight, reduction, ignore_index, label_smoothing);
    else
        r = tn__keep(&k, tn__redispatch_nll_loss_nd(ks, logp, target, weight, reduction,
                                                   ignore_index));
    if (!r)
        goto fail;
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* (1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t:
 * log(1 + e^-x) without overflow for large |x|. */
struct tn_tensor *tn__composite_binary_cross_entropy_with_logits(
    tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *target,
    const struct tn_tensor *weight, const struct tn_tensor *pos_weight, int64_t reduction)
{
    struct tn_keep k = {0};
    struct tn_tensor *omt, *a, *ab, *na, *e, *l1, *nx, *mx, *sp, *loss;
    struct tn_scalar zero = tn_int(0);
    TN_KEEP(&k, omt, tn_neg(target));
    TN_KEEP(&k, omt, tn_add_scalar(omt, tn_int(1), tn_int(1)));
    TN_KEEP(&k, a, tn_mul(omt, self));
    TN_KEEP(&k, ab, tn_abs(self));
    TN_KEEP(&k, na, tn_neg(ab));
    TN_KEEP(&k, e, tn_exp(na));
    TN_KEEP(&k, l1, tn_log1p(e));
    TN_KEEP(&k, nx, tn_neg(self));
    TN_KEEP(&k, mx, tn_clamp(nx, &zero, NULL));
    TN_KEEP(&k, sp, tn_add(l1, mx, tn_int(1)));
    if (pos_weight) {
        struct tn_tensor *pw1, *lw;
        TN_KEEP(&k, pw1, tn_sub_scalar(pos_weight, tn_int(1), tn_int(1)));
        TN_KEEP(&k, lw, tn_mul(pw1, target));
        TN_KEEP(&k, lw, tn_add_scalar(lw, tn_int(1), tn_int(1)));
        TN_KEEP(&k, sp, tn_mul(lw, sp));
    }
    TN_KEEP(&k, loss, tn_add(a, sp, tn_int(1)));
    if (weight)
        TN_KEEP(&k, loss, tn_mul(loss, weight));
    if (!(loss = reduce(&k, loss, reduction)))
        goto fail;
    return tn__keep_out(&k, loss);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* nll_loss's backward for derivatives.yaml (see lib/ops/nn.c's single-gradient
 * backward ops): the total weight its forward kept, recomputed. */
struct tn_tensor *tn__composite_nll_loss_backward_recompute(
    tn_keyset ks, const struct tn_tensor *grad_output, const struct tn_tensor *self,
    const struct tn_tensor *target, const struct tn_tensor *weight, int64_t reduction,
    int64_t ignore_index)
{
    struct tn_keep k = {0};
    struct tn_tensor *x = (struct tn_tensor *)self, *t = (struct tn_tensor *)target;
    struct tn_tensor *g = (struct tn_tensor *)grad_output, *out, *tw, *r;
    int nd = self->ndim;
    int64_t perm[TN_MAX_DIMS], inv[TN_MAX_DIMS], psizes[TN_MAX_DIMS];
    if (nd > 2) { /* nll_loss_nd's layout: classes last, flattened */
        perm[0] = inv[0] = 0;
        for (int i = 2; i < nd; i++)
            perm[i - 1] = i;
        perm[nd - 1] = 1;
        inv[1] = nd - 1;
        for (int i = 2; i < nd; i++)
            inv[i] = i - 1;
        for (int i = 0; i < nd; i++)
            psizes[i] = self->sizes[perm[i]];
        struct tn_tensor *p;
        TN_KEEP(&k, p, tn_permute(self, perm, nd));
        TN_KEEP(&k, x, tn_reshape(p, TN_SHAPE(-1, self->sizes[1])));
        TN_KEEP(&k, t, tn_reshape(target, TN_SHAPE(-1)));
        if (reduction == TN_REDUCTION_NONE)
            TN_KEEP(&k, g, tn_reshape(grad_output, TN_SHAPE(-1)));
    }
    if (tn_nll_loss_forward(x, t, weight, reduction, ignore_index, &out, &tw) < 0)
        goto fail;
    tn__keep(&k, out);
    tn__keep(&k, tw);
    TN_KEEP(&k, r, tn_nll_loss_backward(g, x, t, weight, reduction, ignore_index, tw));
    if (nd > 2) {
        struct tn_tensor *rs;
        TN_KEEP(&k, rs, tn_reshape(r, psizes, nd));
        TN_KEEP(&k, r, tn_permute(rs, inv, nd));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
