/*
 * ops/cpu/nn_conv_dw.c: the direct depthwise convolution (float32,
 * forward), any kernel size, stride, padding and dilation.
 *
 * Each plane is first copied into a zero-padded scratch split into `sw`
 * column phases (phase p holds the padded columns p, p + sw, ...), so that
 * every tap of a strided convolution reads a contiguous run and no tap
 * needs a bounds check. The output is then cut into blocks of 8
 * neighbouring values of a row, taken 8 blocks at a time (from one row, or
 * from several when rows are short): each block's sum over the kh x kw taps
 * stays in a vector register and the 8 blocks are independent chains of
 * multiply-adds. The per-row loop it replaces added each tap into the
 * output row in memory and read strided inputs one at a time: efficientnet
 * b0's 112x112 stride-2 layer took 2.6x PyTorch's time and the 5x5 ones
 * 1.9x (bench/ops/conv.sh).
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"
#include "ops/cpu/nn_conv.h"

/* -std=c11 turns off contracting a * b + c into one FMA; the taps' sums
 * want it (half the instructions, one rounding) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif


#define DW_SLOTS 8

/* A plane's padded, phase-split copy: phase p, row r, column j is padded
 * column j * sw + p of padded row r. */
struct dw_plane {
    int64_t eh, qw, wr, nb, blocks, taps;
    size_t qfloats;
    int64_t *boff; /* block b's start in q: its first output's padded row and column */
    int64_t *ooff; /* block b's first output in the plane; its last block of a row
                    * writes ow % 8 values when ow is not a multiple of 8 */
};

static void plane_of(const struct conv *g, struct dw_plane *d)
{
    d->eh = g->h + 2 * g->ph;
    d->wr = (g->ow + 7) / 8 * 8;
    d->nb = d->wr / 8;
    d->blocks = g->oh * d->nb;
    d->qw = d->wr + (g->kw - 1) * g->dw / g->sw + 1;
    d->taps = g->kh * g->kw;
    d->qfloats = (size_t)(g->sw * d->eh * d->qw);
}

/* Input row xr (w values) into the two phase rows of stride 2, r0 and r1
 * (qw values each; padded column x + pw is phase (x + pw) % 2, column
 * (x + pw) / 2), 8 then 4 pairs at a time by vector shuffles, the rest
 * as two stride-2 runs (a row of 14 was all a scalar loop with a division by 2
 * and a choice of row per value: on efficientnet_b0's 14x14 5x5 stride-2
 * layer this split took 4x the taps' time). */
static inline __attribute__((always_inline)) void split2_row(float *r0, float *r1,
                                                             const float *xr, int64_t w,
                                                             int64_t pw, int64_t qw)
{
    int64_t x = 0, end = 2 * qw - pw < w ? 2 * qw - pw : w;
    if (pw % 2) { /* input column 0 is phase 1: one value first, then pairs from x = 1 */
        if (end > 0)
            r1[pw / 2] = xr[0];
        x = 1;
    }
    /* from here input column x is phase 0, column (x + pw) / 2 */
    float *d0 = r0 + (x + pw) / 2, *d1 = r1 + (x + pw) / 2;
    const float *s = xr + x;
    int64_t pairs = (end - x) / 2, i = 0;
    /* N pairs (N-float vectors VT) from s + 2 i into d0 + i and d1 + i */
#define SPLIT_PAIRS(VT, N, EVEN, ODD)                                                              \
    do {                                                                                           \
        VT a, b;                                                                                   \
        memcpy(&a, s + 2 * i, sizeof a);                                                           \
        memcpy(&b, s + 2 * i + N, sizeof b);                                                       \
        VT e = EVEN(a, b), o = ODD(a, b);                                                          \
        memcpy(d0 + i, &e, sizeof e);                                                              \
        memcpy(d1 + i, &o, sizeof o);                                                              \
        i += N;                                                                                    \
    } while (0)
    /* the pairs left past whole vectors by one more vector ending at the
     * last pair, over values already written (the same ones): a row of 14
     * has 7 pairs, 4 then 3 in scalars took as long as the 5x5 taps of its
     * 7 outputs */
    while (i + 8 <= pairs)
        SPLIT_PAIRS(v8f, 8, TN_EVEN8, TN_ODD8);
    if (i < pairs && pairs >= 8) {
        i = pairs - 8;
        SPLIT_PAIRS(v8f, 8, TN_EVEN8, TN_ODD8);
    }
    if (i + 4 <= pairs)
        SPLIT_PAIRS(v4f, 4, TN_EVEN4, TN_ODD4);
    if (i < pairs && pairs >= 4) {
        i = pairs - 4;
        SPLIT_PAIRS(v4f, 4, TN_EVEN4, TN_ODD4);
    }
#undef SPLIT_PAIRS
    for (; i < pairs; i++) {
        d0[i] = s[2 * i];
        d1[i] = s[2 * i + 1];
    }
    if (x + 2 * pairs < end) /* an odd count: the last value is phase 0 */
        d0[pairs] = s[2 * pairs];
}

