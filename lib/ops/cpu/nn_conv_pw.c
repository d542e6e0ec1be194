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

/* The kernel for one vector type VT of L floats: blocks of R rows x 2L
 * columns of C held in 2R registers. pw_block_SFX computes rows [i0, i0 +
 * R) (those past m repeat row m - 1 and are not stored) by the 2L columns
 * of panel b (row p at p * ldb, or at boff[p] when boff is not NULL: the
 * NULL of pw_cols is a constant once inlined, its loop tests nothing) into
 * c (ldc), at most `cols` of them; pw_cols_SFX the columns [j0, j1), its
 * last panel, under 2L columns, copied first into a zero-padded k x 2L
 * one; pw_implicit_SFX the grouped kernel's loop (below). */
#define PW_KERNEL(SFX, VT, L, R, ATTR)                                                          \
    static inline __attribute__((always_inline)) void                                          \
    pw_block_##SFX(int64_t m, int64_t k, const float *a, int64_t lda, const float *b,          \
                   int64_t ldb, const int64_t *boff, float *c, int64_t ldc, const float *bias,  \
                   int64_t i0, int64_t cols, bool add)                                          \
    {                                                                                          \
        const float *ar[R];                                                                    \
        VT acc0[R], acc1[R];                                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                                   \
        {                                                                                      \
            int64_t i = i0 + r < m ? i0 + r : m - 1;                                           \
            ar[r] = a + i * lda;                                                               \
            float v = bias ? bias[i] : 0.0f;                                                   \
            acc0[r] = acc1[r] = v - (VT){0};                                                   \
            if (add) {                                                                         \
                memcpy(&acc0[r], c + i * ldc, sizeof acc0[r]);                                 \
                memcpy(&acc1[r], c + i * ldc + L, sizeof acc1[r]);                             \
            }                                                                                  \
        }                                                                                      \
        for (int64_t p = 0; p < k; p++)                                                        \
            PW_STEP(VT, L, R, b + (boff ? boff[p] : p * ldb), p);                              \
        for (int r = 0; r < R && i0 + r < m; r++) {                                            \
            float *cr = c + (i0 + r) * ldc;                                                    \
            if (cols >= 2 * L) {                                                               \
                memcpy(cr, &acc0[r], sizeof acc0[r]);                                          \
                memcpy(cr + L, &acc1[r], sizeof acc1[r]);                                      \
            } else {                                                                           \
                float t[2 * L];                                                                \
                memcpy(t, &acc0[r], sizeof acc0[r]);                                           \
                memcpy(t + L, &acc1[r], sizeof acc1[r]);                                       \
                memcpy(cr, t, sizeof(float) * (size_t)cols);                                   \
            }                                                                                  \
        }                                                                                      \
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
                                   o + y * g->ow + x, hw, bias, i, cols, false);               \
            }                                                                                  \
    }                                                                                          \
    static ATTR void pw_flat_##SFX(int64_t m, int64_t k, const float *a, int64_t lda,          \
                                   const float *q, const int64_t *boff, float *c, int64_t ldc, \
                                   int64_t n, const float *bias, bool add)                     \
    {                                                                                          \
        for (int64_t f = 0; f < n; f += 2 * L)                                                 \
            for (int64_t i = 0; i < m; i += R)                                                 \
                pw_block_##SFX(m, k, a, lda, q + f, 0, boff, c + f, ldc, bias, i, 2 * L, add); \
    }                                                                                          \
    static ATTR void pw_cols_##SFX(int64_t m, int64_t k, const float *a, int64_t lda,          \
                                   const float *b, int64_t ldb, float *c, int64_t ldc,         \
                                   const float *bias, int64_t j0, int64_t j1)                  \
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
            for (int64_t i = 0; i < m; i += R)                                                 \
                pw_block_##SFX(m, k, a, lda, panel, ld, NULL, c + j, ldc, bias, i, cols, false); \
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

