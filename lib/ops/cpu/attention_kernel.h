/*
 * ops/cpu/attention_kernel.h: the blocked attention kernels for one real
 * type, included by lib/ops/cpu/attention.c once per type with
 *   R        float or double
 *   F(name)  name with the type's suffix
 *   GEMM     cblas_sgemm or cblas_dgemm
 *   EXP, LOG expf/exp, logf/log
 *   VEC_EXP  1 where expsum_avx2 and rowmax_avx2 serve the type
 * A query block of BQ rows meets the keys BK at a time: scores of the
 * block come from one GEMM, the running max and sum of each row rescale
 * the accumulated output (online softmax), so memory stays O(BQ x BK) per
 * task whatever L and S are.
 */

/* sc[nq x nk] = scale * Q[i0..] K[j0..]^T plus the mask; -inf where the
 * mask or causality hides a key. */
static void F(scores)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                      int64_t nk, R *sc)
{
    const R *q = (const R *)j->q + (b * j->sh.L + i0) * j->sh.E;
    const R *k = (const R *)j->k + (tn__attn_kv(&j->sh, b) * j->sh.S + j0) * j->sh.E;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)j->sh.E,
         (R)j->sh.scale, q, (int)j->sh.E, k, (int)j->sh.E, 0, sc, (int)nk);
    for (int64_t r = 0; r < nq; r++) {
        R *s = sc + r * nk;
        if (j->mask) {
            const char *m = (const char *)j->mask + j->moff[b] + (i0 + r) * j->msl + j0 * j->mss;
            if (j->mbool) {
                for (int64_t c = 0; c < nk; c++)
                    if (!*(const bool *)(m + c * j->mss))
                        s[c] = -INFINITY;
            } else {
                for (int64_t c = 0; c < nk; c++)
                    s[c] += *(const R *)(m + c * j->mss);
            }
        }
        if (j->causal)
            for (int64_t c = i0 + r + 1 - j0 < 0 ? 0 : i0 + r + 1 - j0; c < nk; c++)
                s[c] = -INFINITY;
    }
}

/* s[c] = e^(s[c] - m); returns the sum */
static R F(expsum)(const struct attn_job *j, R *s, int64_t n, R m)
{
#if TN_HAVE_AVX2
    if (VEC_EXP && j->avx2)
        return (R)expsum_avx2((float *)s, n, (float)m);
#endif
    R sum = 0;
    for (int64_t c = 0; c < n; c++)
        sum += (s[c] = EXP(s[c] - m));
    return sum;
}

/* the largest of s[0..n), -inf for none */
static R F(rowmax)(const struct attn_job *j, const R *s, int64_t n)
{
#if TN_HAVE_AVX2
    if (VEC_EXP && j->avx2)
        return (R)rowmax_avx2((const float *)s, n);
#endif
    R m = -INFINITY;
    for (int64_t c = 0; c < n; c++)
        m = s[c] > m ? s[c] : m;
    return m;
}

/* the keys row i may see: all, or 0..i under is_causal */
static int64_t F(kend)(const struct attn_job *j, int64_t last_row)
{
    return j->causal && last_row + 1 < j->sh.S ? last_row + 1 : j->sh.S;
}

static void F(fwd)(int64_t begin, int64_t end, void *ctx)
{
    struct attn_job *j = ctx;
    const int64_t L = j->sh.L, Ev = j->sh.Ev, nqb = (L + BQ - 1) / BQ;
    R *sc = malloc(sizeof(R) * BQ * BK), *acc = malloc(sizeof(R) * BQ * (size_t)Ev);
    R m[BQ], l[BQ];
    if (!sc || !acc) {
        atomic_store(&j->failed, true);
        goto done;
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / nqb, i0 = t % nqb * BQ, nq = L - i0 < BQ ? L - i0 : BQ;
        const R *v = (const R *)j->v + tn__attn_kv(&j->sh, b) * j->sh.S * Ev;
        for (int64_t r = 0; r < nq; r++)
            m[r] = -INFINITY, l[r] = 0;
        memset(acc, 0, sizeof(R) * (size_t)(nq * Ev));
        int64_t kend = F(kend)(j, i0 + nq - 1);
        for (int64_t j0 = 0; j0 < kend; j0 += BK) {
            int64_t nk = kend - j0 < BK ? kend - j0 : BK;
            F(scores)(j, b, i0, nq, j0, nk, sc);
            for (int64_t r = 0; r < nq; r++) {
                R *s = sc + r * nk, mx = F(rowmax)(j, s, nk);
                R mnew = mx > m[r] ? mx : m[r];
                if (mnew == -INFINITY) { /* nothing seen yet in this row */
                    memset(s, 0, sizeof(R) * (size_t)nk);
                    continue;
                }
                R sum = F(expsum)(j, s, nk, mnew);
                R alpha = EXP(m[r] - mnew);
                l[r] = l[r] * alpha + sum, m[r] = mnew;
                if (alpha != 1)
                    for (int64_t c = 0; c < Ev; c++)
                        acc[r * Ev + c] *= alpha;
            }
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)Ev, (int)nk, 1, sc,
                 (int)nk, v + j0 * Ev, (int)Ev, 1, acc, (int)Ev);
        }
        R *o = (R *)j->o + (b * L + i0) * Ev, *lse = (R *)j->lse + b * L + i0;
        for (int64_t r = 0; r < nq; r++) {
            /* a row that sees no key gives zeros, and logsumexp +inf so
             * that the backward's probabilities exp(s - lse) are zeros */
            R inv = l[r] > 0 ? 1 / l[r] : 0;
            for (int64_t c = 0; c < Ev; c++)
                o[r * Ev + c] = acc[r * Ev + c] * inv;
            lse[r] = l[r] > 0 ? m[r] + LOG(l[r]) : INFINITY;
        }
    }
