/*
 * autograd/formulas_select.c: the backward helpers of the ops that pick,
 * move or multiply elements (max.dim/min.dim/sort/topk, index_select,
 * masked_select, roll, repeat, prod, cumprod), computed as PyTorch's
 * FunctionsManual.cpp computes them. Written with the public ops, so a
 * backward under create_graph records its own graph. Each returns a new
 * tensor or NULL with an error; arguments are borrowed.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"

/* value_selecting_reduction_backward: grad scattered back to where the
 * selected values came from (indices along dim), zeros elsewhere. */
struct tn_tensor *tn__value_selecting_bw(const struct tn_tensor *grad, int64_t dim,
                                         const struct tn_tensor *indices, const int64_t *sizes,
                                         int ndim, bool keepdim)
{
    if (ndim == 0)
        return tn_clone(grad);
    int d = tn_wrap_dim(dim, ndim);
    if (d < 0)
        return NULL;
    struct tn_tensor *g = NULL, *i = NULL, *r = NULL;
    STEP(g, keepdim ? tn_retain((struct tn_tensor *)grad) : tn_unsqueeze(grad, d));
    STEP(i, keepdim ? tn_retain((struct tn_tensor *)indices) : tn_unsqueeze(indices, d));
    STEP(r, tn_zeros(sizes, ndim, grad->dtype));
    STEP(r, tn_scatter_src(r, d, i, g));
fail:
    tn_release(g);
    tn_release(i);
    return r;
}

/* index_select_backward: zeros(sizes).index_add_(dim, index, grad), as a
 * scatter_add over the index spread along dim. */
struct tn_tensor *tn__index_select_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                      int ndim, int64_t dim, const struct tn_tensor *index)
{
    if (ndim == 0)
        return tn_clone(grad);
    int d = tn_wrap_dim(dim, ndim);
    if (d < 0)
        return NULL;
    int64_t shape[TN_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        shape[k] = k == d ? tn_numel(index) : 1;
    struct tn_tensor *i = NULL, *r = NULL;
    STEP(i, tn_to_dtype(index, TN_INT64));
    STEP(i, tn_reshape(i, shape, ndim));
    STEP(i, tn_expand(i, grad->sizes, grad->ndim));
    STEP(r, tn_zeros(sizes, ndim, grad->dtype));
    STEP(r, tn_scatter_add(r, d, i, grad));
fail:
    tn_release(i);
    return r;
}

/* masked_select_backward: grad put back where the mask (broadcast with
 * the input's sizes) holds, zeros elsewhere; the engine sums a broadcast
 * result down to the input. */
struct tn_tensor *tn__masked_select_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                       int ndim, const struct tn_tensor *mask)
{
    int64_t shape[TN_MAX_DIMS], numel = 1;
    int n = ndim > mask->ndim ? ndim : mask->ndim;
    for (int k = 0; k < n; k++) {
        int a = k - (n - ndim), b = k - (n - mask->ndim);
        int64_t x = a >= 0 ? sizes[a] : 1, y = b >= 0 ? mask->sizes[b] : 1;
        shape[k] = x == 1 ? y : x;
        numel *= shape[k];
    }
    struct tn_tensor *m = NULL, *pos = NULL, *r = NULL;
    STEP(m, tn_expand(mask, shape, n));
    STEP(m, tn_reshape(m, (const int64_t[]){numel}, 1));
    STEP(pos, tn_nonzero(m));
    STEP(pos, tn_reshape(pos, (const int64_t[]){pos->sizes[0]}, 1));
    STEP(r, tn_zeros((const int64_t[]){numel}, 1, grad->dtype));
    STEP(r, tn_scatter_src(r, 0, pos, grad));
    STEP(r, tn_reshape(r, shape, n));
fail:
    tn_release(m);
    tn_release(pos);
    return r;
}

/* roll's backward: grad rolled back by the opposite shifts. */
struct tn_tensor *tn__roll_bw(const struct tn_tensor *grad, const int64_t *shifts, int nshifts,
                              const int64_t *dims, int ndims)
{
    int64_t neg[TN_MAX_DIMS];
    if (nshifts > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "roll: more than %d shifts", TN_MAX_DIMS);
        return NULL;
    }
    for (int k = 0; k < nshifts; k++)
        neg[k] = -shifts[k];
    return tn_roll(grad, neg, nshifts, dims, ndims);
}

