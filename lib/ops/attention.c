/*
 * ops/attention.c: scaled_dot_product_attention as PyTorch 2.x defines it
 * (masks, is_causal, scale, enable_gqa; dropout by attention_math.c), the
 * CPU flash-attention
 * pair a decomposed graph names, and the argument checks and Meta
 * functions of _tn_attention, the blocked kernel all of them run
 * (lib/ops/cpu/attention.c).
 */
#include <config.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/attention_internal.h"

/* Broadcasts one batch dim of three operands; -1 when they do not fit. */
static int64_t bcast3(int64_t a, int64_t b, int64_t c)
{
    int64_t r = 1;
    const int64_t s[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (s[i] == 1 || s[i] == r)
            continue;
        if (r != 1)
            return -1;
        r = s[i];
    }
    return r;
}

/* t's size at batch dim d of nb (right-aligned), 1 where t has none */
static int64_t bdim(const struct tn_tensor *t, int nb, int d)
{
    int i = d - (nb - (t->ndim - 2));
    return i < 0 ? 1 : t->sizes[i];
}

static int check_mask(const struct tn_tensor *q, const struct tn_tensor *mask,
                      const struct tn__attn_shape *sh, bool is_causal)
{
    if (!mask)
        return TN_OK;
    if (is_causal)
        return tn_set_error(TN_EINVAL, "_scaled_dot_product_attention: Explicit attn_mask should "
                            "not be set when is_causal=True");
    if (mask->dtype != TN_BOOL && !tn_dtype_is_floating(mask->dtype) && mask->dtype != q->dtype)
        return tn_set_error(TN_EDTYPE, "Expected attn_mask dtype to be bool or float or to match "
                            "query dtype, but got attn_mask.dtype: %s and  query.dtype: %s "
                            "instead.", tn__dtype_meta_name(mask->dtype),
                            tn__dtype_meta_name(q->dtype));
    int64_t want[TN_MAX_DIMS + 2];
    tn__attn_sizes(sh->bsz, sh->nb, sh->L, sh->S, want);
    bool ok = mask->ndim <= sh->nb + 2;
    for (int i = 0; ok && i < mask->ndim; i++) {
        int64_t m = mask->sizes[mask->ndim - 1 - i], w = want[sh->nb + 1 - i];
        ok = m == 1 || m == w;
    }
    if (!ok) {
        char a[128], b[128];
        return tn_set_error(TN_ESHAPE, "scaled_dot_product_attention: attn_mask of shape %s does "
                            "not broadcast to the attention's %s",
                            tn_shape_format(mask->sizes, mask->ndim, a, sizeof a),
                            tn_shape_format(want, sh->nb + 2, b, sizeof b));
    }
    return TN_OK;
}

int tn__attn_shape(const struct tn_tensor *q, const struct tn_tensor *k,
                   const struct tn_tensor *v, const struct tn_tensor *mask, double dropout_p,
                   bool is_causal, const double *scale, bool enable_gqa,
                   struct tn__attn_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    if (q->dtype != k->dtype || q->dtype != v->dtype)
        return tn_set_error(TN_EDTYPE, "Expected query, key, and value to have the same dtype, "
                            "but got query.dtype: %s key.dtype: %s and value.dtype: %s instead.",
                            tn__dtype_meta_name(q->dtype), tn__dtype_meta_name(k->dtype),
                            tn__dtype_meta_name(v->dtype));
    int rc = tn__nn_check_float("scaled_dot_product_attention", q);
    if (rc < 0)
        return rc;
    int need = enable_gqa ? 3 : 2;
    if (q->ndim < need || k->ndim < need || v->ndim < need)
        return tn_set_error(TN_ESHAPE, "scaled_dot_product_attention: query, key and value need "
                            "at least %d dims%s, got %d, %d and %d", need,
                            enable_gqa ? " with enable_gqa" : "", q->ndim, k->ndim, v->ndim);
    if (dropout_p < 0 || dropout_p > 1)
        return tn_set_error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %g",
                            dropout_p);
    sh->L = q->sizes[q->ndim - 2], sh->E = q->sizes[q->ndim - 1];
    sh->S = k->sizes[k->ndim - 2], sh->Ev = v->sizes[v->ndim - 1];
    if (k->sizes[k->ndim - 1] != sh->E || v->sizes[v->ndim - 2] != sh->S)
        return tn_set_error(TN_ESHAPE, "scaled_dot_product_attention: key must be [..., S, %lld] "
                            "and value [..., S, Ev] for a query [..., L, %lld], got key [..., "
                            "%lld, %lld] and value [..., %lld, %lld]", (long long)sh->E,
                            (long long)sh->E, (long long)sh->S,
                            (long long)k->sizes[k->ndim - 1], (long long)v->sizes[v->ndim - 2],
                            (long long)sh->Ev);
    int nb = q->ndim > k->ndim ? q->ndim : k->ndim;
    nb = (v->ndim > nb ? v->ndim : nb) - 2;
    sh->nb = nb, sh->Hq = sh->Hk = 1;
    if (enable_gqa) {
        int64_t hq = q->sizes[q->ndim - 3], hk = k->sizes[k->ndim - 3];
        if (hk == 0 || hq % hk != 0 || v->sizes[v->ndim - 3] != hk)
            return tn_set_error(TN_ESHAPE, "Number of heads in key and value must divide the "
                                "number of heads in query");
        if (hk != hq)
            sh->Hq = hq, sh->Hk = hk;
    }
    sh->B = sh->Bkv = 1;
    for (int d = 0; d < nb; d++) {
        bool head = d == nb - 1 && sh->Hq != sh->Hk;
        int64_t s = head ? sh->Hq : bcast3(bdim(q, nb, d), bdim(k, nb, d), bdim(v, nb, d));
        if (s < 0) {
            char a[128], b[128], c[128];
            return tn_set_error(TN_ESHAPE, "scaled_dot_product_attention: the batch dims of query "
                                "%s, key %s and value %s do not broadcast",
                                tn_shape_format(q->sizes, q->ndim, a, sizeof a),
                                tn_shape_format(k->sizes, k->ndim, b, sizeof b),
                                tn_shape_format(v->sizes, v->ndim, c, sizeof c));
        }
        sh->bsz[d] = s, sh->kvsz[d] = head ? sh->Hk : s;
        sh->B *= s, sh->Bkv *= sh->kvsz[d];
    }
    sh->scale = scale ? *scale : 1. / sqrt((double)sh->E);
    return check_mask(q, mask, sh, is_causal);
}