done:
    free(sc);
    free(acc);
}

/* sc (the scores of rows i0.. against keys j0..) becomes the
 * probabilities exp(s - lse) */
static void F(probs)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t nk,
                     R *sc)
{
    const R *lse = (const R *)j->lse + b * j->sh.L + i0;
    for (int64_t r = 0; r < nq; r++)
        F(expsum)(j, sc + r * nk, nk, lse[r]);
}

/* dp (dO V^T of the block) becomes dS = P * (dp - D) */
static void F(dscores)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq,
                       int64_t nk, const R *p, R *dp)
{
    const R *D = (const R *)j->D + b * j->sh.L + i0;
    for (int64_t r = 0; r < nq; r++) {
        R *d = dp + r * nk;
        for (int64_t c = 0; c < nk; c++)
            d[c] = p[r * nk + c] * (d[c] - D[r]);
    }
}

/* D = rowsum(dO * O) of rows i0.. of batch b */
static void F(rowdots)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq)
{
    const int64_t Ev = j->sh.Ev, at = b * j->sh.L + i0;
    const R *go = (const R *)j->go + at * Ev, *o = (const R *)j->o + at * Ev;
    R *D = (R *)j->D + at;
    for (int64_t r = 0; r < nq; r++) {
        R s = 0;
        for (int64_t c = 0; c < Ev; c++)
            s += go[r * Ev + c] * o[r * Ev + c];
        D[r] = s;
    }
}

/* One block of the backward: rows i0.. of batch b against keys j0..
 * (probabilities recomputed) add to dq (rows i0..), dk and dv (rows j0..),
 * each NULL where not wanted, and write the mask's gradient (dm: the
 * job's, or NULL). sc and dp hold BQ x BK each. */
static void F(block_bwd)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                         int64_t nk, R *dq, R *dk, R *dv, R *dm, R *sc, R *dp)
{
    const int64_t E = j->sh.E, Ev = j->sh.Ev, kv = tn__attn_kv(&j->sh, b);
    const R *q = (const R *)j->q + (b * j->sh.L + i0) * E;
    const R *go = (const R *)j->go + (b * j->sh.L + i0) * Ev;
    const R *k = (const R *)j->k + (kv * j->sh.S + j0) * E;
    const R *v = (const R *)j->v + (kv * j->sh.S + j0) * Ev;
    F(scores)(j, b, i0, nq, j0, nk, sc);
    F(probs)(j, b, i0, nq, nk, sc);
    if (dv)
        GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)Ev, (int)nq, 1, sc, (int)nk,
             go, (int)Ev, 1, dv, (int)Ev);
    if (!dq && !dk && !dm)
        return;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)Ev, 1, go, (int)Ev, v,
         (int)Ev, 0, dp, (int)nk);
    F(dscores)(j, b, i0, nq, nk, sc, dp);
    for (int64_t r = 0; dm && r < nq; r++) /* d score / d mask = 1 */
        memcpy(dm + ((b * j->sh.L + i0 + r) * j->sh.S + j0), dp + r * nk, sizeof(R) * (size_t)nk);
    if (dq)
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)E, (int)nk,
             (R)j->sh.scale, dp, (int)nk, k, (int)E, 1, dq, (int)E);
    if (dk)
        GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)E, (int)nq, (R)j->sh.scale,
             dp, (int)nk, q, (int)E, 1, dk, (int)E);
}

/* rows i0.. of batch b against every key they see: D, and dq (zeroed
 * first), dk and dv (rows of key/value head kv) added to, NULL where not
 * wanted */
static void F(rows_bwd)(const struct attn_job *j, int64_t b, int64_t i0, int64_t nq, R *dq,
                        R *dk, R *dv, R *dm, R *sc, R *dp)
{
    const int64_t E = j->sh.E, Ev = j->sh.Ev, kend = F(kend)(j, i0 + nq - 1);
    F(rowdots)(j, b, i0, nq);
    if (dq)
        memset(dq, 0, sizeof(R) * (size_t)(nq * E));
    if (!dq && !dk && !dv && !dm)
        return;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        int64_t nk = kend - j0 < BK ? kend - j0 : BK;
        F(block_bwd)(j, b, i0, nq, j0, nk, dq, dk ? dk + j0 * E : NULL, dv ? dv + j0 * Ev : NULL,
                     dm, sc, dp);
    }
}

