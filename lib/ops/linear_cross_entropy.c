/*
 * ops/linear_cross_entropy.c: F.linear_cross_entropy's chunked path, the
 * custom ops torch_nn::_linear_cross_entropy_batch_chunked(_no_reduction)
 * that PyTorch registers and torch.export keeps whole. PyTorch computes
 * the logits chunk by chunk in acc_dtype and precomputes the gradients in
 * the forward; here the loss is cross_entropy(linear(input)) in acc_dtype
 * at once (the same value, rounded once into the input's dtype), its
 * gradients those ops' own. The reduced form's extra results are the
 * gradients for the flags set, empty [0, 0] / [0] ones otherwise, as
 * PyTorch's fake kernel declares them.
 */
#include <config.h>

#include <string.h>

#include <tensor/autograd.h>

#include "ops/nn_internal.h"

/* t in dtype dt, differentiably (t itself, retained, when it is) */
static struct tn_tensor *as_dtype(const struct tn_tensor *t, enum tn_dtype dt)
{
    if (!t)
        return NULL;
    if (t->dtype == dt || dt == TN_DTYPE_UNSET)
        return tn_retain((struct tn_tensor *)t);
    return tn_underscore_to_copy(t, dt, NULL, NULL, NULL, false, NULL);
}

static struct tn_tensor *lce_loss(const struct tn_tensor *input, const struct tn_tensor *lw,
                                  const struct tn_tensor *target, const struct tn_tensor *lb,
                                  const struct tn_tensor *weight, int64_t reduction,
                                  int64_t ignore_index, double label_smoothing,
                                  enum tn_dtype acc)
{
    struct tn_tensor *x = as_dtype(input, acc), *w = x ? as_dtype(lw, acc) : NULL;
    struct tn_tensor *b = w ? as_dtype(lb, acc) : NULL, *cw = w ? as_dtype(weight, acc) : NULL;
    struct tn_tensor *logits = NULL, *loss = NULL, *r = NULL;
    if (x && w && (!lb || b) && (!weight || cw) && (logits = tn_linear(x, w, b)))
        loss = tn_cross_entropy_loss(logits, target, cw, reduction, ignore_index,
                                     label_smoothing);
    if (loss)
        r = as_dtype(loss, input->dtype);
    tn__nn_drop(0, x, w, b, cw);
    tn__nn_drop(0, logits, loss, NULL, NULL);
    return r;
}

static int reduction_of(const char *s, int64_t *r)
{
    if (!strcmp(s, "none"))
        *r = 0;
    else if (!strcmp(s, "mean"))
        *r = 1;
    else if (!strcmp(s, "sum"))
        *r = 2;
    else
        return tn_set_error(TN_EINVAL, "%s is not a valid value for reduction", s);
    return TN_OK;
}

struct tn_tensor *tn__composite_lce_batch_chunked_no_reduction(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *linear_weight,
    const struct tn_tensor *target, const struct tn_tensor *linear_bias,
    const struct tn_tensor *weight, int64_t ignore_index, int64_t batch_chunk_size,
    const char *acc_policy, enum tn_dtype acc_dtype)
{
    return lce_loss(input, linear_weight, target, linear_bias, weight, 0, ignore_index, 0.0,
                    acc_dtype);
}

/* The gradients of the loss (recomputed on leaves that alias the inputs)
 * with respect to the inputs whose flag is set, into r[0..3). */
