/*
 * autograd/gradcheck.c: torch.autograd.gradcheck: the Jacobian backward
 * computes against central finite differences, in float64.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"

/* The address of element k (row-major) of a float64 tensor. */
static double *elem(const struct tn_tensor *t, int64_t k)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (k % t->sizes[d]) * t->strides[d];
        k /= t->sizes[d];
    }
    return (double *)tn_data(t) + off;
}

/* fn's output as float64 values (row-major), under no grad. */
static int eval(tn_gradcheck_fn fn, struct tn_tensor *const *in, void *ctx, double *out,
                int64_t n)
{
    bool prev = tn_set_grad_enabled(false);
    struct tn_tensor *r = fn(in, ctx);
    tn_set_grad_enabled(prev);
    if (!r)
        return tn_last_status();
    struct tn_tensor *d = tn_to_dtype(r, TN_FLOAT64);
    tn_release(r);
    if (!d)
        return tn_last_status();
    if (tn_numel(d) != n) {
        tn_release(d);
        return tn_set_error(TN_ESHAPE, "gradcheck: the function's output changed size");
    }
    for (int64_t k = 0; k < n; k++)
        out[k] = *elem(d, k);
    tn_release(d);
    return TN_OK;
}

int tn_gradcheck(tn_gradcheck_fn fn, struct tn_tensor *const *inputs, int ninputs, void *ctx,
                 double eps, double atol, double rtol)
{
    for (int i = 0; i < ninputs; i++)
        if (inputs[i] && inputs[i]->requires_grad && inputs[i]->dtype != TN_FLOAT64)
            return tn_set_error(TN_EDTYPE, "gradcheck: input %d is %s; gradcheck needs float64 "
                                "inputs", i, tn_dtype_name(inputs[i]->dtype));
    struct tn_tensor *out = fn(inputs, ctx);
    if (!out)
        return tn_last_status();
    int64_t m = tn_numel(out);
    int rc = 1;
    struct tn_tensor *wrt[64];
    int nw = 0, idx[64];
    double *plus = malloc(sizeof(double) * (size_t)(m ? m : 1));
    double *minus = malloc(sizeof(double) * (size_t)(m ? m : 1));
    struct tn_tensor **rows = calloc((size_t)(m ? m : 1) * (size_t)(ninputs ? ninputs : 1),
                                     sizeof *rows);
    if (!plus || !minus || !rows) {
        rc = tn_set_error(TN_ENOMEM, "gradcheck: out of memory");
        goto done;
    }
    if (!out->requires_grad) {
        rc = tn_set_error(TN_ERUNTIME, "gradcheck: the output does not require grad");
        goto done;
    }
    /* analytical: one backward per output element, d out[j] / d inputs */
    for (int i = 0; i < ninputs && nw < 64; i++)
        if (inputs[i] && inputs[i]->requires_grad) {
            idx[nw] = i;
            wrt[nw++] = inputs[i];
        }
    for (int64_t j = 0; j < m && rc == 1; j++) {
        /* a new one-hot each time: a gradient may come back as this very tensor */
        struct tn_tensor *hot = tn_zeros(out->sizes, out->ndim, out->dtype);
        struct tn_tensor *flat = hot ? tn_reshape(hot, TN_SHAPE(-1)) : NULL;
        struct tn_tensor *e = flat ? tn_select(flat, 0, j) : NULL;
        int r = e ? tn_fill_(e, tn_int(1)) : tn_last_status();
        if (r == TN_OK)
            r = tn_grad(&out, 1, &hot, wrt, nw, true, false, true, &rows[j * nw]);
        tn_release(e);
        tn_release(flat);
        tn_release(hot);
        if (r < 0)
            rc = r;
    }
    /* numerical, column by column, compared as we go */
    for (int w = 0; w < nw && rc == 1; w++) {
        struct tn_tensor *x = wrt[w];
        for (int64_t k = 0; k < tn_numel(x) && rc == 1; k++) {
            double *p = elem(x, k), orig = *p;
            *p = orig + eps;
            int r = eval(fn, inputs, ctx, plus, m);
            *p = orig - eps;
            if (r == TN_OK)
                r = eval(fn, inputs, ctx, minus, m);
            *p = orig;
            if (r < 0) {
                rc = r;
                break;
            }
            for (int64_t j = 0; j < m; j++) {
                double num = (plus[j] - minus[j]) / (2 * eps);
                const struct tn_tensor *g = rows[j * nw + w];
                double ana = 0;
                if (g) {
                    struct tn_tensor *gd = tn_to_dtype(g, TN_FLOAT64);
                    ana = gd ? *elem(gd, k) : NAN;
                    tn_release(gd);
                }
                if (!(fabs(ana - num) <= atol + rtol * fabs(num))) {
                    tn_set_error(TN_ERUNTIME, "Jacobian mismatch for output %lld with respect to "
                                 "input %d, element %lld: numerical %.10g, analytical %.10g",
                                 (long long)j, idx[w], (long long)k, num, ana);
                    rc = 0;
                    break;
                }
            }
        }
    }
done:
    if (rows)
        for (int64_t j = 0; j < m * nw; j++)
            tn_release(rows[j]);
    free(rows);
    free(plus);
    free(minus);
    tn_release(out);
    return rc;
}
