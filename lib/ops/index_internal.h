/*
 * ops/index_internal.h: what the advanced-indexing ops (index.Tensor,
 * index_put) share between their meta half (lib/ops/index.c) and their CPU
 * kernels (lib/ops/cpu/index.c). Never installed.
 */
#ifndef TN_OPS_INDEX_INTERNAL_H
#define TN_OPS_INDEX_INTERNAL_H

#include "ops/internal.h"

/* An indexing expression self[indices] resolved as PyTorch resolves it:
 * bool/uint8 masks replaced by their nonzero indices, the index tensors
 * broadcast together, the result's dims placed (the broadcast dims where
 * the first advanced index stands when the advanced indices are adjacent,
 * else first). */
struct tn__index_plan {
    int nadv;                            /* advanced (indexed) dims of self */
    int adv_dim[TN_MAX_DIMS];            /* the self dim of each */
    struct tn_tensor *idx[TN_MAX_DIMS];  /* int64, contiguous, of bshape, each in
                                          * [0, size) (NULL for a Meta plan) */
    int bndim;
    int64_t bshape[TN_MAX_DIMS];         /* the index tensors' broadcast shape */
    int ndim;
    int64_t sizes[TN_MAX_DIMS];          /* the result's shape */
    int src[TN_MAX_DIMS];                /* result dim j comes from self dim src[j]
                                          * (>= 0) or broadcast dim -1 - src[j] */
};

/* Resolves self[indices] into p (zeroed first). With `need_index`, the
 * index tensors are converted, wrapped and checked against self's sizes
 * with PyTorch's words; without it only the shape is worked out (a mask
 * still needs its values: a Meta mask is nonzero's error on Meta). `none_ok`: an
 * expression of None only (index_put's) is self's whole shape instead of
 * PyTorch's "at least one index must be provided". 0 or an error; on error
 * p holds nothing to free. */
int tn__index_plan(const struct tn_tensor *self, const struct tn_tensor *const *indices, int n,
                   bool need_index, bool none_ok, struct tn__index_plan *p);
void tn__index_plan_free(struct tn__index_plan *p);

/* values expanded to the plan's result shape (PyTorch's index_put checks:
 * same dtype as self, broadcastable). A new reference or NULL. */
struct tn_tensor *tn__index_put_values(const struct tn_tensor *self, const struct tn_tensor *values,
                                       const struct tn__index_plan *p);

/* PyTorch's overlap checks of index_put_ (on a CPU self): values and each
 * index must not share elements with self, unless the write is a
 * masked_fill (no accumulate, one mask, a value of one CPU element), which
 * PyTorch runs without them. 0 or the error. */
int tn__index_put_overlap(const struct tn_tensor *self, const struct tn_tensor *const *indices,
                          int n, const struct tn_tensor *values, bool accumulate);

/* *dst += *from for one element of dtype (or for bool; wrapping for
 * integers): what accumulating index_put and scatter_add do per element. */
void tn__cpu_add_at(void *dst, const void *from, enum tn_dtype dtype);

#endif