/* Columns [j0, j1) of C by the widest kernel this CPU runs. */
static void pw_cols(int64_t m, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, const float *bias, int64_t j0, int64_t j1)
{
#ifdef PW_HAVE_V16
    if (__builtin_cpu_supports("x86-64-v4")) {
        pw_cols_v16(m, k, a, lda, b, ldb, c, ldc, bias, j0, j1);
        return;
    }
#endif
    pw_cols_v8(m, k, a, lda, b, ldb, c, ldc, bias, j0, j1);
}

void tn__gemm_smallk_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias)
{
    if (m > 0 && n > 0)
        pw_cols(m, k, a, lda, b, ldb, c, ldc, bias, 0, n);
}

/* Strided 1x1 convolutions (resnet's downsamples) gather each task's 64
 * input positions into a panel (pw_gather) instead of an im2col of the
 * sample plus OpenBLAS: at batch 8, 1 thread, thread CPU time, best of 8
 * interleaved runs on a loaded machine, 64 -> 128 channels 56 -> 28 at
 * stride 2 1.95 -> 1.45 ms, 128 -> 256 1.60 -> 1.49; 256 -> 512 was
 * slower (1.60 -> 1.71: every 16-column panel streams the 512 KiB weight
 * from beyond L2), so weights over 256 KiB stay with im2col. */
