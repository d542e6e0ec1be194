/*
 * ops/cpu/nn_conv_wino.c: 3x3 convolutions at stride 1 (float32, forward,
 * groups 1, no dilation) by Winograd's F(2x2, 3x3): each 2x2 block of
 * output is A^T [(G g G^T) . (B^T d B)] A over its 4x4 input tile d, so
 * that the channel sums become 16 GEMMs of (oc x c) by (c x tiles), 16
 * multiply-adds per 4 outputs and channel instead of 36: 2.25x fewer than
 * the im2col GEMM. The transforms add only adds and subtracts, and the
 * error stays within float32's rounding of the sums (test_ops_nn2 checks
 * it against the float64 im2col path). resnet18's 3x3 layers took 1.2-1.3x
 * PyTorch's time through im2col (bench/ops/conv.sh).
 */
#include <config.h>

#include <cblas.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"
#include "ops/cpu/nn_conv.h"

#define WINO_TILES 192

/* The most input channels whose 16 products go to the small-k GEMM of
 * nn_conv_pw.c (read in place, no packing, no pass zeroing M) instead of
 * OpenBLAS: bench_ops --conv, 1 thread, thread clock, best of 5
 * interleaved, load 7-8 on 2 cores: 64 -> 64 at 56x56 batch 1 2.32 ->
 * 2.19 ms, batch 8 20.0 -> 18.6; 128 -> 128 at 28x28 2.15 -> 2.24 (slower:
 * stays with OpenBLAS). */
#define WINO_SMALLK 64

struct wino {
    const struct conv *g;
    int64_t th, tw, t;  /* tiles: rows, columns, a block (rb rows) */
    int64_t ty0, ty1;   /* the block of tile rows being transformed */
    const float *x, *w, *b;
    float *u, *v, *m, *out, *rows, *orows;
    int64_t rowlen, tw8, bt; /* bt: the block's tiles */
    int64_t vstride, mstride; /* V[e] and M[e] apart (see tn__conv_wino_f32) */
};

/* U[e][o][c] = (G g G^T)[e] for weights [begin, end) of oc * c, 64 at a
 * time into a block written out one e at a time: the 16 outputs of one
 * weight lie oc * c apart, a multiple of 4096 bytes at most sizes, and
 * storing them directly made 16 streams fight over one set of the L1
 * cache (the transform took longer than the products). */
static void wino_weights(int64_t begin, int64_t end, void *ctx)
{
    const struct wino *j = ctx;
    int64_t occ = j->g->oc * j->g->c;
    float blk[16][64];
    for (int64_t i0 = begin; i0 < end; i0 += 64) {
        int64_t nb = end - i0 < 64 ? end - i0 : 64;
        for (int64_t i = 0; i < nb; i++) {
            const float *k = j->w + (i0 + i) * 9;
            float t[4][3];
            for (int q = 0; q < 3; q++) { /* G g */
                t[0][q] = k[q];
                t[1][q] = 0.5f * (k[q] + k[3 + q] + k[6 + q]);
                t[2][q] = 0.5f * (k[q] - k[3 + q] + k[6 + q]);
                t[3][q] = k[6 + q];
            }
            for (int p = 0; p < 4; p++) { /* (G g) G^T */
                blk[4 * p + 0][i] = t[p][0];
                blk[4 * p + 1][i] = 0.5f * (t[p][0] + t[p][1] + t[p][2]);
                blk[4 * p + 2][i] = 0.5f * (t[p][0] - t[p][1] + t[p][2]);
                blk[4 * p + 3][i] = t[p][2];
            }
        }
        for (int e = 0; e < 16; e++)
            memcpy(j->u + e * occ + i0, blk[e], sizeof(float) * (size_t)nb);
    }
}


/* 8 values at p (any alignment) as a vector; the first n (1 to 8) of
 * vector v to p (macros: a function passing vectors warns of its ABI in
 * the baseline build) */
