/*
 * ops/lu.c: the ops over the triangular solve and the LU kernels
 * (ops/cpu/lu.c), as PyTorch's BatchLinearAlgebra.cpp composes them:
 * triangular_solve, linalg_lu_factor, _lu_with_info, linalg_lu, lu_solve;
 * and the derivatives of the kernels, PyTorch's FunctionsManual.cpp
 * formulas (real case). Gradients of the composites come from autograd
 * through their parts.
 */
#include <config.h>

#include <string.h>

#include "ops/lu_internal.h"
#include "ops/nn_internal.h"

static struct tn_tensor *mT(const struct tn_tensor *t)
{
    return tn_transpose(t, -2, -1);
}

/* ------------------------------------------------------------ composites */

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_linear_solve(const struct tn_tensor *b, const struct tn_tensor *A,
                                  const char *f)
{
    if (b->dtype != A->dtype)
        return tn_set_error(TN_EDTYPE, "Expected b and A to have the same dtype, but found b of "
                            "type %s and A of type %s instead.",
                            tn_dtype_info(b->dtype)->c10_name,
                            tn_dtype_info(A->dtype)->c10_name);
    int64_t n = A->sizes[A->ndim - 1];
    if (n != A->sizes[A->ndim - 2])
        return tn_set_error(TN_ESHAPE, "A must be batches of square matrices, but they are %lld "
                            "by %lld matrices", (long long)A->sizes[A->ndim - 2], (long long)n);
    if (n != b->sizes[b->ndim - 2])
        return tn_set_error(TN_ESHAPE, "Incompatible matrix sizes for %s: each A "
                            "matrix is %lld by %lld but each b matrix is %lld by %lld",
                            f, (long long)n, (long long)n, (long long)b->sizes[b->ndim - 2],
                            (long long)b->sizes[b->ndim - 1]);
    return TN_OK;
}

/* PyTorch's triangular_solve: X with A X = b (A^T X = b with transpose),
 * and A broadcast to the batch shape, copied (cloned_coefficient). */
int tn__composite_triangular_solve(tn_keyset ks, const struct tn_tensor *self,
                                   const struct tn_tensor *A, bool upper, bool transpose,
                                   bool unitriangular, struct tn_tensor **solution,
                                   struct tn_tensor **cloned_coefficient)
{
    (void)ks;
    if (self->ndim < 2)
        return tn_set_error(TN_ESHAPE, "torch.triangular_solve: Expected b to have at least 2 "
                            "dimensions, but it has %d dimensions instead", self->ndim);
    if (A->ndim < 2)
        return tn_set_error(TN_ESHAPE, "torch.triangular_solve: Expected A to have at least 2 "
                            "dimensions, but it has %d dimensions instead", A->ndim);
    if (tn__linalg_check_linear_solve(self, A, "triangular_solve") < 0)
        return -1;
    int64_t n = A->sizes[A->ndim - 1];
    struct tn_keep k = {0};
    struct tn_tensor *a = (struct tn_tensor *)A, *x, *c;
    int64_t bs[TN_MAX_DIMS];
    int nb = tn_broadcast_shapes(self->sizes, self->ndim - 2, A->sizes, A->ndim - 2, bs);
    if (nb < 0)
        return tn_last_status();
    if (transpose)
        TN_KEEP(&k, a, mT(A));
    TN_KEEP(&k, x, tn_linalg_solve_triangular(a, self, upper != transpose, true, unitriangular));
    bs[nb] = bs[nb + 1] = n;
    TN_KEEP(&k, c, tn_expand(A, bs, nb + 2));
    TN_KEEP(&k, c, tn_clone(c));
    *solution = tn_retain(x);
    *cloned_coefficient = tn_retain(c);
    tn__keep_free(&k);
    return TN_OK;
fail:
    tn__keep_free(&k);
    return tn_last_status();
}

