/*
 * ops/meshgrid.c: meshgrid (and .indexing) as PyTorch's
 * CompositeImplicitAutograd one (TensorShape.cpp): each 0-D or 1-D input
 * viewed along its own dim and expanded to the grid's shape (views of the
 * inputs, so their gradients are expand's, summed back); "xy" swaps the
 * first two inputs and then the first two results.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

int tn__composite_meshgrid_indexing(tn_keyset ks, const struct tn_tensor *const *tensors,
                                    int tensors_len, const char *indexing,
                                    struct tn_tensor ***result)
{
    (void)ks;
    int n = tensors_len;
    if (n <= 0)
        return tn_set_error(TN_ERUNTIME, "meshgrid expects a non-empty TensorList");
    if (n > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "meshgrid: %d tensors make a grid of more than %d dims", n,
                            TN_MAX_DIMS);
    for (int i = 0; i + 1 < n; i++)
        if (tensors[i]->dtype != tensors[i + 1]->dtype)
            return tn_set_error(TN_ERUNTIME, "meshgrid expects all tensors to have the same dtype");
    bool swap = !strcmp(indexing, "xy") && n >= 2;
    if (strcmp(indexing, "xy") && strcmp(indexing, "ij"))
        return tn_set_error(TN_ERUNTIME, "torch.meshgrid: indexing must be one of \"xy\" or "
                            "\"ij\", but received: %s", indexing);
    const struct tn_tensor *in[TN_MAX_DIMS];
    int64_t shape[TN_MAX_DIMS], view[TN_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        in[i] = tensors[swap && i < 2 ? 1 - i : i];
        if (in[i]->ndim > 1)
            return tn_set_error(TN_ERUNTIME, "torch.meshgrid: Expected 0D or 1D tensor in the "
                                "tensor list but got a %d-D tensor", in[i]->ndim);
        shape[i] = tn_numel(in[i]); /* a 0-D tensor as a 1-D one */
        view[i] = 1;
    }
    struct tn_tensor **grids = calloc((size_t)n, sizeof *grids);
    if (!grids)
        return tn_set_error(TN_ENOMEM, "meshgrid: out of memory");
    for (int i = 0; i < n; i++) {
        view[i] = -1;
        struct tn_tensor *v = tn_view(in[i], view, n);
        view[i] = 1;
        int at = swap && i < 2 ? 1 - i : i; /* the results in the inputs' order */
        grids[at] = v ? tn_expand(v, shape, n) : NULL;
        tn_release(v);
        if (!grids[at]) {
            tn_release_list(grids, n); /* NULL entries pass */
            return tn_last_status();
        }
    }
    *result = grids;
    return n;
}

/* meshgrid without indexing: "ij" (PyTorch also warns that it will need
 * the argument) */
int tn__composite_meshgrid(tn_keyset ks, const struct tn_tensor *const *tensors, int tensors_len,
                           struct tn_tensor ***result)
{
    return tn__composite_meshgrid_indexing(ks, tensors, tensors_len, "ij", result);
}
