/*
 * compile/convbw.c: a compiled program's convolution gradients, float32,
 * 2-D, groups 1, run here instead of through the eager kernel, which
 * handles one sample at a time (bench/compile/train.sh's CNN: 32 small
 * products each):
 * - tn::convolution_backward_weight as matrix products over chunks of
 *   samples: the chunk's patches side by side, a (C kh kw, nb Ho Wo)
 *   matrix, and its output gradient as (OC, nb Ho Wo), dW += gout @
 *   cols^T (beta 1 after the first chunk). A chunk is as many samples as
 *   fit WGRAD_BUDGET bytes (L2-sized: the CNN at 1 thread, fastest of 30:
 *   16 MiB, the whole batch in one product, took 1.29-1.34 ms for its two
 *   weight gradients; 192 KiB, one or two samples a chunk, 1.03-1.05 ms;
 *   the eager kernel 1.19-1.24 ms). At stride 1 without dilation the
 *   patches are taken on the padded width (wgrad_wide): each patch row
 *   is one run of the sample's zero-padded plane, oh (w + 2 pw) values
 *   whose extra columns meet zeros in the output gradient, in place of
 *   oh short rows with their edges (the CNN's im2col fell from about
 *   9% of its step to 5%, perf shares at 1 thread). Other strides and
 *   dilations use a sample's output gradient in place when a chunk is
 *   that one sample.
 * - tn::convolution_backward_input at stride 1 without dilation as the
 *   forward convolution of the output gradient (input_grad).
 * The sums run in another order than the eager engine's, so these
 * gradients are not its bits: they are held to PyTorch's within float32
 * tolerances (tcompile_train_grad.bats), as torch.compile's are.
 */
#include "compile/internal.h"
#include "graph/internal.h"
#include "ops/internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/ops.h>

typedef float v8 __attribute__((vector_size(32)));

#define WGRAD_BUDGET ((int64_t)192 << 10)

struct wgrad {
    int64_t n, c, h, w, oc, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw, dh, dw;
    const float *x, *go;
    float *cols;       /* (k, nb * hw) patches */
    const float *got;  /* (oc, nb * hw) output gradient: a copy, or go's own at nb 1 */
    int64_t s0, nb;    /* the chunk's samples */
    int64_t fw, qw;    /* columns a sample (hw, or oh qw when wide), padded width or 0 */
    float *pad;        /* wide: a zero-padded copy of each sample of the chunk */
    float *out;        /* the weight's gradient, (oc, k) */
    int64_t blocks;    /* of its rows, one product each */
};

/* Rows [b oc / blocks, (b + 1) oc / blocks) of dW (+)= gout @ cols^T for
 * the chunk: each row's sum runs in the same order however the rows are
 * split, so that the result does not depend on the thread count. */
static void wgrad_rows(int64_t begin, int64_t end, void *ctx)
{
    const struct wgrad *q = ctx;
    int64_t k = q->c * q->kh * q->kw, ld = q->nb * q->fw;
    for (int64_t b = begin; b < end; b++) {
        int64_t r0 = b * q->oc / q->blocks, r1 = (b + 1) * q->oc / q->blocks;
        if (r1 > r0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)k, (int)ld,
                        1.0f, q->got + r0 * ld, (int)ld, q->cols, (int)ld, q->s0 ? 1.0f : 0.0f,
                        q->out + r0 * k, (int)k);
    }
}

/* An int list argument of a run node: its items (a SymInt's from the
 * slots), one value spread over both dims; false when absent or not 2. */
static bool pair(const struct tn_graph_node *n, const struct tn__graph_slot *slots,
                 const char *name, int64_t *out)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    if (!a || (a->kind != TN_GARG_INTS && a->kind != TN_GARG_INT) || a->n < 1 || a->n > 2)
        return false;
    for (int k = 0; k < 2; k++) {
        const struct tn_graph_item *it = &a->items[a->n == 1 ? 0 : k];
        out[k] = it->value >= 0 ? slots[it->value].i : it->i;
    }
    return true;
}

