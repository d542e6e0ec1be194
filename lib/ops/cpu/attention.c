/*
 * ops/cpu/attention.c: _tn_attention and its backward on the CPU, the
 * kernel behind scaled_dot_product_attention. FlashAttention's scheme:
 * tasks of BQ query rows (one batch x head each) on the thread pool, keys
 * and values BK at a time through GEMM, a running max and sum per row, so
 * the L x S attention matrix never exists; memory is linear in L and S.
 * The backward recomputes the probabilities of each block from the
 * saved logsumexp: a pass over query blocks (dQ, and D = rowsum(dO * O)),
 * then one over key blocks (dK, dV), each task owning what it writes; with
 * key/value heads enough for the pool (two a thread), one pass a head
 * instead. Both sum in the same order, so results do not depend on the
 * thread count. No dropout here: sdpa runs it by PyTorch's math path
 * (lib/ops/attention_math.c). float16 and bfloat16 compute in float32.
 */
#include <config.h>

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/attention_internal.h"

/* Measured at one thread, L = S = 2048, 8 heads of 64 (forward): 64 x 128
 * blocks beat 32 x 256, 128 x 128, 64 x 256, 128 x 256 and 64 x 512 by 5
 * to 30%, and the scores through sgemm beat an AVX2 loop of dot products
 * (4 keys at a time) by 1.6x. */
enum { BQ = 64, BK = 128 };

struct attn_job {
    struct tn__attn_shape sh;
    const void *q, *k, *v, *go, *mask;
    void *o, *lse, *D, *dq, *dk, *dv, *dm; /* dm: the mask's gradient, [B, L, S] */
    const int64_t *moff; /* byte offset of each batch's mask */
    int64_t msl, mss;    /* the mask's byte strides over L and S */
    bool mbool, causal, avx2;
    atomic_bool failed; /* a task could not allocate its scratch */
};

/* s[c] = e^(s[c] - m) for c < n; returns their sum. Eight lanes at a time
 * on AVX2 (float32), as softmax does. */
#if TN_HAVE_AVX2
#include "ops/cpu/vmath.h"

TN_AVX2 static float expsum_avx2(float *s, int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 e = tn__exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c), vm));
        _mm256_storeu_ps(s + c, e);
        acc = _mm256_add_ps(acc, e);
    }
    float lanes[8], sum = 0;
    _mm256_storeu_ps(lanes, acc);
    for (int i = 0; i < 8; i++)
        sum += lanes[i];
    for (; c < n; c++)
        sum += (s[c] = expf(s[c] - m));
    return sum;
}

/* the largest of s[0..n) (-inf for none) */
TN_AVX2 static float rowmax_avx2(const float *s, int64_t n)
{
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + c));
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, m8);
    for (int i = 0; i < 8; i++)
        m = lanes[i] > m ? lanes[i] : m;
    for (; c < n; c++)
        m = s[c] > m ? s[c] : m;
    return m;
}
#endif

#define VEC_EXP 1
#define R float
#define F(name) name##_f32
#define GEMM cblas_sgemm
#define EXP expf
#define LOG logf
#include "ops/cpu/attention_kernel.h"
#undef R
#undef F
#undef GEMM
#undef EXP
#undef LOG
#undef VEC_EXP
#define VEC_EXP 0
#define R double
#define F(name) name##_f64
#define GEMM cblas_dgemm
#define EXP exp
#define LOG log
#include "ops/cpu/attention_kernel.h"
#undef R
#undef F
#undef GEMM
#undef EXP
#undef LOG

/* t broadcast to batch [nb sizes] + [a, b], contiguous, in dtype ct */
static struct tn_tensor *operand(const struct tn_tensor *t, const int64_t *batch, int nb,
                                 int64_t a, int64_t b, enum tn_dtype ct)
{
    int64_t sz[TN_MAX_DIMS];
    struct tn_tensor *e = tn_expand(t, sz, tn__attn_sizes(batch, nb, a, b, sz)), *r = e ? tn__nn_as(e, ct) : NULL;
    tn_release(e);
    return r;
}

/* The mask as the kernel reads it: bool as it is, a float mask in ct,
 * expanded to [bsz..., L, S] (strides 0 where it broadcasts, never
 * copied to that size), with the byte offset of each batch. */
