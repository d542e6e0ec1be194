/*
 * ops/cpu/lu.c: the triangular solves and the LU family on the CPU,
 * float32 and float64: linalg_solve_triangular through OpenBLAS's ?trsm
 * (CBLAS, row-major as it is), linalg_lu_factor_ex through LAPACK's ?getrf
 * (declared here: Debian's OpenBLAS has the Fortran symbols, no LAPACKE),
 * lu_unpack, and linalg_lu_solve as ?getrs does it (row swaps and two
 * ?trsm), row-major. Meta tensors get the shapes and checks only.
 *
 * LAPACK is column-major: ?getrf factors a transposed copy of each matrix
 * (the column-major A), and the factors are transposed back, so LU and
 * the pivots are PyTorch's (whose CPU kernel factors a column-major copy).
 */
#include <config.h>

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/lu_internal.h"

void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);

/* ------------------------------------------------------------- checks */

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_matrix(const struct tn_tensor *A, const char *f, const char *arg,
                            bool square)
{
    if (A->ndim < 2)
        return tn_set_error(TN_ESHAPE, "%s: The input tensor %s must have at least 2 dimensions.",
                            f, arg);
    if (square && A->sizes[A->ndim - 1] != A->sizes[A->ndim - 2])
        return tn_set_error(TN_ESHAPE, "%s: %s must be batches of square matrices, but they are "
                            "%lld by %lld matrices", f, arg, (long long)A->sizes[A->ndim - 2],
                            (long long)A->sizes[A->ndim - 1]);
    return TN_OK;
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_solver(const struct tn_tensor *A, const struct tn_tensor *B, bool left,
                        const char *f)
{
    if (tn__linalg_check_matrix(A, f, "A", true) < 0 ||
        tn__linalg_check_matrix(B, f, "B", false) < 0)
        return -1;
    int64_t n = A->sizes[A->ndim - 1], r = B->sizes[B->ndim - 2], c = B->sizes[B->ndim - 1];
    if (left ? n != r : n != c)
        return tn_set_error(TN_ESHAPE, "%s: Incompatible shapes of A and B for the equation %s "
                            "(%lldx%lld and %lldx%lld)", f, left ? "AX = B" : "XA = B",
                            (long long)n, (long long)n, (long long)r, (long long)c);
    return TN_OK;
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_floating(const struct tn_tensor *t, const char *f)
{
    if (tn_dtype_is_floating(t->dtype) || tn_dtype_is_complex(t->dtype))
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "%s: Expected a floating point or complex tensor as input. "
                        "Got %s", f, tn_dtype_info(t->dtype)->c10_name);
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_same_dtype(const struct tn_tensor *a, const struct tn_tensor *b,
                                const char *f, const char *an, const char *bn)
{
    if (a->dtype == b->dtype)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "%s: Expected %s and %s to have the same dtype, but found %s "
                        "of type %s and %s of type %s instead", f, an, bn, an,
                        tn_dtype_info(a->dtype)->c10_name, bn, tn_dtype_info(b->dtype)->c10_name);
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_out3(int rc, struct tn_tensor *a, struct tn_tensor *b, struct tn_tensor *c,
                    struct tn_tensor **oa, struct tn_tensor **ob, struct tn_tensor **oc)
{
    if (rc < 0) {
        rc = tn_last_status();
        tn_release(a);
        tn_release(b);
        tn_release(c);
        return rc;
    }
    *oa = a;
    *ob = b;
    *oc = c;
    return TN_OK;
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_errors(const struct tn_tensor *info, const char *api, bool is_matrix)
{
    if (info->device.type == TN_DEVICE_META) /* no values: nothing to check */
        return TN_OK;
    const int32_t *d = tn_data(info);
    int64_t n = tn_numel(info);
    for (int64_t b = 0; b < n; b++) {
        if (d[b] <= 0)
            continue;
        char batch[48] = "";
        if (!is_matrix)
            snprintf(batch, sizeof batch, ": (Batch element %lld)", (long long)b);
        if (strstr(api, "lu_factor"))
            return tn_set_error(TN_EINVAL, "%s%s: U[%d,%d] is zero and using it on lu_solve "
                                "would result in a division by zero. If you still want to "
                                "perform the factorization, consider calling linalg.lu(A, "
                                "pivot) or linalg.lu_factor_ex(A, pivot)", api, batch, d[b],
                                d[b]);
        if (strstr(api, "inv"))
            return tn_set_error(TN_EINVAL, "%s%s: The diagonal element %d is zero, the "
                                "inversion could not be completed because the input matrix "
                                "is singular.", api, batch, d[b]);
        if (strstr(api, "cholesky"))
            return tn_set_error(TN_EINVAL, "%s%s: The factorization could not be completed "
                                "because the input is not positive-definite (the leading minor "
                                "of order %d is not positive-definite).", api, batch, d[b]);
        if (strstr(api, "eig"))
            return tn_set_error(TN_EINVAL, "%s%s: The algorithm failed to converge because the "
                                "input matrix is ill-conditioned or has too many repeated "
                                "eigenvalues (error code: %d).", api, batch, d[b]);
        return tn_set_error(TN_EINVAL, "%s%s: The solver failed because the input matrix is "
                            "singular.", api, batch);
    }
    return TN_OK;
}

/* Contract in ops/lu_internal.h. */
int tn__linalg_check_float(const struct tn_tensor *t, const char *kernel)
{
    if (t->dtype == TN_FLOAT32 || t->dtype == TN_FLOAT64)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                        tn_dtype_info(t->dtype)->c10_name);
}

/* ------------------------------------------------------------ helpers */

/* t's batch dims (all but its last `keep`) broadcast to batch[0..nb), its
 * last dims kept: a contiguous copy in dtype dt (a new reference). */
static struct tn_tensor *batched(const struct tn_tensor *t, int keep, const int64_t *batch,
                                 int nb, enum tn_dtype dt)
{
    int64_t sz[TN_MAX_DIMS];
    memcpy(sz, batch, sizeof(int64_t) * (size_t)nb);
    for (int i = 0; i < keep; i++)
        sz[nb + i] = t->sizes[t->ndim - keep + i];
    struct tn_tensor *e = tn_expand(t, sz, nb + keep);
    struct tn_tensor *c = e ? tn_empty_on(sz, nb + keep, dt, t->device) : NULL;
    if (c && c->device.type != TN_DEVICE_META && tn_copy_(c, e) < 0) {
        tn_release(c);
        c = NULL;
    }
    tn_release(e);
    return c;
}

/* The broadcast of a's and b's batch dims (all but their last ka and kb)
 * into out; its length, or -1 with PyTorch's error. */
static int batch_dims(const struct tn_tensor *a, int ka, const struct tn_tensor *b, int kb,
                      int64_t *out)
{
    return tn_broadcast_shapes(a->sizes, a->ndim - ka, b->sizes, b->ndim - kb, out);
}

static int64_t prod(const int64_t *s, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= s[i];
    return p;
}

static void trsm(bool f64, enum CBLAS_SIDE side, enum CBLAS_UPLO uplo, enum CBLAS_TRANSPOSE tr,
                 enum CBLAS_DIAG diag, int m, int n, const void *a, int lda, void *b, int ldb)
{
    if (f64)
        cblas_dtrsm(CblasRowMajor, side, uplo, tr, diag, m, n, 1.0, a, lda, b, ldb);
    else
        cblas_strsm(CblasRowMajor, side, uplo, tr, diag, m, n, 1.0f, a, lda, b, ldb);
}

/* ----------------------------------------------- linalg_solve_triangular */

/* PyTorch's linalg_solve_triangular: X with A X = B (left) or X A = B, A's
 * upper or lower triangle (its diagonal taken as ones if unitriangular),
 * batch dims broadcast, the dtypes promoted. */
struct tn_tensor *tn__cpu_linalg_solve_triangular(tn_keyset ks, const struct tn_tensor *self,
                                                  const struct tn_tensor *B, bool upper,
                                                  bool left, bool unitriangular)
{
    (void)ks;
    const char *f = "linalg.solve_triangular";
    if (tn__linalg_check_solver(self, B, left, f) < 0)
        return NULL;
    enum tn_dtype dt = self->dtype; /* PyTorch's result takes A's dtype */
    if (dt != TN_FLOAT32 && dt != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "\"triangular_solve_cpu\" not implemented for '%s'",
                            tn_dtype_info(dt)->c10_name), NULL;
    int64_t bs[TN_MAX_DIMS];
    int nb = batch_dims(B, 2, self, 2, bs);
    if (nb < 0)
        return NULL;
    struct tn_tensor *a = batched(self, 2, bs, nb, dt);
    struct tn_tensor *x = a ? batched(B, 2, bs, nb, dt) : NULL;
    if (!x || x->device.type == TN_DEVICE_META || tn_numel(x) == 0) {
        tn_release(a);
        return x;
    }
    int n = (int)self->sizes[self->ndim - 1];
    int r = (int)x->sizes[x->ndim - 2], c = (int)x->sizes[x->ndim - 1];
    bool f64 = dt == TN_FLOAT64;
    size_t es = f64 ? 8 : 4;
    for (int64_t b = 0, nbat = prod(bs, nb); b < nbat; b++)
        trsm(f64, left ? CblasLeft : CblasRight, upper ? CblasUpper : CblasLower, CblasNoTrans,
             unitriangular ? CblasUnit : CblasNonUnit, r, c,
             (const char *)tn_data(a) + es * (size_t)(b * n * n), n,
             (char *)tn_data(x) + es * (size_t)(b * r * c), c);
    tn_release(a);
    return x;
}

/* ---------------------------------------------------- linalg_lu_factor_ex */

static void getrf(bool f64, int m, int n, void *a, int *ipiv, int *info)
{
    int lda = m > 1 ? m : 1;
    if (f64)
        dgetrf_(&m, &n, a, &lda, ipiv, info);
    else
        sgetrf_(&m, &n, a, &lda, ipiv, info);
}

/* Element (i, j) of a row-major (!cm) or column-major (cm) m x n matrix
 * copied between the two layouts. */
static void transpose_copy(bool f64, void *dst, const void *src, int rows, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            if (f64)
                ((double *)dst)[(size_t)j * rows + i] = ((const double *)src)[(size_t)i * cols + j];
            else
                ((float *)dst)[(size_t)j * rows + i] = ((const float *)src)[(size_t)i * cols + j];
        }
}

/* PyTorch's linalg_lu_factor_ex: A = P L U with partial pivoting (LAPACK's
 * 1-based row interchanges as int32 pivots), L (unit diagonal) and U
 * packed in LU, info > 0 where U is singular (an error with
 * check_errors). */
int tn__cpu_linalg_lu_factor_ex(tn_keyset ks, const struct tn_tensor *A, bool pivot,
                                bool check_errors, struct tn_tensor **LU,
                                struct tn_tensor **pivots, struct tn_tensor **info)
{
    (void)ks;
    if (A->ndim < 2) {
        char s[128];
        return tn_set_error(TN_ESHAPE, "torch.lu_factor: Expected tensor with 2 or more "
                            "dimensions. Got size: %s instead",
                            tn_shape_format(A->sizes, A->ndim, s, sizeof s));
    }
    if (tn__linalg_check_float(A, "lu_cpu") < 0)
        return -1;
    if (!pivot)
        return tn_set_error(TN_EINVAL, "linalg.lu_factor: LU without pivoting is not "
                            "implemented on the CPU");
    int nd = A->ndim;
    int64_t m = A->sizes[nd - 2], n = A->sizes[nd - 1], k = m < n ? m : n;
    if (m > 0x7fffffff / (n > 0 ? n : 1))
        return tn_set_error(TN_ESHAPE, "linalg.lu_factor: a %lld x %lld matrix is beyond "
                            "LAPACK's 32-bit sizes", (long long)m, (long long)n);
    int64_t ps[TN_MAX_DIMS];
    memcpy(ps, A->sizes, sizeof(int64_t) * (size_t)nd);
    ps[nd - 2] = k;
    struct tn_tensor *lu = tn_empty_on(A->sizes, nd, A->dtype, A->device);
    struct tn_tensor *pv = tn_empty_on(ps, nd - 1, TN_INT32, A->device);
    struct tn_tensor *in = tn_empty_on(A->sizes, nd - 2, TN_INT32, A->device);
    int rc = lu && pv && in ? TN_OK : -1;
    if (rc == TN_OK && A->device.type != TN_DEVICE_META) {
        bool f64 = A->dtype == TN_FLOAT64;
        size_t es = f64 ? 8 : 4, mn = (size_t)(m * n);
        struct tn_tensor *a = tn_contiguous(A);
        void *w = malloc(es * mn + 1);
        int64_t nbat = prod(A->sizes, nd - 2);
        if (!a || !w)
            rc = a ? tn_set_error(TN_ENOMEM, "linalg.lu_factor: out of memory") : -1;
        for (int64_t b = 0; rc == TN_OK && b < nbat; b++) {
            int *inf = (int *)tn_data(in) + b;
            *inf = 0;
            if (mn == 0) /* (an empty tensor's data may be NULL: no pointer into it) */
                continue;
            transpose_copy(f64, w, (const char *)tn_data(a) + es * b * mn, (int)m, (int)n);
            getrf(f64, (int)m, (int)n, w, (int *)tn_data(pv) + b * k, inf);
            if (*inf < 0)
                rc = tn_set_error(TN_EINVAL, "linalg.lu_factor: LAPACK's ?getrf rejected "
                                  "argument %d", -*inf);
            transpose_copy(f64, (char *)tn_data(lu) + es * b * mn, w, (int)n, (int)m);
        }
        free(w);
        tn_release(a);
        if (rc == TN_OK && check_errors)
            rc = tn__linalg_check_errors(in, "torch.linalg.lu_factor_ex", nd == 2);
    }
    return tn__linalg_out3(rc, lu, pv, in, LU, pivots, info);
}

/* ------------------------------------------------------------- lu_unpack */

/* The row order that LAPACK's interchanges piv[0..k) make of 0..m-1:
 * row r of P^T A is row perm[r] of A. */
static void permutation(const int32_t *piv, int64_t k, int64_t m, int64_t *perm)
{
    for (int64_t i = 0; i < m; i++)
        perm[i] = i;
    for (int64_t i = 0; i < k; i++) {
        int64_t j = piv[i] - 1, t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Whether every pivot of pv (nbat x k, int32) is a row in i+1..m, as
 * LAPACK writes them; an error otherwise (they index P's rows). */
static int check_pivots(const struct tn_tensor *pv, int64_t nbat, int64_t k, int64_t m)
{
    const int32_t *p = tn_data(pv);
    for (int64_t b = 0; b < nbat; b++)
        for (int64_t i = 0; i < k; i++)
            if (p[b * k + i] < i + 1 || p[b * k + i] > m)
                return tn_set_error(TN_EINVAL, "torch.lu_unpack: pivot %d at position %lld is "
                                    "not a row of the %lld x %lld matrix (1-based, at least "
                                    "%lld)", p[b * k + i], (long long)i, (long long)m,
                                    (long long)m, (long long)(i + 1));
    return TN_OK;
}

/* P (m x m) of each batch of pivots pv (contiguous int32). */
static int fill_p(struct tn_tensor *P, const struct tn_tensor *pv, int64_t nbat, int64_t k,
                  int64_t m)
{
    if (check_pivots(pv, nbat, k, m) < 0 || tn_fill_(P, tn_int(0)) < 0)
        return -1;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(m > 0 ? m : 1));
    if (!perm)
        return tn_set_error(TN_ENOMEM, "torch.lu_unpack: out of memory");
    bool f64 = P->dtype == TN_FLOAT64;
    for (int64_t b = 0; b < nbat; b++) {
        permutation((const int32_t *)tn_data(pv) + b * k, k, m, perm);
        for (int64_t r = 0; r < m; r++) {
            size_t at = (size_t)(b * m * m + perm[r] * m + r);
            if (f64)
                ((double *)tn_data(P))[at] = 1;
            else
                ((float *)tn_data(P))[at] = 1;
        }
    }
    free(perm);
    return TN_OK;
}

/* PyTorch's lu_unpack: P, L (m x k, unit diagonal) and U (k x n) with
 * A = P L U; L and U are empty without unpack_data, P without
 * unpack_pivots. */
int tn__cpu_lu_unpack(tn_keyset ks, const struct tn_tensor *LU_data,
                      const struct tn_tensor *LU_pivots, bool unpack_data, bool unpack_pivots,
                      struct tn_tensor **P, struct tn_tensor **L, struct tn_tensor **U)
{
    (void)ks;
    const struct tn_tensor *A = LU_data;
    if (A->ndim < 2) {
        char s[128];
        return tn_set_error(TN_ESHAPE, "torch.lu_unpack: Expected tensor with 2 or more "
                            "dimensions. Got size: %s instead",
                            tn_shape_format(A->sizes, A->ndim, s, sizeof s));
    }
    if (unpack_pivots && LU_pivots->dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "torch.lu_unpack: LU_pivots is expected to be a "
                            "contiguous tensor of torch.int32 dtype.");
    int nd = A->ndim;
    int64_t m = A->sizes[nd - 2], n = A->sizes[nd - 1], k = m < n ? m : n, none = 0;
    if (unpack_pivots && (LU_pivots->ndim != nd - 1 || LU_pivots->sizes[nd - 2] != k ||
                          memcmp(LU_pivots->sizes, A->sizes, sizeof(int64_t) * (nd - 2)))) {
        char s[128];
        return tn_set_error(TN_ESHAPE, "torch.lu_unpack: Expected LU_pivots to have the shape "
                            "of LU_data without its last dim, [..., %lld], but got %s instead",
                            (long long)k, tn_shape_format(LU_pivots->sizes, LU_pivots->ndim, s,
                                                          sizeof s));
    }
    int64_t ps[TN_MAX_DIMS], ls[TN_MAX_DIMS], us[TN_MAX_DIMS];
    memcpy(ps, A->sizes, sizeof(int64_t) * (size_t)nd);
    memcpy(ls, A->sizes, sizeof(int64_t) * (size_t)nd);
    memcpy(us, A->sizes, sizeof(int64_t) * (size_t)nd);
    ps[nd - 1] = m;
    ls[nd - 1] = k;
    us[nd - 2] = k;
    struct tn_tensor *p = unpack_pivots ? tn_empty_on(ps, nd, A->dtype, A->device)
                                        : tn_empty_on(&none, 1, A->dtype, A->device);
    struct tn_tensor *l = NULL, *u = NULL, *pv = NULL;
    if (unpack_data) {
        struct tn_tensor *ln = tn_narrow(A, -1, 0, k), *un = tn_narrow(A, -2, 0, k);
        l = ln ? tn_tril(ln, -1) : NULL;
        u = un ? tn_triu(un, 0) : NULL;
        tn_release(ln);
        tn_release(un);
        /* (a Meta L has no values to set) */
        struct tn_tensor *d = l ? tn_diagonal(l, 0, -2, -1) : NULL;
        if (!d || (A->device.type != TN_DEVICE_META && tn_fill_(d, tn_int(1)) < 0)) {
            tn_release(u);
            u = NULL;
        }
        tn_release(d);
    } else {
        l = tn_empty_on(&none, 1, A->dtype, A->device);
        u = tn_empty_on(&none, 1, A->dtype, A->device);
    }
    int rc = p && l && u ? TN_OK : -1;
    if (rc == TN_OK && unpack_pivots && A->device.type != TN_DEVICE_META) {
        pv = tn_contiguous(LU_pivots);
        rc = pv ? fill_p(p, pv, prod(A->sizes, nd - 2), k, m) : -1;
    }
    tn_release(pv);
    return tn__linalg_out3(rc, p, l, u, P, L, U);
}

/* -------------------------------------------------------- linalg_lu_solve */

/* The row interchanges piv[0..n) applied to the n x c matrix x, forward
 * (P^T x) or backward (P x). */
static void swap_rows(bool f64, void *x, const int32_t *piv, int n, int c, bool forward)
{
    size_t es = f64 ? 8 : 4, row = es * (size_t)c;
    char tmp[256];
    for (int s = 0; s < n; s++) {
        int i = forward ? s : n - 1 - s, j = piv[i] - 1;
        if (i == j)
            continue;
        char *a = (char *)x + row * (size_t)i, *b = (char *)x + row * (size_t)j;
        for (size_t o = 0; o < row; o += sizeof tmp) {
            size_t len = row - o < sizeof tmp ? row - o : sizeof tmp;
            memcpy(tmp, a + o, len);
            memcpy(a + o, b + o, len);
            memcpy(b + o, tmp, len);
        }
    }
}

/* PyTorch's linalg_lu_solve checks: LU square and float, B its dtype,
 * pivots int32 of LU's batch shape. */
static int lu_solve_checks(const struct tn_tensor *LU, const struct tn_tensor *pivots,
                           const struct tn_tensor *B, bool left)
{
    if (tn__linalg_check_floating(LU, "torch.linalg.lu_solve") < 0)
        return -1;
    if (tn__linalg_check_same_dtype(LU, B, "linalg.lu_solve", "LU", "B") < 0)
        return -1;
    if (pivots->dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "linalg.lu_solve: pivots should be a Tensor of scalar "
                            "type torch.int32");
    if (tn__linalg_check_matrix(LU, "torch.linalg.lu_solve", "A", true) < 0 ||
        tn__linalg_check_solver(LU, B, left, "linalg.lu_solve") < 0)
        return -1;
    if (pivots->ndim < 1 || LU->sizes[LU->ndim - 1] != pivots->sizes[pivots->ndim - 1])
        return tn_set_error(TN_ESHAPE, "linalg.lu_solve: Number of pivots per batch should be "
                            "same as the dimension of the matrix");
    if (pivots->ndim != LU->ndim - 1 ||
        memcmp(pivots->sizes, LU->sizes, sizeof(int64_t) * (size_t)(LU->ndim - 2)) != 0) {
        char s[128];
        return tn_set_error(TN_ESHAPE, "linalg.lu_solve: Expected LU.shape[:-1] and "
                            "pivots.shape to be the same, but got pivots with shape %s instead",
                            tn_shape_format(pivots->sizes, pivots->ndim, s, sizeof s));
    }
    return tn__linalg_check_float(LU, "linalg_lu_solve_cpu");
}

/* Solves A X = B (adjoint: A^T X = B) in place on x (batch x n x c) with
 * A = P L U packed in lu (batch of the broadcast, contiguous). */
static void lu_solve_left(bool f64, const struct tn_tensor *lu, const struct tn_tensor *pv,
                          struct tn_tensor *x, int64_t nbat, int n, int c, bool adjoint)
{
    size_t es = f64 ? 8 : 4;
    for (int64_t b = 0; b < nbat; b++) {
        const char *a = (const char *)tn_data(lu) + es * (size_t)(b * n * n);
        const int32_t *piv = (const int32_t *)tn_data(pv) + b * n;
        char *xb = (char *)tn_data(x) + es * (size_t)(b * n * c);
        if (!adjoint) { /* X = U^-1 L^-1 P^T B */
            swap_rows(f64, xb, piv, n, c, true);
            trsm(f64, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, n, c, a, n, xb, c);
            trsm(f64, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, c, a, n, xb, c);
        } else { /* X = P L^-T U^-T B */
            trsm(f64, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, n, c, a, n, xb, c);
            trsm(f64, CblasLeft, CblasLower, CblasTrans, CblasUnit, n, c, a, n, xb, c);
            swap_rows(f64, xb, piv, n, c, false);
        }
    }
}

/* PyTorch's linalg_lu_solve: X with A X = B (A^H X = B with adjoint; X A =
 * B, X A^H = B without left) for A = P L U as linalg_lu_factor packs it;
 * B's batch dims broadcast with LU's. */
struct tn_tensor *tn__cpu_linalg_lu_solve(tn_keyset ks, const struct tn_tensor *LU,
                                          const struct tn_tensor *pivots,
                                          const struct tn_tensor *B, bool left, bool adjoint)
{
    if (lu_solve_checks(LU, pivots, B, left) < 0)
        return NULL;
    if (!left) { /* X A = B is A^T X^T = B^T */
        struct tn_tensor *bt = tn_transpose(B, -2, -1);
        struct tn_tensor *xt = bt ? tn__cpu_linalg_lu_solve(ks, LU, pivots, bt, true, !adjoint)
                                  : NULL;
        struct tn_tensor *x = xt ? tn_transpose(xt, -2, -1) : NULL;
        struct tn_tensor *r = x ? tn_contiguous(x) : NULL;
        tn_release(bt);
        tn_release(xt);
        tn_release(x);
        return r;
    }
    int64_t bs[TN_MAX_DIMS];
    int nb = batch_dims(B, 2, LU, 2, bs);
    if (nb < 0)
        return NULL;
    struct tn_tensor *lu = batched(LU, 2, bs, nb, LU->dtype);
    struct tn_tensor *pv = lu ? batched(pivots, 1, bs, nb, TN_INT32) : NULL;
    struct tn_tensor *x = pv ? batched(B, 2, bs, nb, B->dtype) : NULL;
    if (x && x->device.type != TN_DEVICE_META && tn_numel(x) > 0)
        lu_solve_left(x->dtype == TN_FLOAT64, lu, pv, x, prod(bs, nb),
                      (int)x->sizes[x->ndim - 2], (int)x->sizes[x->ndim - 1], adjoint);
    tn_release(lu);
    tn_release(pv);
    return x;
}