/* repeat_backward: each input element's gradient summed over its copies:
 * grad's leading (added) dims summed, then every repeated dim r*s seen as
 * (r, s) and the r summed, in one reshape and sum. */
struct tn_tensor *tn__repeat_bw(const struct tn_tensor *grad, const int64_t *repeats, int nrep,
                                const int64_t *sizes, int ndim)
{
    for (int k = 0; k < nrep; k++)
        if (repeats[k] == 0)
            return tn_zeros(sizes, ndim, grad->dtype);
    int lead = grad->ndim - ndim;
    struct tn_tensor *g = tn_retain((struct tn_tensor *)grad);
    for (int k = 0; k < lead; k++)
        STEP(g, tn_sum_dim_intlist(g, (const int64_t[]){0}, 1, false, TN_DTYPE_UNSET));
    int64_t gs[2 * TN_MAX_DIMS], sd[TN_MAX_DIMS];
    int ng = 0, ns = 0;
    for (int d = 0; d < ndim; d++) {
        if (repeats[d + lead] != 1) {
            gs[ng++] = repeats[d + lead];
            sd[ns++] = ng - 1;
        }
        gs[ng++] = sizes[d];
    }
    if (ns) {
        STEP(g, tn_reshape(g, gs, ng));
        STEP(g, tn_sum_dim_intlist(g, sd, ns, false, TN_DTYPE_UNSET));
    }
    return g;
fail:
    return NULL;
}

/* The number of zeros in t (-1 with an error). */
static int64_t count_zeros(const struct tn_tensor *t)
{
    struct tn_tensor *z = NULL, *s = NULL;
    int64_t n = -1;
    STEP(z, tn_eq_scalar(t, tn_int(0)));
    STEP(s, tn_sum(z, TN_INT64));
    n = tn_item(s).v.i;
fail:
    tn_release(z);
    tn_release(s);
    return n;
}

/* prod_safe_zeros_backward: the product of every other element of the
 * slice along dim, as exclusive cumulative products from both ends (right
 * with any number of zeros). */
static struct tn_tensor *prod_safe_zeros(const struct tn_tensor *grad,
                                         const struct tn_tensor *inp, int dim)
{
    if (tn_numel(inp) == 0)
        return tn_expand(grad, inp->sizes, inp->ndim);
    int64_t os[TN_MAX_DIMS], n = inp->sizes[dim];
    memcpy(os, inp->sizes, sizeof(int64_t) * (size_t)inp->ndim);
    os[dim] = 1;
    struct tn_tensor *ones = NULL, *a = NULL, *b = NULL, *r = NULL;
    const int64_t dims[1] = {dim};
    STEP(ones, tn_ones(os, inp->ndim, grad->dtype));
    STEP(a, tn_narrow(inp, dim, 0, n - 1));
    STEP(a, tn_cat((const struct tn_tensor *const[]){ones, a}, 2, dim));
    STEP(a, tn_cumprod(a, dim, TN_DTYPE_UNSET));
    STEP(b, tn_narrow(inp, dim, 1, n - 1));
    STEP(b, tn_flip(b, dims, 1));
    STEP(b, tn_cat((const struct tn_tensor *const[]){ones, b}, 2, dim));
    STEP(b, tn_cumprod(b, dim, TN_DTYPE_UNSET));
    STEP(b, tn_flip(b, dims, 1));
    STEP(r, tn_mul(a, b));
    STEP(r, tn_mul(grad, r));
fail:
    tn_release(ones);
    tn_release(a);
    tn_release(b);
    return r;
}

/* grad * result / input: prod's gradient where no input is zero. */
static struct tn_tensor *prod_no_zeros(const struct tn_tensor *grad, const struct tn_tensor *input,
                                       const struct tn_tensor *result)
{
    struct tn_tensor *q = tn_div(result, input);
    struct tn_tensor *r = q ? tn_mul(grad, q) : NULL;
    tn_release(q);
    return r;
}

