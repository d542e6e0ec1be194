/*
 * ops/attention_math.c: scaled_dot_product_attention with dropout, as
 * PyTorch's CPU dispatcher runs it (its math path,
 * _scaled_dot_product_attention_math): float16 and bfloat16 upcast to
 * float32; q and k^T each scaled by sqrt(scale); a bool or causal mask as
 * 0 / -inf added to the scores; _safe_softmax (rows that see no key give
 * zeros); dropout(attn, p, train) (PyTorch's CPU dropout: the noise
 * bernoulli_(1 - p) / (1 - p) drawn from the default generator); attn @ v;
 * the result cast back. Composed of ops, so autograd follows them and the
 * draws are PyTorch's for the same seed.
 */
#include <config.h>

#include <math.h>

#include "ops/attention_internal.h"

/* A bool mask m as PyTorch's convert_boolean_attn_mask: 0 where true,
 * -inf where false, of dtype dt. Takes m. */
static struct tn_tensor *float_mask(struct tn_tensor *m, enum tn_dtype dt)
{
    struct tn_tensor *z = m ? tn_zeros_like(m, dt) : NULL, *n = z ? tn_logical_not(m) : NULL;
    struct tn_tensor *r = n ? tn_masked_fill_scalar(z, n, tn_float(-INFINITY)) : NULL;
    tn__nn_drop(0, m, z, n, NULL);
    return r;
}

/* GQA: key/value heads repeated to the query's hq (repeat_interleave over
 * dim -3, as unsqueeze, expand and reshape); t itself (a new reference)
 * for hq 0. */
static struct tn_tensor *repeat_heads(const struct tn_tensor *t, int64_t hq)
{
    if (hq == 0)
        return tn_retain((struct tn_tensor *)t);
    int64_t hk = t->sizes[t->ndim - 3];
    int64_t sz[TN_MAX_DIMS + 1];
    int nd = t->ndim;
    for (int d = 0, o = 0; d < nd; d++) {
        sz[o++] = t->sizes[d];
        if (d == nd - 3)
            sz[o++] = hq / hk;
    }
    struct tn_tensor *u = tn_unsqueeze(t, nd - 2), *e = u ? tn_expand(u, sz, nd + 1) : NULL;
    int64_t rs[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        rs[d] = t->sizes[d];
    rs[nd - 3] = hq;
    struct tn_tensor *r = e ? tn_reshape(e, rs, nd) : NULL;
    tn__nn_drop(0, u, e, NULL, NULL);
    return r;
}

/* x cast to dt (a new reference, x itself when it has dt) */
static struct tn_tensor *as(const struct tn_tensor *x, enum tn_dtype dt)
{
    return x->dtype == dt ? tn_retain((struct tn_tensor *)x) : tn_to_dtype(x, dt);
}

/* _safe_softmax(s, -1): softmax, with zeros for rows all -inf. Those
 * rows go through softmax as zeros, so that its backward gives them 0 as
 * PyTorch's (_softmax_backward_data of a zero result), not NaN. Takes s. */
static struct tn_tensor *safe_softmax(struct tn_tensor *s)
{
    struct tn_tensor *e = tn_eq_scalar(s, tn_float(-INFINITY));
    struct tn_tensor *rows = e ? tn_all_dim(e, -1, true) : NULL;
    struct tn_tensor *z = rows ? tn_scalar_tensor(tn_float(0), s->dtype) : NULL;
    struct tn_tensor *s0 = z ? tn_where_self(rows, z, s) : NULL;
    struct tn_tensor *p = s0 ? tn_softmax_int(s0, -1, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *r = p ? tn_where_self(rows, z, p) : NULL;
    tn__nn_drop(0, s, e, rows, z);
    tn__nn_drop(0, s0, p, NULL, NULL);
    return r;
}

/* attn (taken) plus the mask: attn_mask (bool converted) or the causal
 * one; added in place as PyTorch does, so the sum keeps attn's dtype. */
static struct tn_tensor *add_mask(struct tn_tensor *attn, const struct tn_tensor *mask,
                                  bool is_causal, enum tn_dtype qdt)
{
    struct tn_tensor *m = NULL;
    if (is_causal) {
        struct tn_tensor *z = tn_zeros_like(attn, TN_BOOL), *o = z ? tn_logical_not(z) : NULL;
        m = float_mask(o ? tn_tril(o, 0) : NULL, attn->dtype);
        tn__nn_drop(0, z, o, NULL, NULL);
    } else if (mask && mask->dtype == TN_BOOL) {
        m = float_mask(tn_retain((struct tn_tensor *)mask), qdt);
    } else if (mask) {
        m = tn_retain((struct tn_tensor *)mask);
    } else {
        return attn;
    }
    struct tn_tensor *s = m ? tn_add(attn, m, tn_int(1)) : NULL, *r = s ? as(s, attn->dtype) : NULL;
    tn__nn_drop(0, attn, m, s, NULL);
    return r;
}

struct tn_tensor *tn__attn_math(const struct tn_tensor *query, const struct tn_tensor *key,
                                const struct tn_tensor *value, const struct tn_tensor *attn_mask,
                                double dropout_p, bool is_causal, const double *scale,
                                bool enable_gqa)
{
    struct tn__attn_shape sh;
    if (tn__attn_shape(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                       &sh) < 0)
        return NULL;
    enum tn_dtype dt = query->dtype, ct = tn__attn_compute(dt);
    /* sdp::calculate_scale(query, |scale|).sqrt(), negated for a negative scale */
    double sf = sqrt(scale ? fabs(*scale) : 1. / sqrt((double)sh.E));
    struct tn_tensor *q = as(query, ct), *k = as(key, ct), *v = as(value, ct);
    struct tn_tensor *qs = q ? tn__nn_scale(q, scale && *scale < 0 ? 0.0 - sf : sf) : NULL;
    struct tn_tensor *ke = qs && k ? repeat_heads(k, sh.Hq != sh.Hk ? sh.Hq : 0) : NULL;
    struct tn_tensor *ve = ke && v ? repeat_heads(v, sh.Hq != sh.Hk ? sh.Hq : 0) : NULL;
    struct tn_tensor *kt = ve ? tn_transpose(ke, -2, -1) : NULL;
    struct tn_tensor *ks = kt ? tn__nn_scale(kt, sf) : NULL;
    struct tn_tensor *a = ks ? tn_matmul(qs, ks) : NULL, *o = NULL, *r = NULL;
    tn__nn_drop(0, q, k, v, qs);
    tn__nn_drop(0, ke, kt, ks, NULL);
    a = a ? add_mask(a, attn_mask, is_causal, dt) : NULL;
    a = a ? safe_softmax(a) : NULL;
    if (a && dropout_p > 0) {
        struct tn_tensor *d = tn_dropout(a, dropout_p, true);
        tn_release(a);
        a = d;
    }
    o = a ? tn_matmul(a, ve) : NULL;
    r = o ? as(o, dt) : NULL;
    tn__nn_drop(0, a, ve, o, NULL);
    return r;
}
