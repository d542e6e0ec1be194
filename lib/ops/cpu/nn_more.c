/*
 * ops/cpu/nn_more.c: CPU kernels of the nn ops added after nn_loss.c,
 * nn_norm.c, nn_conv.c and nn_pool.c: smooth_l1_loss and its backward.
 * They are written over the elementwise ops, which broadcast, promote and
 * serve every floating dtype.
 */
#include <config.h>

#include "ops/nn_internal.h"

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
    if (check_beta(beta) < 0)
        return NULL;
    if (beta == 0)
        return tn_l1_loss(self, target, reduction);
    struct tn_keep k = {0};
    struct tn_tensor *d, *a, *h, *hz, *q, *l, *c, *e;
    TN_KEEP(&k, d, tn_sub(self, target, tn_int(1)));
    TN_KEEP(&k, a, tn_abs(d));
    TN_KEEP(&k, h, tn__nn_scale(a, 0.5));
    TN_KEEP(&k, hz, tn_mul(h, a));
    TN_KEEP(&k, q, tn_div_scalar(hz, tn_float(beta)));
    TN_KEEP(&k, l, tn__nn_plus(a, -0.5 * beta));
    TN_KEEP(&k, c, tn_lt_scalar(a, tn_float(beta)));
    TN_KEEP(&k, e, tn_where_self(c, q, l));
    return tn__keep_out(&k, tn__nn_reduce_loss(e, reduction));
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
