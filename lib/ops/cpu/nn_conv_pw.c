/*
 * ops/cpu/nn_conv_pw.c: a GEMM for short inner dimensions (float32),
 * C (m x n) = A (m x k) B (k x n) (+ a bias per row of C), row-major, and
 * the 1x1 convolutions (no padding) that run as one such product a sample
 * and group, W (ocg x cg) @ X (cg x hw), with no im2col (strided ones
 * through a gathered panel of 64 positions a task).
 *
 * OpenBLAS's sgemm packs both operands at every call; with k of 16 to 128
 * (mobilenet_v3_small's 16-channel expansion, efficientnet_b0's 96 -> 24
 * projection, the Winograd products of a grouped 3x3 with 16 channels a
 * group) that packing and its call overhead cost more than the
 * multiply-adds: mbv3s's 16 -> 72 1x1 took 1.5x PyTorch's time. Here B is
 * read in place, 2L columns at a time (a k x 2L panel, up to 16 or 32 KiB,
 * stays in L1 while every row block of A passes over it), and a block of C
 * (6 x 16 with AVX2's 8-float vectors, 8 x 32 with AVX-512's 16-float
 * ones) stays in registers through the k multiply-adds.
 * Each value of C is the same sum in the same order whatever the thread
 * split.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"
#include "ops/cpu/nn_conv.h"

/* -std=c11 turns off contracting a * b + c into one FMA; the sums want it */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

/* One step of a register block's sums: row bp of B (2L values) times the
 * R values ar[r][ai] of A broadcast, into the accumulators acc0 and acc1
 * (R vectors each) of the block that uses it. */
#define PW_STEP(VT, L, R, bp, ai)                                                              \
    do {                                                                                       \
        VT b0_, b1_;                                                                           \
        const float *bp_ = (bp);                                                               \
        int64_t ai_ = (ai);                                                                    \
        memcpy(&b0_, bp_, sizeof b0_);                                                         \
        memcpy(&b1_, bp_ + (L), sizeof b1_);                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < (R); r++)                                 \
        {                                                                                      \
            VT sv = ar[r][ai_] - (VT){0};                                                      \
            acc0[r] += sv * b0_;                                                               \
            acc1[r] += sv * b1_;                                                               \
        }                                                                                      \
    } while (0)

/* PW_STEP for a block of one vector (L columns): acc0 only. */
#define PW_STEP1(VT, R, bp, ai)                                                                 \
    do {                                                                                       \
        VT b0_;                                                                                \
        int64_t ai_ = (ai);                                                                    \
        memcpy(&b0_, (bp), sizeof b0_);                                                        \
        _Pragma("GCC unroll 16") for (int r = 0; r < (R); r++)                                 \
            acc0[r] += (ar[r][ai_] - (VT){0}) * b0_;                                           \
    } while (0)

/* The sums of a register block, rows i0 + r (those under m) of c (ldc),
 * into at most `cols` (under 2L: through a buffer) columns. */
#define PW_STORE(L, R, m, i0, c, ldc, cols)                                                    \
    do {                                                                                       \
        if ((i0) + (R) <= (m) && (cols) >= 2 * (L)) {                                          \
            _Pragma("GCC unroll 16") for (int r_ = 0; r_ < (R); r_++)                          \
            {                                                                                  \
                float *cr_ = (c) + ((i0) + r_) * (ldc);                                        \
                memcpy(cr_, &acc0[r_], sizeof acc0[r_]);                                       \
                memcpy(cr_ + (L), &acc1[r_], sizeof acc1[r_]);                                 \
            }                                                                                  \
            break;                                                                             \
        }                                                                                      \
        for (int r_ = 0; r_ < (R) && (i0) + r_ < (m); r_++) {                                  \
            float t_[2 * (L)];                                                                 \
            memcpy(t_, &acc0[r_], sizeof acc0[r_]);                                            \
            memcpy(t_ + (L), &acc1[r_], sizeof acc1[r_]);                                      \
            memcpy((c) + ((i0) + r_) * (ldc), t_,                                              \
                   sizeof(float) * (size_t)((cols) < 2 * (L) ? (cols) : 2 * (L)));             \
        }                                                                                      \
    } while (0)

/* The kernel for one vector type VT of L floats: blocks of R rows x 2L
 * columns of C held in 2R registers. pw_block_SFX computes rows [i0, i0 +
 * R) (those past m repeat row m - 1 and are not stored) by the 2L columns
 * of panel b (row p at p * ldb, or at boff[p] when boff is not NULL: the
 * NULL of pw_cols is a constant once inlined, its loop tests nothing) into
 * c (ldc), at most `cols` of them, its first k rows of pf (when not
 * NULL) prefetched; pw_cols_SFX the columns [j0, j1), its last panel,
 * under 2L columns, copied first into a zero-padded k x 2L one, each
 * panel's first row block prefetching the next panel of B while it lies
 * whole under column jend (B's rows 12 KiB apart at efficientnet_b0's 96
 * -> 24 1x1, 96 streams, more than the hardware prefetcher follows);
 * pw_implicit_SFX the grouped kernel's loop (below). */
