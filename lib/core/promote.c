/*
 * core/promote.c: type promotion (torch.promote_types, torch.result_type).
 */
#include "core/internal.h"

#include <string.h>

/* A category order: bool < integer < floating < complex. */
static int tn_category(enum tn_dtype d)
{
    switch (tn_dtype_info(d)->kind) {
    case 'b': return 0;
    case 'u':
    case 'i': return 1;
    case 'f': return 2;
    default: return 3;
    }
}

/* Rank of a dtype within its category, for "the larger one wins". */
static int tn_rank(enum tn_dtype d)
{
    switch (d) {
    case TN_UINT8: return 0;
    case TN_INT8: return 1;
    case TN_INT16: return 2;
    case TN_INT32: return 3;
    case TN_INT64: return 4;
    case TN_FLOAT16: return 0;
    case TN_BFLOAT16: return 0;
    case TN_FLOAT32: return 1;
    case TN_FLOAT64: return 2;
    case TN_COMPLEX64: return 1;
    case TN_COMPLEX128: return 2;
    default: return 0;
    }
}

static enum tn_dtype tn_unsupported(enum tn_dtype a, enum tn_dtype b, const char *what)
{
    tn_set_error(TN_EDTYPE, "promoting %s and %s gives %s, which tensorkit does not support",
                 tn_dtype_name(a), tn_dtype_name(b), what);
    return TN_DTYPE_UNSET;
}

enum tn_dtype tn_promote_types(enum tn_dtype a, enum tn_dtype b)
{
    if (a == b)
        return a;
    if (tn_dtype_is_storage_only(a) || tn_dtype_is_storage_only(b)) {
        const char *na = tn_dtype_info(a)->c10_name, *nb = tn_dtype_info(b)->c10_name;
        if (!strncmp(na, "Float8", 6) || !strncmp(nb, "Float8", 6))
            tn_set_error(TN_EDTYPE, "Promotion for Float8 Types is not supported, attempted to "
                         "promote %s and %s", na, nb);
        else
            tn_set_error(TN_EDTYPE, "Promotion of %s and %s is not supported: %s is a storage-only "
                         "dtype in tensorkit", na, nb, tn_dtype_is_storage_only(a) ? na : nb);
        return TN_DTYPE_UNSET;
    }
    int ca = tn_category(a), cb = tn_category(b);
    if (ca != cb) {
        enum tn_dtype hi = ca > cb ? a : b, lo = ca > cb ? b : a;
        /* float64 with complex64 is complex128 in PyTorch. */
        if (tn_category(hi) == 3 && lo == TN_FLOAT64)
            return TN_COMPLEX128;
        return hi;
    }
    switch (ca) {
    case 1:
        /* uint8 with int8 needs int16 to hold both ranges. */
        if ((a == TN_UINT8 && b == TN_INT8) || (a == TN_INT8 && b == TN_UINT8))
            return TN_INT16;
        return tn_rank(a) > tn_rank(b) ? a : b;
    case 2:
        if ((a == TN_FLOAT16 && b == TN_BFLOAT16) || (a == TN_BFLOAT16 && b == TN_FLOAT16))
            return TN_FLOAT32;
        return tn_rank(a) > tn_rank(b) ? a : b;
    default:
        return tn_rank(a) > tn_rank(b) ? a : b;
    }
}

/* The dtype a Python scalar takes part in promotion as. */
static enum tn_dtype tn_scalar_dtype(struct tn_scalar s)
{
    switch (s.kind) {
    case TN_SCALAR_BOOL: return TN_BOOL;
    case TN_SCALAR_INT: return TN_INT64;
    case TN_SCALAR_FLOAT: return tn_get_default_dtype();
    default: return tn__dtype_complex(tn_get_default_dtype());
    }
}

/* Folds one operand into a priority class's running result. */
static int tn_fold(enum tn_dtype *acc, enum tn_dtype d)
{
    if (*acc == TN_DTYPE_UNSET) {
        *acc = d;
        return 0;
    }
    enum tn_dtype r = tn_promote_types(*acc, d);
    if (r == TN_DTYPE_UNSET)
        return -1;
    *acc = r;
    return 0;
}

/* Combines a higher priority class's result with a lower one's: the lower
 * class only matters when it brings a higher category (PyTorch's
 * combine_categories). */
static enum tn_dtype tn_combine(enum tn_dtype higher, enum tn_dtype lower)
{
    if (higher == TN_DTYPE_UNSET)
        return lower;
    if (lower == TN_DTYPE_UNSET)
        return higher;
    int ch = tn_category(higher), cl = tn_category(lower);
    if (ch == 3)
        return higher;
    if (cl == 3) {
        if (ch == 2) {
            /* keep the higher class's precision: float32 -> complex64,
             * float64 -> complex128. (PyTorch 1.13 made bfloat16 complex64
             * too; 2.x refuses.) */
            if (higher == TN_FLOAT32 || higher == TN_FLOAT64)
                return tn__dtype_complex(higher);
            return tn_unsupported(higher, lower, "complex32");
        }
        return lower;
    }
    if (ch == 2)
        return higher;
    if (higher == TN_BOOL || cl == 2)
        return tn_promote_types(higher, lower);
    return higher;
}

enum tn_dtype tn_result_type(const struct tn_tensor *const *tensors, int ntensors,
                             const struct tn_scalar *scalars, int nscalars)
{
    enum tn_dtype dim = TN_DTYPE_UNSET, zero = TN_DTYPE_UNSET, wrapped = TN_DTYPE_UNSET;
    if (ntensors + nscalars == 0) {
        tn_set_error(TN_EINVAL, "result_type needs at least one tensor or scalar");
        return TN_DTYPE_UNSET;
    }
    for (int i = 0; i < ntensors; i++)
        if (tn_fold(tensors[i]->ndim > 0 ? &dim : &zero, tensors[i]->dtype) < 0)
            return TN_DTYPE_UNSET;
    for (int i = 0; i < nscalars; i++)
        if (tn_fold(&wrapped, tn_scalar_dtype(scalars[i])) < 0)
            return TN_DTYPE_UNSET;
    enum tn_dtype low = tn_combine(zero, wrapped);
    if (low == TN_DTYPE_UNSET && (zero != TN_DTYPE_UNSET || wrapped != TN_DTYPE_UNSET))
        return TN_DTYPE_UNSET;
    return tn_combine(dim, low);
}
