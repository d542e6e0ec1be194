/*
 * ops/cholesky.c: the ops over the Cholesky kernel (linalg_cholesky_ex,
 * ops/cpu/cholesky.c), as PyTorch's BatchLinearAlgebra.cpp composes them:
 * linalg_cholesky, cholesky_solve and cholesky_inverse (the
 * last two as LAPACK's ?potrs does it: two triangular solves, with the
 * identity for the inverse); and the derivatives of the kernel and of
 * those two, PyTorch's FunctionsManual.cpp formulas (real case).
 */
#include <config.h>

#include <string.h>

#include "ops/cholesky_internal.h"
#include "ops/lu_internal.h"
#include "ops/nn_internal.h"

static struct tn_tensor *mT(const struct tn_tensor *t)
{
    return tn_transpose(t, -2, -1);
}

/* ------------------------------------------------------------ composites */

/* linalg_cholesky_ex, a matrix that is not positive-definite an error
 * naming api. */
static struct tn_tensor *cholesky_checked(const struct tn_tensor *A, bool upper, const char *api)
{
    struct tn_tensor *l, *info;
    if (tn_linalg_cholesky_ex(A, upper, false, &l, &info) < 0)
        return NULL;
    int rc = tn__linalg_check_errors(info, api, A->ndim == 2);
    tn_release(info);
    if (rc < 0) {
        tn_release(l);
        return NULL;
    }
    return l;
}

struct tn_tensor *tn__composite_linalg_cholesky(tn_keyset ks, const struct tn_tensor *self,
                                                bool upper)
{
    (void)ks;
    return cholesky_checked(self, upper, "linalg.cholesky");
}

/* X = A^-1 b for A = L L^T (U^T U with upper) given its factor f: the two
 * triangular solves of ?potrs, batch dims broadcast. */