#define PW_KERNEL(SFX, VT, L, R, ATTR)                                                          \
    static inline __attribute__((always_inline)) void                                          \
    pw_block_##SFX(int64_t m, int64_t k, const float *a, int64_t lda, const float *b,          \
                   int64_t ldb, const int64_t *boff, float *c, int64_t ldc, const float *bias,  \
                   int64_t i0, int64_t cols, const float *pf)                                   \
    {                                                                                          \
        const float *ar[R];                                                                    \
        VT acc0[R], acc1[R];                                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                                   \
        {                                                                                      \
            int64_t i = i0 + r < m ? i0 + r : m - 1;                                           \
            ar[r] = a + i * lda;                                                               \
            float v = bias ? bias[i] : 0.0f;                                                   \
            acc0[r] = acc1[r] = v - (VT){0};                                                   \
        }                                                                                      \
        for (int64_t p = 0; p < k; p++) {                                                      \
            if (pf)                                                                            \
                __builtin_prefetch(pf + p * ldb);                                              \
            PW_STEP(VT, L, R, b + (boff ? boff[p] : p * ldb), p);                              \
        }                                                                                      \
        PW_STORE(L, R, m, i0, c, ldc, cols);                                                   \
    }                                                                                          \
    static ATTR void pw_implicit_##SFX(const struct conv *g, const float *q, int64_t qw,       \
                                       const int64_t *boff, const float *w, const float *bias, \
                                       float *o)                                               \
    {                                                                                          \
        int64_t hw = g->oh * g->ow;                                                            \
        for (int64_t y = 0; y < g->oh; y++)                                                    \
            for (int64_t x = 0; x < g->ow; x += 2 * L) {                                       \
                int64_t cols = g->ow - x < 2 * L ? g->ow - x : 2 * L;                          \
                for (int64_t i = 0; i < g->ocg; i += R)                                        \
                    pw_block_##SFX(g->ocg, g->k, w, g->k, q + y * qw + x, 0, boff,             \
                                   o + y * g->ow + x, hw, bias, i, cols, NULL);         \
            }                                                                                  \
    }                                                                                          \
    static ATTR void pw_cols_##SFX(int64_t m, int64_t k, const float *a, int64_t lda,          \
                                   const float *b, int64_t ldb, float *c, int64_t ldc,         \
                                   const float *bias, int64_t j0, int64_t j1, int64_t jend)    \
    {                                                                                          \
        float pad[TN_GEMM_SMALLK_MAX * 2 * L];                                                 \
        for (int64_t j = j0; j < j1; j += 2 * L) {                                             \
            int64_t cols = j1 - j < 2 * L ? j1 - j : 2 * L;                                    \
            const float *panel = b + j;                                                        \
            int64_t ld = ldb;                                                                  \
            if (cols < 2 * L) {                                                                \
                for (int64_t p = 0; p < k; p++) {                                              \
                    memset(pad + p * 2 * L + cols, 0, sizeof(float) * (size_t)(2 * L - cols)); \
                    memcpy(pad + p * 2 * L, b + p * ldb + j, sizeof(float) * (size_t)cols);    \
                }                                                                              \
                panel = pad;                                                                   \
                ld = 2 * L;                                                                    \
            }                                                                                  \
            const float *pf = j + 4 * L <= jend ? b + j + 2 * L : NULL;                        \
            for (int64_t i = 0; i < m; i += R)                                                 \
                pw_block_##SFX(m, k, a, lda, panel, ld, NULL, c + j, ldc, bias, i, cols,         \
                               i ? NULL : pf);                                                 \
        }                                                                                      \
    }

/* 8-float vectors, 6 x 16 blocks (12 of AVX2's 16 registers), for AVX2
 * and plain x86-64 */
PW_KERNEL(v8, v8f, 8, 6, TN_KERNEL_CLONES)

/* 16-float vectors, 8 x 32 blocks (16 of AVX-512's 32 registers): twice
 * the multiply-adds an instruction where the CPU has AVX-512 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&    \
    !defined(__SANITIZE_ADDRESS__)
#define PW_HAVE_V16 1
typedef float v16f __attribute__((vector_size(64)));
PW_KERNEL(v16, v16f, 16, 8, __attribute__((target("arch=x86-64-v4"))))
#endif

/* Columns [j0, j1) of C by the widest kernel this CPU runs; B's columns
 * up to jend may be prefetched. */
static void pw_cols(int64_t m, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, const float *bias, int64_t j0, int64_t j1,
                    int64_t jend)
{
#ifdef PW_HAVE_V16
    if (__builtin_cpu_supports("x86-64-v4")) {
        pw_cols_v16(m, k, a, lda, b, ldb, c, ldc, bias, j0, j1, jend);
        return;
    }
#endif
    pw_cols_v8(m, k, a, lda, b, ldb, c, ldc, bias, j0, j1, jend);
}

void tn__gemm_smallk_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias)
{
    if (m > 0 && n > 0)
        pw_cols(m, k, a, lda, b, ldb, c, ldc, bias, 0, n, n);
}

/* Strided 1x1 convolutions (resnet's downsamples) gather each task's 64
 * input positions into a panel (pw_gather) instead of an im2col of the
 * sample plus OpenBLAS: at batch 8, 1 thread, thread CPU time, best of 8
 * interleaved runs on a loaded machine, 64 -> 128 channels 56 -> 28 at
 * stride 2 1.95 -> 1.45 ms, 128 -> 256 1.60 -> 1.49; 256 -> 512 was
 * slower (1.60 -> 1.71: every 16-column panel streams the 512 KiB weight
 * from beyond L2), so weights over 256 KiB stay with im2col. Those of
 * groups 1 at batch 2+ whose output planes are not whole tiles of 16
 * (14x14, 7x7) go to the flat kernel instead (tn__conv_flat_fits), its
 * tiles across samples. */
