/*
 * ops/solve.c: linear solves, inverses and determinants over the LU
 * (linalg_lu_factor_ex and linalg_lu_solve, ops/cpu/lu.c), as PyTorch's
 * BatchLinearAlgebra.cpp and LinearAlgebra.cpp compose them:
 * _linalg_solve_ex, linalg_solve_ex, linalg_solve, linalg_inv_ex,
 * linalg_inv, inverse, linalg_det, det, linalg_slogdet, slogdet, logdet.
 * Their gradients come from autograd through the LU's derivatives, which
 * for an invertible A are PyTorch's (-A^-T grad X^T, det A^-T, ...).
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/lu_internal.h"
#include "ops/nn_internal.h"

/* ----------------------------------------------------------------- solve */

/* PyTorch's linalg_solve_is_vector_rhs: B is a vector (or a batch of
 * them, of A's batch shape). */
static bool vector_rhs(const struct tn_tensor *A, const struct tn_tensor *B)
{
    return B->ndim == 1 ||
           (A->ndim - 1 == B->ndim &&
            memcmp(A->sizes, B->sizes, sizeof(int64_t) * (size_t)B->ndim) == 0);
}

/* PyTorch's _linalg_solve_ex: X with A X = B (X A = B without left) through
 * A's LU, a vector B taken as a column. */
int tn__composite__linalg_solve_ex(tn_keyset ks, const struct tn_tensor *A,
                                   const struct tn_tensor *B, bool left, bool check_errors,
                                   struct tn_tensor **result, struct tn_tensor **LU,
                                   struct tn_tensor **pivots, struct tn_tensor **info)
{
    (void)ks;
    if (tn__linalg_check_floating(A, "linalg.solve") < 0)
        return -1;
    if (tn__linalg_check_same_dtype(A, B, "linalg.solve", "A", "B") < 0)
        return -1;
    bool vec = vector_rhs(A, B);
    struct tn_keep k = {0};
    struct tn_tensor *b = (struct tn_tensor *)B, *lu, *pv, *in, *x;
    if (vec)
        TN_KEEP(&k, b, tn_unsqueeze(B, -1));
    if (tn__linalg_check_solver(A, b, left, "linalg.solve") < 0)
        goto fail;
    if (!left && vec) {
        tn_set_error(TN_ESHAPE, "linalg.solve: Vector broadcasting of the left hand side is not "
                     "supported for left=False. In this case linalg.solve is equivalent to B / "
                     "A.squeeze(-1)");
        goto fail;
    }
    if (tn_linalg_lu_factor_ex(A, true, false, &lu, &pv, &in) < 0)
        goto fail;
    tn__keep(&k, lu);
    tn__keep(&k, pv);
    tn__keep(&k, in);
    TN_KEEP(&k, x, tn_linalg_lu_solve(lu, pv, b, left, false));
    if (vec)
        TN_KEEP(&k, x, tn_squeeze_dims(x, (int64_t[]){-1}, 1));
    if (check_errors && tn__linalg_check_errors(in, "torch.linalg.solve_ex", A->ndim == 2) < 0)
        goto fail;
    *result = tn_retain(x);
    *LU = tn_retain(lu);
    *pivots = tn_retain(pv);
    *info = tn_retain(in);
    tn__keep_free(&k);
    return TN_OK;
fail:
    tn__keep_free(&k);
    return tn_last_status();
}

int tn__composite_linalg_solve_ex(tn_keyset ks, const struct tn_tensor *A,
                                  const struct tn_tensor *B, bool left, bool check_errors,
                                  struct tn_tensor **result, struct tn_tensor **info)
{
    (void)ks;
    struct tn_tensor *lu, *pv;
    if (tn_underscore_linalg_solve_ex(A, B, left, check_errors, result, &lu, &pv, info) < 0)
        return tn_last_status();
    tn_release(lu);
    tn_release(pv);
    return TN_OK;
}

