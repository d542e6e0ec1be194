/*
 * ops/cpu/bucketize.c: torch.searchsorted as PyTorch's CPU kernel computes
 * it (aten/src/ATen/native/Bucketization.cpp): for each value, the first
 * boundary of its row that is not below it (or above it, right=True),
 * found by the same binary search with the same `!(mid >= v)` tests, so a
 * NaN lands where PyTorch's does; the values and boundaries are first cast
 * to their common dtype (result_type), as searchsorted_maybe_trim_input_tensors
 * does.
 * bucketize and the Scalar overloads are decompositions over it
 * (ops/bucketize.c).
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

/* cus_lower_bound / cus_upper_bound of Bucketization.cpp over [start, end)
 * of bd (through sort, offset by start, where given) */
#define TN_BOUND(NAME, T)                                                                   \
    static int64_t NAME(int64_t start, int64_t end, T val, const T *bd, const int64_t *sort, \
                        bool right)                                                         \
    {                                                                                       \
        const int64_t orig = start;                                                         \
        while (start < end) {                                                               \
            const int64_t mid = start + ((end - start) >> 1);                               \
            const T m = sort ? bd[sort[mid] + orig] : bd[mid];                              \
            if (right ? !(m > val) : !(m >= val))                                           \
                start = mid + 1;                                                            \
            else                                                                            \
                end = mid;                                                                  \
        }                                                                                   \
        return start;                                                                       \
    }
TN_BOUND(bound_f64, double)
TN_BOUND(bound_i64, int64_t)

/* searchsorted_pre_check's checks, in its order and words */
static int pre_check(const struct tn_tensor *bd, const struct tn_tensor *self, bool right,
                     const char *side, const struct tn_tensor *sorter)
{
    char a[128], b[128];
    if (side && strcmp(side, "left") && strcmp(side, "right"))
        return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): side can only be 'left' or 'right' "
                            "but got %s", side);
    if (side && right && strcmp(side, "right"))
        return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): side and right can't be set to "
                            "opposites, got side of %s while right was True", side);
    if (sorter) {
        bool same = sorter->ndim == bd->ndim &&
                    !memcmp(sorter->sizes, bd->sizes, sizeof(int64_t) * (size_t)bd->ndim);
        if (!same)
            return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): boundary and sorter must have "
                                "the same size, but got boundary tensor %sand got sorter tensor %s",
                                tn_shape_format(bd->sizes, bd->ndim, a, sizeof a),
                                tn_shape_format(sorter->sizes, sorter->ndim, b, sizeof b));
        if (sorter->dtype != TN_INT64)
            return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): sorter must be a tensor of long "
                                "dtype but got dtype %s", tn_dtype_info(sorter->dtype)->c10_name);
    }
    if (!(self->ndim > 0 || bd->ndim == 1))
        return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): input value can be a scalar only "
                            "when boundaries tensor dimension is 1, but we got boundaries tensor "
                            "dim(%d) and input value's dim(%d) numel(1)", bd->ndim, self->ndim);
    if (bd->ndim == 0)
        return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): boundaries tensor should have "
                            "positive dimension, but got 0 dimension");
    bool matched = bd->ndim == self->ndim &&
                   !memcmp(bd->sizes, self->sizes, sizeof(int64_t) * (size_t)(bd->ndim - 1));
    if (bd->ndim != 1 && !matched)
        return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): boundaries tensor should be 1 "
                            "dimension or the first N-1 dimensions of boundaries tensor and input "
                            "value tensor must match, but we got boundaries tensor %s and input "
                            "value tensor %s", tn_shape_format(bd->sizes, bd->ndim, a, sizeof a),
                            tn_shape_format(self->sizes, self->ndim, b, sizeof b));
    return TN_OK;
}

/* The dtype both are compared in: result_type's (a 0-dim self ranks below
 * the boundaries, a wrapped number, the Scalar overloads', below both);
 * TN_DTYPE_UNSET with the error of AT_DISPATCH where the kernel has none. */
