/*
 * ops/lu_internal.h: what the triangular solves and the LU family share
 * (lib/ops/lu.c, lib/ops/cpu/lu.c): PyTorch's argument checks and error
 * words, and the derivatives derivatives.yaml calls (never installed).
 */
#ifndef TN_OPS_LU_INTERNAL_H
#define TN_OPS_LU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct tn_tensor;

/* PyTorch's checkIsMatrix (and squareCheckInputs with square): A has at
 * least 2 dims (and square matrices); 0, or -1 with its error naming
 * function f and argument arg. */
int tn__linalg_check_matrix(const struct tn_tensor *A, const char *f, const char *arg,
                            bool square);

/* PyTorch's checkInputsSolver: A square, B a matrix whose rows (left) or
 * columns match A's; 0 or -1 with its error naming f. */
int tn__linalg_check_solver(const struct tn_tensor *A, const struct tn_tensor *B, bool left,
                            const char *f);

/* PyTorch's linearSolveCheckInputs for b and A (at least 2 dims each,
 * checked by the caller): the same dtype, A square, b's rows A's; 0, or
 * -1 with its error naming f. */
int tn__linalg_check_linear_solve(const struct tn_tensor *b, const struct tn_tensor *A,
                                  const char *f);

/* "kernel" not implemented for 'Long', as PyTorch's dispatch macros say it
 * for a dtype of t other than float32 and float64: 0, or -1 with it. */
int tn__linalg_check_float(const struct tn_tensor *t, const char *kernel);

/* PyTorch's checkFloatingOrComplex: 0, or -1 with its error naming f. */
int tn__linalg_check_floating(const struct tn_tensor *t, const char *f);

/* f: Expected A and B to have the same dtype (a and b named an and bn):
 * 0, or -1 with PyTorch's error. */
int tn__linalg_check_same_dtype(const struct tn_tensor *a, const struct tn_tensor *b,
                                const char *f, const char *an, const char *bn);

/* The three results of a kernel handed out (rc 0) or released (rc < 0,
 * tn_last_status() returned). */
int tn__linalg_out3(int rc, struct tn_tensor *a, struct tn_tensor *b, struct tn_tensor *c,
                    struct tn_tensor **oa, struct tn_tensor **ob, struct tn_tensor **oc);

/* PyTorch's _linalg_check_errors for the LAPACK info codes in info
 * (int32, one a matrix): 0 when all are 0, else -1 with the error of api
 * (its wording picked by "lu_factor", "inv", "cholesky", "eig" or a solver
 * in the name),
 * naming the batch element unless is_matrix. */
int tn__linalg_check_errors(const struct tn_tensor *info, const char *api, bool is_matrix);

/* The derivatives (lib/ops/lu.c), new references or NULL with an error:
 * linalg_solve_triangular's gradient of A (which 0) or B (which 1) for
 * result X, as PyTorch's linalg_solve_triangular_backward; */
struct tn_tensor *tn__linalg_solve_triangular_bw(const struct tn_tensor *grad,
                                                 const struct tn_tensor *A,
                                                 const struct tn_tensor *X, bool upper,
                                                 bool left, bool unitriangular, int64_t which);
/* linalg_lu_factor_ex's gradient of A (PyTorch's lu_factor_ex_backward); */
struct tn_tensor *tn__lu_factor_ex_bw(const struct tn_tensor *grad, const struct tn_tensor *LU,
                                      const struct tn_tensor *pivots, bool pivot);
/* lu_unpack's gradient of LU_data (of shape sizes) from those of L and U; */
struct tn_tensor *tn__lu_unpack_bw(const struct tn_tensor *gL, const struct tn_tensor *gU,
                                   const int64_t *sizes, int ndim);
/* linalg_lu_solve's gradients of LU (PyTorch's linalg_lu_solve_LU, X the
 * result) and of B. */
struct tn_tensor *tn__linalg_lu_solve_LU(const struct tn_tensor *gX, const struct tn_tensor *LU,
                                         const struct tn_tensor *pivots,
                                         const struct tn_tensor *X, bool left, bool adjoint);
struct tn_tensor *tn__linalg_lu_solve_B(const struct tn_tensor *gX, const struct tn_tensor *LU,
                                        const struct tn_tensor *pivots, bool left, bool adjoint);
/* linalg_pinv's gradient of A for result A+ (PyTorch's pinv_backward,
 * real case, lib/ops/pinv.c). */
struct tn_tensor *tn__pinv_bw(const struct tn_tensor *grad, const struct tn_tensor *pinvA,
                              const struct tn_tensor *A);

#endif