bool tn__conv_pw_fits(const struct conv *g)
{
    return g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0 && g->cg <= TN_GEMM_SMALLK_MAX &&
           ((g->sh == 1 && g->sw == 1) || (g->ocg * g->cg <= 65536 && !tn__conv_flat_fits(g)));
}

/* Tasks are (sample, group, run of 64 output columns). */
struct pw_job {
    const struct conv *g;
    const float *x, *w, *b;
    float *out;
    int64_t runs;
};

#define PW_RUN 64

/* The input values of output columns [j0, j1) of a strided 1x1
 * convolution, channel by channel, into panel (cg rows of PW_RUN): input
 * (y sh, x sw) for output (y, x) of the cg channels at x (h w apart). */
static void pw_gather(const struct conv *g, const float *x, int64_t j0, int64_t j1, float *panel)
{
    int64_t off[PW_RUN], n = j1 - j0, y = j0 / g->ow, xo = j0 % g->ow;
    for (int64_t i = 0; i < n; i++) {
        off[i] = y * g->sh * g->w + xo * g->sw;
        if (++xo == g->ow)
            xo = 0, y++;
    }
    for (int64_t c = 0; c < g->cg; c++) {
        const float *xc = x + c * g->h * g->w;
        for (int64_t i = 0; i < n; i++)
            panel[c * PW_RUN + i] = xc[off[i]];
    }
}

static void pw_range(int64_t begin, int64_t end, void *ctx)
{
    const struct pw_job *j = ctx;
    const struct conv *g = j->g;
    int64_t hw = g->oh * g->ow;
    bool strided = g->sh != 1 || g->sw != 1;
    float panel[TN_GEMM_SMALLK_MAX * PW_RUN];
    for (int64_t t = begin; t < end; t++) {
        int64_t run = t % j->runs, sg = t / j->runs, s = sg / g->groups, gr = sg % g->groups;
        int64_t j0 = run * PW_RUN, j1 = j0 + PW_RUN < hw ? j0 + PW_RUN : hw;
        const float *x = j->x + (s * g->c + gr * g->cg) * g->h * g->w, *wg = j->w + gr * g->ocg * g->cg;
        const float *bg = j->b ? j->b + gr * g->ocg : NULL;
        float *o = j->out + (s * g->oc + gr * g->ocg) * hw;
        if (strided) {
            /* the run's strided input gathered into a panel: no im2col */
            pw_gather(g, x, j0, j1, panel);
            pw_cols(g->ocg, g->cg, wg, g->cg, panel, PW_RUN, o + j0, hw, bg, 0, j1 - j0,
                    j1 - j0);
        } else {
            pw_cols(g->ocg, g->cg, wg, g->cg, x, hw, o, hw, bg, j0, j1, hw);
        }
    }
}

int tn__conv_pw_f32(const struct conv *g, const float *x, const float *w, const float *b,
                    float *out)
{
    int64_t hw = g->oh * g->ow;
    struct pw_job j = {g, x, w, b, out, (hw + PW_RUN - 1) / PW_RUN};
    int64_t tasks = g->n * g->groups * j.runs;
    if (tasks > 0)
        tn_parallel_for(tasks, tn__grain_of(g->ocg * g->cg * PW_RUN), pw_range, &j);
    return TN_OK;
}

/* ------------------------------------------------ grouped, by implicit GEMM
 * A grouped convolution at stride 1 (no dilation) with a short patch (cg
 * kh kw <= TN_GEMM_SMALLK_MAX) as the same register blocks with no patch
 * matrix: each group's channels are copied once into a zero-padded scratch
 * with rows qw >= w + 2 pw + 32 apart, and the patch row of tap (c, ky, kx)
 * at output (y, x) is that scratch at y * qw + x plus a fixed offset, so a
 * block of output columns of one row reads 2L contiguous values a tap. The
 * im2col it replaces wrote kh kw copies of the input and, like the
 * Winograd kernel's 16 small products a group, cost more than the sums:
 * a 128-channel 28x28 3x3 in 8 groups took 1.7x PyTorch's time. */
bool tn__conv_grouped_fits(const struct conv *g)
{
    return g->groups > 1 && !(g->cg == 1 && g->ocg == 1) && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1 && g->k <= TN_GEMM_SMALLK_MAX;
}

struct grouped_job {
    const struct conv *g;
    const float *x, *w, *b;
    float *out;
    int64_t eh, qw, ranges;
    const int64_t *boff;
    int rc;
};

/* ranges of the n * groups (sample, group) pairs, each with its scratch */
static void grouped_range(int64_t begin, int64_t end, void *ctx)
{
    struct grouped_job *j = ctx;
    const struct conv *g = j->g;
    int64_t pairs = g->n * g->groups, plane = j->eh * j->qw;
    /* 64 floats past the last plane: a block of the last row reads up to
     * 2L - 1 values past its row's padding */
    float *q = malloc(sizeof(float) * (size_t)(g->cg * plane + 64));
    if (!q) {
        j->rc = -1;
        return;
    }
    for (int64_t r = begin; r < end; r++)
        for (int64_t pr = r * pairs / j->ranges; pr < (r + 1) * pairs / j->ranges; pr++) {
            int64_t s = pr / g->groups, gr = pr % g->groups;
            const float *x = j->x + (s * g->c + gr * g->cg) * g->h * g->w;
            memset(q, 0, sizeof(float) * (size_t)(g->cg * plane + 64));
            for (int64_t c = 0; c < g->cg; c++)
                for (int64_t y = 0; y < g->h; y++)
                    memcpy(q + c * plane + (y + g->ph) * j->qw + g->pw, x + (c * g->h + y) * g->w,
                           sizeof(float) * (size_t)g->w);
            const float *w = j->w + gr * g->ocg * g->k, *b = j->b ? j->b + gr * g->ocg : NULL;
            float *o = j->out + (s * g->oc + gr * g->ocg) * g->oh * g->ow;
#ifdef PW_HAVE_V16
            if (__builtin_cpu_supports("x86-64-v4")) {
                pw_implicit_v16(g, q, j->qw, j->boff, w, b, o);
                continue;
            }
#endif
            pw_implicit_v8(g, q, j->qw, j->boff, w, b, o);
        }
    free(q);
}