/* two BQ x BK scratch blocks a task */
static R *F(scratch)(struct attn_job *j)
{
    R *s = malloc(sizeof(R) * 2 * BQ * BK);
    if (!s)
        atomic_store(&j->failed, true);
    return s;
}

/* backward, first pass, over query blocks: D = rowsum(dO * O), dQ and the
 * mask's gradient */
static void F(bwd_q)(int64_t begin, int64_t end, void *ctx)
{
    struct attn_job *j = ctx;
    const int64_t L = j->sh.L, nqb = (L + BQ - 1) / BQ;
    R *sc = F(scratch)(j);
    for (int64_t t = begin; sc && t < end; t++) {
        int64_t b = t / nqb, i0 = t % nqb * BQ, nq = L - i0 < BQ ? L - i0 : BQ;
        R *dq = j->dq ? (R *)j->dq + (b * L + i0) * j->sh.E : NULL;
        F(rows_bwd)(j, b, i0, nq, dq, NULL, NULL, j->dm, sc, sc + BQ * BK);
    }
    free(sc);
}

/* the query heads that read key/value head kv: h = 0..g-1 gives b */
static int64_t F(group_b)(const struct attn_job *j, int64_t kv, int64_t h)
{
    return kv / j->sh.Hk * j->sh.Hq + kv % j->sh.Hk * (j->sh.Hq / j->sh.Hk) + h;
}

/* backward, second pass, over key blocks of each key/value head: dK and dV
 * summed over the query heads that read it, in a fixed order */
static void F(bwd_kv)(int64_t begin, int64_t end, void *ctx)
{
    struct attn_job *j = ctx;
    const int64_t L = j->sh.L, S = j->sh.S, E = j->sh.E, Ev = j->sh.Ev;
    const int64_t nkb = (S + BK - 1) / BK, g = j->sh.Hq / j->sh.Hk;
    R *sc = F(scratch)(j);
    for (int64_t t = begin; sc && t < end; t++) {
        int64_t kv = t / nkb, j0 = t % nkb * BK, nk = S - j0 < BK ? S - j0 : BK;
        R *dk = (R *)j->dk + (kv * S + j0) * E, *dv = (R *)j->dv + (kv * S + j0) * Ev;
        memset(dk, 0, sizeof(R) * (size_t)(nk * E));
        memset(dv, 0, sizeof(R) * (size_t)(nk * Ev));
        for (int64_t h = 0; h < g; h++)
            for (int64_t i0 = j->causal ? j0 / BQ * BQ : 0; i0 < L; i0 += BQ) {
                /* the keys rows_bwd gives this block: the same GEMM shapes,
                 * so the same bits as the one-pass form */
                int64_t nq = L - i0 < BQ ? L - i0 : BQ, kn = F(kend)(j, i0 + nq - 1) - j0;
                if (kn > 0)
                    F(block_bwd)(j, F(group_b)(j, kv, h), i0, nq, j0, kn < nk ? kn : nk, NULL,
                                 dk, dv, NULL, sc, sc + BQ * BK);
            }
    }
    free(sc);
}

/* backward in one pass where there are key/value heads enough to keep the
 * pool busy: a task per key/value head walks its query heads and blocks
 * once, computing the probabilities once for dQ, dK and dV (the two-pass
 * form computes them twice). The sums run in the two-pass form's order
 * and through the same GEMM calls, so both give the same bits. */
static void F(bwd_fused)(int64_t begin, int64_t end, void *ctx)
{
    struct attn_job *j = ctx;
    const int64_t L = j->sh.L, S = j->sh.S, E = j->sh.E, Ev = j->sh.Ev;
    const int64_t g = j->sh.Hq / j->sh.Hk;
    R *sc = F(scratch)(j);
    for (int64_t kv = begin; sc && kv < end; kv++) {
        R *dk = (R *)j->dk + kv * S * E, *dv = (R *)j->dv + kv * S * Ev;
        memset(dk, 0, sizeof(R) * (size_t)(S * E));
        memset(dv, 0, sizeof(R) * (size_t)(S * Ev));
        for (int64_t h = 0; h < g; h++) {
            int64_t b = F(group_b)(j, kv, h);
            for (int64_t i0 = 0; i0 < L; i0 += BQ)
                F(rows_bwd)(j, b, i0, L - i0 < BQ ? L - i0 : BQ,
                            j->dq ? (R *)j->dq + (b * L + i0) * E : NULL, dk, dv, j->dm, sc,
                            sc + BQ * BK);
        }
    }
    free(sc);
}
