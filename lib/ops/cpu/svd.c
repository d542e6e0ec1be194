/*
 * ops/cpu/svd.c: _linalg_svd on the CPU, float32 and float64, through
 * LAPACK's divide-and-conquer SVD (?gesdd) as OpenBLAS builds it (the
 * driver PyTorch's CPU kernel calls too). Debian's OpenBLAS carries the
 * Fortran symbols but not LAPACKE, so they are declared here.
 *
 * LAPACK is column-major: a row-major m x n matrix is the column-major
 * n x m matrix A^T = V S U^T, so ?gesdd called on it writes Vh where its
 * U goes and U where its VT goes, both in row-major order, with no
 * transposes.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* LAPACK's Fortran interface (gfortran: a hidden length after the
 * arguments for each character argument) */
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s,
             float *u, const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork,
             int *iwork, int *info, size_t jobz_len);
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s,
             double *u, const int *ldu, double *vt, const int *ldvt, double *work,
             const int *lwork, int *iwork, int *info, size_t jobz_len);

static void gesdd(bool f64, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt,
                  int ldvt, void *work, int lwork, int *iwork, int *info)
{
    int lda = m > 1 ? m : 1;
    if (f64)
        dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
    else
        sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}

/* The identity in the last two dims of every matrix of t (PyTorch's U and
 * Vh of an empty A with full_matrices). */
static int eye_(struct tn_tensor *t)
{
    if (tn_fill_(t, tn_int(0)) < 0)
        return -1;
    struct tn_tensor *d = tn_diagonal(t, 0, -2, -1);
    int rc = d ? tn_fill_(d, tn_int(1)) : -1;
    tn_release(d);
    return rc;
}

/* Each matrix of a (contiguous, batch x m x n) into u, s, vh. */
static int svd_batch(const struct tn_tensor *a, int64_t batch, int m, int n, bool full, bool uv,
                     struct tn_tensor *u, struct tn_tensor *s, struct tn_tensor *vh)
{
    bool f64 = a->dtype == TN_FLOAT64;
    size_t es = f64 ? 8 : 4;
    int k = m < n ? m : n;
    char jobz = !uv ? 'N' : full ? 'A' : 'S';
    /* LAPACK's view: rows n, columns m; its U (n x ucols) is our Vh, its VT
     * (vrows x m) our U */
    int ldu = n > 1 ? n : 1, ldvt = !uv ? 1 : full ? m : k;
    ldvt = ldvt > 1 ? ldvt : 1;
    union { double d; float f; } q = {0};
    int info = 0, lwork = -1;
    int *iwork = malloc(sizeof(int) * (size_t)(8 * (k > 0 ? k : 1)));
    char *work0 = malloc(es * (size_t)m * (size_t)n + 1);
    if (!iwork || !work0) {
        free(iwork);
        free(work0);
        return tn_set_error(TN_ENOMEM, "linalg.svd: out of memory for a %d x %d matrix", m, n);
    }
    gesdd(f64, jobz, n, m, work0, tn_data(s), uv ? tn_data(vh) : NULL, ldu,
          uv ? tn_data(u) : NULL, ldvt, &q, -1, iwork, &info);
    lwork = (int)(f64 ? q.d : (double)q.f) + 1;
    void *work = malloc(es * (size_t)lwork);
    if (!work) {
        free(iwork);
        free(work0);
        return tn_set_error(TN_ENOMEM, "linalg.svd: out of memory for LAPACK's workspace");
    }
    int64_t usz = uv ? (int64_t)m * (full ? m : k) : 0, vsz = uv ? (int64_t)(full ? n : k) * n : 0;
    int rc = TN_OK;
    for (int64_t b = 0; b < batch && rc == TN_OK; b++) {
        memcpy(work0, (const char *)tn_data(a) + es * (size_t)(b * m * n), es * (size_t)m * n);
        gesdd(f64, jobz, n, m, work0, (char *)tn_data(s) + es * (size_t)(b * k),
              uv ? (char *)tn_data(vh) + es * (size_t)(b * vsz) : NULL, ldu,
              uv ? (char *)tn_data(u) + es * (size_t)(b * usz) : NULL, ldvt, work, lwork, iwork,
              &info);
        if (info > 0)
            rc = tn_set_error(TN_EINVAL, "linalg.svd: The algorithm failed to converge because "
                              "the input matrix is ill-conditioned or has too many repeated "
                              "singular values (error code: %d).", info);
        else if (info < 0)
            rc = tn_set_error(TN_EINVAL, "linalg.svd: LAPACK's ?gesdd rejected argument %d",
                              -info);
    }
    free(work);
    free(work0);
    free(iwork);
    return rc;
}