TN_KERNEL_CLONES void tn__conv_split2(float *r0, float *r1, const float *xr, int64_t w, int64_t pw,
                                      int64_t qw)
{
    split2_row(r0, r1, xr, w, pw, qw);
}

/* Fills q (sw phases of eh x qw) from plane xp (h x w). Cloned, its row
 * splits inlined: a call through the clones' resolver a row of 14 cost
 * as much as the split (efficientnet_b0's 672-channel 5x5 at stride 2). */
static TN_KERNEL_CLONES void pad_plane(const struct conv *g, const struct dw_plane *d, const float *xp, float *q)
{
    /* zeros where no input lands: the padding rows, and in the others the
     * columns before ceil((pw - p) / sw) and from (pw + w) / sw - 1 on
     * (the data overwrites the overlap); a small plane (up to 16 KiB) is
     * zeroed whole in one call instead of two or three a row */
    int64_t head = g->pw / g->sw + 1, tail = (g->pw + g->w) / g->sw - 1;
    head = head < d->qw ? head : d->qw;
    tail = tail < 0 ? 0 : tail;
    bool whole = d->qfloats <= 16384;
    if (whole)
        memset(q, 0, sizeof(float) * d->qfloats);
    for (int64_t p = 0; p < g->sw && !whole; p++)
        for (int64_t r = 0; r < d->eh; r++) {
            float *row = q + (p * d->eh + r) * d->qw;
            if (r < g->ph || r >= g->ph + g->h) {
                memset(row, 0, sizeof(float) * (size_t)d->qw);
                continue;
            }
            memset(row, 0, sizeof(float) * (size_t)head);
            if (tail < d->qw)
                memset(row + tail, 0, sizeof(float) * (size_t)(d->qw - tail));
        }
    /* (the phase-1 rows of stride 2 are filled with phase 0's; no division
     * a row: on 14x14 planes it showed) */
    if (g->sw == 1) {
        int64_t n = g->w < d->qw - g->pw ? g->w : d->qw - g->pw;
        for (int64_t y = 0; y < g->h; y++)
            memcpy(q + (y + g->ph) * d->qw + g->pw, xp + y * g->w, sizeof(float) * (size_t)n);
        return;
    }
    if (g->sw == 2) {
        for (int64_t y = 0; y < g->h; y++) {
            float *row = q + (y + g->ph) * d->qw;
            split2_row(row, row + d->eh * d->qw, xp + y * g->w, g->w, g->pw, d->qw);
        }
        return;
    }
    for (int64_t p = 0; p < g->sw; p++)
        for (int64_t y = 0; y < g->h; y++) {
            float *row = q + (p * d->eh + y + g->ph) * d->qw;
            const float *xr = xp + y * g->w;
            /* padded column j * sw + p is input column j * sw + p - pw */
            int64_t j0 = g->pw - p <= 0 ? 0 : (g->pw - p + g->sw - 1) / g->sw;
            for (int64_t j = j0; j < d->qw; j++) {
                int64_t x = j * g->sw + p - g->pw;
                if (x >= g->w)
                    break;
                row[j] = xr[x];
            }
        }
}

/* The output blocks [b0, b0 + n) (n <= DW_SLOTS) of one plane into o (oh
 * rows of wr values, block b at b * 8): each block's taps summed in a
 * register. Block b reads q from d->boff[b], tap t toff[t] further. */