static int mask_setup(struct attn_job *j, const struct tn_tensor *mask, enum tn_dtype ct,
                      struct tn_tensor **held, int64_t **moff)
{
    *held = NULL, *moff = NULL;
    if (!mask)
        return TN_OK;
    const struct tn__attn_shape *sh = &j->sh;
    struct tn_tensor *m = mask->dtype == TN_BOOL || mask->dtype == ct
                              ? tn_retain((struct tn_tensor *)mask) : tn_to_dtype(mask, ct);
    int64_t sz[TN_MAX_DIMS];
    struct tn_tensor *e = m ? tn_expand(m, sz, tn__attn_sizes(sh->bsz, sh->nb, sh->L, sh->S, sz))
                            : NULL;
    tn_release(m);
    int64_t *off = e ? malloc(sizeof(int64_t) * (size_t)(sh->B ? sh->B : 1)) : NULL;
    if (!off) {
        tn_release(e);
        return e ? tn_set_error(TN_ENOMEM, "scaled_dot_product_attention: out of memory")
                 : tn_last_status();
    }
    int64_t es = (int64_t)tn_dtype_size(e->dtype);
    for (int64_t b = 0; b < sh->B; b++) {
        int64_t rest = b, o = 0;
        for (int d = sh->nb - 1; d >= 0; d--) {
            o += rest % sh->bsz[d] * e->strides[d];
            rest /= sh->bsz[d];
        }
        off[b] = o * es;
    }
    j->mask = tn_data(e), j->mbool = e->dtype == TN_BOOL;
    j->msl = e->strides[sh->nb] * es, j->mss = e->strides[sh->nb + 1] * es;
    j->moff = off;
    *held = e, *moff = off;
    return TN_OK;
}

static void job_init(struct attn_job *j, bool is_causal)
{
    j->causal = is_causal;
#if TN_HAVE_AVX2
    j->avx2 = tn__have_avx2();
#endif
}

static struct tn_tensor *batched(const int64_t *batch, int nb, int64_t a, int64_t b, int tail,
                                 enum tn_dtype dt)
{
    return tn__attn_empty(batch, nb, a, b, tail, dt, TN_CPU);
}

static int run(struct attn_job *j, int64_t n, tn_range_fn f32, tn_range_fn f64, bool is64)
{
    atomic_store(&j->failed, false);
    if (n > 0)
        tn__blas_parallel_for(n, 1, is64 ? f64 : f32, j);
    if (atomic_load(&j->failed))
        return tn_set_error(TN_ENOMEM, "scaled_dot_product_attention: out of memory");
    return TN_OK;
}

int tn__cpu__tn_attention(tn_keyset ks, const struct tn_tensor *query,
                          const struct tn_tensor *key, const struct tn_tensor *value,
                          const struct tn_tensor *attn_mask, bool is_causal,
                          const double *scale, bool enable_gqa, struct tn_tensor **output,
                          struct tn_tensor **logsumexp)
{
    struct attn_job j = {0};
    *output = *logsumexp = NULL;
    int rc = tn__attn_shape(query, key, value, attn_mask, 0, is_causal, scale, enable_gqa, &j.sh);
    if (rc < 0)
        return rc;
    const struct tn__attn_shape *sh = &j.sh;
    enum tn_dtype ct = tn__attn_compute(query->dtype);
    job_init(&j, is_causal);
    struct tn_tensor *q = operand(query, sh->bsz, sh->nb, sh->L, sh->E, ct);
    struct tn_tensor *k = q ? operand(key, sh->kvsz, sh->nb, sh->S, sh->E, ct) : NULL;
    struct tn_tensor *v = k ? operand(value, sh->kvsz, sh->nb, sh->S, sh->Ev, ct) : NULL;
    struct tn_tensor *o = v ? batched(sh->bsz, sh->nb, sh->L, sh->Ev, 2, ct) : NULL;
    struct tn_tensor *lse = o ? batched(sh->bsz, sh->nb, sh->L, 0, 1, ct) : NULL, *m = NULL;
    int64_t *moff = NULL;
    rc = lse ? mask_setup(&j, attn_mask, ct, &m, &moff) : tn_last_status();
    if (rc == 0) {
        j.q = tn_data(q), j.k = tn_data(k), j.v = tn_data(v);
        j.o = tn_data(o), j.lse = tn_data(lse);
        rc = run(&j, sh->B * ((sh->L + BQ - 1) / BQ), fwd_f32, fwd_f64, ct == TN_FLOAT64);
    }
    free(moff);
    tn__nn_drop(0, q, k, v, m);
    if (rc < 0)
        return tn__nn_drop(rc, o, lse, NULL, NULL);
    if (tn__attn_query_layout(query, key, value, sh)) {
        struct tn_tensor *r = tn_empty_like(query, query->dtype);
        if (r && tn_copy_(r, o) < 0) {
            tn_release(r);
            r = NULL;
        }
        tn_release(o);
        *output = r;
    } else {
        *output = tn__nn_to(o, query->dtype);
    }
    *logsumexp = lse;
    if (!*output) {
        tn_release(lse);
        *logsumexp = NULL;
        return tn_last_status();
    }
    return TN_OK;
}

