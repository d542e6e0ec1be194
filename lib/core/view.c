/*
 * core/view.c: views (view, reshape, permute, transpose, expand, narrow,
 * slice, select, squeeze, unsqueeze, flatten, unflatten, as_strided,
 * diagonal, unfold) and shape broadcasting, with PyTorch's rules and errors.
 */
#include "core/internal.h"

#include <string.h>

int tn_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = n - 1; i >= 0; i--) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            tn_set_error(TN_ESHAPE,
                         "The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                         "non-singleton dimension %d",
                         (long long)sa, (long long)sb, i);
            return -1;
        }
        out[i] = sa == 1 ? sb : sa;
    }
    return n;
}