static bool has_shape(const struct tn_tensor *t, const struct tn__attn_shape *sh, int tail,
                      int64_t a, int64_t b)
{
    if (t->ndim != sh->nb + tail ||
        memcmp(t->sizes, sh->bsz, sizeof(int64_t) * (size_t)sh->nb) != 0)
        return false;
    return t->sizes[sh->nb] == a && (tail == 1 || t->sizes[sh->nb + 1] == b);
}

int tn__attn_backward_check(const struct tn_tensor *grad_out, const struct tn_tensor *q,
                            const struct tn_tensor *k, const struct tn_tensor *v,
                            const struct tn_tensor *mask, const struct tn_tensor *out,
                            const struct tn_tensor *lse, bool is_causal, const double *scale,
                            bool enable_gqa, const bool *output_mask, int output_mask_len,
                            struct tn__attn_shape *sh)
{
    int rc = tn__attn_shape(q, k, v, mask, 0, is_causal, scale, enable_gqa, sh);
    if (rc < 0)
        return rc;
    if (output_mask_len != 4)
        return tn_set_error(TN_EINVAL, "output_mask must hold 4 bools, not %d", output_mask_len);
    if (output_mask[3] && (!mask || !tn_dtype_is_floating(mask->dtype)))
        return tn_set_error(TN_EINVAL, "scaled_dot_product_attention backward: only a float "
                            "attn_mask has a gradient");
    if (!has_shape(grad_out, sh, 2, sh->L, sh->Ev) || !has_shape(out, sh, 2, sh->L, sh->Ev) ||
        !has_shape(lse, sh, 1, sh->L, 0))
        return tn_set_error(TN_ESHAPE, "scaled_dot_product_attention backward: grad_out, out or "
                            "logsumexp does not fit the query, key and value");
    return TN_OK;
}