/* PyTorch's linalg_lu_factor: linalg_lu_factor_ex, its info an error. */
int tn__composite_linalg_lu_factor(tn_keyset ks, const struct tn_tensor *A, bool pivot,
                                   struct tn_tensor **LU, struct tn_tensor **pivots)
{
    (void)ks;
    struct tn_tensor *lu, *pv, *info;
    if (tn_linalg_lu_factor_ex(A, pivot, false, &lu, &pv, &info) < 0)
        return tn_last_status();
    int rc = tn__linalg_check_errors(info, "torch.linalg.lu_factor", A->ndim == 2);
    tn_release(info);
    if (rc < 0) {
        tn_release(lu);
        tn_release(pv);
        return rc;
    }
    *LU = lu;
    *pivots = pv;
    return TN_OK;
}

/* torch.lu's op: linalg_lu_factor_ex, whose errors PyTorch 2.x never
 * checks here (torch.lu does, from the info it returns). */
int tn__composite__lu_with_info(tn_keyset ks, const struct tn_tensor *self, bool pivot,
                                bool check_errors, struct tn_tensor **LU,
                                struct tn_tensor **pivots, struct tn_tensor **info)
{
    (void)ks;
    (void)check_errors;
    return tn_linalg_lu_factor_ex(self, pivot, false, LU, pivots, info);
}

/* PyTorch's linalg_lu: A = P L U, linalg_lu_factor_ex unpacked. */
int tn__composite_linalg_lu(tn_keyset ks, const struct tn_tensor *A, bool pivot,
                            struct tn_tensor **P, struct tn_tensor **L, struct tn_tensor **U)
{
    (void)ks;
    struct tn_tensor *lu, *pv, *info;
    if (tn_linalg_lu_factor_ex(A, pivot, false, &lu, &pv, &info) < 0)
        return tn_last_status();
    int rc = tn_lu_unpack(lu, pv, true, pivot, P, L, U);
    tn_release(lu);
    tn_release(pv);
    tn_release(info);
    return rc < 0 ? tn_last_status() : TN_OK;
}

/* torch.lu_solve(b, LU, pivots): linalg_lu_solve with its arguments
 * reordered. */
struct tn_tensor *tn__composite_lu_solve(tn_keyset ks, const struct tn_tensor *self,
                                         const struct tn_tensor *LU_data,
                                         const struct tn_tensor *LU_pivots)
{
    (void)ks;
    return tn_linalg_lu_solve(LU_data, LU_pivots, self, true, false);
}

/* ----------------------------------------------------------- derivatives */

/* Contract in ops/lu_internal.h: gB = A^-T grad (grad A^-T on the right),
 * gA = -gB X^T (-X^T gB), in A's triangle. */