/* prod()'s backward (PyTorch's prod_backward without a dim). */
struct tn_tensor *tn__prod_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                              const struct tn_tensor *result)
{
    if (input->ndim == 0)
        return tn_clone(grad);
    int64_t zeros = count_zeros(input);
    if (zeros < 0)
        return NULL;
    if (zeros == 0)
        return prod_no_zeros(grad, input, result);
    if (!tn_is_grad_enabled() && zeros > 1)
        return tn_zeros_like(input, TN_DTYPE_UNSET);
    struct tn_tensor *flat = tn_reshape(input, (const int64_t[]){tn_numel(input)}, 1);
    struct tn_tensor *g = flat ? prod_safe_zeros(grad, flat, 0) : NULL;
    struct tn_tensor *r = g ? tn_reshape(g, input->sizes, input->ndim) : NULL;
    tn_release(flat);
    tn_release(g);
    return r;
}

/* prod.dim_int's backward. */
struct tn_tensor *tn__prod_dim_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                                  const struct tn_tensor *result, int64_t dim, bool keepdim)
{
    if (input->ndim == 0)
        return tn_clone(grad);
    int d = tn_wrap_dim(dim, input->ndim);
    if (d < 0)
        return NULL;
    struct tn_tensor *g = NULL, *res = NULL, *r = NULL;
    bool unsq = !keepdim && input->ndim != 1;
    STEP(g, unsq ? tn_unsqueeze(grad, d) : tn_retain((struct tn_tensor *)grad));
    STEP(res, unsq ? tn_unsqueeze(result, d) : tn_retain((struct tn_tensor *)result));
    int64_t zeros = count_zeros(input);
    if (zeros < 0)
        goto fail;
    r = zeros == 0 ? prod_no_zeros(g, input, res) : prod_safe_zeros(g, input, d);
fail:
    tn_release(g);
    tn_release(res);
    return r;
}

/* w flipped along dim, summed cumulatively, flipped back. */
static struct tn_tensor *reversed_cumsum(const struct tn_tensor *w, int dim)
{
    const int64_t dims[1] = {dim};
    struct tn_tensor *r = NULL;
    STEP(r, tn_flip(w, dims, 1));
    STEP(r, tn_cumsum(r, dim, TN_DTYPE_UNSET));
    STEP(r, tn_flip(r, dims, 1));
fail:
    return r;
}

/* The gradient of slice k of cumprod along dim where inputs may be zero:
 * (grad[k:] * the products of input[:k+1..] without input[k]) summed,
 * PyTorch's O(n^2) path (which also differentiates twice). */
static struct tn_tensor *cumprod_slice_bw(const struct tn_tensor *grad,
                                          const struct tn_tensor *input, int dim, int64_t k)
{
    int64_t n = input->sizes[dim];
    int64_t os[TN_MAX_DIMS];
    memcpy(os, input->sizes, sizeof(int64_t) * (size_t)input->ndim);
    os[dim] = 1;
    struct tn_tensor *until = NULL, *from = NULL, *om = NULL, *g = NULL;
    if (k > 0) {
        STEP(until, tn_narrow(input, dim, 0, k));
        STEP(until, tn_prod_dim_int(until, dim, true, TN_DTYPE_UNSET));
    } else {
        STEP(until, tn_ones(os, input->ndim, grad->dtype));
    }
    if (k < n - 1) {
        STEP(from, tn_narrow(input, dim, k + 1, n - k - 1));
        STEP(from, tn_cumprod(from, dim, TN_DTYPE_UNSET));
        STEP(om, tn_mul(until, from));
        STEP(om, tn_cat((const struct tn_tensor *const[]){until, om}, 2, dim));
    } else {
        STEP(om, tn_retain(until));
    }
    STEP(g, tn_narrow(grad, dim, k, n - k));
    STEP(g, tn_mul(g, om));
    STEP(g, tn_sum_dim_intlist(g, (const int64_t[]){dim}, 1, true, TN_DTYPE_UNSET));
fail:
    tn_release(until);
    tn_release(from);
    tn_release(om);
    return g;
}

/* cumprod_backward: reversed_cumsum(result * grad) / input without zeros,
 * slice by slice with them. */