static struct tn_tensor *potrs(const struct tn_tensor *b, const struct tn_tensor *f, bool upper)
{
    struct tn_keep k = {0};
    struct tn_tensor *ft, *y;
    TN_KEEP(&k, ft, mT(f));
    TN_KEEP(&k, y, tn_linalg_solve_triangular(upper ? ft : f, b, false, true, false));
    TN_KEEP(&k, y, tn_linalg_solve_triangular(upper ? f : ft, y, true, true, false));
    return tn__keep_out(&k, y);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* PyTorch's cholesky_solve: X with A X = self for A = L L^T given L
 * (input2; U^T U given U with upper), batch dims broadcast. */
struct tn_tensor *tn__composite_cholesky_solve(tn_keyset ks, const struct tn_tensor *self,
                                               const struct tn_tensor *input2, bool upper)
{
    (void)ks;
    if (self->ndim < 2)
        return tn_set_error(TN_ESHAPE, "b should have at least 2 dimensions, but has %d "
                            "dimensions instead", self->ndim), NULL;
    if (input2->ndim < 2)
        return tn_set_error(TN_ESHAPE, "u should have at least 2 dimensions, but has %d "
                            "dimensions instead", input2->ndim), NULL;
    if (tn__linalg_check_linear_solve(self, input2, "cholesky_solve") < 0 ||
        tn__linalg_check_float(self, "cholesky_solve_cpu") < 0)
        return NULL;
    return potrs(self, input2, upper);
}

/* PyTorch's cholesky_inverse: A^-1 for A = L L^T given L (U^T U given U
 * with upper). */
struct tn_tensor *tn__composite_cholesky_inverse(tn_keyset ks, const struct tn_tensor *self,
                                                 bool upper)
{
    (void)ks;
    if (tn__linalg_check_matrix(self, "cholesky_inverse", "A", true) < 0 ||
        tn__linalg_check_float(self, "cholesky_inverse_out_cpu") < 0)
        return NULL;
    int64_t n = self->sizes[self->ndim - 1];
    struct tn_tensor *eye = tn_empty_on((int64_t[]){n, n}, 2, self->dtype, self->device);
    struct tn_tensor *d = eye ? tn_diagonal(eye, 0, -2, -1) : NULL, *r = NULL;
    if (d && (self->device.type == TN_DEVICE_META ||
              (tn_fill_(eye, tn_int(0)) == 0 && tn_fill_(d, tn_int(1)) == 0)))
        r = potrs(eye, self, upper);
    tn_release(d);
    tn_release(eye);
    return r;
}

/* ----------------------------------------------------------- derivatives */

/* Contract in ops/cholesky_internal.h. With L the lower factor (U^T with
 * upper) and gL its gradient (transposed with upper), Iain Murray's
 *   Phi = tril(L^T gL), gA = L^-T (Phi + tril_-1(Phi)^T) / 2 L^-1. */
struct tn_tensor *tn__cholesky_bw(const struct tn_tensor *grad, bool upper,
                                  const struct tn_tensor *L)
{
    struct tn_keep k = {0};
    struct tn_tensor *l = (struct tn_tensor *)L, *g = (struct tn_tensor *)grad, *lt, *ga, *t;
    if (upper) {
        TN_KEEP(&k, l, mT(L));
        TN_KEEP(&k, g, mT(grad));
    }
    TN_KEEP(&k, lt, mT(l));
    TN_KEEP(&k, ga, tn_matmul(lt, g));
    TN_KEEP(&k, ga, tn_tril(ga, 0));
    TN_KEEP(&k, t, tn_tril(ga, -1));
    TN_KEEP(&k, t, mT(t));
    TN_KEEP(&k, ga, tn_add(ga, t, tn_int(1)));
    TN_KEEP(&k, ga, tn_mul_scalar(ga, tn_float(0.5)));
    TN_KEEP(&k, ga, tn_linalg_solve_triangular(lt, ga, true, true, false));
    TN_KEEP(&k, ga, tn_linalg_solve_triangular(l, ga, false, false, false));
    return tn__keep_out(&k, ga);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* -(F C) with upper, -(C F) without, for C = S + S^T: what the gradients
 * of cholesky_solve's and cholesky_inverse's factor F share. */
static struct tn_tensor *factor_grad(struct tn_tensor *s, const struct tn_tensor *f, bool upper)
{
    struct tn_keep k = {0};
    struct tn_tensor *c, *r;
    TN_KEEP(&k, c, mT(s));
    TN_KEEP(&k, c, tn_add(s, c, tn_int(1)));
    TN_KEEP(&k, r, upper ? tn_matmul(f, c) : tn_matmul(c, f));
    TN_KEEP(&k, r, tn_neg(r));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/cholesky_internal.h. gB = cholesky_solve(grad, F),
 * gF = -(F C) or -(C F) with C = gB X^T + X gB^T. */
struct tn_tensor *tn__cholesky_solve_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                        const struct tn_tensor *input2,
                                        const struct tn_tensor *X, bool upper, int64_t which)
{
    (void)self;
    struct tn_keep k = {0};
    struct tn_tensor *gb, *s;
    TN_KEEP(&k, gb, tn_cholesky_solve(grad, input2, upper));
    if (which == 0)
        return tn__keep_out(&k, gb);
    TN_KEEP(&k, s, mT(X));
    TN_KEEP(&k, s, tn_matmul(gb, s));
    TN_KEEP(&k, s, factor_grad(s, input2, upper));
    return tn__keep_out(&k, s);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/cholesky_internal.h. gF = -(F C) or -(C F) with
 * C = A^-1 (G + G^T) A^-1 = S + S^T for S = A^-1 G A^-1 (A^-1 symmetric). */
struct tn_tensor *tn__cholesky_inverse_bw(const struct tn_tensor *grad, const struct tn_tensor *L,
                                          bool upper, const struct tn_tensor *inverse)
{
    struct tn_keep k = {0};
    struct tn_tensor *s;
    TN_KEEP(&k, s, tn_matmul(grad, inverse));
    TN_KEEP(&k, s, tn_matmul(inverse, s));
    TN_KEEP(&k, s, factor_grad(s, L, upper));
    return tn__keep_out(&k, s);
fail:
    tn__keep_free(&k);
    return NULL;
}