int tn__conv_grouped_f32(const struct conv *g, const float *x, const float *w, const float *b,
                         float *out)
{
    int64_t boff[TN_GEMM_SMALLK_MAX];
    struct grouped_job j = {g, x, w, b, out, g->h + 2 * g->ph, g->w + 2 * g->pw + 32, 1, boff,
                            0};
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++)
                boff[(c * g->kh + ky) * g->kw + kx] = (c * j.eh + ky) * j.qw + kx;
    int64_t pairs = g->n * g->groups, t = tn_get_num_threads();
    j.ranges = pairs < t ? pairs : t;
    tn_parallel_for(j.ranges, 1, grouped_range, &j);
    if (j.rc < 0)
        return tn_set_error(TN_ENOMEM, "grouped convolution: out of memory for its scratch");
    return TN_OK;
}

/* ------------------------------------------ groups 1, by flat implicit GEMM
 * A convolution of groups 1 at stride 1 (no dilation) that the Winograd
 * kernel does not take (under 100 output tiles, under 16 channels, not
 * 3x3): the input copied once into a zero-padded scratch of rows qw = w +
 * 2 pw, in which the tap (c, ky, kx) of output (oy, ox) is the scratch
 * at f + c plane + ky qw + kx, f = oy qw + ox its flat offset on the
 * padded width. Each task packs the patch rows of its tiles of 2L output
 * positions (runs of contiguous scratch values, one a row a tile crosses)
 * into a k x 2L panel, then each block of R output channels keeps its
 * sums in registers over all the taps of a pass and writes them straight
 * into the output: one pass unless a task's panels would pass 256 KiB
 * (over 1024 taps with 8-float vectors). Before, the flat kernel computed
 * each sample on the padded width into a scratch, its taps cut into chunks
 * of 252 at 3x3 that each reloaded and stored the scratch, then copied its
 * rows into the output; and at batch 4 or more on small planes a second
 * kernel with output channels in the vector lanes. Here (bench/ops/
 * resnet18_conv.sh, 1 thread, thread CPU time, alternating runs on a
 * loaded machine, batch 8): 64 -> 128 channels 56 -> 28 at stride 2
 * 14.2-14.6 -> 11.6-12.2 ms, 128 -> 256 13.6-13.9 -> 12.1-12.3, 256 -> 512
 * 18.5-19.0 (the second kernel) -> 14.4-14.9, 512 at 7x7 32.5-35.3 ->
 * 30.1-32.3; batch 1 alike or within the noise. im2col with OpenBLAS:
 * resnet18's 512-channel 7x7 and 256-channel 14x14 3x3s took 0.85-0.95x
 * PyTorch's time. Outputs over 1 Mi values on the padded width (3 -> 64 channels
 * at 224x224: 3.2 Mi) stay with im2col, which was faster there: the flat
 * output, written once a chunk, no longer stays in cache.
 * At stride 2 the input is split into its four phase planes (padded row
 * Y, column X to plane (Y % 2, X % 2) at (Y / 2, X / 2)), so that tap (c,
 * ky, kx) of flat output f = oy qw + ox is again one contiguous run, at f
 * + c plane + phase (ky % 2, kx % 2)'s plane + ky / 2 qw + kx / 2, and
 * the output rows are qw = ceil((w + 2 pw) / 2) wide (ow or one more).
 * im2col + OpenBLAS took 1.1-1.5x this time at resnet18's stride-2
 * layers (bench/ops/resnet18_conv.sh, 1 thread, thread CPU time,
 * interleaved best-of runs, batch 1: 7x7 stem 2.48 -> 1.66 ms, 3x3 64 ->
 * 128 0.82 -> 0.74, 128 -> 256 0.76 -> 0.71, 256 -> 512 0.96 -> 0.79;
 * batch 8 alike); its 1x1 stride-2 downsamples were slower here (a plain
 * subsampling copy is all their im2col does) and go to the small-k GEMM
 * over a gathered panel (tn__conv_pw_fits) or im2col, except below.
 * Positions are tiled across the samples of a chunk (as few as fill the
 * batch's lanes to 97%, in at most 4 MiB of scratch) where a plane is
 * not whole tiles of 2L: a 7x7 output was 4 tiles of 16 (64 lanes for
 * 49), a 14x14 13 (208 for 196); batch 8 7x7 is 24.5 tiles, a tile
 * crossing samples storing its sums in a
 * segment a sample. A strided 1x1 (no padding) of groups 1 runs here too
 * at batch 2+ on such planes, over its subsampled input (rows of ow, one
 * plane a channel, read in place by a tile within one sample, packed when
 * it crosses samples): resnet18's 256 -> 512 downsample, weight too big
 * for the gathered panel, went to im2col. bench/ops/resnet18_conv.sh,
 * batch 8, 1 thread, thread CPU time, old and new alternating at load
 * 8-12 on 2 cores: 512 channels at 7x7 27.4-28.4 -> 21.9-22.7 ms (PyTorch
 * 24.2-25.0), 256 -> 512 at stride 2 13.8-14.2 -> 11.2-11.5 (PyTorch
 * 13.7-14.0), the 256 -> 512 downsample 1.50-1.55 -> 1.28-1.34 (PyTorch
 * 1.51-1.90). */
