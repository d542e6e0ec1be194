/*
 * ops/isin.c: isin (.Tensor_Tensor, .Tensor_Scalar, .Scalar_Tensor) as
 * PyTorch's CPU kernels (TensorCompare.cpp) pick them: fewer test elements
 * than numpy's 10 * numel^0.145 compares each element with all of them in
 * their common dtype; more goes through isin_sorting (the unique elements,
 * or all with assume_unique, and the unique test elements, stably sorted
 * together, an element found where its next neighbour equals it), so
 * assume_unique with repeated elements gives what PyTorch's gives. Bool
 * results: no gradient.
 */
#include <config.h>

#include <math.h>

#include "ops/internal.h"

static int isin_scalar_ok(struct tn_scalar s)
{
    if (s.kind == TN_SCALAR_BOOL)
        return tn_set_error(TN_ERUNTIME, "Unsupported input type encountered for isin(): Bool");
    return TN_OK;
}

static int isin_dtype_ok(const struct tn_tensor *t)
{
    if (t->dtype == TN_BOOL || tn_dtype_is_complex(t->dtype))
        return tn_set_error(TN_ERUNTIME, "Unsupported input type encountered for isin(): %s",
                            tn_dtype_info(t->dtype)->c10_name);
    return TN_OK;
}

/* isin_default_kernel_cpu: each element against every test element */
static struct tn_tensor *isin_default(const struct tn_tensor *e, const struct tn_tensor *t,
                                      bool invert)
{
    const struct tn_tensor *both[2] = {e, t};
    enum tn_dtype dt = tn_result_type(both, 2, NULL, 0);
    int64_t flat = -1;
    struct tn_tensor *h[6] = {NULL}, *r = NULL;
    if (dt != TN_DTYPE_UNSET && (h[0] = tn_to_dtype(e, dt)) && (h[1] = tn_unsqueeze(h[0], -1)) &&
        (h[2] = tn_to_dtype(t, dt)) && (h[3] = tn_reshape(h[2], &flat, 1)) &&
        (h[4] = tn_eq(h[1], h[3])) && (h[5] = tn_any_dim(h[4], -1, false)))
        r = invert ? tn_logical_not(h[5]) : tn_retain(h[5]);
    for (int i = 0; i < 6; i++)
        tn_release(h[i]);
    return r;
}

/* isin_sorting: steps 1 to 5 of PyTorch's */
static struct tn_tensor *isin_sorting(const struct tn_tensor *e, const struct tn_tensor *t,
                                      bool assume_unique, bool invert)
{
    struct tn_tensor *h[14] = {NULL}, *r = NULL, *order = NULL;
    int64_t flat = -1, one = 1;
    bool stable = true;
    int ok;
    if (assume_unique)
        ok = (h[0] = tn_reshape(e, &flat, 1)) && (h[1] = tn_reshape(t, &flat, 1));
    else
        ok = tn_underscore_unique2(e, false, true, false, &h[0], &order, &h[12]) >= 0 &&
             tn_underscore_unique2(t, false, false, false, &h[1], &h[13], &h[11]) >= 0;
    const struct tn_tensor *parts[2] = {h[0], h[1]};
    int64_t n = ok ? tn_numel(h[0]) + tn_numel(h[1]) : 0;
    if (ok && (h[2] = tn_cat(parts, 2, 0)) &&
        tn_sort_stable(h[2], &stable, 0, false, &h[3], &h[4]) >= 0 &&
        (h[5] = tn_slice(h[3], 0, 1, n, 1)) && (h[6] = tn_slice(h[3], 0, 0, n - 1, 1)) &&
        (h[7] = invert ? tn_ne(h[5], h[6]) : tn_eq(h[5], h[6])) &&
        (h[8] = tn_scalar_tensor(tn_bool(invert), TN_BOOL)) &&
        (h[9] = tn_reshape(h[8], &one, 1))) {
        const struct tn_tensor *dup[2] = {h[7], h[9]};
        struct tn_tensor *mask = tn_cat(dup, 2, 0);
        struct tn_tensor *back = mask ? tn_scatter_src(mask, 0, h[4], mask) : NULL;
        if (back && assume_unique) {
            struct tn_tensor *first = tn_slice(back, 0, 0, tn_numel(e), 1);
            r = first ? tn_reshape(first, e->sizes, e->ndim) : NULL;
            tn_release(first);
        } else if (back) {
            const struct tn_tensor *idx[1] = {order};
            r = tn_index(back, idx, 1);
        }
        tn_release(back);
        tn_release(mask);
    }
    tn_release(order);
    for (int i = 0; i < 14; i++)
        tn_release(h[i]);
    return r;
}

struct tn_tensor *tn__composite_isin_tensor_tensor(tn_keyset ks, const struct tn_tensor *elements,
                                                   const struct tn_tensor *test_elements,
                                                   bool assume_unique, bool invert)
{
    (void)ks;
    if (isin_dtype_ok(elements) < 0 || isin_dtype_ok(test_elements) < 0)
        return NULL;
    if (!tn_numel(elements))
        return tn_empty(elements->sizes, elements->ndim, TN_BOOL);
    /* numpy's heuristic, as PyTorch computes it */
    if (tn_numel(test_elements) < (int64_t)(10.0 * pow((double)tn_numel(elements), 0.145)))
        return isin_default(elements, test_elements, invert);
    return isin_sorting(elements, test_elements, assume_unique, invert);
}

struct tn_tensor *tn__composite_isin_tensor_scalar(tn_keyset ks, const struct tn_tensor *elements,
                                                   struct tn_scalar test_element,
                                                   bool assume_unique, bool invert)
{
    (void)ks, (void)assume_unique;
    if (isin_dtype_ok(elements) < 0 || isin_scalar_ok(test_element) < 0)
        return NULL;
    return invert ? tn_ne_scalar(elements, test_element) : tn_eq_scalar(elements, test_element);
}

struct tn_tensor *tn__composite_isin_scalar_tensor(tn_keyset ks, struct tn_scalar element,
                                                   const struct tn_tensor *test_elements,
                                                   bool assume_unique, bool invert)
{
    if (isin_scalar_ok(element) < 0)
        return NULL;
    struct tn_tensor *e = tn__wrapped_scalar(element);
    struct tn_tensor *r =
        e ? tn__composite_isin_tensor_tensor(ks, e, test_elements, assume_unique, invert) : NULL;
    tn_release(e);
    return r;
}
