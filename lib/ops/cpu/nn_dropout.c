/*
 * ops/cpu/nn_dropout.c: native_dropout and its backward on the CPU. The
 * mask is a bool tensor filled by bernoulli_(1 - p) from the default
 * generator, element by element in memory order as PyTorch draws it, so the
 * same seed drops the same elements as torch.manual_seed does.
 */
#include <config.h>

#include "ops/nn_internal.h"

int tn__cpu_native_dropout(tn_keyset ks, const struct tn_tensor *input, double p,
                           const bool *train, struct tn_tensor **output, struct tn_tensor **mask)
{
    *output = *mask = NULL;
    if (p < 0 || p > 1)
        return tn_set_error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %g",
                            p);
    if (tn_numel(input) == 0 || (train && !*train)) {
        /* (an empty input's mask has the input's dtype, as in PyTorch) */
        *output = tn_clone(input);
        *mask = tn_ones(input->sizes, input->ndim, tn_numel(input) ? TN_BOOL : input->dtype);
        if (!*output || !*mask)
            return tn__nn_drop(tn_last_status(), *output, *mask, NULL, NULL);
        return TN_OK;
    }
    if (!tn_dtype_is_floating(input->dtype) && !tn_dtype_is_complex(input->dtype))
        return tn_set_error(TN_EDTYPE, "result type Float can't be cast to the desired output "
                            "type %s", tn_dtype_info(input->dtype)->c10_name);
    double p1m = 1. - p, scale = p1m == 0 ? 0. : 1. / p1m;
    struct tn_tensor *m = tn_empty(input->sizes, input->ndim, TN_BOOL), *a = NULL, *o = NULL;
    if (!m || tn_bernoulli_(m, p1m, NULL) < 0 || !(a = tn_mul(input, m)) ||
        !(o = tn__nn_scale(a, scale)))
        return tn__nn_drop(tn_last_status(), m, a, o, NULL);
    tn_release(a);
    *output = o;
    *mask = m;
    return TN_OK;
}

struct tn_tensor *tn__cpu_native_dropout_backward(tn_keyset ks,
                                                  const struct tn_tensor *grad_output,
                                                  const struct tn_tensor *mask, double scale)
{
    struct tn_tensor *a = tn_mul(grad_output, mask), *r = a ? tn__nn_scale(a, scale) : NULL;
    tn_release(a);
    return r;
}