struct tn_tensor *tn__cumprod_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                                 int64_t dim, const struct tn_tensor *result)
{
    if (tn_numel(input) <= 1)
        return tn_clone(grad);
    int d = tn_wrap_dim(dim, input->ndim ? input->ndim : 1);
    if (d < 0)
        return NULL;
    int64_t n = input->ndim ? input->sizes[d] : 1;
    if (n == 1)
        return tn_clone(grad);
    int64_t zeros = count_zeros(input);
    if (zeros < 0)
        return NULL;
    struct tn_tensor *r = NULL;
    if (zeros == 0) {
        STEP(r, tn_mul(result, grad));
        STEP(r, reversed_cumsum(r, d));
        STEP(r, tn_div(r, input));
        return r;
    }
    struct tn_tensor **parts = calloc((size_t)n, sizeof *parts);
    if (!parts) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    int64_t k = 0;
    while (k < n && (parts[k] = cumprod_slice_bw(grad, input, d, k)))
        k++;
    if (k == n)
        r = tn_cat((const struct tn_tensor *const *)parts, (int)n, d);
    for (int64_t i = 0; i < k; i++)
        tn_release(parts[i]);
    free(parts);
    return r;
fail:
    return NULL;
}

/* native_dropout's backward: grad * mask * scale, scale 1/(1-p) when
 * training (0 for p = 1), 1 otherwise; through native_dropout_backward
 * unless a graph is being recorded, as PyTorch. */
struct tn_tensor *tn__native_dropout_bw(const struct tn_tensor *grad, const struct tn_tensor *mask,
                                        double p, const bool *train)
{
    double scale = !train || !*train ? 1.0 : p == 1 ? 0.0 : 1.0 / (1.0 - p);
    if (!tn_is_grad_enabled())
        return tn_native_dropout_backward(grad, mask, scale);
    struct tn_tensor *m = tn_to_dtype(mask, grad->dtype), *r = NULL;
    STEP(r, tn_mul(grad, m));
    STEP(r, tn_mul_scalar(r, tn_float(scale)));
fail:
    tn_release(m);
    return r;
}

/* scatter_reduce_backward (FunctionsManual.cpp) for the five reductions:
 * which 0 is self's gradient, 1 src's. sum: grad, and grad gathered;
 * mean: grad over each place's count (self's own value counted with
 * include_self); prod: the product without the element, zeros handled as
 * PyTorch does (a lone zero of src takes the product of the others, two
 * zeros give 0); amax/amin: grad shared evenly among the elements equal to
 * the result. Without include_self, self's scattered-to places get 0. */
/* mean's count N of each place (self's own value counted with
 * include_self; places nothing reaches count 1) */
static struct tn_tensor *scatter_mean_count(const struct tn_tensor *grad, int64_t dim,
                                            const struct tn_tensor *index,
                                            const struct tn_tensor *src, bool include_self)
{
    struct tn_tensor *n = NULL, *b = NULL;
    STEP(n, include_self ? tn_ones_like(grad, TN_DTYPE_UNSET)
                         : tn_zeros_like(grad, TN_DTYPE_UNSET));
    STEP(b, tn_ones_like(src, TN_DTYPE_UNSET));
    STEP(n, tn_scatter_add(n, dim, index, b));
    STEP(b, tn_eq_scalar(n, tn_int(0)));
    STEP(n, tn_masked_fill_scalar(n, b, tn_int(1)));
fail:
    tn_release(b);
    return n;
}

/* grad and n gathered at the index, grad's over n's */
static struct tn_tensor *div_gathered(const struct tn_tensor *grad,
                                              const struct tn_tensor *n, int64_t dim,
                                              const struct tn_tensor *index)
{
    struct tn_tensor *g = NULL, *m = NULL;
    STEP(g, tn_gather(grad, dim, index, false));
    STEP(m, tn_gather(n, dim, index, false));
    STEP(g, tn_div(g, m));
fail:
    tn_release(m);
    return g;
}

/* amax/amin: grad over the count of elements equal to the result, and
 * (in *self_is, *src_is) which of self's and src's are */