bool tn__conv_flat_fits(const struct conv *g)
{
    int64_t s = g->sh, taps = g->kh * g->kw, qw = (g->w + 2 * g->pw + s - 1) / s;
    if (g->groups != 1 || g->dh != 1 || g->dw != 1)
        return false;
    if (taps == 1) /* strided 1x1 over the subsampled input, its tiles across samples */
        return g->ph == 0 && g->pw == 0 && (g->sh > 1 || g->sw > 1) && g->n > 1 &&
               g->oh * g->ow % 16 != 0 && g->oc * g->oh * g->ow <= ((int64_t)1 << 20);
    return g->sh == g->sw && s <= 2 && taps <= TN_GEMM_SMALLK_MAX &&
           g->oc * g->oh * qw <= ((int64_t)1 << 20);
}

#define FLAT_TILES 4 /* tiles of 2L output positions a task */
#define FLAT_BMAX (64 * 1024) /* floats of a task's packed tiles a pass */
#define FLAT_QMAX (1024 * 1024) /* floats of a chunk's scratch of several samples */
#define FLAT_DIRECT_OC 64      /* most output channels the direct kernel takes */

/* Where a tile's sums go: output segments s in [0, nos), lanes [lane[s],
 * lane[s + 1]) to out + off[s] (channel planes hw apart), one a sample
 * the tile crosses; cols = lane[nos] of its 2L lanes hold positions. */
struct flat_tile {
    int nos;
    int64_t cols, lane[34], off[33];
    const float *b; /* its patch rows, ldb floats apart */
    int64_t ldb;
};

/* The flat kernel for one vector type. pw_fpack_SFX packs the k patch
 * rows of one tile of 2L output positions into bp (k rows of 2L, and 2L
 * floats of slack): tap p of position f of the padded width is q[boff[p]
 * + f], and the tile's positions are runs of the padded rows, nseg
 * segments, segment s from lane sst[s] at flat offset ssh[s] + lane
 * (each segment's whole-vector copy writes past its end into lanes that
 * the next segment, or row p + 1, overwrites; a segment of L lanes or
 * fewer copies one vector, not two: rows 14 wide, tiles of 16 in two or
 * three segments, bench/compile/train.sh's CNN). pw_ftask_SFX computes a
 * task's nt packed tiles (the last one `last` positions wide) for every
 * output channel: each block of R channels of the packed weight ap (rows
 * of R values a tap, lda R floats a block row) stays in L1 while the nt
 * tiles pass, its sums in registers over the whole k, added to the bias
 * (or, when add, to what out holds: an earlier pass's taps) and written
 * straight into out (channel planes hw apart). pw_fdirect_SFX, at stride
 * 1 for output rows narrower than a tile, packs nothing: its tiles are
 * 2L positions of the padded width (oh rows of qw, the qw - ow last of
 * each row computed and dropped), so that tap p of a tile is the one run
 * q[boff[p] + f..], read in place, all k taps in one pass; each sum is
 * stored row piece by row piece. bench/compile/train.sh's CNN (rows of
 * 14, 16 and 32 channels, tiles of 16 in two or three segments) spent
 * as long packing as multiplying: its two 14x14 convolutions (forward,
 * and the input's gradient) fell from about 37% to 27% of its step
 * (perf, 1 thread, shares against the unchanged weight-gradient GEMM). */
/* Row r of a block at i0: its weights' row ar[r] (past m: row m - 1) and
 * its sums acc0[r], acc1[r] started at its bias (0 past m, or without) */
#define PW_FROW(VT, m, i0, r, a, lda, bias)                                                    \
    do {                                                                                       \
        ar[r] = (a) + ((i0) + (r) < (m) ? (i0) + (r) : (m) - 1) * (lda);                       \
        float v_ = (bias) && (i0) + (r) < (m) ? (bias)[(i0) + (r)] : 0.0f;                     \
        acc0[r] = acc1[r] = v_ - (VT){0};                                                      \
    } while (0)