/* linalg_solve: a singular A is an error (api names it) */
static struct tn_tensor *solve_checked(const struct tn_tensor *A, const struct tn_tensor *B,
                                       bool left, const char *api)
{
    struct tn_tensor *x, *info;
    if (tn_linalg_solve_ex(A, B, left, false, &x, &info) < 0)
        return NULL;
    int rc = tn__linalg_check_errors(info, api, A->ndim == 2);
    tn_release(info);
    if (rc < 0) {
        tn_release(x);
        return NULL;
    }
    return x;
}

struct tn_tensor *tn__composite_linalg_solve(tn_keyset ks, const struct tn_tensor *A,
                                             const struct tn_tensor *B, bool left)
{
    (void)ks;
    return solve_checked(A, B, left, "torch.linalg.solve");
}

/* --------------------------------------------------------------- inverse */

/* PyTorch's linalg_inv_ex: the solve of A X = I. */
int tn__composite_linalg_inv_ex(tn_keyset ks, const struct tn_tensor *A, bool check_errors,
                                struct tn_tensor **inverse, struct tn_tensor **info)
{
    (void)ks;
    if (tn__linalg_check_matrix(A, "linalg.inv", "A", true) < 0 ||
        tn__linalg_check_floating(A, "linalg.inv") < 0)
        return -1;
    /* the identity (a Meta one has no values to set) */
    struct tn_tensor *eye = tn_zeros_like(A, TN_DTYPE_UNSET);
    struct tn_tensor *d = eye ? tn_diagonal(eye, 0, -2, -1) : NULL;
    int rc = d && (A->device.type == TN_DEVICE_META || tn_fill_(d, tn_int(1)) == TN_OK)
                 ? TN_OK : -1;
    tn_release(d);
    if (rc == TN_OK)
        rc = tn_linalg_solve_ex(A, eye, true, false, inverse, info);
    tn_release(eye);
    if (rc == TN_OK && check_errors &&
        (rc = tn__linalg_check_errors(*info, "linalg.inv_ex", A->ndim == 2)) < 0) {
        tn_release(*inverse);
        tn_release(*info);
    }
    return rc < 0 ? tn_last_status() : TN_OK;
}

struct tn_tensor *tn__composite_linalg_inv(tn_keyset ks, const struct tn_tensor *A)
{
    (void)ks;
    struct tn_tensor *x, *info;
    if (tn_linalg_inv_ex(A, false, &x, &info) < 0)
        return NULL;
    int rc = tn__linalg_check_errors(info, "linalg.inv", A->ndim == 2);
    tn_release(info);
    if (rc < 0) {
        tn_release(x);
        return NULL;
    }
    return x;
}

struct tn_tensor *tn__composite_inverse(tn_keyset ks, const struct tn_tensor *self)
{
    return tn__composite_linalg_inv(ks, self);
}

/* ---------------------------------------------------------- determinants */

/* The sign of the permutation of each batch of pivots (+-1 in dtype dt,
 * shape pivots' without its last dim); empty on Meta. */
static struct tn_tensor *perm_sign(const struct tn_tensor *pv, enum tn_dtype dt)
{
    struct tn_tensor *s = tn_empty_on(pv->sizes, pv->ndim - 1, dt, pv->device);
    if (!s || pv->device.type == TN_DEVICE_META)
        return s;
    struct tn_tensor *c = tn_contiguous(pv);
    if (!c) {
        tn_release(s);
        return NULL;
    }
    int64_t k = pv->sizes[pv->ndim - 1], nb = tn_numel(s);
    const int32_t *p = tn_data(c);
    for (int64_t b = 0; b < nb; b++) {
        int odd = 0;
        for (int64_t i = 0; i < k; i++)
            odd ^= p[b * k + i] != i + 1;
        if (dt == TN_FLOAT64)
            ((double *)tn_data(s))[b] = odd ? -1 : 1;
        else
            ((float *)tn_data(s))[b] = odd ? -1.0f : 1.0f;
    }
    tn_release(c);
    return s;
}

/* A's LU diagonal (*diag, a view) and its permutation's sign, after
 * PyTorch's checks naming f. 0 or -1. */