static struct tn_tensor *scatter_minmax_share(const struct tn_tensor *grad,
                                              const struct tn_tensor *self, int64_t dim,
                                              const struct tn_tensor *index,
                                              const struct tn_tensor *src,
                                              const struct tn_tensor *result,
                                              struct tn_tensor **self_is, struct tn_tensor **src_is)
{
    struct tn_tensor *c = NULL, *n = NULL;
    *self_is = *src_is = NULL;
    STEP(c, tn_gather(result, dim, index, false));
    STEP(*src_is, tn_eq(src, c));
    STEP(c, tn_to_dtype(*src_is, self->dtype));
    STEP(*self_is, tn_eq(self, result));
    STEP(n, tn_to_dtype(*self_is, self->dtype));
    STEP(n, tn_scatter_add(n, dim, index, c));
    STEP(n, tn_div(grad, n));
fail:
    tn_release(c);
    return n;
}

struct tn_tensor *tn__scatter_reduce_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                        int64_t dim, const struct tn_tensor *index,
                                        const struct tn_tensor *src, const char *reduce,
                                        bool include_self, const struct tn_tensor *result,
                                        int which)
{
    struct tn_tensor *a = NULL, *b = NULL, *c = NULL, *r = NULL;
    bool minmax = strcmp(reduce, "amax") == 0 || strcmp(reduce, "amin") == 0;
    if (strcmp(reduce, "sum") == 0) {
        STEP(r, which == 0 ? tn_retain((struct tn_tensor *)grad)
                           : tn_gather(grad, dim, index, false));
    } else if (strcmp(reduce, "prod") == 0 && which == 0) {
        STEP(a, tn_eq_scalar(self, tn_int(0)));
        STEP(a, tn_masked_fill_scalar(self, a, tn_int(1)));  /* masked_self */
        STEP(b, tn_scatter_reduce_two(a, dim, index, src, reduce, include_self));
        STEP(r, tn_mul(grad, b));
        STEP(r, tn_div(r, a));
    } else if (strcmp(reduce, "prod") == 0) {
        STEP(a, tn_eq_scalar(src, tn_int(0)));                /* src_zero */
        STEP(b, tn_zeros_like(self, TN_DTYPE_UNSET));
        STEP(c, tn_to_dtype(a, self->dtype));
        STEP(b, tn_scatter_add(b, dim, index, c));
        STEP(b, tn_gather(b, dim, index, false));
        STEP(b, tn_eq_scalar(b, tn_int(1)));
        STEP(b, tn_logical_and(a, b));                         /* src_single_zero */
        STEP(c, tn_masked_fill_scalar(src, b, tn_int(1)));     /* masked_src */
        STEP(c, tn_scatter_reduce_two(self, dim, index, c, reduce, include_self));
        STEP(c, tn_mul(grad, c));
        STEP(c, tn_gather(c, dim, index, false));              /* the lone zeros' */
        STEP(r, tn_mul(grad, result));
        STEP(r, tn_gather(r, dim, index, false));
        STEP(a, tn_masked_fill_scalar(src, a, tn_int(1)));
        STEP(r, tn_div(r, a));
        STEP(r, tn_where_self(b, c, r));
    } else if (strcmp(reduce, "mean") == 0 || minmax) {
        /* mean: grad / N; amax/amin: (is the result) * grad / the count
         * of those; src's gathered at the index */
        STEP(a, minmax ? scatter_minmax_share(grad, self, dim, index, src, result, &b, &c)
                       : scatter_mean_count(grad, dim, index, src, include_self));
        if (!minmax)
            STEP(a, which == 0 ? tn_div(grad, a) : div_gathered(grad, a, dim, index));
        else if (which == 1)
            STEP(a, tn_gather(a, dim, index, false));
        STEP(r, !minmax ? tn_retain(a) : tn_mul(which == 0 ? b : c, a));
    } else {
        tn_set_error(TN_EINVAL, "reduce argument must be either sum, prod, mean, amax or amin, "
                     "got %s", reduce);
        goto fail;
    }
    if (which == 0 && !include_self)
        STEP(r, tn_scatter_value(r, dim, index, tn_int(0)));
fail:
    tn_release(a);
    tn_release(b);
    tn_release(c);
    return r;
}