#define PW_FKERNEL(SFX, VT, L, R, ATTR)                                                        \
    static ATTR void pw_fpack_##SFX(const float *q, const int64_t *boff, int64_t k,           \
                                    const int64_t *sst, const int64_t *ssh, int nseg,         \
                                    float *bp)                                                \
    {                                                                                          \
        for (int64_t p = 0; p < k; p++) {                                                      \
            const float *src = q + boff[p];                                                    \
            float *d = bp + p * 2 * L;                                                         \
            for (int s = 0; s < nseg; s++) {                                                   \
                VT v0, v1;                                                                     \
                memcpy(&v0, src + (ssh[s] + sst[s]), sizeof v0);                               \
                memcpy(d + sst[s], &v0, sizeof v0);                                            \
                if ((s + 1 < nseg ? sst[s + 1] : 2 * L) - sst[s] <= L)                         \
                    continue;                                                                  \
                memcpy(&v1, src + (ssh[s] + sst[s] + L), sizeof v1);                           \
                if ((s + 1 < nseg ? sst[s + 1] : 2 * L) - sst[s] <= L)                         \
                    continue;                                                                  \
                memcpy(&v1, src + ssh[s] + sst[s] + L, sizeof v1);                             \
                memcpy(d + sst[s] + L, &v1, sizeof v1);                                        \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static ATTR void pw_ftask_##SFX(const float *a, int64_t m,  int64_t lda, int64_t k,       \
                                    int64_t nt, const struct flat_tile *tl,                   \
                                    const float *bias, float *out, int64_t hw, bool add)      \
    {                                                                                          \
        for (int64_t i0 = 0; i0 < m; i0 += R)                                                  \
            for (int64_t t = 0; t < nt; t++) {                                                 \
                const struct flat_tile *ti = tl + t;                                           \
                const float *ar[R], *b = ti->b;                                                \
                float *o = out + ti->off[0];                                                   \
                int64_t cols = ti->cols;                                                       \
                VT acc0[R], acc1[R];                                                           \
                _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                           \
                {                                                                              \
                    PW_FROW(VT, m, i0, r, a, lda, bias);                                       \
                    if (add && i0 + r < m) {                                                   \
                        float u[2 * L] = {0};                                                  \
                        for (int s = 0; s < ti->nos; s++)                                      \
                            memcpy(u + ti->lane[s], out + ti->off[s] + (i0 + r) * hw,          \
                                   sizeof(float) * (size_t)(ti->lane[s + 1] - ti->lane[s]));   \
                        memcpy(&acc0[r], u, sizeof acc0[r]);                                   \
                        memcpy(&acc1[r], u + L, sizeof acc1[r]);                               \
                    }                                                                          \
                }                                                                              \
                if (cols <= L) /* a tail of one vector: half the multiply-adds */           \
                    for (int64_t p = 0; p < k; p++)                                            \
                        PW_STEP1(VT, R, b + p * ti->ldb, p);                                   \
                else                                                                           \
                    for (int64_t p = 0; p < k; p++)                                            \
                        PW_STEP(VT, L, R, b + p * ti->ldb, p);                                 \
                if (ti->nos == 1) {                                                            \
                    PW_STORE(L, R, m, i0, o, hw, cols);                                        \
                    continue;                                                                  \
                }                                                                              \
                for (int r = 0; r < R && i0 + r < m; r++) {                                    \
                    float u[2 * L];                                                            \
                    memcpy(u, &acc0[r], sizeof acc0[r]);                                       \
                    memcpy(u + L, &acc1[r], sizeof acc1[r]);                                   \
                    for (int s = 0; s < ti->nos; s++)                                          \
                        memcpy(out + ti->off[s] + (i0 + r) * hw, u + ti->lane[s],              \
                               sizeof(float) * (size_t)(ti->lane[s + 1] - ti->lane[s]));       \
                }                                                                              \
            }                                                                                  \
    }                                                                                          \
    static ATTR void pw_fdirect_##SFX(const struct conv *g, const float *a, const float *q,   \
                                      const int64_t *boff, int64_t f0, int64_t nt, int64_t qw, \
                                      const float *bias, float *out)                           \
    {                                                                                          \
        int64_t m = g->oc, k = g->k, hw = g->oh * g->ow, fend = g->oh * qw;                    \
        for (int64_t i0 = 0; i0 < m; i0 += R)                                                  \
            for (int64_t t = 0; t < nt; t++) {                                                 \
                const float *ar[R];                                                            \
                int64_t f = f0 + t * 2 * L;                                                    \
                VT acc0[R], acc1[R];                                                           \
                _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                           \
                    PW_FROW(VT, m, i0, r, a, k, bias);                                         \
                for (int64_t p = 0; p < k; p++)                                                \
                    PW_STEP(VT, L, R, q + boff[p] + f, p);                                     \
                for (int r = 0; r < R && i0 + r < m; r++) {                                    \
                    float t_[2 * L], *o = out + (i0 + r) * hw;                                 \
                    memcpy(t_, &acc0[r], sizeof acc0[r]);                                      \
                    memcpy(t_ + L, &acc1[r], sizeof acc1[r]);                                  \
                    for (int64_t e = 0; e < 2 * L && f + e < fend;) {                          \
                        int64_t y = (f + e) / qw, x = (f + e) % qw, n = g->ow - x;             \
                        if (n <= 0) {                                                          \
                            e += qw - x;                                                       \
                            continue;                                                          \
                        }                                                                      \
                        n = n < 2 * L - e ? n : 2 * L - e;                                     \
                        float *d_ = o + y * g->ow + x; /* n < 32 (ow < 2L): no memcpy call */ \
                        _Pragma("GCC unroll 8") for (int c_ = 16; c_; c_ /= 2)                 \
                            if (n & c_) {                                                      \
                                memcpy(d_, t_ + e, sizeof(float) * (size_t)c_);                \
                                d_ += c_;                                                      \
                                e += c_;                                                       \
                            }                                                                  \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
    }

PW_FKERNEL(v8, v8f, 8, 6, TN_KERNEL_CLONES)
#ifdef PW_HAVE_V16
PW_FKERNEL(v16, v16f, 16, 8, __attribute__((target("arch=x86-64-v4"))))
#endif

struct flat_job {
    const struct conv *g;
    const float *w, *b, *q;
    float *out;
    const int64_t *boff;
    int64_t qw, lanes; /* 2L of the kernel run */
    int64_t sq, np;    /* scratch floats a sample; output positions of the chunk */
    int64_t p0, kc;    /* the taps [p0, p0 + kc) of this pass */
    int rc;
};

/* tasks: runs of FLAT_TILES tiles of 2L output positions of the chunk's
 * samples (position s hw + r: sample s, output r of its plane) */
static void flat_range(int64_t begin, int64_t end, void *ctx)
{
    struct flat_job *j = ctx;
    const struct conv *g = j->g;
    int64_t hw = g->oh * g->ow, l2 = j->lanes, sst[33], ssh[33], tile = (j->kc + 1) * l2;
    const float *a = j->w + j->p0, *bias = j->p0 > 0 ? NULL : j->b;
    bool sub = g->kh * g->kw == 1;
    struct flat_tile tl[FLAT_TILES];
    float *bp = malloc(sizeof(float) * (size_t)(FLAT_TILES * tile));
    if (!bp) {
        j->rc = -1;
        return;
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t jt = t * FLAT_TILES * l2, nt = 0;
        for (int64_t j0 = jt; j0 < jt + FLAT_TILES * l2 && j0 < j->np; j0 += l2, nt++) {
            int64_t cols = j->np - j0 < l2 ? j->np - j0 : l2;
            struct flat_tile *ti = tl + nt;
            int nseg = 0;
            ti->nos = 0;
            /* the tile's runs of one output row each: lane i of segment
             * nseg at scratch offset ssh + i (sample s at s sq) */
            for (int64_t i = 0, len; i < cols; i += len, nseg++) {
                int64_t s = (j0 + i) / hw, r = (j0 + i) % hw, y = r / g->ow, x = r % g->ow;
                len = g->ow - x < cols - i ? g->ow - x : cols - i;
                sst[nseg] = i;
                ssh[nseg] = s * j->sq + y * j->qw + x - i;
                if (i == 0 || r == 0) {
                    ti->lane[ti->nos] = i;
                    ti->off[ti->nos++] = s * g->oc * hw + r;
                }
            }
            ti->lane[ti->nos] = ti->cols = cols;
            ti->b = bp + nt * tile;
            ti->ldb = l2;
            if (sub && ti->nos == 1 && cols == l2) {
                /* a strided 1x1's whole tile in one sample: its patch rows
                 * are runs of the subsampled planes (rows ow = qw), read in
                 * place */
                ti->b = j->q + j->boff[j->p0] + ssh[0];
                ti->ldb = hw;
                continue;
            }
#ifdef PW_HAVE_V16
            if (l2 == 32) {
                pw_fpack_v16(j->q, j->boff + j->p0, j->kc, sst, ssh, nseg, bp + nt * tile);
                continue;
            }
#endif
            pw_fpack_v8(j->q, j->boff + j->p0, j->kc, sst, ssh, nseg, bp + nt * tile);
        }
#ifdef PW_HAVE_V16
        if (l2 == 32) {
            pw_ftask_v16(a, g->oc, g->k, j->kc, nt, tl, bias, j->out, hw, j->p0 > 0);
            continue;
        }
#endif
        pw_ftask_v8(a, g->oc, g->k, j->kc, nt, tl, bias, j->out, hw, j->p0 > 0);
    }
    free(bp);
}

/* tasks of the direct kernel: runs of FLAT_TILES tiles of 2L positions
 * of the padded width (oh rows of qw) of one sample */
static void flat_direct_range(int64_t begin, int64_t end, void *ctx)
{
    const struct flat_job *j = ctx;
    int64_t l2 = j->lanes, fend = j->g->oh * j->qw;
    for (int64_t t = begin; t < end; t++) {
        int64_t f0 = t * FLAT_TILES * l2, left = (fend - f0 + l2 - 1) / l2;
        int64_t nt = left < FLAT_TILES ? left : FLAT_TILES;
#ifdef PW_HAVE_V16
        if (l2 == 32) {
            pw_fdirect_v16(j->g, j->w, j->q, j->boff, f0, nt, j->qw, j->b, j->out);
            continue;
        }
#endif
        pw_fdirect_v8(j->g, j->w, j->q, j->boff, f0, nt, j->qw, j->b, j->out);
    }
}

/* Sample s's channels into the zero-padded scratch q (planes `plane`
 * apart): at stride 1 one plane of rows qw; at stride 2 the four phase
 * planes of rows qw (padded row Y, column X at phase (Y % 2, X % 2), row
 * Y / 2, column X / 2), eh / 2 rows each, so that a stride-2 tap is a
 * contiguous run of its phase plane as a stride-1 tap is of the plane;
 * a strided 1x1 (no padding) only the values it reads, the plane of rows
 * qw = ow of the input subsampled. Every sample of a chunk writes the
 * same places, so a scratch that held one already keeps its zeros (zero
 * false): the flat kernel zeroed its scratch for each sample of a batch
 * (0.7 of 14.7 ms at batch 8, 64 -> 128 channels 56 -> 28 at stride 2). */
static void flat_fill(const struct conv *g, const float *x, float *q, size_t nq, int64_t qw,
                      int64_t eh, int64_t plane, bool zero)
{
    if (g->kh * g->kw == 1) { /* every value of the plane written: only the slack zeroed */
        if (zero)
            memset(q + g->c * plane, 0, sizeof(float) * (nq - (size_t)(g->c * plane)));
        for (int64_t ci = 0; ci < g->c; ci++)
            for (int64_t y = 0; y < g->oh; y++) {
                const float *xr = x + (ci * g->h + y * g->sh) * g->w;
                float *d = q + ci * plane + y * qw;
                for (int64_t i = 0; i < g->ow; i++)
                    d[i] = xr[i * g->sw];
            }
        return;
    }
    if (zero)
        memset(q, 0, sizeof(float) * nq);
    for (int64_t ci = 0; ci < g->c; ci++)
        for (int64_t y = 0; y < g->h; y++) {
            const float *xr = x + (ci * g->h + y) * g->w;
            int64_t Y = y + g->ph;
            if (g->sh == 1) {
                memcpy(q + ci * plane + Y * qw + g->pw, xr, sizeof(float) * (size_t)g->w);
                continue;
            }
            float *r0 = q + ci * plane + ((Y % 2) * 2 * eh + Y / 2) * qw;
            tn__conv_split2(r0, r0 + eh * qw, xr, g->w, g->pw, qw);
        }
}

int tn__conv_flat_f32(const struct conv *g, const float *x, const float *w, const float *b,
                      float *out)
{
    /* rows of qw values, eh of them a plane (a phase plane at stride 2;
     * a strided 1x1's subsampled plane) */
    bool sub = g->kh * g->kw == 1;
    int64_t st = sub ? 1 : g->sh, qw = sub ? g->ow : (g->w + 2 * g->pw + st - 1) / st;
    int64_t eh = sub ? g->oh : (g->h + 2 * g->ph + st - 1) / st;
    int64_t plane = st * st * eh * qw, hw = g->oh * g->ow, sq = g->c * plane;
    int64_t n2 = (g->oh * qw + 31) / 32 * 32, lanes = 16;
#ifdef PW_HAVE_V16
    if (__builtin_cpu_supports("x86-64-v4"))
        lanes = 32;
#endif
    /* samples a chunk: positions tiled across samples where a plane is
     * not whole tiles (7x7, 14x14), as few as leave at most 3% of the
     * batch's lanes empty (a smaller scratch stays in L2: 128 -> 256
     * channels at 14x14 stride 2, batch 8, 2 samples a chunk 0.94-0.97x
     * the time of 8), with the chunk's scratch bounded */
    /* rows narrower than a tile at stride 1, few output channels: the
     * direct kernel, a sample at a time. Packing a tile costs about as
     * much as its product when only a few blocks of channels share it;
     * with many channels the packed tiles across samples win (they waste
     * 2% of the lanes where the direct kernel computes the padded width).
     * bench_ops --conv, 1 thread, thread clock, direct against packed:
     * batch 32 16 -> 32 and 32 -> 16 at 14x14 (the bench CNN's forward and
     * input gradient) 0.87-1.07 and 0.58-0.76, 32 -> 32 at 7x7 0.73-0.88,
     * batch 8 64 -> 64 at 7x7 0.78-1.01; 128 -> 128 at 14x14 0.94-1.36,
     * 512 -> 512 at 7x7 1.15-1.33 */
    bool direct = st == 1 && g->ow < lanes && g->oc <= FLAT_DIRECT_OC;
    int64_t sc = 1, cap = direct ? 1 : FLAT_QMAX / sq;
    for (; sc < g->n && sc < cap; sc++) {
        int64_t tiles = g->n / sc * ((sc * hw + lanes - 1) / lanes) +
                        (g->n % sc * hw + lanes - 1) / lanes;
        if (tiles * lanes * 100 <= 103 * g->n * hw)
            break;
    }
    size_t nq = (size_t)(sc * sq + n2 + g->kh * qw + g->kw + 64);
    float *q = malloc(sizeof(float) * nq);
    int64_t *boff = malloc(sizeof(int64_t) * (size_t)g->k);
    if (!q || !boff) {
        free(q);
        free(boff);
        return tn_set_error(TN_ENOMEM, "convolution: out of memory for its scratch");
    }
    for (int64_t ci = 0; ci < g->c; ci++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++)
                boff[(ci * g->kh + ky) * g->kw + kx] =
                    ci * plane + ((ky % st) * st + kx % st) * eh * qw + ky / st * qw + kx / st;
    /* passes of kc taps: a task's packed tiles (FLAT_TILES kc 2L floats)
     * stay in L2 while each block of output channels passes over them */
    int64_t passes = (g->k * FLAT_TILES * lanes + FLAT_BMAX - 1) / FLAT_BMAX;
    int64_t kc = (g->k + passes - 1) / passes;
    struct flat_job j = {g, w, b, q, NULL, boff, qw, lanes, sq, 0, 0, kc, 0};
    int64_t dtasks = (g->oh * qw + FLAT_TILES * lanes - 1) / (FLAT_TILES * lanes);
    for (int64_t s0 = 0; s0 < g->n && j.rc == 0; s0 += sc) {
        int64_t ns = g->n - s0 < sc ? g->n - s0 : sc;
        for (int64_t s = 0; s < ns; s++)
            flat_fill(g, x + (s0 + s) * g->c * g->h * g->w, q + s * sq, nq - (size_t)(s * sq),
                      qw, eh, plane, s0 == 0 && s == 0);
        j.out = out + s0 * g->oc * hw;
        j.np = ns * hw;
        if (direct) {
            tn_parallel_for(dtasks, 1, flat_direct_range, &j);
            continue;
        }
        int64_t tasks = (j.np + FLAT_TILES * lanes - 1) / (FLAT_TILES * lanes);
        for (j.p0 = 0; j.p0 < g->k; j.p0 += kc) {
            j.kc = g->k - j.p0 < kc ? g->k - j.p0 : kc;
            tn_parallel_for(tasks, 1, flat_range, &j);
        }
    }
    free(q);
    free(boff);
    if (j.rc < 0)
        return tn_set_error(TN_ENOMEM, "convolution: out of memory for its scratch");
    return TN_OK;
}