/* Sample s0 + j of the chunk at stride 1 without dilation, on the padded
 * width: its channels into its zero-padded plane (the borders zeroed once
 * a call), then each patch row one run of it, oh qw values (the qw - ow
 * last of each output row reach past the row: their output gradient, in
 * got, is 0), and the output gradient into got with those zeros. */
static void wgrad_wide(int64_t begin, int64_t end, void *ctx)
{
    const struct wgrad *q = ctx;
    int64_t hw = q->oh * q->ow, ld = q->nb * q->fw, k = q->c * q->kh * q->kw;
    int64_t plane = (q->h + 2 * q->ph) * q->qw;
    for (int64_t j = begin; j < end; j++) {
        const float *x = q->x + (q->s0 + j) * q->c * q->h * q->w;
        const float *go = q->go + (q->s0 + j) * q->oc * hw;
        float *pad = q->pad + j * (q->c * plane + q->kw);
        for (int64_t c = 0; c < q->c; c++)
            for (int64_t y = 0; y < q->h; y++)
                memcpy(pad + c * plane + (y + q->ph) * q->qw + q->pw, x + (c * q->h + y) * q->w,
                       sizeof(float) * (size_t)q->w);
        for (int64_t p = 0; p < k; p++)
            memcpy(q->cols + p * ld + j * q->fw,
                   pad + p / (q->kh * q->kw) * plane + p / q->kw % q->kh * q->qw + p % q->kw,
                   sizeof(float) * (size_t)q->fw);
        for (int64_t o = 0; o < q->oc; o++)
            for (int64_t y = 0; y < q->oh; y++) {
                float *r = q->cols + (k + o) * ld + j * q->fw + y * q->qw;
                memcpy(r, go + o * hw + y * q->ow, sizeof(float) * (size_t)q->ow);
                memset(r + q->ow, 0, sizeof(float) * (size_t)(q->qw - q->ow));
            }
    }
}

/* Sample s0 + j of the chunk: its patches into columns j hw.. of cols,
 * its output gradient into columns j hw.. of got. */
static void wgrad_sample(int64_t begin, int64_t end, void *ctx)
{
    const struct wgrad *q = ctx;
    int64_t hw = q->oh * q->ow, ld = q->nb * hw;
    for (int64_t j = begin; j < end; j++) {
        const float *x = q->x + (q->s0 + j) * q->c * q->h * q->w;
        const float *go = q->go + (q->s0 + j) * q->oc * hw;
        if (q->nb > 1) /* one sample's (oc, hw) is already the matrix */
            for (int64_t o = 0; o < q->oc; o++)
                memcpy(q->cols + (q->c * q->kh * q->kw + o) * ld + j * hw, go + o * hw,
                       sizeof(float) * (size_t)hw);
        for (int64_t c = 0; c < q->c; c++)
            for (int64_t i = 0; i < q->kh; i++)
                for (int64_t k = 0; k < q->kw; k++) {
                    float *row = q->cols + ((c * q->kh + i) * q->kw + k) * ld + j * hw;
                    int64_t x0 = k * q->dw - q->pw;
                    for (int64_t oy = 0; oy < q->oh; oy++) {
                        int64_t y = oy * q->sh - q->ph + i * q->dh;
                        float *r = row + oy * q->ow;
                        if (y < 0 || y >= q->h) {
                            memset(r, 0, sizeof(float) * (size_t)q->ow);
                            continue;
                        }
                        const float *xr = x + (c * q->h + y) * q->w + x0;
                        int64_t ox = 0;
                        for (; ox < q->ow && x0 + ox * q->sw < 0; ox++)
                            r[ox] = 0.0f;
                        if (q->sw == 1) {
                            int64_t hi = q->w - x0 < q->ow ? q->w - x0 : q->ow;
                            for (; ox + 8 <= hi; ox += 8) { /* short rows: no memcpy call */
                                v8 t;
                                memcpy(&t, xr + ox, sizeof t);
                                memcpy(r + ox, &t, sizeof t);
                            }
                            for (; ox < hi; ox++)
                                r[ox] = xr[ox];
                        } else {
                            for (; ox < q->ow && x0 + ox * q->sw < q->w; ox++)
                                r[ox] = xr[ox * q->sw];
                        }
                        for (; ox < q->ow; ox++)
                            r[ox] = 0.0f;
                    }
                }
    }
}

