/*
 * ops/pinv.c: the pseudoinverse over the SVD (linalg_pinv's overloads and
 * pinverse), linalg_vecdot and dist, as PyTorch's LinearAlgebra.cpp
 * composes them; gradients from autograd through their parts. hermitian=True
 * takes the SVD too (PyTorch: linalg_eigh, not here yet): the pseudoinverse
 * of a symmetric matrix is the same, its tolerance too (|eigenvalues| are
 * the singular values).
 */
#include <config.h>

#include <float.h>
#include <string.h>

#include "ops/lu_internal.h"
#include "ops/nn_internal.h"

/* PyTorch's get_atol_rtol default: eps(dtype) * max(m, n) */
static double default_rtol(const struct tn_tensor *A)
{
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    return (A->dtype == TN_FLOAT64 ? DBL_EPSILON : FLT_EPSILON) * (double)(m > n ? m : n);
}

static struct tn_tensor *f64(double v)
{
    return tn_scalar_tensor(tn_float(v), TN_FLOAT64);
}

/* V diag(Sinv) U^T over A's SVD, Sinv the reciprocals of the singular
 * values above max(atol, rtol * their largest), 0 elsewhere. */
static struct tn_tensor *pinv_svd(const struct tn_tensor *A, const struct tn_tensor *atol,
                                  const struct tn_tensor *rtol)
{
    struct tn_keep k = {0};
    struct tn_tensor *u, *s, *vh, *v, *ut, *inv, *t, *tol, *r;
    if (tn_linalg_svd(A, false, NULL, &u, &s, &vh) < 0)
        return NULL;
    tn__keep(&k, u);
    tn__keep(&k, s);
    tn__keep(&k, vh);
    TN_KEEP(&k, v, tn_transpose(vh, -2, -1));
    TN_KEEP(&k, ut, tn_transpose(u, -2, -1));
    TN_KEEP(&k, inv, tn_reciprocal(s));
    if (tn_numel(A) > 0) {
        TN_KEEP(&k, t, tn_narrow(s, -1, 0, 1));
        TN_KEEP(&k, tol, tn_unsqueeze(rtol, -1));
        TN_KEEP(&k, tol, tn_mul(tol, t));
        TN_KEEP(&k, t, tn_unsqueeze(atol, -1));
        TN_KEEP(&k, tol, tn_maximum(t, tol));
        TN_KEEP(&k, t, tn_gt(s, tol));
        TN_KEEP(&k, inv, tn_where_scalarother(t, inv, tn_int(0)));
        TN_KEEP(&k, inv, tn_to_dtype(inv, A->dtype));
    }
    TN_KEEP(&k, t, tn_unsqueeze(inv, -2));
    TN_KEEP(&k, r, tn_mul(v, t));
    TN_KEEP(&k, r, tn_matmul(r, ut));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_linalg_pinv_atol_rtol_tensor(tn_keyset ks,
                                                             const struct tn_tensor *self,
                                                             const struct tn_tensor *atol,
                                                             const struct tn_tensor *rtol,
                                                             bool hermitian)
{
    (void)ks;
    if ((self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64) || self->ndim < 2) {
        char s[128];
        return tn_set_error(TN_EDTYPE, "linalg.pinv(%s{%s}): expected a tensor with 2 or more "
                            "dimensions of float, double, cfloat or cdouble types",
                            tn_dtype_info(self->dtype)->c10_name,
                            tn_shape_format(self->sizes, self->ndim, s, sizeof s)), NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *a = (struct tn_tensor *)atol, *r = (struct tn_tensor *)rtol, *t, *p;
    if (!atol)
        TN_KEEP(&k, a, f64(0));
    if (!rtol) {
        TN_KEEP(&k, r, f64(default_rtol(self)));
        if (atol) { /* no default once atol > 0 */
            TN_KEEP(&k, t, tn_gt_scalar(atol, tn_int(0)));
            TN_KEEP(&k, p, f64(0));
            TN_KEEP(&k, r, tn_where_self(t, p, r));
        }
    }
    if (hermitian) { /* the symmetric matrix of A's lower triangle, as eigh reads it */
        struct tn_tensor *lo, *up;
        TN_KEEP(&k, lo, tn_tril(self, 0));
        TN_KEEP(&k, up, tn_tril(self, -1));
        TN_KEEP(&k, up, tn_transpose(up, -2, -1));
        TN_KEEP(&k, t, tn_add(lo, up, tn_int(1)));
        self = t;
    }
    TN_KEEP(&k, p, pinv_svd(self, a, r));
    return tn__keep_out(&k, p);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_linalg_pinv_atol_rtol_float(tn_keyset ks,
                                                            const struct tn_tensor *self,
                                                            const double *atol,
                                                            const double *rtol, bool hermitian)
{
    double a = atol ? *atol : 0;
    double r = rtol ? *rtol : a > 0 ? 0 : self->ndim >= 2 ? default_rtol(self) : 0;
    struct tn_tensor *at = f64(a), *rt = at ? f64(r) : NULL;
    struct tn_tensor *p =
        rt ? tn__composite_linalg_pinv_atol_rtol_tensor(ks, self, at, rt, hermitian) : NULL;
    tn_release(at);
    tn_release(rt);
    return p;
}

/* the rcond overloads: a tolerance relative to the largest singular value */
struct tn_tensor *tn__composite_linalg_pinv_rcond_tensor(tn_keyset ks,
                                                         const struct tn_tensor *self,
                                                         const struct tn_tensor *rcond,
                                                         bool hermitian)
{
    struct tn_tensor *at = f64(0);
    struct tn_tensor *p =
        at ? tn__composite_linalg_pinv_atol_rtol_tensor(ks, self, at, rcond, hermitian) : NULL;
    tn_release(at);
    return p;
}

struct tn_tensor *tn__composite_linalg_pinv(tn_keyset ks, const struct tn_tensor *self,
                                            double rcond, bool hermitian)
{
    double zero = 0;
    return tn__composite_linalg_pinv_atol_rtol_float(ks, self, &zero, &rcond, hermitian);
}

struct tn_tensor *tn__composite_pinverse(tn_keyset ks, const struct tn_tensor *self,
                                         double rcond)
{
    return tn__composite_linalg_pinv(ks, self, rcond, false);
}

/* PyTorch's linalg_vecdot (real case): the sum over dim of x * y, dot for
 * two vectors. */
struct tn_tensor *tn__composite_linalg_vecdot(tn_keyset ks, const struct tn_tensor *x,
                                              const struct tn_tensor *y, int64_t dim)
{
    (void)ks;
    if (tn__linalg_check_floating(x, "linalg.vecdot") < 0)
        return NULL;
    if (tn__linalg_check_same_dtype(x, y, "linalg.vecdot", "x", "y") < 0)
        return NULL;
    if (x->ndim == 1 && y->ndim == 1 && (dim == 0 || dim == -1))
        return tn_dot(x, y);
    struct tn_tensor *p = tn_mul(x, y);
    struct tn_tensor *r = p ? tn_sum_dim_intlist(p, &dim, 1, false, TN_DTYPE_UNSET) : NULL;
    tn_release(p);
    return r;
}

/* PyTorch's dist: the p-norm of self - other. */
struct tn_tensor *tn__composite_dist(tn_keyset ks, const struct tn_tensor *self,
                                     const struct tn_tensor *other, struct tn_scalar p)
{
    (void)ks;
    struct tn_tensor *d = tn_sub(self, other, tn_int(1));
    if (d && !tn_dtype_is_floating(d->dtype) && !tn_dtype_is_complex(d->dtype)) {
        tn_set_error(TN_EDTYPE, "norm(): input dtype should be either floating point or "
                     "complex. Got %s instead.", tn_dtype_info(d->dtype)->c10_name);
        tn_release(d);
        return NULL;
    }
    struct tn_tensor *r = d ? tn_linalg_vector_norm(d, p, NULL, 0, false, TN_DTYPE_UNSET) : NULL;
    tn_release(d);
    return r;
}

static struct tn_tensor *mT(const struct tn_tensor *t)
{
    return tn_transpose(t, -2, -1);
}

/* Contract in ops/lu_internal.h. With X = A+ and G = grad (X's shape):
 *   gA = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A),
 * multiplied out in the order that keeps the smaller of A's dims inside,
 * as PyTorch does. */
struct tn_tensor *tn__pinv_bw(const struct tn_tensor *grad, const struct tn_tensor *pinvA,
                              const struct tn_tensor *A)
{
    struct tn_keep k = {0};
    struct tn_tensor *xt, *gt, *kk, *r, *t, *u;
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    TN_KEEP(&k, xt, mT(pinvA));
    TN_KEEP(&k, gt, mT(grad));
    if (m <= n) {
        struct tn_tensor *kx;
        TN_KEEP(&k, kk, tn_matmul(gt, pinvA));  /* K = G^T X */
        TN_KEEP(&k, kx, tn_matmul(kk, xt));     /* K X^T */
        TN_KEEP(&k, r, tn_matmul(pinvA, kk));
        TN_KEEP(&k, r, mT(r));
        TN_KEEP(&k, r, tn_sub(kx, r, tn_int(1)));
        TN_KEEP(&k, t, tn_matmul(A, pinvA));
        TN_KEEP(&k, t, tn_matmul(t, kx));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
        TN_KEEP(&k, t, tn_matmul(kk, A));
        TN_KEEP(&k, t, tn_sub(gt, t, tn_int(1)));
        TN_KEEP(&k, u, tn_matmul(xt, pinvA));
        TN_KEEP(&k, t, tn_matmul(u, t));
        TN_KEEP(&k, r, tn_add(r, t, tn_int(1)));
    } else {
        struct tn_tensor *xk;
        TN_KEEP(&k, kk, tn_matmul(pinvA, gt));  /* K = X G^T */
        TN_KEEP(&k, xk, tn_matmul(xt, kk));     /* X^T K */
        TN_KEEP(&k, r, tn_matmul(kk, pinvA));
        TN_KEEP(&k, r, mT(r));
        TN_KEEP(&k, r, tn_sub(xk, r, tn_int(1)));
        TN_KEEP(&k, t, tn_matmul(A, kk));
        TN_KEEP(&k, t, tn_sub(gt, t, tn_int(1)));
        TN_KEEP(&k, u, tn_matmul(pinvA, xt));
        TN_KEEP(&k, t, tn_matmul(t, u));
        TN_KEEP(&k, r, tn_add(r, t, tn_int(1)));
        TN_KEEP(&k, t, tn_matmul(xk, pinvA));
        TN_KEEP(&k, t, tn_matmul(t, A));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
