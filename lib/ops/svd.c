/*
 * ops/svd.c: the ops over the singular value decomposition (the kernel,
 * _linalg_svd, is ops/cpu/svd.c): linalg_svd, svd, linalg_svdvals, the
 * matrix norms (linalg_matrix_norm: 'fro', 'nuc', +-1, +-2, +-inf) and
 * linalg_norm, as PyTorch's LinearAlgebra.cpp composes them, and
 * _linalg_svd's derivative (PyTorch's svd_backward). Gradients of the
 * composites come from autograd through their parts.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/svd_internal.h"

int tn__composite_linalg_svd(tn_keyset ks, const struct tn_tensor *A, bool full_matrices,
                             const char *driver, struct tn_tensor **U, struct tn_tensor **S,
                             struct tn_tensor **Vh)
{
    (void)ks;
    return tn_underscore_linalg_svd(A, full_matrices, true, driver, U, S, Vh);
}

/* PyTorch's linalg_svdvals: the singular vectors are computed only when a
 * gradient may be asked for (svd_backward needs them): when A requires
 * grad (ops sit below autograd's grad mode; under no_grad they are
 * computed and dropped). */
struct tn_tensor *tn__composite_linalg_svdvals(tn_keyset ks, const struct tn_tensor *A,
                                               const char *driver)
{
    (void)ks;
    struct tn_tensor *u = NULL, *s = NULL, *vh = NULL;
    bool uv = A->requires_grad;
    if (tn_underscore_linalg_svd(A, false, uv, driver, &u, &s, &vh) < 0)
        return NULL;
    tn_release(u);
    tn_release(vh);
    return s;
}

/* torch.svd: V (not Vh), `some` the opposite of full_matrices; without
 * compute_uv, U and V are zeros of the full shapes, as in PyTorch. */
int tn__composite_svd(tn_keyset ks, const struct tn_tensor *self, bool some, bool compute_uv,
                      struct tn_tensor **U, struct tn_tensor **S, struct tn_tensor **V)
{
    if (self->ndim < 2)
        return tn_set_error(TN_ESHAPE, "linalg.svd: input should have at least 2 dimensions, "
                            "but has %d dimensions instead", self->ndim);
    struct tn_tensor *u = NULL, *s = NULL, *vh = NULL;
    if (compute_uv) {
        if (tn_underscore_linalg_svd(self, !some, true, NULL, &u, &s, &vh) < 0)
            return tn_last_status();
    } else {
        int64_t sz[TN_MAX_DIMS];
        int nd = self->ndim;
        memcpy(sz, self->sizes, sizeof(int64_t) * (size_t)nd);
        sz[nd - 1] = self->sizes[nd - 2];
        s = tn__composite_linalg_svdvals(ks, self, NULL);
        u = s ? tn_zeros(sz, nd, self->dtype) : NULL;
        sz[nd - 2] = sz[nd - 1] = self->sizes[nd - 1];
        vh = u ? tn_zeros(sz, nd, self->dtype) : NULL;
    }
    struct tn_tensor *v = vh ? tn_transpose(vh, -2, -1) : NULL;
    tn_release(vh);
    if (!v) {
        tn_release(u);
        tn_release(s);
        return tn_last_status();
    }
    *U = u;
    *S = s;
    *V = v;
    return TN_OK;
}

/* --------------------------------------------------------- matrix norms */

/* PyTorch's _linalg_matrix_norm_checks: A has two distinct dims d[0..1]
 * (wrapped into w), a floating dtype (float32 or float64 where the norm
 * needs an SVD). */
static int matrix_norm_checks(const struct tn_tensor *A, const int64_t *dim, int dim_len,
                              enum tn_dtype dtype, bool low_precision, int64_t w[2])
{
    if (A->ndim < 2)
        return tn_set_error(TN_ESHAPE, "linalg.matrix_norm: The input tensor A must have at "
                            "least 2 dimensions.");
    if (dim_len != 2)
        return tn_set_error(TN_EINVAL, "linalg.matrix_norm: dim must be a 2-tuple. Got %d "
                            "dims", dim_len);
    for (int i = 0; i < 2; i++)
        if ((w[i] = tn_wrap_dim(dim[i], A->ndim)) < 0)
            return tn_last_status();
    if (w[0] == w[1])
        return tn_set_error(TN_EINVAL, "linalg.matrix_norm: dims must be different. Got (%lld, "
                            "%lld)", (long long)dim[0], (long long)dim[1]);
    enum tn_dtype dt = dtype != TN_DTYPE_UNSET ? dtype : A->dtype;
    if (!tn_dtype_is_floating(A->dtype) && !tn_dtype_is_complex(A->dtype))
        return tn_set_error(TN_EDTYPE, "linalg.matrix_norm: Expected a floating point or "
                            "complex tensor as input. Got %s", tn_dtype_info(A->dtype)->c10_name);
    if (!low_precision && dt != TN_FLOAT32 && dt != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "linalg.matrix_norm: Low precision dtypes not supported. "
                            "Got %s", tn_dtype_info(dt)->c10_name);
    return TN_OK;
}