typedef float v8fu __attribute__((vector_size(32), aligned(4), may_alias));
#define LD8(v, p) ((v) = *(const v8fu *)(p))
#define ST8(p, v, n)                                                                               \
    do {                                                                                           \
        v8f st8_ = (v);                                                                            \
        if ((n) >= 8) /* a constant length: one store, not a copy loop */                          \
            memcpy((p), &st8_, sizeof st8_);                                                       \
        else                                                                                       \
            memcpy((p), &st8_, sizeof(float) * (size_t)(n));                                       \
    } while (0)

/* Each padded input row of channels [begin, end) of the sample at j->x
 * split into its even and odd columns (E and O, le values each), once a
 * sample, into the channel's own part of j->rows. */
static void wino_split(int64_t begin, int64_t end, void *ctx)
{
    const struct wino *j = ctx;
    const struct conv *g = j->g;
    int64_t le = j->rowlen, nr = 2 * j->th + 2;
    for (int64_t ch = begin; ch < end; ch++) {
        const float *xc = j->x + ch * g->h * g->w;
        float *eo = j->rows + ch * nr * 2 * le;
        for (int64_t r = 0; r < nr; r++) {
            float *e = eo + r * 2 * le, *o = e + le;
            int64_t y = r - g->ph;
            memset(e, 0, sizeof(float) * (size_t)(2 * le));
            if (y < 0 || y >= g->h)
                continue;
            tn__conv_split2(e, o, xc + y * g->w, g->w, g->pw, le);
        }
    }
}

/* V[e][ch][t] = (B^T d B)[e] of the tiles of the block's rows [ty0, ty1)
 * of channels [begin, end), from wino_split's rows, 8 tiles of a row at a
 * time: the 4 columns of 8 neighbouring tiles are the contiguous runs
 * E[tx], O[tx], E[tx + 1], O[tx + 1]. */
static TN_KERNEL_CLONES void wino_input(int64_t begin, int64_t end, void *ctx)
{
    const struct wino *j = ctx;
    int64_t T = j->t, cT = j->vstride, le = j->rowlen, nr = 2 * j->th + 2;
    for (int64_t ch = begin; ch < end; ch++) {
        const float *eo = j->rows + ch * nr * 2 * le;
        for (int64_t ty = j->ty0; ty < j->ty1; ty++) {
            const float *rw[4];
            for (int i = 0; i < 4; i++)
                rw[i] = eo + (2 * ty + i) * 2 * le;
            float *vo = j->v + ch * T + (ty - j->ty0) * j->tw;
            for (int64_t tx = 0; tx < j->tw; tx += 8) {
                v8f d[4][4], t[4][4];
                for (int i = 0; i < 4; i++) {
                    LD8(d[i][0], rw[i] + tx);
                    LD8(d[i][1], rw[i] + le + tx);
                    LD8(d[i][2], rw[i] + tx + 1);
                    LD8(d[i][3], rw[i] + le + tx + 1);
                }
                for (int q = 0; q < 4; q++) { /* B^T d */
                    t[0][q] = d[0][q] - d[2][q];
                    t[1][q] = d[1][q] + d[2][q];
                    t[2][q] = d[2][q] - d[1][q];
                    t[3][q] = d[1][q] - d[3][q];
                }
                int64_t n = j->tw - tx;
                for (int p = 0; p < 4; p++) { /* (B^T d) B */
                    ST8(vo + (4 * p + 0) * cT + tx, t[p][0] - t[p][2], n);
                    ST8(vo + (4 * p + 1) * cT + tx, t[p][1] + t[p][2], n);
                    ST8(vo + (4 * p + 2) * cT + tx, t[p][2] - t[p][1], n);
                    ST8(vo + (4 * p + 3) * cT + tx, t[p][1] - t[p][3], n);
                }
            }
        }
    }
}

/* out[o] = A^T M A (+ bias) for output channels [begin, end) at the
 * block's tile rows, 8 tiles of a row at a time: their two output rows
 * are interleaved into a scratch pair of rows (j->orows, 2 x 16 values a
 * block, per channel) and copied out. */
