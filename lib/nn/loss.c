/*
 * nn/loss.c: the losses of torch.nn.functional, written as chains of
 * operators so that autograd differentiates them like any other ops.
 *
 * nll_loss picks input[i, target[i]] by multiplying with a constant
 * [N, C] matrix that holds weight[target[i]] at (i, target[i]) and zero
 * elsewhere (zero rows for ignore_index): the same sum PyTorch forms, and
 * its gradient is the same matrix.
 */
#include "core/internal.h"
#include "nn/internal.h"
#include <tensor/ops.h>

#include <math.h>
#include <stdlib.h>

/* loss (elementwise) reduced as asked; `loss` is consumed. */
static struct tn_tensor *reduce(struct tn_tensor *loss, enum tn_reduction r)
{
    if (!loss || r == TN_REDUCTION_NONE)
        return loss;
    struct tn_tensor *out = r == TN_REDUCTION_MEAN ? tn_mean(loss, TN_DTYPE_UNSET)
                                                   : tn_sum(loss, TN_DTYPE_UNSET);
    tn_release(loss);
    return out;
}

/* The [N, C] selection matrix of nll_loss and the sum of its entries
 * (the divisor of reduction='mean').  NULL with an error. */
static struct tn_tensor *nll_select(const struct tn_tensor *input, const struct tn_tensor *target,
                                    const struct tn_tensor *weight, int64_t ignore_index,
                                    double *total)
{
    int64_t n = input->sizes[0], c = input->sizes[1];
    if (target->ndim != 1 || target->sizes[0] != n) {
        tn_set_error(TN_ESHAPE, "Expected input batch_size (%lld) to match target batch_size "
                     "(%lld).", (long long)n, (long long)(target->ndim ? target->sizes[0] : 1));
        return NULL;
    }
    if (target->dtype != TN_INT64) {
        tn_set_error(TN_EDTYPE, "expected scalar type Long but found %s",
                     tn_dtype_info(target->dtype)->c10_name);
        return NULL;
    }
    if (weight && (weight->ndim != 1 || weight->sizes[0] != c)) {
        tn_set_error(TN_ESHAPE, "weight tensor should be defined either for all %lld classes "
                     "or no classes but got weight tensor of shape: [%lld]", (long long)c,
                     (long long)(weight->ndim ? weight->sizes[0] : 0));
        return NULL;
    }
    struct tn_tensor *tc = tn_contiguous(target);
    struct tn_tensor *wd = weight ? tn_to_dtype(weight, TN_FLOAT64) : NULL;
    struct tn_tensor *wc = wd ? tn_contiguous(wd) : NULL;
    tn_release(wd);
    struct tn_tensor *sel = tn_zeros(TN_SHAPE(n, c), input->dtype);
    if (!tc || (weight && !wc) || !sel)
        goto fail;
    const int64_t *t = tn_data(tc);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i] == ignore_index)
            continue;
        if (t[i] < 0 || t[i] >= c) {
            tn_set_error(TN_EINDEX, "Target %lld is out of bounds.", (long long)t[i]);
            goto fail;
        }
        double w = wc ? ((const double *)tn_data(wc))[t[i]] : 1.0;
        if (input->dtype == TN_FLOAT32)
            ((float *)tn_data(sel))[i * c + t[i]] = (float)w;
        else if (input->dtype == TN_FLOAT64)
            ((double *)tn_data(sel))[i * c + t[i]] = w;
        sum += input->dtype == TN_FLOAT32 ? (double)(float)w : w;
    }
    tn_release(tc);
    tn_release(wc);
    *total = sum;
    return sel;
fail:
    tn_release(tc);
    tn_release(wc);
    tn_release(sel);
    return NULL;
}