static int lu_diag(const struct tn_tensor *A, const char *f, struct tn_tensor **diag,
                   struct tn_tensor **sign)
{
    if (tn__linalg_check_matrix(A, f, "A", true) < 0 || tn__linalg_check_floating(A, f) < 0)
        return -1;
    struct tn_tensor *lu, *pv, *in;
    if (tn_linalg_lu_factor_ex(A, true, false, &lu, &pv, &in) < 0)
        return -1;
    *diag = tn_diagonal(lu, 0, -2, -1);
    *sign = *diag ? perm_sign(pv, A->dtype) : NULL;
    tn_release(lu);
    tn_release(pv);
    tn_release(in);
    if (!*sign) {
        tn_release(*diag);
        return -1;
    }
    return TN_OK;
}

/* PyTorch's _linalg_det: the product of U's diagonal, signed by P. */
struct tn_tensor *tn__composite_linalg_det(tn_keyset ks, const struct tn_tensor *A)
{
    (void)ks;
    struct tn_tensor *d, *s, *p, *r;
    if (lu_diag(A, "linalg.det", &d, &s) < 0)
        return NULL;
    p = tn_prod_dim_int(d, -1, false, TN_DTYPE_UNSET);
    r = p ? tn_mul(p, s) : NULL;
    tn_release(p);
    tn_release(d);
    tn_release(s);
    return r;
}

struct tn_tensor *tn__composite_det(tn_keyset ks, const struct tn_tensor *self)
{
    return tn__composite_linalg_det(ks, self);
}

/* PyTorch's _linalg_slogdet: the sign of det A (0 when singular) and
 * log |det A| (-inf then), summed over U's diagonal. */
static int slogdet(const struct tn_tensor *A, const char *f, struct tn_tensor **sign,
                   struct tn_tensor **logabsdet)
{
    struct tn_keep k = {0};
    struct tn_tensor *d, *s, *t, *l;
    int64_t last = -1;
    if (lu_diag(A, f, &d, &s) < 0)
        return -1;
    tn__keep(&k, d);
    tn__keep(&k, s);
    TN_KEEP(&k, t, tn_sign(d));
    TN_KEEP(&k, t, tn_prod_dim_int(t, -1, false, TN_DTYPE_UNSET));
    TN_KEEP(&k, t, tn_mul(t, s));
    TN_KEEP(&k, l, tn_abs(d));
    TN_KEEP(&k, l, tn_log(l));
    TN_KEEP(&k, l, tn_sum_dim_intlist(l, &last, 1, false, TN_DTYPE_UNSET));
    *sign = tn_retain(t);
    *logabsdet = tn_retain(l);
    tn__keep_free(&k);
    return TN_OK;
fail:
    tn__keep_free(&k);
    return -1;
}

int tn__composite_linalg_slogdet(tn_keyset ks, const struct tn_tensor *A, struct tn_tensor **sign,
                                 struct tn_tensor **logabsdet)
{
    (void)ks;
    return slogdet(A, "linalg.slogdet", sign, logabsdet) < 0 ? tn_last_status() : TN_OK;
}

int tn__composite_slogdet(tn_keyset ks, const struct tn_tensor *self, struct tn_tensor **sign,
                          struct tn_tensor **logabsdet)
{
    return tn__composite_linalg_slogdet(ks, self, sign, logabsdet);
}

/* PyTorch's logdet: log |det A|, NaN where det A < 0. */
struct tn_tensor *tn__composite_logdet(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    struct tn_tensor *s, *l;
    if (slogdet(self, "logdet", &s, &l) < 0)
        return NULL;
    struct tn_tensor *neg = tn_eq_scalar(s, tn_int(-1));
    struct tn_tensor *nan = neg ? tn_scalar_tensor(tn_float(NAN), l->dtype) : NULL;
    struct tn_tensor *r = nan ? tn_where_self(neg, nan, l) : NULL;
    tn_release(neg);
    tn_release(nan);
    tn_release(s);
    tn_release(l);
    return r;
}
