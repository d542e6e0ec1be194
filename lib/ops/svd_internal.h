/*
 * ops/svd_internal.h: _linalg_svd's derivative (lib/ops/svd.c), for the
 * autograd node tgen generates from derivatives.yaml (never installed).
 */
#ifndef TN_OPS_SVD_INTERNAL_H
#define TN_OPS_SVD_INTERNAL_H

#include <stdbool.h>

struct tn_tensor;

/* The gradient of A for _linalg_svd's results U, S, Vh (full_matrices as
 * the call had it) and their gradients gU, gS, gVh (zeros where no path
 * reached them): PyTorch's svd_backward, assuming distinct singular
 * values where gU or gVh is not zero. A new reference, or NULL with
 * tn_last_error() (compute_uv was false: U and Vh are empty). */
struct tn_tensor *tn__linalg_svd_bw(const struct tn_tensor *gU, const struct tn_tensor *gS,
                                    const struct tn_tensor *gVh, const struct tn_tensor *U,
                                    const struct tn_tensor *S, const struct tn_tensor *Vh,
                                    bool full_matrices);

#endif