static int lce_grads(const struct tn_tensor *const in[3], const bool want[3],
                     const struct tn_tensor *target, const struct tn_tensor *weight,
                     int64_t reduction, int64_t ignore_index, double label_smoothing,
                     enum tn_dtype acc, struct tn_tensor **r)
{
    struct tn_tensor *leaf[3] = {NULL}, *use[3] = {NULL}, *loss = NULL;
    int n = 0, rc = TN_OK;
    bool prev = tn_set_grad_enabled(true);
    tn_keyset old = tn_dispatch_set_excluded(tn_dispatch_excluded() & ~TN_KEYSET(TN_KEY_AUTOGRAD));
    for (int i = 0; i < 3 && rc >= 0; i++) {
        if (!in[i])
            continue;
        if (!(leaf[i] = tn_detach(in[i])))
            rc = tn_last_status();
        else if (want[i] && (rc = tn_requires_grad_(leaf[i], true)) >= 0)
            use[n++] = leaf[i];
    }
    if (rc >= 0 && !(loss = lce_loss(leaf[0], leaf[1], target, leaf[2], weight, reduction,
                                     ignore_index, label_smoothing, acc)))
        rc = tn_last_status();
    struct tn_tensor *g[3] = {NULL};
    if (rc >= 0 && n)
        rc = tn_grad(&loss, 1, NULL, use, n, false, false, true, g);
    for (int i = 0, k = 0; i < 3; i++)
        if (want[i] && leaf[i])
            r[i] = rc >= 0 ? g[k++] : NULL;
    tn_dispatch_set_excluded(old);
    tn_set_grad_enabled(prev);
    tn__nn_drop(0, leaf[0], leaf[1], leaf[2], loss);
    return rc;
}

int tn__composite_lce_batch_chunked(
    tn_keyset ks, const struct tn_tensor *input, const struct tn_tensor *linear_weight,
    const struct tn_tensor *target, const struct tn_tensor *linear_bias,
    const struct tn_tensor *weight, const char *reduction, int64_t ignore_index,
    double label_smoothing, int64_t batch_chunk_size, const char *acc_policy,
    enum tn_dtype acc_dtype, bool allow_retain_graph, bool compute_input_grad,
    bool compute_linear_weight_grad, bool compute_linear_bias_grad,
    struct tn_tensor **result0, struct tn_tensor **result1, struct tn_tensor **result2,
    struct tn_tensor **result3)
{
    int64_t red;
    struct tn_tensor *r[4] = {NULL};
    *result0 = *result1 = *result2 = *result3 = NULL;
    int rc = reduction_of(reduction, &red);
    if (rc < 0)
        return rc;
    if (red == 0)
        return tn_set_error(TN_EINVAL, "linear_cross_entropy does not support reduction='none'");
    if (!(r[0] = lce_loss(input, linear_weight, target, linear_bias, weight, red, ignore_index,
                          label_smoothing, acc_dtype)))
        return tn_last_status();
    const bool want[3] = {compute_input_grad, compute_linear_weight_grad,
                          compute_linear_bias_grad && linear_bias};
    const struct tn_tensor *in[3] = {input, linear_weight, linear_bias};
    struct tn_tensor *g[3] = {NULL};
    if (input->device.type == TN_DEVICE_CPU && (want[0] || want[1] || want[2]))
        rc = lce_grads(in, want, target, weight, red, ignore_index, label_smoothing, acc_dtype,
                       g);
    for (int i = 0; i < 3 && rc >= 0; i++) {
        int64_t empty[2] = {0, 0};
        if (g[i]) {
            r[1 + i] = as_dtype(g[i], input->dtype);
        } else if (i < 2) {
            const struct tn_tensor *s = want[i] ? in[i] : NULL;
            r[1 + i] = tn_empty_on(s ? s->sizes : empty, s ? s->ndim : 2, input->dtype,
                                   input->device);
        } else {
            int64_t nb = compute_linear_bias_grad ? linear_weight->sizes[0] : 0;
            r[3] = tn_empty_on(&nb, 1, input->dtype, input->device);
            if (r[3] && nb && input->device.type == TN_DEVICE_CPU)
                rc = tn_fill_(r[3], tn_int(0)); /* (no bias: its gradient is 0) */
        }
        if (rc >= 0 && !r[1 + i])
            rc = tn_last_status();
    }
    tn__nn_drop(0, g[0], g[1], g[2], NULL);
    if (rc < 0) {
        tn__nn_drop(0, r[0], r[1], r[2], r[3]);
        return rc;
    }
    *result0 = r[0], *result1 = r[1], *result2 = r[2], *result3 = r[3];
    return TN_OK;
}