/* A's dims w[0], w[1] moved to the end (PyTorch's
 * create_dim_backshift_permutation); perm gets the permutation. */
static struct tn_tensor *backshift(const struct tn_tensor *A, const int64_t w[2], int64_t *perm)
{
    int n = 0;
    for (int d = 0; d < A->ndim; d++)
        if (d != w[0] && d != w[1])
            perm[n++] = d;
    perm[n++] = w[0];
    perm[n++] = w[1];
    return tn_permute(A, perm, A->ndim);
}

/* r (A's batch dims, reduced over the last with keepdim) with the two
 * matrix dims back where A had them, each of size 1. */
static struct tn_tensor *backshift_undo(struct tn_tensor *r, const int64_t *perm, int ndim)
{
    int64_t inv[TN_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        inv[perm[d]] = d;
    struct tn_tensor *u = tn_unsqueeze(r, -1);
    struct tn_tensor *p = u ? tn_permute(u, inv, ndim) : NULL;
    tn_release(u);
    return p;
}

/* The singular values of A's dims w reduced over: their sum (nuc), max
 * (ord 2) or min (ord -2). */
static struct tn_tensor *svd_norm(const struct tn_tensor *A, const int64_t w[2], char how,
                                  bool keepdim, enum tn_dtype dtype)
{
    struct tn_keep k = {0};
    struct tn_tensor *a = (struct tn_tensor *)A, *p, *s, *r;
    int64_t perm[TN_MAX_DIMS], last = -1;
    if (dtype != TN_DTYPE_UNSET)
        TN_KEEP(&k, a, tn_to_dtype(A, dtype));
    TN_KEEP(&k, p, backshift(a, w, perm));
    TN_KEEP(&k, s, tn_linalg_svdvals(p, NULL));
    /* the largest of no singular values is 0 in PyTorch (the smallest is an
     * error): their sum */
    if (how == '>' && s->sizes[s->ndim - 1] == 0)
        how = '+';
    r = how == '+' ? tn_sum_dim_intlist(s, &last, 1, keepdim, TN_DTYPE_UNSET)
        : how == '>' ? tn_amax(s, &last, 1, keepdim) : tn_amin(s, &last, 1, keepdim);
    TN_KEEP(&k, r, r);
    if (keepdim)
        TN_KEEP(&k, r, backshift_undo(r, perm, A->ndim));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_linalg_matrix_norm(tn_keyset ks, const struct tn_tensor *self,
                                                   struct tn_scalar ord, const int64_t *dim,
                                                   int dim_len, bool keepdim, enum tn_dtype dtype)
{
    double o = tn_scalar_to_double(ord), ao = fabs(o);
    int64_t w[2];
    if (ao != 1 && ao != 2 && !isinf(ao))
        return tn_set_error(TN_EINVAL, "linalg.matrix_norm: Order %g not supported.", o), NULL;
    if (matrix_norm_checks(self, dim, dim_len, dtype, ao != 2, w) < 0)
        return NULL;
    if (ao == 2)
        return svd_norm(self, w, o > 0 ? '>' : '<', keepdim, dtype);
    /* 1: the largest (smallest) column sum of |A|; inf: that of the rows */
    if (isinf(ao)) {
        int64_t t = w[0];
        w[0] = w[1];
        w[1] = t;
    }
    if (!keepdim && w[0] < w[1])
        w[1]--;
    struct tn_tensor *c = tn__composite_linalg_vector_norm(ks, self, tn_int(1), &w[0], 1, keepdim,
                                                           dtype);
    /* (the largest of no sums is 0 in PyTorch, the smallest an error) */
    struct tn_tensor *r = !c ? NULL
                          : o > 0 && c->sizes[w[1]] == 0
                              ? tn_sum_dim_intlist(c, &w[1], 1, keepdim, TN_DTYPE_UNSET)
                          : o > 0 ? tn_amax(c, &w[1], 1, keepdim)
                                  : tn_amin(c, &w[1], 1, keepdim);
    tn_release(c);
    return r;
}

struct tn_tensor *tn__composite_linalg_matrix_norm_str_ord(tn_keyset ks,
                                                           const struct tn_tensor *self,
                                                           const char *ord, const int64_t *dim,
                                                           int dim_len, bool keepdim,
                                                           enum tn_dtype dtype)
{
    bool nuc = strcmp(ord, "nuc") == 0;
    int64_t w[2];
    if (!nuc && strcmp(ord, "fro") != 0)
        return tn_set_error(TN_EINVAL, "linalg.matrix_norm: Order %s not supported.", ord), NULL;
    if (matrix_norm_checks(self, dim, dim_len, dtype, !nuc, w) < 0)
        return NULL;
    if (nuc)
        return svd_norm(self, w, '+', keepdim, dtype);
    return tn__composite_linalg_vector_norm(ks, self, tn_int(2), w, 2, keepdim, dtype);
}

/* linalg.norm's dim: when absent and ord given, self must be a vector or
 * a matrix. 2 when the norm is a matrix norm, 1 a vector norm, <0 an
 * error. */
static int norm_kind(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool ord)
{
    if (dim) {
        if (dim_len != 1 && dim_len != 2)
            return tn_set_error(TN_EINVAL, "linalg.norm: If dim is specified, it must be of "
                                "length 1 or 2. Got %d dims", dim_len);
        return dim_len;
    }
    if (ord && self->ndim != 1 && self->ndim != 2)
        return tn_set_error(TN_ESHAPE, "linalg.norm: If dim is not specified but ord is, the "
                            "input must be 1D or 2D. Got %dD.", self->ndim);
    return ord ? self->ndim : 1;
}

struct tn_tensor *tn__composite_linalg_norm(tn_keyset ks, const struct tn_tensor *self,
                                            const struct tn_scalar *ord, const int64_t *dim,
                                            int dim_len, bool keepdim, enum tn_dtype dtype)
{
    static const int64_t both[2] = {0, 1};
    int kind = norm_kind(self, dim, dim_len, ord != NULL);
    if (kind < 0)
        return NULL;
    if (kind == 2)
        return tn__composite_linalg_matrix_norm(ks, self, *ord, dim ? dim : both, 2, keepdim,
                                                dtype);
    return tn__composite_linalg_vector_norm(ks, self, ord ? *ord : tn_int(2), dim, dim_len,
                                            keepdim, dtype);
}

struct tn_tensor *tn__composite_linalg_norm_ord_str(tn_keyset ks, const struct tn_tensor *self,
                                                    const char *ord, const int64_t *dim,
                                                    int dim_len, bool keepdim, enum tn_dtype dtype)
{
    static const int64_t both[2] = {0, 1};
    if (norm_kind(self, dim, dim_len, true) < 0)
        return NULL;
    return tn__composite_linalg_matrix_norm_str_ord(ks, self, ord, dim ? dim : both,
                                                    dim ? dim_len : 2, keepdim, dtype);
}

/* ----------------------------------------------------------- derivative */

/* Whether every element of g is 0 (a gradient no path reached). */
static int all_zero(const struct tn_tensor *g)
{
    struct tn_tensor *nz = tn_ne_scalar(g, tn_int(0));
    struct tn_tensor *any = nz ? tn_any(nz) : NULL;
    int r = any ? tn_item_double(any) == 0 : -1;
    tn_release(nz);
    tn_release(any);
    return r;
}

/* The k x k core of svd_backward:
 *   (skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)
 * with E_ij = S_j^2 - S_i^2 (1 on the diagonal). */
static struct tn_tensor *svd_bw_core(const struct tn_tensor *u, const struct tn_tensor *vh,
                                     const struct tn_tensor *gu, const struct tn_tensor *gvh,
                                     const struct tn_tensor *S, const struct tn_tensor *gS)
{
    struct tn_keep k = {0};
    struct tn_tensor *x, *xt, *y, *yt, *e, *s2, *d, *t, *r;
    TN_KEEP(&k, t, tn_transpose(u, -2, -1));
    TN_KEEP(&k, x, tn_matmul(t, gu));
    TN_KEEP(&k, xt, tn_transpose(x, -2, -1));
    TN_KEEP(&k, x, tn_sub(x, xt, tn_int(1))); /* skew(U^T gU) */
    TN_KEEP(&k, t, tn_transpose(gvh, -2, -1));
    TN_KEEP(&k, y, tn_matmul(vh, t));
    TN_KEEP(&k, yt, tn_transpose(y, -2, -1));
    TN_KEEP(&k, y, tn_sub(y, yt, tn_int(1))); /* skew(Vh gVh^T) */
    TN_KEEP(&k, s2, tn_mul(S, S));
    TN_KEEP(&k, t, tn_unsqueeze(s2, -2));
    TN_KEEP(&k, e, tn_unsqueeze(s2, -1));
    TN_KEEP(&k, e, tn_sub(t, e, tn_int(1)));
    TN_KEEP(&k, d, tn_diagonal(e, 0, -2, -1));
    if (tn_fill_(d, tn_int(1)) < 0)
        goto fail;
    TN_KEEP(&k, t, tn_unsqueeze(S, -2));
    TN_KEEP(&k, x, tn_mul(x, t));
    TN_KEEP(&k, t, tn_unsqueeze(S, -1));
    TN_KEEP(&k, y, tn_mul(t, y));
    TN_KEEP(&k, r, tn_add(x, y, tn_int(1)));
    TN_KEEP(&k, r, tn_div(r, e));
    TN_KEEP(&k, d, tn_diagonal(r, 0, -2, -1));
    TN_KEEP(&k, t, tn_add(d, gS, tn_int(1)));
    if (tn_copy_(d, t) < 0)
        goto fail;
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* Contract in ops/svd_internal.h. PyTorch's svd_backward, real case:
 * gA = U core Vh (svd_bw_core), plus the part of gU outside the span of
 * U (m > n) or of gVh outside that of V (m < n). With gU and gVh both
 * zero (only S reached), U diag(gS) Vh, as PyTorch computes it for
 * undefined gU and gVh (no division by E: repeated singular values are
 * fine there). */
struct tn_tensor *tn__linalg_svd_bw(const struct tn_tensor *gU, const struct tn_tensor *gS,
                                    const struct tn_tensor *gVh, const struct tn_tensor *U,
                                    const struct tn_tensor *S, const struct tn_tensor *Vh,
                                    bool full_matrices)
{
    if (U->ndim < 2 || Vh->ndim < 2)
        return tn_set_error(TN_EINVAL, "linalg.svd: Setting compute_uv=False in torch.linalg.svd "
                            "and using the result in backward is not supported; use "
                            "torch.linalg.svdvals"), NULL;
    struct tn_keep k = {0};
    struct tn_tensor *u = (struct tn_tensor *)U, *vh = (struct tn_tensor *)Vh;
    struct tn_tensor *gu = (struct tn_tensor *)gU, *gvh = (struct tn_tensor *)gVh;
    struct tn_tensor *r, *t, *g;
    int64_t kk = S->sizes[S->ndim - 1], m = U->sizes[U->ndim - 2], n = Vh->sizes[Vh->ndim - 1];
    if (kk == 0) {
        int64_t sz[TN_MAX_DIMS];
        memcpy(sz, S->sizes, sizeof(int64_t) * (size_t)S->ndim);
        sz[S->ndim - 1] = m;
        sz[S->ndim] = n;
        return tn_zeros(sz, S->ndim + 1, S->dtype);
    }
    if (full_matrices) {
        TN_KEEP(&k, u, tn_narrow(U, -1, 0, kk));
        TN_KEEP(&k, vh, tn_narrow(Vh, -2, 0, kk));
        TN_KEEP(&k, gu, tn_narrow(gU, -1, 0, kk));
        TN_KEEP(&k, gvh, tn_narrow(gVh, -2, 0, kk));
    }
    int zu = all_zero(gu), zv = zu == 1 ? all_zero(gvh) : 0;
    if (zu < 0 || zv < 0)
        goto fail;
    if (zu && zv) {
        TN_KEEP(&k, t, tn_unsqueeze(gS, -1));
        TN_KEEP(&k, t, tn_mul(t, vh));
        TN_KEEP(&k, r, tn_matmul(u, t));
        return tn__keep_out(&k, r);
    }
    TN_KEEP(&k, r, svd_bw_core(u, vh, gu, gvh, S, gS));
    if (m > n) { /* U core + (I - U U^T) gU S^-1, times Vh */
        TN_KEEP(&k, r, tn_matmul(u, r));
        TN_KEEP(&k, t, tn_unsqueeze(S, -2));
        TN_KEEP(&k, g, tn_div(gu, t));
        TN_KEEP(&k, r, tn_add(r, g, tn_int(1)));
        TN_KEEP(&k, t, tn_transpose(u, -2, -1));
        TN_KEEP(&k, t, tn_matmul(t, g));
        TN_KEEP(&k, t, tn_matmul(u, t));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
        TN_KEEP(&k, r, tn_matmul(r, vh));
    } else if (m < n) { /* U times: core Vh + S^-1 gVh (I - V Vh) */
        TN_KEEP(&k, r, tn_matmul(r, vh));
        TN_KEEP(&k, t, tn_unsqueeze(S, -1));
        TN_KEEP(&k, g, tn_div(gvh, t));
        TN_KEEP(&k, r, tn_add(r, g, tn_int(1)));
        TN_KEEP(&k, t, tn_transpose(vh, -2, -1));
        TN_KEEP(&k, t, tn_matmul(g, t));
        TN_KEEP(&k, t, tn_matmul(t, vh));
        TN_KEEP(&k, r, tn_sub(r, t, tn_int(1)));
        TN_KEEP(&k, r, tn_matmul(u, r));
    } else {
        TN_KEEP(&k, r, tn_matmul(r, vh));
        TN_KEEP(&k, r, tn_matmul(u, r));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}
