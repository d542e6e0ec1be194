/*
 * ops/nn2.c: the device-independent half of the nn ops added after
 * lib/ops/nn.c: the reduction every loss applies, and the
 * CompositeImplicitAutograd decompositions PyTorch has (l1_loss).
 */
#include <config.h>

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