int tn__cpu__tn_attention_backward(
    tn_keyset ks, const struct tn_tensor *grad_out, const struct tn_tensor *query,
    const struct tn_tensor *key, const struct tn_tensor *value, const struct tn_tensor *attn_mask,
    const struct tn_tensor *out, const struct tn_tensor *logsumexp, bool is_causal,
    const double *scale, bool enable_gqa, const bool *output_mask, int output_mask_len,
    struct tn_tensor **grad_query, struct tn_tensor **grad_key, struct tn_tensor **grad_value,
    struct tn_tensor **grad_attn_mask)
{
    struct attn_job j = {0};
    *grad_query = *grad_key = *grad_value = *grad_attn_mask = NULL;
    int rc = tn__attn_backward_check(grad_out, query, key, value, attn_mask, out, logsumexp,
                                     is_causal, scale, enable_gqa, output_mask, output_mask_len,
                                     &j.sh);
    if (rc < 0)
        return rc;
    const struct tn__attn_shape *sh = &j.sh;
    enum tn_dtype ct = tn__attn_compute(query->dtype);
    bool kvgrad = output_mask[1] || output_mask[2];
    job_init(&j, is_causal);
    struct tn_keep kp = {0};
    struct tn_tensor *m = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dm = NULL, *q, *k, *v, *go,
                     *o, *lse, *D;
    int64_t *moff = NULL;
    TN_KEEP(&kp, q, operand(query, sh->bsz, sh->nb, sh->L, sh->E, ct));
    TN_KEEP(&kp, k, operand(key, sh->kvsz, sh->nb, sh->S, sh->E, ct));
    TN_KEEP(&kp, v, operand(value, sh->kvsz, sh->nb, sh->S, sh->Ev, ct));
    TN_KEEP(&kp, go, tn__nn_as(grad_out, ct));
    TN_KEEP(&kp, o, tn__nn_as(out, ct));
    TN_KEEP(&kp, lse, tn__nn_as(logsumexp, ct));
    TN_KEEP(&kp, D, batched(sh->bsz, sh->nb, sh->L, 0, 1, ct));
    if (output_mask[0])
        TN_KEEP(&kp, dq, batched(sh->bsz, sh->nb, sh->L, sh->E, 2, ct));
    if (kvgrad) {
        TN_KEEP(&kp, dk, batched(sh->kvsz, sh->nb, sh->S, sh->E, 2, ct));
        TN_KEEP(&kp, dv, batched(sh->kvsz, sh->nb, sh->S, sh->Ev, 2, ct));
    }
    if (output_mask[3])
        TN_KEEP(&kp, dm, batched(sh->bsz, sh->nb, sh->L, sh->S, 2, ct));
    if ((rc = mask_setup(&j, attn_mask, ct, &m, &moff)) < 0)
        goto fail;
    tn__keep(&kp, m);
    j.q = tn_data(q), j.k = tn_data(k), j.v = tn_data(v), j.go = tn_data(go);
    j.o = tn_data(o), j.lse = tn_data(lse), j.D = tn_data(D);
    j.dq = dq ? tn_data(dq) : NULL, j.dm = dm ? tn_data(dm) : NULL;
    j.dk = dk ? tn_data(dk) : NULL, j.dv = dv ? tn_data(dv) : NULL;
    bool is64 = ct == TN_FLOAT64;
    if (kvgrad && sh->Bkv >= 2 * tn_get_num_threads()) {
        rc = run(&j, sh->Bkv, bwd_fused_f32, bwd_fused_f64, is64);
    } else {
        rc = run(&j, sh->B * ((sh->L + BQ - 1) / BQ), bwd_q_f32, bwd_q_f64, is64);
        if (rc == 0 && kvgrad)
            rc = run(&j, sh->Bkv * ((sh->S + BK - 1) / BK), bwd_kv_f32, bwd_kv_f64, is64);
    }
    free(moff);
    moff = NULL;
    if (rc < 0)
        goto fail;
    struct tn_tensor *r[4] = {dq, output_mask[1] ? dk : NULL, output_mask[2] ? dv : NULL, dm};
    struct tn_tensor **res[4] = {grad_query, grad_key, grad_value, grad_attn_mask};
    for (int i = 0; i < 4; i++)
        if (r[i] && !(*res[i] = tn_to_dtype(r[i], i == 3 ? attn_mask->dtype : query->dtype))) {
            rc = tn__nn_drop(tn_last_status(), *grad_query, *grad_key, *grad_value,
                             *grad_attn_mask);
            *grad_query = *grad_key = *grad_value = *grad_attn_mask = NULL;
            goto fail;
        }
    tn__keep_free(&kp);
    return TN_OK;
fail:
    free(moff);
    tn__keep_free(&kp);
    return rc < 0 ? rc : tn_last_status();
}