bool tn__conv_pw_fits(const struct conv *g)
{
    return g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0 && g->cg <= TN_GEMM_SMALLK_MAX &&
           ((g->sh == 1 && g->sw == 1) || g->ocg * g->cg <= 65536);
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
            pw_cols(g->ocg, g->cg, wg, g->cg, panel, PW_RUN, o + j0, hw, bg, 0, j1 - j0);
        } else {
            pw_cols(g->ocg, g->cg, wg, g->cg, x, hw, o, hw, bg, j0, j1);
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
 * 2 pw, and the output computed on that padded width, oh x qw values an
 * output channel laid flat (the qw - ow values at each row's end are
 * computed and dropped), so that the tap (c, ky, kx) of flat output f is
 * the scratch at f + c plane + ky qw + kx: 2L contiguous values whatever
 * the row length (the grouped kernel's row blocks would waste half their
 * lanes on 14-wide rows). The patch, c kh kw values, is cut into chunks
 * of up to TN_GEMM_SMALLK_MAX that add into the output blocks in turn;
 * tasks are runs of 64 output channels. im2col with OpenBLAS: resnet18's
 * 512-channel 7x7 and 256-channel 14x14 3x3s took 0.85-0.95x PyTorch's
 * time. Outputs over 1 Mi values on the padded width (3 -> 64 channels
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
 * over a gathered panel (tn__conv_pw_fits) or im2col. */
bool tn__conv_flat_fits(const struct conv *g)
{
    int64_t s = g->sh, taps = g->kh * g->kw, qw = (g->w + 2 * g->pw + s - 1) / s;
    return g->groups == 1 && g->sh == g->sw && s <= 2 && g->dh == 1 && g->dw == 1 &&
           taps > 1 && taps <= TN_GEMM_SMALLK_MAX && g->oc * g->oh * qw <= ((int64_t)1 << 20);
}

#define FLAT_ROWS 64

struct flat_job {
    const struct conv *g;
    const float *w, *b, *q;
    float *c;
    const int64_t *boff;
    int64_t plane, n2, cc;
};

static void flat_range(int64_t begin, int64_t end, void *ctx)
{
    const struct flat_job *j = ctx;
    const struct conv *g = j->g;
    int64_t taps = g->kh * g->kw;
    for (int64_t t = begin; t < end; t++) {
        int64_t o0 = t * FLAT_ROWS, m = g->oc - o0 < FLAT_ROWS ? g->oc - o0 : FLAT_ROWS;
        for (int64_t c0 = 0; c0 < g->c; c0 += j->cc) {
            int64_t cn = g->c - c0 < j->cc ? g->c - c0 : j->cc;
            const float *a = j->w + o0 * g->k + c0 * taps, *q = j->q + c0 * j->plane;
            const float *b = c0 == 0 && j->b ? j->b + o0 : NULL;
            float *c = j->c + o0 * j->n2;
#ifdef PW_HAVE_V16
            if (__builtin_cpu_supports("x86-64-v4")) {
                pw_flat_v16(m, cn * taps, a, g->k, q, j->boff, c, j->n2, j->n2, b, c0 > 0);
                continue;
            }
#endif
            pw_flat_v8(m, cn * taps, a, g->k, q, j->boff, c, j->n2, j->n2, b, c0 > 0);
        }
    }
}

/* Sample s's channels into the zero-padded scratch q (planes `plane`
 * apart): at stride 1 one plane of rows qw; at stride 2 the four phase
 * planes of rows qw (padded row Y, column X at phase (Y % 2, X % 2), row
 * Y / 2, column X / 2), eh / 2 rows each, so that a stride-2 tap is a
 * contiguous run of its phase plane as a stride-1 tap is of the plane.
 * Every sample writes the same places, so a scratch that held one
 * already keeps its zeros (zero false): the flat kernel zeroed its
 * scratch for each sample of a batch (0.7 of 14.7 ms at batch 8, 64 ->
 * 128 channels 56 -> 28 at stride 2). */
static void flat_fill(const struct conv *g, const float *x, float *q, size_t nq, int64_t qw,
                      int64_t eh, int64_t plane, bool zero)
{
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
    /* rows of qw values, eh of them a plane (a phase plane at stride 2) */
    int64_t st = g->sh, qw = (g->w + 2 * g->pw + st - 1) / st, eh = (g->h + 2 * g->ph + st - 1) / st;
    int64_t plane = st * st * eh * qw, taps = g->kh * g->kw;
    int64_t n = g->oh * qw, n2 = (n + 31) / 32 * 32;
    int64_t cc = TN_GEMM_SMALLK_MAX / taps, boff[TN_GEMM_SMALLK_MAX];
    size_t nq = (size_t)(g->c * plane + n2 + g->kh * qw + g->kw + 64);
    float *q = malloc(sizeof(float) * nq), *c = malloc(sizeof(float) * (size_t)(g->oc * n2));
    if (!q || !c) {
        free(q);
        free(c);
        return tn_set_error(TN_ENOMEM, "convolution: out of memory for its scratch");
    }
    for (int64_t ci = 0; ci < cc; ci++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++)
                boff[(ci * g->kh + ky) * g->kw + kx] =
                    ci * plane + ((ky % st) * st + kx % st) * eh * qw + ky / st * qw + kx / st;
    struct flat_job j = {g, w, b, q, c, boff, plane, n2, cc};
    for (int64_t s = 0; s < g->n; s++) {
        flat_fill(g, x + s * g->c * g->h * g->w, q, nq, qw, eh, plane, s == 0);
        tn_parallel_for((g->oc + FLAT_ROWS - 1) / FLAT_ROWS, 1, flat_range, &j);
        for (int64_t o = 0; o < g->oc; o++)
            for (int64_t y = 0; y < g->oh; y++)
                memcpy(out + ((s * g->oc + o) * g->oh + y) * g->ow, c + o * n2 + y * qw,
                       sizeof(float) * (size_t)g->ow);
    }
    free(q);
    free(c);
    return TN_OK;
}

/* ------------------------- groups 1, output channels in the vector lanes
 * The flat kernel puts output positions in the vector lanes and computes
 * each sample's rows on the padded width in blocks of 2L: on small planes
 * much of that is dropped (512 channels at 7x7: 49 of 64 columns kept,
 * 256 at 14x14 196 of 224, a stride-2 3x3 to 7x7 49 of 64), and at batch 8
 * resnet18's 7x7 and 14x14 layers took 1.1-1.4x PyTorch's time. Here the
 * lanes hold 2L output channels and a block's R rows are R output
 * positions, taken in turn over the whole batch (rows of one block may lie
 * in two samples), so that only the batch's last block has spare rows:
 * the block reads the weight transposed (K x oc, zero-padded to 32
 * channels) as its panel and broadcasts the input, each sample copied
 * into the flat kernel's padded (phase-split at stride 2) scratch, where
 * tap p of the position whose window starts at offset f is f + aoff[p].
 * The result, positions x channels, is transposed into the output. Costs
 * a transposed copy of the weight (panels of 32 channels, K x 32 each) a
 * call, and its blocks are slower than the flat kernel's (the panel
 * streams from L2 where the flat kernel's taps stay in L1), so it runs
 * where the flat kernel would drop over a fifth of its columns, from
 * batch 4: bench/ops/resnet18_conv.sh at batch 8, 1 thread, thread CPU
 * time, 512 channels at 7x7 22.2-22.5 -> 20.2-20.5 ms, 256 -> 512 3x3
 * stride 2 11.4-11.5 -> 10.4-11.0 (256 at 14x14, 196 of 224 kept, was
 * slower here: 19.7 -> 21.4). */
#define PW_TKERNEL(SFX, VT, L, R, ATTR)                                                        \
    static ATTR void pw_trows_##SFX(const float *const *ar, int64_t k, const int64_t *aoff,    \
                                    const float *b, const float *bias, float *c,               \
                                    int64_t ldc, int64_t rows)                                 \
    {                                                                                          \
        VT acc0[R], acc1[R], b0, b1;                                                           \
        memcpy(&b0, bias, sizeof b0);                                                          \
        memcpy(&b1, bias + L, sizeof b1);                                                      \
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                                   \
        {                                                                                      \
            acc0[r] = b0;                                                                      \
            acc1[r] = b1;                                                                      \
        }                                                                                      \
        for (int64_t p = 0; p < k; p++)                                                        \
            PW_STEP(VT, L, R, b + p * 32, aoff[p]);                                            \
        for (int r = 0; r < R && r < rows; r++) {                                              \
            memcpy(c + r * ldc, &acc0[r], sizeof acc0[r]);                                     \
            memcpy(c + r * ldc + L, &acc1[r], sizeof acc1[r]);                                 \
        }                                                                                      \
    }

PW_TKERNEL(v8, v8f, 8, 6, TN_KERNEL_CLONES)
#ifdef PW_HAVE_V16
PW_TKERNEL(v16, v16f, 16, 8, __attribute__((target("arch=x86-64-v4"))))
#endif

bool tn__conv_tflat_fits(const struct conv *g)
{
    int64_t s = g->sh, qw = (g->w + 2 * g->pw + s - 1) / s, hw = g->oh * g->ow;
    return tn__conv_flat_fits(g) && g->n >= 4 &&
           (double)hw / (double)((g->oh * qw + 31) / 32 * 32) < 0.8;
}

struct tflat_job {
    const struct conv *g;
    const float *q, *wt, *bias;
    const int64_t *aoff;
    float *c;
    int64_t nq, qw, ocp, blocks;
    int rows; /* R of the kernel run */
};

/* tasks: (32 output channels, run of TFLAT_RUN blocks of rows) */
#define TFLAT_RUN 16

static void tflat_range(int64_t begin, int64_t end, void *ctx)
{
    const struct tflat_job *j = ctx;
    const struct conv *g = j->g;
    int64_t hw = g->oh * g->ow, m = g->n * hw, runs = (j->blocks + TFLAT_RUN - 1) / TFLAT_RUN;
    const float *ar[16];
    for (int64_t t = begin; t < end; t++) {
        int64_t o0 = t / runs * 32, b0 = t % runs * TFLAT_RUN;
        int64_t b1 = b0 + TFLAT_RUN < j->blocks ? b0 + TFLAT_RUN : j->blocks;
        for (int64_t blk = b0; blk < b1; blk++) {
            int64_t i0 = blk * j->rows;
            for (int r = 0; r < j->rows; r++) {
                int64_t i = i0 + r < m ? i0 + r : m - 1, s = i / hw, oy = i % hw / g->ow;
                ar[r] = j->q + s * j->nq + oy * j->qw + i % hw % g->ow;
            }
            const float *wt = j->wt + o0 * g->k, *bias = j->bias + o0;
            float *c = j->c + i0 * j->ocp + o0;
#ifdef PW_HAVE_V16
            if (j->rows == 8) {
                pw_trows_v16(ar, g->k, j->aoff, wt, bias, c, j->ocp, m - i0);
                continue;
            }
#endif
            for (int h = 0; h < 32; h += 16) /* (8-float vectors: 16 channels a block) */
                pw_trows_v8(ar, g->k, j->aoff, wt + h, bias + h, c + h, j->ocp, m - i0);
        }
    }
}

int tn__conv_tflat_f32(const struct conv *g, const float *x, const float *w, const float *b,
                       float *out)
{
    int64_t st = g->sh, qw = (g->w + 2 * g->pw + st - 1) / st, eh = (g->h + 2 * g->ph + st - 1) / st;
    int64_t plane = st * st * eh * qw, hw = g->oh * g->ow, m = g->n * hw;
    int64_t ocp = (g->oc + 31) / 32 * 32, nq = g->c * plane + g->kh * qw + g->kw + 64;
    int rows = 6;
#ifdef PW_HAVE_V16
    if (__builtin_cpu_supports("x86-64-v4"))
        rows = 8;
#endif
    float *q = malloc(sizeof(float) * (size_t)(g->n * nq));
    float *wt = malloc(sizeof(float) * (size_t)(g->k * ocp + ocp));
    float *c = malloc(sizeof(float) * (size_t)((m + rows) * ocp));
    int64_t *aoff = malloc(sizeof(int64_t) * (size_t)g->k);
    if (!q || !wt || !c || !aoff) {
        free(q);
        free(wt);
        free(c);
        free(aoff);
        return tn_set_error(TN_ENOMEM, "convolution: out of memory for its scratch");
    }
    float *bias = wt + g->k * ocp;
    memset(wt, 0, sizeof(float) * (size_t)(g->k * ocp + ocp));
    for (int64_t o = 0; o < g->oc; o++)
        bias[o] = b ? b[o] : 0.0f;
    for (int64_t o = 0; o < g->oc; o++) /* (a panel's K x 32 values stay in L2) */
        for (int64_t p = 0; p < g->k; p++)
            wt[(o / 32 * g->k + p) * 32 + o % 32] = w[o * g->k + p];
    for (int64_t ci = 0; ci < g->c; ci++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++)
                aoff[(ci * g->kh + ky) * g->kw + kx] =
                    ci * plane + ((ky % st) * st + kx % st) * eh * qw + ky / st * qw + kx / st;
    for (int64_t s = 0; s < g->n; s++)
        flat_fill(g, x + s * g->c * g->h * g->w, q + s * nq, (size_t)nq, qw, eh, plane, true);
    struct tflat_job j = {g, q, wt, bias, aoff, c, nq, qw, ocp, (m + rows - 1) / rows, rows};
    int64_t runs = (j.blocks + TFLAT_RUN - 1) / TFLAT_RUN;
    tn_parallel_for(ocp / 32 * runs, 1, tflat_range, &j);
    for (int64_t s = 0; s < g->n; s++)
        for (int64_t o0 = 0; o0 < g->oc; o0 += 32)
            for (int64_t i0 = 0; i0 < hw; i0 += 32)
                for (int64_t o = o0; o < o0 + 32 && o < g->oc; o++)
                    for (int64_t i = i0; i < i0 + 32 && i < hw; i++)
                        out[(s * g->oc + o) * hw + i] = c[(s * hw + i) * ocp + o];
    free(q);
    free(wt);
    free(c);
    free(aoff);
    return TN_OK;
}
