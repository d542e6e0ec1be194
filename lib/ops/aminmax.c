/*
 * ops/aminmax.c: aminmax, PyTorch's checks and words in front of amin and
 * amax over the same dims (all of them for dim=None), whose values and
 * gradients (each shared evenly among the tied elements) are aminmax's.
 */
#include <config.h>

#include "ops/internal.h"

int tn__composite_aminmax(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                          bool keepdim, struct tn_tensor **min, struct tn_tensor **max)
{
    (void)ks;
    if (dim) {
        int d = tn_wrap_dim(*dim, self->ndim ? self->ndim : 1);
        if (d < 0)
            return tn_last_status();
        if (self->ndim && self->sizes[d] == 0)
            return tn_set_error(TN_EINDEX, "aminmax: Expected reduction dim %d to have non-zero "
                                "size.", d);
    } else if (tn_numel(self) == 0)
        return tn_set_error(TN_EINDEX, "aminmax(): cannot compute aminmax over an empty "
                            "dimension as the operation has no identity.");
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "aminmax not implemented for %s",
                            tn_dtype_info(self->dtype)->c10_name);
    int n = dim && self->ndim ? 1 : 0;
    *min = tn_amin(self, dim, n, keepdim);
    *max = *min ? tn_amax(self, dim, n, keepdim) : NULL;
    if (*max)
        return TN_OK;
    tn_release(*min);
    return tn_last_status();
}
