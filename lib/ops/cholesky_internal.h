/*
 * ops/cholesky_internal.h: the derivatives of the Cholesky family
 * (lib/ops/cholesky.c) that schemas/derivatives.yaml calls, PyTorch's
 * FunctionsManual.cpp formulas, real case (never installed). New
 * references, or NULL with an error.
 */
#ifndef TN_OPS_CHOLESKY_INTERNAL_H
#define TN_OPS_CHOLESKY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct tn_tensor;

/* linalg_cholesky_ex's gradient of A from that of its factor L (U with
 * upper): PyTorch's cholesky_backward; */
struct tn_tensor *tn__cholesky_bw(const struct tn_tensor *grad, bool upper,
                                  const struct tn_tensor *L);
/* cholesky_solve's gradient of self (which 0) or of input2 (which 1) for
 * result X: PyTorch's cholesky_solve_backward; */
struct tn_tensor *tn__cholesky_solve_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                        const struct tn_tensor *input2,
                                        const struct tn_tensor *X, bool upper, int64_t which);
/* cholesky_inverse's gradient of its factor L for result inverse:
 * PyTorch's cholesky_inverse_backward. */
struct tn_tensor *tn__cholesky_inverse_bw(const struct tn_tensor *grad, const struct tn_tensor *L,
                                          bool upper, const struct tn_tensor *inverse);

#endif