static TN_KERNEL_CLONES void wino_output(int64_t begin, int64_t end, void *ctx)
{
    const struct wino *j = ctx;
    const struct conv *g = j->g;
    int64_t T = j->t, oT = j->mstride, ol = 2 * j->tw8;
    float *buf = j->orows + begin * 2 * ol;
    for (int64_t o = begin; o < end; o++) {
        float bias = j->b ? j->b[o] : 0.0f, *yo = j->out + o * g->oh * g->ow;
        v8f b8 = {bias, bias, bias, bias, bias, bias, bias, bias};
        for (int64_t ty = j->ty0; ty < j->ty1; ty++) {
            const float *mo = j->m + o * T + (ty - j->ty0) * j->tw;
            for (int64_t tx = 0; tx < j->tw; tx += 8) {
                v8f m[16], t[2][4];
                for (int e = 0; e < 16; e++)
                    LD8(m[e], mo + e * oT + tx);
                for (int q = 0; q < 4; q++) { /* A^T M */
                    t[0][q] = m[q] + m[4 + q] + m[8 + q];
                    t[1][q] = m[4 + q] - m[8 + q] - m[12 + q];
                }
                for (int i = 0; i < 2; i++) {
                    v8f y0 = t[i][0] + t[i][1] + t[i][2] + b8;
                    v8f y1 = t[i][1] - t[i][2] - t[i][3] + b8;
                    v8f a = TN_ZIPLO8(y0, y1), c = TN_ZIPHI8(y0, y1);
                    memcpy(buf + i * ol + 2 * tx, &a, sizeof a);
                    memcpy(buf + i * ol + 2 * tx + 8, &c, sizeof c);
                }
            }
            int64_t y = 2 * ty;
            memcpy(yo + y * g->ow, buf, sizeof(float) * (size_t)g->ow);
            if (y + 1 < g->oh)
                memcpy(yo + (y + 1) * g->ow, buf + ol, sizeof(float) * (size_t)g->ow);
        }
        buf += 2 * ol;
    }
}

/* M[e] = U[e] V[e] of the block's tiles for e in [begin, end), by the
 * small-k GEMM (c <= WINO_SMALLK) */
static void wino_products(int64_t begin, int64_t end, void *ctx)
{
    const struct wino *j = ctx;
    int64_t oc = j->g->oc, c = j->g->c;
    for (int64_t e = begin; e < end; e++)
        tn__gemm_smallk_f32(oc, j->bt, c, j->u + e * oc * c, c, j->v + e * j->vstride, j->t,
                            j->m + e * j->mstride, j->t, NULL);
}

bool tn__conv_wino_fits(const struct conv *g)
{
    return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->cg >= 16 && g->ocg >= 16 &&
           (g->oh + 1) / 2 * ((g->ow + 1) / 2) >= 100;
}