struct tn_tensor *tn__linalg_solve_triangular_bw(const struct tn_tensor *grad,
                                                 const struct tn_tensor *A,
                                                 const struct tn_tensor *X, bool upper,
                                                 bool left, bool unitriangular, int64_t which)
{
    struct tn_keep k = {0};
    struct tn_tensor *at, *gb, *xt, *ga;
    TN_KEEP(&k, at, mT(A));
    TN_KEEP(&k, gb, tn_linalg_solve_triangular(at, grad, !upper, left, unitriangular));
    if (which == 1)
        return tn__keep_out(&k, gb);
    TN_KEEP(&k, xt, mT(X));
    TN_KEEP(&k, ga, left ? tn_matmul(gb, xt) : tn_matmul(xt, gb));
    TN_KEEP(&k, ga, tn_neg(ga));
    TN_KEEP(&k, ga, upper ? tn_triu(ga, unitriangular) : tn_tril(ga, -(int64_t)unitriangular));
    return tn__keep_out(&k, ga);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* PyTorch's linalg_lu_backward for A = P L U (L m x k, U k x n): with
 * gL and gU the gradients of L and U,
 *   square: P L^-T [(L^T gL) o tril_-1 + (gU U^T) o triu] U^-T
 *   wide:   the first k columns as the square case with U1 (and gU1 added
 *           inside), the rest L^-T gU2
 *   tall:   the first k rows as the square case with L1, the rest gL2 U^-T. */
static struct tn_tensor *lu_backward(const struct tn_tensor *gL, const struct tn_tensor *gU,
                                     const struct tn_tensor *P, const struct tn_tensor *L,
                                     const struct tn_tensor *U, bool pivot)
{
    struct tn_keep k = {0};
    struct tn_tensor *lt, *ut, *r, *t, *p2[2];
    int64_t m = L->sizes[L->ndim - 2], n = U->sizes[U->ndim - 1], kk = m < n ? m : n;
    TN_KEEP(&k, lt, mT(L));
    TN_KEEP(&k, ut, mT(U));
    if (m == n) {
        TN_KEEP(&k, r, tn_matmul(lt, gL));
        TN_KEEP(&k, r, tn_tril(r, -1));
        TN_KEEP(&k, t, tn_matmul(gU, ut));
        TN_KEEP(&k, t, tn_triu(t, 0));
        TN_KEEP(&k, r, tn_add(r, t, tn_int(1)));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(ut, r, false, false, false));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(lt, r, true, true, true));
    } else if (m < n) {
        struct tn_tensor *u1t, *gu1, *gu2;
        TN_KEEP(&k, r, tn_matmul(lt, gL));
        TN_KEEP(&k, t, tn_triu(gU, 0));
        TN_KEEP(&k, t, tn_matmul(t, ut));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
        TN_KEEP(&k, r, tn_tril(r, -1));
        TN_KEEP(&k, u1t, tn_narrow(ut, -2, 0, kk));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(u1t, r, false, false, false));
        TN_KEEP(&k, gu1, tn_narrow(gU, -1, 0, kk));
        TN_KEEP(&k, gu1, tn_triu(gu1, 0));
        TN_KEEP(&k, p2[0], tn_add(r, gu1, tn_int(1)));
        TN_KEEP(&k, gu2, tn_narrow(gU, -1, kk, n - kk));
        p2[1] = gu2;
        TN_KEEP(&k, r, tn_cat((const struct tn_tensor *const *)p2, 2, -1));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(lt, r, true, true, true));
    } else {
        struct tn_tensor *l1t, *gl1, *gl2;
        TN_KEEP(&k, r, tn_matmul(gU, ut));
        TN_KEEP(&k, t, tn_tril(gL, -1));
        TN_KEEP(&k, t, tn_matmul(lt, t));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
        TN_KEEP(&k, r, tn_triu(r, 0));
        TN_KEEP(&k, l1t, tn_narrow(lt, -1, 0, kk));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(l1t, r, true, true, true));
        TN_KEEP(&k, gl1, tn_narrow(gL, -2, 0, kk));
        TN_KEEP(&k, gl1, tn_tril(gl1, -1));
        TN_KEEP(&k, p2[0], tn_add(r, gl1, tn_int(1)));
        TN_KEEP(&k, gl2, tn_narrow(gL, -2, kk, m - kk));
        p2[1] = gl2;
        TN_KEEP(&k, r, tn_cat((const struct tn_tensor *const *)p2, 2, -2));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(ut, r, false, false, false));
    }
    if (pivot)
        TN_KEEP(&k, r, tn_matmul(P, r));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/lu_internal.h: grad split into L's part (its first k
 * columns) and U's (its first k rows), through linalg_lu_backward. */