/* The arguments of convolution_backward_input or _weight node n when
 * this file takes them (float32, 4-D, contiguous activations, groups 1,
 * not transposed): into *q; 1 when not. */
static int conv_args(const struct tn_graph_node *n, const struct tn__graph_slot *slots,
                     struct wgrad *q, const struct tn_tensor **wp,
                     const struct tn_tensor **gop)
{
    int vg = tn__arg_tensor(n, "grad_output"), vx = tn__arg_tensor(n, "input");
    int vw = tn__arg_tensor(n, "weight");
    const struct tn_graph_arg *tr = tn__arg(n, "transposed");
    const struct tn_graph_arg *gr = tn__arg(n, "groups");
    if (n->nout != 1 || n->outs[0] < 0 || vg < 0 || vx < 0 || vw < 0 || !tr ||
        tr->kind != TN_GARG_BOOL || tr->items[0].i || !gr || gr->kind != TN_GARG_INT ||
        gr->items[0].value >= 0 || gr->items[0].i != 1)
        return 1;
    const struct tn_tensor *go = slots[vg].t, *x = slots[vx].t, *w = slots[vw].t;
    int64_t st[2], pd[2], dl[2];
    if (!go || !x || !w || x->ndim != 4 || w->ndim != 4 || go->ndim != 4 ||
        x->dtype != TN_FLOAT32 || w->dtype != TN_FLOAT32 || go->dtype != TN_FLOAT32 ||
        !tn_is_contiguous(x) || !tn_is_contiguous(go) || !pair(n, slots, "stride", st) ||
        !pair(n, slots, "padding", pd) || !pair(n, slots, "dilation", dl))
        return 1;
    *q = (struct wgrad){.n = x->sizes[0], .c = x->sizes[1], .h = x->sizes[2], .w = x->sizes[3],
                        .oc = w->sizes[0], .kh = w->sizes[2], .kw = w->sizes[3],
                        .oh = go->sizes[2], .ow = go->sizes[3], .sh = st[0], .sw = st[1],
                        .ph = pd[0], .pw = pd[1], .dh = dl[0], .dw = dl[1]};
    q->x = tn_data((struct tn_tensor *)x);
    q->go = tn_data((struct tn_tensor *)go);
    *wp = w;
    *gop = go;
    /* the geometry the eager kernel checks (its errors stay its own) */
    if (w->sizes[1] != q->c || go->sizes[0] != q->n || go->sizes[1] != q->oc || q->n < 1 ||
        q->c < 1 || q->kh < 1 || q->kw < 1 || q->oh < 1 || q->ow < 1 || q->oc < 1 ||
        q->sh < 1 || q->sw < 1 || q->dh < 1 || q->dw < 1 || q->ph < 0 || q->pw < 0 ||
        q->oh != (q->h + 2 * q->ph - q->dh * (q->kh - 1) - 1) / q->sh + 1 ||
        q->ow != (q->w + 2 * q->pw - q->dw * (q->kw - 1) - 1) / q->sw + 1)
        return 1;
    return TN_OK;
}

/* The input's gradient of a convolution at stride 1 without dilation is
 * the forward convolution of the output gradient with the weight's
 * channels swapped and its taps reversed, padded by k - 1 - p: the
 * forward kernels (Winograd for 3x3 with 16 channels or more) instead of
 * the eager kernel's per-sample W^T @ gout and col2im. */