static inline __attribute__((always_inline)) void
dw_blocks(const struct conv *g, const struct dw_plane *d, const float *q, const int64_t *toff, const float *wp,
          float bias, int64_t b0, int n, float *o)
{
    const float *base[DW_SLOTS];
    v8f acc[DW_SLOTS];
#pragma GCC unroll 8
    for (int s = 0; s < DW_SLOTS; s++) {
        base[s] = q + d->boff[b0 + (s < n ? s : 0)];
        acc[s] = (v8f){bias, bias, bias, bias, bias, bias, bias, bias};
    }
    for (int64_t t = 0; t < d->taps; t++) {
        float wv = wp[t];
        v8f w8 = {wv, wv, wv, wv, wv, wv, wv, wv};
#pragma GCC unroll 8
        for (int s = 0; s < DW_SLOTS; s++) {
            v8f v;
            memcpy(&v, base[s] + toff[t], sizeof v);
            acc[s] += w8 * v;
        }
    }
    for (int s = 0; s < n; s++) {
        int64_t b = b0 + s, left = g->ow - (b % d->nb) * 8;
        if (left >= 8)
            memcpy(o + d->ooff[b], &acc[s], sizeof acc[s]);
        else
            memcpy(o + d->ooff[b], &acc[s], sizeof(float) * (size_t)left);
    }
}

/* A K x K kernel (5x5) at stride S (1 or 2, no dilation), output rows
 * [y0, y0 + N) of column block cb: each input vector (padded row S y0 +
 * r, column phase kx % S at column 8 cb + kx / S) is loaded once and
 * multiplied into the up to K / S rows it feeds, with the K weights of
 * column kx in registers (N sums, K weights, one input: at most 14 of
 * AVX2's 16 registers). dw_blocks loads an input vector a multiply-add:
 * efficientnet_b0's 240-channel 5x5 at 28x28, batch 8, took 1.3x
 * PyTorch's time, its 672-channel 5x5 at stride 2 (7 output rows, 8
 * blocks for 7) 1.2-1.6x. */
static inline __attribute__((always_inline)) void
dw_rows(const struct conv *g, const struct dw_plane *d, const float *q, const float *wp,
        float bias, int64_t y0, int64_t cb, float *o, const int K, const int S, const int N)
{
    v8f acc[8];
#pragma GCC unroll 8
    for (int r = 0; r < N; r++)
        acc[r] = (v8f){bias, bias, bias, bias, bias, bias, bias, bias};
    const float *src = q + y0 * S * d->qw + cb * 8;
#pragma GCC unroll 5
    for (int kx = 0; kx < K; kx++) {
        v8f wv[5];
        const float *col = src + kx % S * d->eh * d->qw + kx / S;
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ky++) {
            float wk = wp[ky * K + kx];
            wv[ky] = (v8f){wk, wk, wk, wk, wk, wk, wk, wk};
        }
#pragma GCC unroll 20
        for (int r = 0; r < S * (N - 1) + K; r++) {
            v8f in;
            memcpy(&in, col + r * d->qw, sizeof in);
#pragma GCC unroll 5
            for (int ky = 0; ky < K; ky++)
                if (r - ky >= 0 && (r - ky) % S == 0 && (r - ky) / S < N)
                    acc[(r - ky) / S] += wv[ky] * in;
        }
    }
    int64_t left = g->ow - cb * 8, n = left < 8 ? left : 8;
    for (int r = 0; r < N; r++)
        memcpy(o + (y0 + r) * g->ow + cb * 8, &acc[r], sizeof(float) * (size_t)n);
}

/* The rows of a plane by runs of N (dw_rows), all column blocks; returns
 * the rows done. One function a stride, each its own registers: the two
 * in one function made stride 1 1.05x slower. */
static inline __attribute__((always_inline)) int64_t
dw_rows_plane(const struct conv *g, const struct dw_plane *d, const float *q, const float *wp,
              float bias, float *o, const int S, const int N)
{
    int64_t y0 = 0;
    for (; y0 + N <= g->oh; y0 += N)
        for (int64_t cb = 0; cb < d->nb; cb++)
            dw_rows(g, d, q, wp, bias, y0, cb, o, 5, S, N);
    return y0;
}

static TN_KERNEL_CLONES int64_t dw_rows5_s1(const struct conv *g, const struct dw_plane *d,
                                            const float *q, const float *wp, float bias, float *o)
{
    return dw_rows_plane(g, d, q, wp, bias, o, 1, 8);
}

static TN_KERNEL_CLONES int64_t dw_rows5_s2(const struct conv *g, const struct dw_plane *d,
                                            const float *q, const float *wp, float bias, float *o)
{
    return dw_rows_plane(g, d, q, wp, bias, o, 2, 7);
}

