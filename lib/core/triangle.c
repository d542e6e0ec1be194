/*
 * core/triangle.c: tril_indices and triu_indices as PyTorch's CPU kernels
 * (TensorFactories.cpp): the coordinates of a row x col matrix's lower
 * (c <= r + offset) or upper (c >= r + offset) triangle in row-major order,
 * rows in the result's row 0 and columns in its row 1; int64 by default,
 * int32 too (AT_DISPATCH_INDEX_TYPES), other dtypes refused in its words.
 */
#include "core/internal.h"

/* row r's columns in the triangle: [*lo, *hi) */
static void span(int64_t r, int64_t col, int64_t offset, bool upper, int64_t *lo, int64_t *hi)
{
    int64_t a = upper ? r + offset : 0, b = upper ? col : r + offset + 1;
    a = a < 0 ? 0 : a > col ? col : a;
    *lo = a;
    *hi = b < a ? a : b > col ? col : b;
}

static struct tn_tensor *indices(const char *op, int64_t row, int64_t col, int64_t offset,
                                 enum tn_dtype dtype, bool upper)
{
    if (row < 0)
        return tn_set_error(TN_EINVAL, "row must be non-negative, got%lld", (long long)row), NULL;
    if (col < 0)
        return tn_set_error(TN_EINVAL, "col must be non-negative, got%lld", (long long)col), NULL;
    if (dtype == TN_DTYPE_UNSET)
        dtype = TN_INT64;
    if (dtype != TN_INT64 && dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op,
                            tn_dtype_info(dtype)->c10_name), NULL;
    int64_t n = 0, lo, hi;
    for (int64_t r = 0; r < row; r++) {
        span(r, col, offset, upper, &lo, &hi);
        n += hi - lo;
    }
    struct tn_tensor *t = tn_empty((int64_t[]){2, n}, 2, dtype);
    if (!t)
        return NULL;
    int64_t i = 0;
    for (int64_t r = 0; r < row; r++) {
        span(r, col, offset, upper, &lo, &hi);
        for (int64_t c = lo; c < hi; c++, i++) {
            if (dtype == TN_INT64) {
                ((int64_t *)tn_data(t))[i] = r;
                ((int64_t *)tn_data(t))[n + i] = c;
            } else {
                ((int32_t *)tn_data(t))[i] = (int32_t)r;
                ((int32_t *)tn_data(t))[n + i] = (int32_t)c;
            }
        }
    }
    return t;
}

struct tn_tensor *tn_tril_indices(int64_t row, int64_t col, int64_t offset, enum tn_dtype dtype)
{
    return indices("tril_indices", row, col, offset, dtype, false);
}

struct tn_tensor *tn_triu_indices(int64_t row, int64_t col, int64_t offset, enum tn_dtype dtype)
{
    return indices("triu_indices", row, col, offset, dtype, true);
}