/* PyTorch's _linalg_svd: A = U diag(S) Vh over the last two dims, S
 * descending; U and Vh are empty when compute_uv is false. Meta tensors
 * get the shapes only. */
int tn__cpu__linalg_svd(tn_keyset ks, const struct tn_tensor *A, bool full_matrices,
                        bool compute_uv, const char *driver, struct tn_tensor **U,
                        struct tn_tensor **S, struct tn_tensor **Vh)
{
    (void)ks;
    if (A->ndim < 2)
        return tn_set_error(TN_ESHAPE, "linalg.svd: The input tensor A must have at least 2 "
                            "dimensions.");
    if (A->dtype != TN_FLOAT32 && A->dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "linalg.svd: expected a float32 or float64 tensor, got %s",
                            tn_dtype_name(A->dtype));
    if (driver)
        return tn_set_error(TN_EINVAL, "linalg.svd: keyword argument `driver=` is only "
                            "supported on CUDA inputs with cuSOLVER backend.");
    int nd = A->ndim;
    int64_t m = A->sizes[nd - 2], n = A->sizes[nd - 1], k = m < n ? m : n, batch = 1;
    if (m > 0x7fffffff / (n > 0 ? n : 1))
        return tn_set_error(TN_ESHAPE, "linalg.svd: a %lld x %lld matrix is beyond LAPACK's "
                            "32-bit sizes", (long long)m, (long long)n);
    for (int d = 0; d < nd - 2; d++)
        batch *= A->sizes[d];
    int64_t ss[TN_MAX_DIMS], us[TN_MAX_DIMS], vs[TN_MAX_DIMS], none = 0;
    memcpy(ss, A->sizes, sizeof(int64_t) * (size_t)nd);
    memcpy(us, A->sizes, sizeof(int64_t) * (size_t)nd);
    memcpy(vs, A->sizes, sizeof(int64_t) * (size_t)nd);
    ss[nd - 2] = k;
    us[nd - 1] = full_matrices ? m : k;
    vs[nd - 2] = full_matrices ? n : k;
    struct tn_tensor *s = tn_empty_on(ss, nd - 1, A->dtype, A->device);
    struct tn_tensor *u = compute_uv ? tn_empty_on(us, nd, A->dtype, A->device)
                                     : tn_empty_on(&none, 1, A->dtype, A->device);
    struct tn_tensor *vh = compute_uv ? tn_empty_on(vs, nd, A->dtype, A->device)
                                      : tn_empty_on(&none, 1, A->dtype, A->device);
    struct tn_tensor *a = NULL;
    int rc = s && u && vh ? TN_OK : tn_last_status();
    if (rc == TN_OK && A->device.type != TN_DEVICE_META) {
        if (k == 0)
            rc = compute_uv && full_matrices && (eye_(u) < 0 || eye_(vh) < 0) ? -1 : TN_OK;
        else if (!(a = tn_contiguous(A)))
            rc = -1;
        else
            rc = svd_batch(a, batch, (int)m, (int)n, full_matrices, compute_uv, u, s, vh);
        if (rc < 0)
            rc = tn_last_status();
    }
    tn_release(a);
    if (rc < 0) {
        tn_release(s);
        tn_release(u);
        tn_release(vh);
        return rc;
    }
    *U = u;
    *S = s;
    *Vh = vh;
    return TN_OK;
}