/* One plane: q is its padded copy, o its output (oh x ow). 5x5 at
 * stride 1 takes its rows by eights, at stride 2 by sevens (dw_rows; 7
 * sums and 17 input rows), the rows left as the other kernels. (3x3s by eights took 1.05x the time: 144 channels at
 * 56x56, 32 at 112x112, batch 1, thread clock, alternating.) */
static TN_KERNEL_CLONES void dw_plane_run(const struct conv *g, const struct dw_plane *d,
                                          const float *q, const int64_t *toff, const float *wp,
                                          float bias, float *o)
{
    int64_t b = 0;
    if (g->sh == g->sw && g->sh <= 2 && g->dh == 1 && g->dw == 1 && g->kh == 5 && g->kw == 5)
        b = (g->sh == 1 ? dw_rows5_s1 : dw_rows5_s2)(g, d, q, wp, bias, o) * d->nb;
    for (; b + DW_SLOTS <= d->blocks; b += DW_SLOTS)
        dw_blocks(g, d, q, toff, wp, bias, b, DW_SLOTS, o);
    if (b < d->blocks)
        dw_blocks(g, d, q, toff, wp, bias, b, (int)(d->blocks - b), o);
}

struct dw_job {
    const struct conv *g;
    struct dw_plane d;
    const float *x, *w, *b;
    float *out, *scratch;
    int64_t *toff, ranges;
};

/* ranges [begin, end) of the job's: range r is the planes [r P / R,
 * (r + 1) P / R) of the P = n * c (plane p is sample p / c, channel
 * p % c), with its own scratch */
static void dw_range(int64_t begin, int64_t end, void *ctx)
{
    const struct dw_job *j = ctx;
    const struct conv *g = j->g;
    int64_t planes = g->n * g->c;
    for (int64_t r = begin; r < end; r++) {
        float *q = j->scratch + (size_t)r * j->d.qfloats;
        for (int64_t p = r * planes / j->ranges; p < (r + 1) * planes / j->ranges; p++) {
            int64_t ch = p % g->c;
            pad_plane(g, &j->d, j->x + p * g->h * g->w, q);
            dw_plane_run(g, &j->d, q, j->toff, j->w + ch * j->d.taps, j->b ? j->b[ch] : 0.0f,
                         j->out + p * g->oh * g->ow);
        }
    }
}

int tn__conv_depthwise_f32(const struct conv *g, const float *x, const float *w,
                           const float *b, float *out)
{
    struct dw_job j = {g, {0}, x, w, b, out, NULL, NULL, 1};
    plane_of(g, &j.d);
    int64_t planes = g->n * g->c, t = tn_get_num_threads();
    /* one range a thread, once each holds about 32k multiply-adds */
    int64_t work = planes * g->oh * g->ow * j.d.taps;
    j.ranges = work / 32768 < t ? work / 32768 : t;
    j.ranges = j.ranges < 1 ? 1 : j.ranges > planes ? planes : j.ranges;
    int64_t *toff = malloc(sizeof(int64_t) * (size_t)(j.d.taps + 2 * j.d.blocks));
    j.d.boff = toff ? toff + j.d.taps : NULL;
    j.d.ooff = toff ? toff + j.d.taps + j.d.blocks : NULL;
    j.scratch = malloc(sizeof(float) * j.d.qfloats * (size_t)j.ranges);
    if (!toff || !j.scratch) {
        free(toff);
        free(j.scratch);
        return tn_set_error(TN_ENOMEM, "depthwise convolution: out of memory for %lld planes "
                            "of scratch", (long long)j.ranges);
    }
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t c = kx * g->dw;
            toff[ky * g->kw + kx] = (c % g->sw * j.d.eh + ky * g->dh) * j.d.qw + c / g->sw;
        }
    j.toff = toff;
    for (int64_t i = 0; i < j.d.blocks; i++)
    {
        j.d.boff[i] = i / j.d.nb * g->sh * j.d.qw + i % j.d.nb * 8;
        j.d.ooff[i] = i / j.d.nb * g->ow + i % j.d.nb * 8;
    }
    tn_parallel_for(j.ranges, 1, dw_range, &j);
    free(j.scratch);
    free(toff);
    return TN_OK;
}