/* One group (g's groups 1): samples xs and os values apart in x and out. */
static int wino_group(const struct conv *g, const float *x, const float *w, const float *b,
                      float *out, int64_t xs, int64_t os)
{
    struct wino j = {.g = g, .th = (g->oh + 1) / 2, .tw = (g->ow + 1) / 2, .x = x, .w = w, .b = b};
    /* the tiles go through the transforms and products in blocks of rb
     * tile rows, WINO_TILES tiles or more: the 16 V and M matrices of the
     * whole plane (3.2 MB each at resnet18's 64-channel 56x56 layers)
     * left the L2 cache between the input transform, the products and
     * the output transform. bench_ops --conv 64 56 64 3 1 (1 thread,
     * thread CPU time): whole plane 1.30 ms, blocks of 84 tiles 1.17-1.22,
     * 128 1.13-1.14, 196 1.12 (batch 8: 11.3-12.0 -> 9.8-10.0); its
     * 128-channel 28x28 layers (196 tiles) were slower in blocks of 84 or
     * 128 (1.20-1.25 -> 1.23-1.41) and stay whole. */
    int64_t rb = (WINO_TILES + j.tw - 1) / j.tw;
    rb = rb < j.th ? rb : j.th;
    j.t = rb * j.tw;
    j.tw8 = (j.tw + 7) / 8 * 8;
    /* an even or odd half of a padded row: the 8-tile blocks read up to
     * tw8 + 8 values of it */
    j.rowlen = j.tw8 + 8;
    /* the 16 matrices of V and of M, which the transforms read or write
     * together, 64 bytes more than a multiple of 4096 bytes apart: at a
     * multiple (c * t = 64 * 784 at resnet18's first layers) the 16 streams
     * fell into one set of the L1 cache */
    j.vstride = (g->c * j.t + 1023) / 1024 * 1024 + 16;
    j.mstride = (g->oc * j.t + 1023) / 1024 * 1024 + 16;
    size_t nu = (size_t)(16 * g->oc * g->c), nv = (size_t)(16 * j.vstride);
    size_t nm = (size_t)(16 * j.mstride) + 8; /* the last block reads 8 past */
    size_t nr = (size_t)(g->c * (2 * j.th + 2) * 2 * j.rowlen), no = (size_t)(g->oc * 4 * j.tw8);
    /* through the library's caching allocator: a fresh malloc of these
     * megabytes faulted in zeroed pages at every call */
    int64_t n = (int64_t)(nu + nv + nm + nr + no);
    struct tn_tensor *st = tn_empty(&n, 1, TN_FLOAT32);
    if (!st)
        return tn_last_status();
    float *s = tn_data(st);
    j.u = s;
    j.v = s + nu;
    j.m = j.v + nv;
    j.rows = j.m + nm;
    j.orows = j.rows + nr;
    int64_t nt = tn_get_num_threads();
    bool smallk = g->c <= WINO_SMALLK;
    tn_parallel_for(g->oc * g->c, 4096, wino_weights, &j);
    openblas_set_num_threads((int)nt);
    for (int64_t s0 = 0; s0 < g->n; s0++) {
        j.x = x + s0 * xs;
        j.out = out + s0 * os;
        tn_parallel_for(g->c, 1 + 16384 / (16 * j.th * j.tw + 1), wino_split, &j);
        for (j.ty0 = 0; j.ty0 < j.th; j.ty0 = j.ty1) {
            j.ty1 = j.ty0 + rb < j.th ? j.ty0 + rb : j.th;
            int64_t bt = (j.ty1 - j.ty0) * j.tw;
            tn_parallel_for(g->c, 1 + 16384 / (16 * bt + 1), wino_input, &j);
            j.bt = bt;
            if (smallk)
                tn_parallel_for(16, 1, wino_products, &j);
            else
                for (int e = 0; e < 16; e++)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->oc, (int)bt,
                                (int)g->c, 1.0f, j.u + e * g->oc * g->c, (int)g->c,
                                j.v + e * j.vstride, (int)j.t, 0.0f, j.m + e * j.mstride,
                                (int)j.t);
            tn_parallel_for(g->oc, 1 + 16384 / (4 * bt + 1), wino_output, &j);
        }
    }
    tn_release(st);
    return TN_OK;
}

/* Each group as a convolution of its own: cg channels in, ocg out. */
int tn__conv_wino_f32(const struct conv *g, const float *x, const float *w, const float *b,
                      float *out)
{
    struct conv sub = *g;
    sub.c = g->cg;
    sub.oc = g->ocg;
    sub.groups = 1;
    int64_t xs = g->c * g->h * g->w, os = g->oc * g->oh * g->ow;
    for (int64_t gr = 0; gr < g->groups; gr++) {
        int rc = wino_group(&sub, x + gr * g->cg * g->h * g->w, w + gr * g->ocg * g->k,
                            b ? b + gr * g->ocg : NULL, out + gr * g->ocg * g->oh * g->ow, xs, os);
        if (rc < 0)
            return rc;
    }
    return TN_OK;
}