struct tn_tensor *tn__lu_factor_ex_bw(const struct tn_tensor *grad, const struct tn_tensor *LU,
                                      const struct tn_tensor *pivots, bool pivot)
{
    struct tn_keep k = {0};
    struct tn_tensor *p, *l, *u, *gl, *gu, *r;
    int64_t m = LU->sizes[LU->ndim - 2], n = LU->sizes[LU->ndim - 1], kk = m < n ? m : n;
    if (tn_lu_unpack(LU, pivots, true, pivot, &p, &l, &u) < 0)
        return NULL;
    tn__keep(&k, p);
    tn__keep(&k, l);
    tn__keep(&k, u);
    TN_KEEP(&k, gl, tn_narrow(grad, -1, 0, kk));
    TN_KEEP(&k, gu, tn_narrow(grad, -2, 0, kk));
    TN_KEEP(&k, r, lu_backward(gl, gu, p, l, u, pivot));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/lu_internal.h: gL's strict lower triangle and gU's upper
 * one, where each sits in LU_data. */
struct tn_tensor *tn__lu_unpack_bw(const struct tn_tensor *gL, const struct tn_tensor *gU,
                                   const int64_t *sizes, int ndim)
{
    struct tn_keep k = {0};
    struct tn_tensor *l, *u, *r, *part, *s;
    int64_t m = sizes[ndim - 2], n = sizes[ndim - 1], kk = m < n ? m : n;
    TN_KEEP(&k, l, tn_tril(gL, -1));
    TN_KEEP(&k, u, tn_triu(gU, 0));
    if (m == n) {
        TN_KEEP(&k, r, tn_add(l, u, tn_int(1)));
        return tn__keep_out(&k, r);
    }
    /* wide: U is m x n, L m x m; tall: L is m x n, U n x n */
    r = m < n ? u : l;
    TN_KEEP(&k, part, m < n ? tn_narrow(r, -1, 0, kk) : tn_narrow(r, -2, 0, kk));
    TN_KEEP(&k, s, tn_add(part, m < n ? l : u, tn_int(1)));
    if (tn_copy_(part, s) < 0)
        goto fail;
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/lu_internal.h: PyTorch's linalg_lu_solve_LU, real case:
 * with R the gradient in the factors' frame,
 *   left != adjoint: R = U^-T (-op(gX) op(X)^T), gLU = (L^-T R U^T) o
 *                    tril_-1 + R o triu
 *   else:            R = -P^T op(X) op(gX)^T P L^-T, gLU = R o tril_-1 +
 *                    (L^T R U^-T) o triu
 * op transposing when not left. */
struct tn_tensor *tn__linalg_lu_solve_LU(const struct tn_tensor *gX, const struct tn_tensor *LU,
                                         const struct tn_tensor *pivots,
                                         const struct tn_tensor *X, bool left, bool adjoint)
{
    struct tn_keep k = {0};
    struct tn_tensor *p, *l, *u, *lt, *ut, *r, *t, *g, *x;
    if (tn_lu_unpack(LU, pivots, true, left == adjoint, &p, &l, &u) < 0)
        return NULL;
    tn__keep(&k, p);
    tn__keep(&k, l);
    tn__keep(&k, u);
    TN_KEEP(&k, lt, mT(l));
    TN_KEEP(&k, ut, mT(u));
    if (left != adjoint) {
        TN_KEEP(&k, g, left ? tn_neg(gX) : mT(gX));
        if (!left)
            TN_KEEP(&k, g, tn_neg(g));
        TN_KEEP(&k, x, left ? mT(X) : tn_retain((struct tn_tensor *)X));
        TN_KEEP(&k, r, tn_matmul(g, x));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(ut, r, false, true, false));
        TN_KEEP(&k, t, tn_matmul(r, ut));
        TN_KEEP(&k, t, tn_linalg_solve_triangular(lt, t, true, true, true));
        TN_KEEP(&k, t, tn_tril(t, -1));
        TN_KEEP(&k, r, tn_triu(r, 0));
        TN_KEEP(&k, r, tn_add(t, r, tn_int(1)));
    } else {
        TN_KEEP(&k, t, mT(p));
        TN_KEEP(&k, x, left ? tn_retain((struct tn_tensor *)X) : mT(X));
        TN_KEEP(&k, r, tn_matmul(t, x));
        TN_KEEP(&k, g, left ? mT(gX) : tn_retain((struct tn_tensor *)gX));
        TN_KEEP(&k, r, tn_matmul(r, g));
        TN_KEEP(&k, r, tn_matmul(r, p));
        TN_KEEP(&k, r, tn_neg(r));
        TN_KEEP(&k, r, tn_linalg_solve_triangular(lt, r, true, false, true));
        TN_KEEP(&k, t, tn_matmul(lt, r));
        TN_KEEP(&k, t, tn_linalg_solve_triangular(ut, t, false, false, false));
        TN_KEEP(&k, t, tn_triu(t, 0));
        TN_KEEP(&k, r, tn_tril(r, -1));
        TN_KEEP(&k, r, tn_add(r, t, tn_int(1)));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/lu_internal.h: gB = lu_solve(LU, pivots, gX) of the
 * adjoint system. */
struct tn_tensor *tn__linalg_lu_solve_B(const struct tn_tensor *gX, const struct tn_tensor *LU,
                                        const struct tn_tensor *pivots, bool left, bool adjoint)
{
    return tn_linalg_lu_solve(LU, pivots, gX, left, !adjoint);
}