static int input_grad(const struct wgrad *q, const struct tn_tensor *w,
                      const struct tn_tensor *go, struct tn_tensor **out)
{
    if (q->sh != 1 || q->sw != 1 || q->dh != 1 || q->dw != 1 || q->ph > q->kh - 1 ||
        q->pw > q->kw - 1)
        return 1;
    int64_t ws[4] = {q->c, q->oc, q->kh, q->kw};
    int64_t one[2] = {1, 1}, pad[2] = {q->kh - 1 - q->ph, q->kw - 1 - q->pw};
    struct tn_tensor *wt = tn_empty(ws, 4, TN_FLOAT32);
    if (!wt)
        return tn_last_status();
    const float *src = tn_data((struct tn_tensor *)w); /* (contiguous: conv_args) */
    float *dst = tn_data(wt);
    int64_t kk = q->kh * q->kw;
    for (int64_t o = 0; o < q->oc; o++)
        for (int64_t c = 0; c < q->c; c++)
            for (int64_t t = 0; t < kk; t++)
                dst[(c * q->oc + o) * kk + kk - 1 - t] = src[(o * q->c + c) * kk + t];
    *out = tn_conv2d(go, wt, NULL, one, 2, pad, 2, one, 2, 1);
    tn_release(wt);
    return *out ? TN_OK : tn_last_status();
}

int tn__exec_conv_bw(const struct tn_graph_node *n, struct tn__graph_slot *slots)
{
    struct wgrad q;
    const struct tn_tensor *w, *go;
    bool weight = !strcmp(n->op->qualname, "tn::convolution_backward_weight");
    if ((!weight && strcmp(n->op->qualname, "tn::convolution_backward_input") != 0) ||
        conv_args(n, slots, &q, &w, &go) != TN_OK || !tn_is_contiguous(w))
        return 1;
    if (!weight)
        return input_grad(&q, w, go, &slots[n->outs[0]].t);
    int64_t k = q.c * q.kh * q.kw, hw = q.oh * q.ow;
    bool wide = q.sh == 1 && q.sw == 1 && q.dh == 1 && q.dw == 1;
    q.qw = wide ? q.w + 2 * q.pw : 0;
    q.fw = wide ? q.oh * q.qw : hw;
    int64_t padn = wide ? q.c * (q.h + 2 * q.ph) * q.qw + q.kw : 0; /* a sample's */
    int64_t per = (k + q.oc) * q.fw + padn; /* a sample's scratch floats */
    int64_t nb = WGRAD_BUDGET / (per * (int64_t)sizeof(float));
    nb = nb < 1 ? 1 : nb > q.n ? q.n : nb;
    struct tn_tensor *gw = tn_empty(w->sizes, 4, TN_FLOAT32);
    int64_t scratch_n = per * nb;
    struct tn_tensor *scratch = gw ? tn_empty(&scratch_n, 1, TN_FLOAT32) : NULL;
    if (!scratch) {
        tn_release(gw);
        return tn_last_status();
    }
    q.cols = tn_data(scratch);
    q.pad = q.cols + (k + q.oc) * q.fw * nb;
    memset(q.pad, 0, sizeof(float) * (size_t)(padn * nb));
    q.out = tn_data(gw);
    q.blocks = tn_get_num_threads() < q.oc ? tn_get_num_threads() : q.oc;
    for (int64_t s0 = 0; s0 < q.n; s0 += nb) {
        q.s0 = s0;
        q.nb = q.n - s0 < nb ? q.n - s0 : nb;
        q.got = q.nb > 1 || wide ? q.cols + k * q.nb * q.fw : q.go + s0 * q.oc * hw;
        tn_parallel_for(q.nb, 1, wide ? wgrad_wide : wgrad_sample, &q);
        tn__blas_parallel_for(q.blocks, 1, wgrad_rows, &q);
    }
    tn_release(scratch);
    slots[n->outs[0]].t = gw;
    return TN_OK;
}
