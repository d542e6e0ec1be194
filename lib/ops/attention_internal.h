/*
 * ops/attention_internal.h: what scaled_dot_product_attention's halves
 * share (lib/ops/attention.c checks and decomposes, lib/ops/cpu/attention.c
 * computes).
 */
#ifndef TN_OPS_ATTENTION_INTERNAL_H
#define TN_OPS_ATTENTION_INTERNAL_H

#include "ops/nn_internal.h"

/* The shapes of one attention call: query [bsz..., L, E] after
 * broadcasting, key [kvsz..., S, E], value [kvsz..., S, Ev], the result
 * [bsz..., L, Ev]. kvsz equals bsz except, under grouped-query attention,
 * its head dim (the last batch dim), Hk where the query has Hq; query head
 * h then reads key/value head h / (Hq / Hk). Hq = Hk = 1 otherwise. */
struct tn__attn_shape {
    int nb;
    int64_t bsz[TN_MAX_DIMS], kvsz[TN_MAX_DIMS];
    int64_t B, Bkv, L, S, E, Ev, Hq, Hk;
    double scale;
};

/* Checks query, key, value, attn_mask and dropout_p (0 for the kernel,
 * _tn_attention, which has no dropout) as PyTorch does and fills sh; 0 or
 * an error naming what does not fit. */
int tn__attn_shape(const struct tn_tensor *q, const struct tn_tensor *k,
                   const struct tn_tensor *v, const struct tn_tensor *mask, double dropout_p,
                   bool is_causal, const double *scale, bool enable_gqa,
                   struct tn__attn_shape *sh);

/* tn__attn_shape for the backward, and that grad_out and out are
 * [bsz..., L, Ev], logsumexp [bsz..., L] and output_mask four bools (the
 * last only with a float mask). */
int tn__attn_backward_check(const struct tn_tensor *grad_out, const struct tn_tensor *q,
                            const struct tn_tensor *k, const struct tn_tensor *v,
                            const struct tn_tensor *mask, const struct tn_tensor *out,
                            const struct tn_tensor *lse, bool is_causal, const double *scale,
                            bool enable_gqa, const bool *output_mask, int output_mask_len,
                            struct tn__attn_shape *sh);

/* scaled_dot_product_attention by PyTorch's math path (lib/ops/
 * attention_math.c): what it runs with dropout_p > 0, the dropout drawn
 * from the default generator as PyTorch's; NULL with an error. */
struct tn_tensor *tn__attn_math(const struct tn_tensor *query, const struct tn_tensor *key,
                                const struct tn_tensor *value, const struct tn_tensor *attn_mask,
                                double dropout_p, bool is_causal, const double *scale,
                                bool enable_gqa);

/* sz = [batch (nb dims)..., a, b]; returns nb + 2 */
static inline int tn__attn_sizes(const int64_t *batch, int nb, int64_t a, int64_t b, int64_t *sz)
{
    for (int i = 0; i < nb; i++)
        sz[i] = batch[i];
    sz[nb] = a, sz[nb + 1] = b;
    return nb + 2;
}

/* A new uninitialised tensor [batch (nb dims)..., a, b] (tail 2) or
 * [batch..., a] (tail 1) on dev. */
struct tn_tensor *tn__attn_empty(const int64_t *batch, int nb, int64_t a, int64_t b, int tail,
                                 enum tn_dtype dt, struct tn_device dev);

/* Whether the result takes the query's layout (strides in the query's
 * order, as empty_like(query)) rather than a contiguous one: PyTorch's CPU
 * flash kernel lays it out so, and PyTorch picks that kernel without
 * dropout (the only case _tn_attention runs), for Ev = E and unit last
 * strides; its math path (otherwise) gives a contiguous result. */
bool tn__attn_query_layout(const struct tn_tensor *q, const struct tn_tensor *k,
                           const struct tn_tensor *v, const struct tn__attn_shape *sh);

/* The dtype the kernel computes in (float32 for float16 and bfloat16), and
 * that of logsumexp. */
static inline enum tn_dtype tn__attn_compute(enum tn_dtype dt)
{
    return dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
}

/* The key/value batch index that query batch index b reads. */
static inline int64_t tn__attn_kv(const struct tn__attn_shape *sh, int64_t b)
{
    return b / sh->Hq * sh->Hk + b % sh->Hq / (sh->Hq / sh->Hk);
}

#endif