struct tn_tensor *tn_nn_nll_loss(const struct tn_tensor *input, const struct tn_tensor *target,
                                 const struct tn_tensor *weight, enum tn_reduction reduction,
                                 int64_t ignore_index)
{
    if (input->ndim != 2) {
        tn_set_error(TN_ESHAPE, "nll_loss: expected a 2-D input [N, C], got %dD", input->ndim);
        return NULL;
    }
    if (input->dtype != TN_FLOAT32 && input->dtype != TN_FLOAT64) {
        tn_set_error(TN_EDTYPE, "\"nll_loss_forward_reduce_cuda_kernel_2d_index\" not "
                     "implemented for '%s'", tn_dtype_info(input->dtype)->c10_name);
        return NULL;
    }
    double total = 0;
    struct tn_tensor *sel = nll_select(input, target, weight, ignore_index, &total);
    if (!sel)
        return NULL;
    struct tn_tensor *picked = tn_mul(input, sel), *out = NULL;
    tn_release(sel);
    if (!picked)
        return NULL;
    if (reduction == TN_REDUCTION_NONE) {
        struct tn_tensor *rows = tn_sum_dim_intlist(picked, (const int64_t[]){1}, 1, false,
                                                    TN_DTYPE_UNSET);
        out = rows ? tn_neg(rows) : NULL;
        tn_release(rows);
    } else {
        struct tn_tensor *s = tn_sum(picked, TN_DTYPE_UNSET);
        struct tn_tensor *ns = s ? tn_neg(s) : NULL;
        /* mean: the weighted sum over the sum of the weights picked
         * (0/0 = nan when every target is ignored, as PyTorch) */
        out = ns && reduction == TN_REDUCTION_MEAN ? tn_div_scalar(ns, tn_float(total))
                                                   : tn_retain(ns);
        tn_release(s);
        tn_release(ns);
    }
    tn_release(picked);
    return out;
}

struct tn_tensor *tn_nn_cross_entropy(const struct tn_tensor *input,
                                      const struct tn_tensor *target,
                                      const struct tn_tensor *weight,
                                      enum tn_reduction reduction, int64_t ignore_index)
{
    struct tn_tensor *logp = tn_log_softmax_int(input, 1, TN_DTYPE_UNSET);
    if (!logp)
        return NULL;
    struct tn_tensor *out = tn_nn_nll_loss(logp, target, weight, reduction, ignore_index);
    tn_release(logp);
    return out;
}

static int same_shape(const struct tn_tensor *a, const struct tn_tensor *b, const char *what)
{
    if (a->ndim == b->ndim) {
        int i = 0;
        while (i < a->ndim && a->sizes[i] == b->sizes[i])
            i++;
        if (i == a->ndim)
            return 0;
    }
    return tn_set_error(TN_ESHAPE, "%s: target and input must have the same shape", what);
}

struct tn_tensor *tn_nn_mse_loss(const struct tn_tensor *input, const struct tn_tensor *target,
                                 enum tn_reduction reduction)
{
    if (same_shape(input, target, "mse_loss"))
        return NULL;
    struct tn_tensor *d = tn_sub(input, target, tn_int(1));
    struct tn_tensor *sq = d ? tn_mul(d, d) : NULL;
    tn_release(d);
    return reduce(sq, reduction);
}

struct tn_tensor *tn_nn_bce_with_logits(const struct tn_tensor *input,
                                        const struct tn_tensor *target,
                                        enum tn_reduction reduction)
{
    if (same_shape(input, target, "binary_cross_entropy_with_logits"))
        return NULL;
    /* (1 - target) * input - log_sigmoid(input), log_sigmoid(x) = -softplus(-x) */
    struct tn_tensor *nt = tn_neg(target);
    struct tn_tensor *one_minus = nt ? tn_add_scalar(nt, tn_int(1), tn_int(1)) : NULL;
    struct tn_tensor *a = one_minus ? tn_mul(one_minus, input) : NULL;
    struct tn_tensor *nx = a ? tn_neg(input) : NULL;
    struct tn_tensor *sp = nx ? tn_softplus(nx, tn_int(1), tn_int(20)) : NULL;
    struct tn_tensor *loss = sp ? tn_add(a, sp, tn_int(1)) : NULL;
    tn_release(nt);
    tn_release(one_minus);
    tn_release(a);
    tn_release(nx);
    tn_release(sp);
    return reduce(loss, reduction);
}

struct tn_tensor *tn_nn_bce(const struct tn_tensor *input, const struct tn_tensor *target,
                            const struct tn_tensor *weight, enum tn_reduction reduction)
{
    if (same_shape(input, target, "binary_cross_entropy"))
        return NULL;
    return tn_binary_cross_entropy(input, target, weight, reduction);
}