static enum tn_dtype common_dtype(const struct tn_tensor *bd, const struct tn_tensor *self)
{
    const struct tn_tensor *both[2] = {bd, self};
    enum tn_dtype c = tn_result_type(both, 2, NULL, 0);
    if (c != TN_DTYPE_UNSET && (c == TN_BOOL || tn_dtype_is_complex(c))) {
        tn_set_error(TN_EDTYPE, "\"searchsorted_out_cpu\" not implemented for '%s'",
                     tn_dtype_info(c)->c10_name);
        return TN_DTYPE_UNSET;
    }
    return c;
}

/* sorter's entries must index its last dim */
static int check_sorter(const struct tn_tensor *st)
{
    int64_t n = tn_numel(st), last = st->sizes[st->ndim - 1];
    const int64_t *s = tn_data(st);
    for (int64_t i = 0; i < n; i++)
        if (s[i] < 0 || s[i] >= last)
            return tn_set_error(TN_ERUNTIME, "torch.searchsorted(): sorter index out of range");
    return TN_OK;
}

/* The positions into r (int64 or int32, self's shape, contiguous) from
 * contiguous values x and boundaries b of dtype dt (float64 or int64). */
static void search(const struct tn_tensor *b, const struct tn_tensor *x, const int64_t *sort,
                   bool right, struct tn_tensor *r)
{
    int64_t n = tn_numel(x), m = b->sizes[b->ndim - 1];
    int64_t row_in = x->ndim ? x->sizes[x->ndim - 1] : 1;
    bool one_d = b->ndim == 1, f = x->dtype == TN_FLOAT64;
    int64_t *o64 = r->dtype == TN_INT64 ? tn_data(r) : NULL;
    int32_t *o32 = r->dtype == TN_INT32 ? tn_data(r) : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t start = one_d ? 0 : i / row_in * m, pos;
        if (f)
            pos = bound_f64(start, start + m, ((const double *)tn_data(x))[i], tn_data(b), sort, right);
        else
            pos = bound_i64(start, start + m, ((const int64_t *)tn_data(x))[i], tn_data(b), sort,
                            right);
        pos -= start;
        if (o64)
            o64[i] = pos;
        else
            o32[i] = (int32_t)pos;
    }
}

/* searchsorted.Tensor (CPU and Meta): self's shape, int64 (int32 with
 * out_int32). */
struct tn_tensor *tn__cpu_searchsorted(tn_keyset ks, const struct tn_tensor *sorted_sequence,
                                       const struct tn_tensor *self, bool out_int32, bool right,
                                       const char *side, const struct tn_tensor *sorter)
{
    (void)ks;
    if (pre_check(sorted_sequence, self, right, side, sorter) < 0)
        return NULL;
    bool is_right = side ? !strcmp(side, "right") : right;
    /* on the boundaries' device: self may be a wrapped number (CPU) */
    struct tn_tensor *r = tn_empty_on(self->sizes, self->ndim, out_int32 ? TN_INT32 : TN_INT64,
                                      sorted_sequence->device);
    if (!r || sorted_sequence->device.type == TN_DEVICE_META ||
        self->device.type == TN_DEVICE_META || tn_numel(self) == 0)
        return r;
    enum tn_dtype common = common_dtype(sorted_sequence, self);
    if (common == TN_DTYPE_UNSET) {
        tn_release(r);
        return NULL;
    }
    enum tn_dtype key = tn_dtype_is_floating(common) ? TN_FLOAT64 : TN_INT64;
    /* cast to the common dtype first: its rounding, then exactly widened */
    struct tn_tensor *bc = tn_to_dtype(sorted_sequence, common), *xc = tn_to_dtype(self, common);
    struct tn_tensor *bk = bc ? tn_to_dtype(bc, key) : NULL, *xk = xc ? tn_to_dtype(xc, key) : NULL;
    struct tn_tensor *b = bk ? tn_contiguous(bk) : NULL, *x = xk ? tn_contiguous(xk) : NULL;
    struct tn_tensor *st = sorter && x ? tn_contiguous(sorter) : NULL;
    bool ok = x && b && (!sorter || (st && check_sorter(st) == TN_OK));
    if (ok)
        search(b, x, st ? tn_data(st) : NULL, is_right, r);
    tn_release(bc), tn_release(xc), tn_release(bk), tn_release(xk);
    tn_release(b), tn_release(x), tn_release(st);
    if (!ok) {
        tn_release(r);
        return NULL;
    }
    return r;
}
