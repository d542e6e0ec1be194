/*
 * ops/cpu/cholesky.c: linalg_cholesky_ex on the CPU, float32 and float64,
 * through LAPACK's ?potrf as OpenBLAS builds it (declared here: Debian's
 * OpenBLAS has the Fortran symbols, no LAPACKE). Meta tensors get the
 * shapes and checks only.
 *
 * LAPACK is column-major: a row-major matrix is the column-major A^T, so
 * its lower triangle is LAPACK's upper one. ?potrf with uplo 'U' on it
 * reads what PyTorch reads for upper=False (A's lower triangle) and writes
 * U^T U = A^T there, which row-major is L L^T = A; uplo 'L' serves
 * upper=True the same way.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"
#include "ops/lu_internal.h"

/* LAPACK's Fortran interface (gfortran: a hidden length after the
 * arguments for each character argument) */
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info,
             size_t uplo_len);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
             size_t uplo_len);

static void potrf(bool f64, char uplo, int n, void *a, int *info)
{
    int lda = n > 1 ? n : 1;
    if (f64)
        dpotrf_(&uplo, &n, a, &lda, info, 1);
    else
        spotrf_(&uplo, &n, a, &lda, info, 1);
}

/* Each of the nbat n x n matrices of l (contiguous, a copy of A) factored
 * in place; info[b] LAPACK's code for matrix b. */
static int factor(struct tn_tensor *l, struct tn_tensor *in, int64_t nbat, int n, bool upper)
{
    bool f64 = l->dtype == TN_FLOAT64;
    size_t es = f64 ? 8 : 4;
    int32_t *info = tn_data(in);
    for (int64_t b = 0; b < nbat; b++) {
        info[b] = 0;
        if (n == 0) /* (an empty tensor's data may be NULL: no pointer into it) */
            continue;
        potrf(f64, upper ? 'L' : 'U', n, (char *)tn_data(l) + es * (size_t)(b * n * n),
              &info[b]);
        if (info[b] < 0)
            return tn_set_error(TN_EINVAL, "linalg.cholesky: LAPACK's ?potrf rejected "
                                "argument %d", -info[b]);
    }
    return TN_OK;
}

/* PyTorch's linalg_cholesky_ex: L (lower, L L^T = A, from A's lower
 * triangle) or with upper U (U^T U = A, from A's upper triangle); info[b]
 * > 0 is the order of the leading minor that is not positive-definite
 * (an error with check_errors). */
int tn__cpu_linalg_cholesky_ex(tn_keyset ks, const struct tn_tensor *self, bool upper,
                               bool check_errors, struct tn_tensor **L,
                               struct tn_tensor **info)
{
    (void)ks;
    if (tn__linalg_check_matrix(self, "linalg.cholesky", "A", true) < 0 ||
        tn__linalg_check_floating(self, "linalg.cholesky") < 0)
        return -1;
    if (self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "\"cholesky_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name);
    int nd = self->ndim;
    int64_t n = self->sizes[nd - 1], nbat = 1;
    if (n > 46340) /* n * n within LAPACK's 32-bit sizes */
        return tn_set_error(TN_ESHAPE, "linalg.cholesky: a %lld x %lld matrix is beyond "
                            "LAPACK's 32-bit sizes", (long long)n, (long long)n);
    for (int d = 0; d < nd - 2; d++)
        nbat *= self->sizes[d];
    struct tn_tensor *l = tn_empty_on(self->sizes, nd, self->dtype, self->device);
    struct tn_tensor *in = tn_empty_on(self->sizes, nd - 2, TN_INT32, self->device);
    struct tn_tensor *t = NULL;
    int rc = l && in ? TN_OK : -1;
    if (rc == TN_OK && self->device.type != TN_DEVICE_META) {
        if (tn_numel(l) > 0 && tn_copy_(l, self) < 0)
            rc = -1;
        if (rc == TN_OK)
            rc = factor(l, in, nbat, (int)n, upper);
        /* the other triangle keeps A's values: zeroed as PyTorch does */
        if (rc == TN_OK && !(t = upper ? tn_triu(l, 0) : tn_tril(l, 0)))
            rc = -1;
        if (rc == TN_OK) {
            tn_release(l);
            l = t;
        }
        if (rc == TN_OK && check_errors)
            rc = tn__linalg_check_errors(in, "linalg.cholesky_ex", nd == 2);
    }
    if (rc < 0) {
        rc = tn_last_status();
        tn_release(l);
        tn_release(in);
        return rc;
    }
    *L = l;
    *info = in;
    return TN_OK;
}