bool tn__attn_query_layout(const struct tn_tensor *q, const struct tn_tensor *k,
                           const struct tn_tensor *v, const struct tn__attn_shape *sh)
{
    if (sh->Ev != sh->E || q->ndim != sh->nb + 2 ||
        memcmp(q->sizes, sh->bsz, sizeof(int64_t) * (size_t)sh->nb) != 0)
        return false;
    const struct tn_tensor *t[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (t[i]->strides[t[i]->ndim - 1] != 1 && t[i]->sizes[t[i]->ndim - 1] != 1)
            return false;
    /* empty_like(query): its strides when dense, else dense in their order
     * (a query split from a qkv projection gives [B, L, H, E] transposed) */
    return true;
}

/* ------------------------------------------------------------ decompositions */

/* Without dropout the blocked kernel (PyTorch's CPU flash attention, which
 * its dispatcher picks then); with dropout PyTorch's math path, whose
 * dropout draws from the default generator as PyTorch's does. */
struct tn_tensor *tn__composite_scaled_dot_product_attention(
    tn_keyset ks, const struct tn_tensor *query, const struct tn_tensor *key,
    const struct tn_tensor *value, const struct tn_tensor *attn_mask, double dropout_p,
    bool is_causal, const double *scale, bool enable_gqa)
{
    struct tn_tensor *out, *lse;
    if (dropout_p > 0)
        return tn__attn_math(query, key, value, attn_mask, dropout_p, is_causal, scale,
                             enable_gqa);
    if (tn__redispatch_underscore_tn_attention(ks, query, key, value, attn_mask, is_causal,
                                               scale, enable_gqa, &out, &lse) < 0)
        return NULL;
    tn_release(lse);
    return out;
}

/* What PyTorch's CPU flash kernel refuses, in its words. */
static int flash_check(const struct tn_tensor *q, const struct tn_tensor *k,
                       const struct tn_tensor *v, const struct tn_tensor *mask, double dropout_p)
{
    const char *p = "scaled_dot_product_attention_flash_attention: ";
    if (dropout_p > 0)
        return tn_set_error(TN_EINVAL, "%sCurrently do not support dropout > 0", p);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return tn_set_error(TN_ESHAPE, "%sAccept only 4 dims inputs shape of {B, H, T, K}", p);
    if (k->sizes[3] != q->sizes[3] || v->sizes[3] != q->sizes[3])
        return tn_set_error(TN_ESHAPE, "%sQ/K/V should have the same head size", p);
    if (mask && mask->dtype != q->dtype)
        return tn_set_error(TN_EDTYPE, "%sAttention mask is the same data type as query", p);
    return TN_OK;
}

/* *t replaced by its values with the dense strides st (same sizes), through
 * a permute, a contiguous copy and the inverse permute, so that autograd
 * follows; nothing is done when *t has them already. */
static int with_strides(struct tn_tensor **t, const int64_t *st)
{
    struct tn_tensor *x = *t;
    int nd = x->ndim;
    bool same = true;
    for (int d = 0; d < nd; d++)
        same = same && (x->sizes[d] == 1 || x->strides[d] == st[d]);
    if (same)
        return TN_OK;
    int64_t perm[TN_MAX_DIMS], inv[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    for (int i = 1; i < nd; i++) /* outermost (largest stride) first */
        for (int j = i; j > 0 && st[perm[j]] > st[perm[j - 1]]; j--) {
            int64_t tmp = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = tmp;
        }
    for (int d = 0; d < nd; d++)
        inv[perm[d]] = d;
    struct tn_tensor *p = tn_permute(x, perm, nd), *c = p ? tn_contiguous(p) : NULL;
    struct tn_tensor *r = c ? tn_permute(c, inv, nd) : NULL;
    tn_release(p);
    tn_release(c);
    if (!r)
        return tn_last_status();
    tn_release(x);
    *t = r;
    return TN_OK;
}

int tn__composite__scaled_dot_product_flash_attention_for_cpu(
    tn_keyset ks, const struct tn_tensor *query, const struct tn_tensor *key,
    const struct tn_tensor *value, double dropout_p, bool is_causal,
    const struct tn_tensor *attn_mask, const double *scale, struct tn_tensor **output,
    struct tn_tensor **logsumexp)
{
    *output = *logsumexp = NULL;
    int rc = flash_check(query, key, value, attn_mask, dropout_p);
    if (rc == TN_OK)
        rc = tn__redispatch_underscore_tn_attention(ks, query, key, value, attn_mask, is_causal,
                                                    scale, false, output, logsumexp);
    if (rc < 0)
        return rc;
    /* PyTorch's CPU flash kernel's layouts, which compiled code (an
     * AOTInductor package) reads its results with: the output as
     * empty_like(query) (dense, in the order of the query's strides: a
     * query split from a qkv projection gives [B, L, H, E] transposed), the
     * logsumexp [B, L, H] transposed */
    struct tn_tensor *like = tn_empty_like(query, (*output)->dtype);
    int64_t lse_st[3] = {(*logsumexp)->sizes[1] * (*logsumexp)->sizes[2], 1,
                         (*logsumexp)->sizes[1]};
    rc = like ? TN_OK : tn_last_status();
    if (rc == TN_OK)
        rc = with_strides(output, like->strides);
    if (rc == TN_OK && (*logsumexp)->ndim == 3)
        rc = with_strides(logsumexp, lse_st);
    tn_release(like);
    if (rc < 0) {
        tn_release(*output);
        tn_release(*logsumexp);
        *output = *logsumexp = NULL;
    }
    return rc;
}

int tn__composite__scaled_dot_product_flash_attention_for_cpu_backward(
    tn_keyset ks, const struct tn_tensor *grad_out, const struct tn_tensor *query,
    const struct tn_tensor *key, const struct tn_tensor *value, const struct tn_tensor *out,
    const struct tn_tensor *logsumexp, double dropout_p, bool is_causal,
    const struct tn_tensor *attn_mask, const double *scale, struct tn_tensor **grad_query,
    struct tn_tensor **grad_key, struct tn_tensor **grad_value)
{
    *grad_query = *grad_key = *grad_value = NULL;
    int rc = flash_check(query, key, value, attn_mask, dropout_p);
    if (rc < 0)
        return rc;
    static const bool qkv[4] = {true, true, true, false};
    struct tn_tensor *gm;
    return tn__redispatch_underscore_tn_attention_backward(
        ks, grad_out, query, key, value, attn_mask, out, logsumexp, is_causal, scale, false, qkv,
        4, grad_query, grad_key, grad_value, &gm);
}

/* ------------------------------------------------------------------- Meta */

struct tn_tensor *tn__attn_empty(const int64_t *batch, int nb, int64_t a, int64_t b, int tail,
                                enum tn_dtype dt, struct tn_device dev)
{
    int64_t sz[TN_MAX_DIMS];
    tn__attn_sizes(batch, nb, a, b, sz);
    return tn_empty_on(sz, nb + tail, dt, dev);
}

static struct tn_tensor *meta_empty(const int64_t *batch, int nb, int64_t a, int64_t b,
                                    int tail, enum tn_dtype dt)
{
    return tn__attn_empty(batch, nb, a, b, tail, dt, (struct tn_device){TN_DEVICE_META, -1});
}

int tn__meta__tn_attention(tn_keyset ks, const struct tn_tensor *query,
                           const struct tn_tensor *key, const struct tn_tensor *value,
                           const struct tn_tensor *attn_mask, bool is_causal,
                           const double *scale, bool enable_gqa, struct tn_tensor **output,
                           struct tn_tensor **logsumexp)
{
    struct tn__attn_shape sh;
    *output = *logsumexp = NULL;
    int rc = tn__attn_shape(query, key, value, attn_mask, 0, is_causal, scale, enable_gqa, &sh);
    if (rc < 0)
        return rc;
    *output = tn__attn_query_layout(query, key, value, &sh)
                  ? tn_empty_like(query, query->dtype)
                  : meta_empty(sh.bsz, sh.nb, sh.L, sh.Ev, 2, query->dtype);
    *logsumexp = meta_empty(sh.bsz, sh.nb, sh.L, 0, 1, tn__attn_compute(query->dtype));
    if (!*output || !*logsumexp)
        return tn__nn_drop(tn_last_status(), *output, *logsumexp, NULL, NULL);
    return TN_OK;
}

int tn__meta__tn_attention_backward(
    tn_keyset ks, const struct tn_tensor *grad_out, const struct tn_tensor *query,
    const struct tn_tensor *key, const struct tn_tensor *value, const struct tn_tensor *attn_mask,
    const struct tn_tensor *out, const struct tn_tensor *logsumexp, bool is_causal,
    const double *scale, bool enable_gqa, const bool *output_mask, int output_mask_len,
    struct tn_tensor **grad_query, struct tn_tensor **grad_key, struct tn_tensor **grad_value,
    struct tn_tensor **grad_attn_mask)
{
    struct tn__attn_shape sh;
    *grad_query = *grad_key = *grad_value = *grad_attn_mask = NULL;
    int rc = tn__attn_backward_check(grad_out, query, key, value, attn_mask, out, logsumexp,
                                     is_causal, scale, enable_gqa, output_mask, output_mask_len,
                                     &sh);
    if (rc < 0)
        return rc;
    enum tn_dtype dt = query->dtype;
    struct tn_tensor *r[4] = {
        output_mask[0] ? meta_empty(sh.bsz, sh.nb, sh.L, sh.E, 2, dt) : NULL,
        output_mask[1] ? meta_empty(sh.kvsz, sh.nb, sh.S, sh.E, 2, dt) : NULL,
        output_mask[2] ? meta_empty(sh.kvsz, sh.nb, sh.S, sh.Ev, 2, dt) : NULL,
        output_mask[3] ? meta_empty(sh.bsz, sh.nb, sh.L, sh.S, 2, dt) : NULL};
    for (int i = 0; i < 4; i++)
        if (output_mask[i] && !r[i]) {
            tn_release(r[3]);
            return tn__nn_drop(tn_last_status(), r[0], r[1], r[2], NULL);
        }
    *grad_query = r[0], *grad_key = r[1], *grad_value = r[2], *grad_attn_mask = r[3];
    return TN_OK;
}
