/*
 * ops/cpu/nn_pool.c: CPU kernels of 2-D pooling over (N, C, H, W) or
 * (C, H, W): max_pool2d_with_indices (NaN wins, as in PyTorch; indices are
 * h * W + w in each plane), avg_pool2d (count_include_pad,
 * divisor_override, ceil_mode), _adaptive_avg_pool2d,
 * adaptive_max_pool2d, and their backward ops. The max pools compute
 * float32 in float32; the rest in float64, rounded into the input's dtype.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"
#include "ops/cpu/kernel.h"
#include "ops/cpu/nn_conv.h"

struct pool {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/* The 2-D geometry of a max (dilation dl) or average (divisor_override)
 * pool, checked by tn__pool_check (lib/ops/nn.c) in PyTorch's order and
 * words: 0, or a negative status with the error set. */
static int pool_geometry(enum tn__pool_kind kind, const struct tn_tensor *self, const int64_t *ks,
                         int ks_len, const int64_t *st, int st_len, const int64_t *pd, int pd_len,
                         const int64_t *dl, int dl_len, bool ceil_mode,
                         const int64_t *divisor_override, struct pool *g)
{
    struct tn__pool q;
    int rc = tn__pool_check(kind, self, ks, ks_len, st, st_len, pd, pd_len, dl, dl_len,
                            ceil_mode, divisor_override, &q);
    if (rc < 0)
        return rc;
    *g = (struct pool){.h = q.in[0], .w = q.in[1], .oh = q.out[0], .ow = q.out[1],
                       .kh = q.k[0], .kw = q.k[1], .sh = q.s[0], .sw = q.s[1],
                       .ph = q.p[0], .pw = q.p[1], .dh = q.d[0], .dw = q.d[1]};
    g->planes = g->h * g->w > 0 ? tn_numel(self) / (g->h * g->w) : 0;
    return TN_OK;
}

/* self's shape with the last two dims oh, ow */
static void out_shape(const struct tn_tensor *self, const struct pool *g, int64_t *s)
{
    memcpy(s, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    s[self->ndim - 2] = g->oh;
    s[self->ndim - 1] = g->ow;
}

/* The max pool of planes [begin, end) in T (float32 and float64 compute in
 * their own type: a max rounds nothing). */
struct maxpool_job {
    const struct pool *g;
    const void *x;
    void *y;
    int64_t *ix;
};

/* mask (all ones or zero) ? a : b, without a branch */
#define TN_PICK(SFX, T, U)                                                                     \
    static inline T pick_##SFX(int64_t mask, T a, T b)                                         \
    {                                                                                          \
        U ua, ub, m = (U)mask;                                                                 \
        memcpy(&ua, &a, sizeof a);                                                             \
        memcpy(&ub, &b, sizeof b);                                                             \
        ua = (ua & m) | (ub & ~m);                                                             \
        memcpy(&a, &ua, sizeof a);                                                             \
        return a;                                                                              \
    }
TN_PICK(f32, float, uint32_t)
TN_PICK(f64, double, uint64_t)

#define TN_MAXPOOL(SFX, T)                                                                     \
    static void maxpool_##SFX(int64_t begin, int64_t end, void *ctx)                           \
    {                                                                                          \
        const struct maxpool_job *j = ctx;                                                     \
        const struct pool *g = j->g;                                                           \
        const T *xp = j->x;                                                                    \
        T *yp = j->y;                                                                          \
        for (int64_t p = begin; p < end; p++)                                                  \
            for (int64_t oy = 0; oy < g->oh; oy++)                                             \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                       \
                    T best = -INFINITY;                                                        \
                    int64_t at = -1;                                                           \
                    for (int64_t i = 0; i < g->kh; i++) {                                      \
                        int64_t yy = oy * g->sh - g->ph + i * g->dh;                           \
                        if (yy < 0 || yy >= g->h)                                              \
                            continue;                                                          \
                        for (int64_t k = 0; k < g->kw; k++) {                                  \
                            int64_t xx = ox * g->sw - g->pw + k * g->dw;                       \
                            if (xx < 0 || xx >= g->w)                                          \
                                continue;                                                      \
                            /* a NaN wins (the last, as in PyTorch); selects, not              \
                             * branches: which element wins is a coin toss on real data */     \
                            T v = xp[(p * g->h + yy) * g->w + xx];                             \
                            int64_t take = -(int64_t)((at < 0) | (v > best) | (v != v));       \
                            best = pick_##SFX(take, v, best);                                  \
                            at = (take & (yy * g->w + xx)) | (~take & at);                     \
                        }                                                                      \
                    }                                                                          \
                    yp[(p * g->oh + oy) * g->ow + ox] = best;                                  \
                    j->ix[(p * g->oh + oy) * g->ow + ox] = at;                                 \
                }                                                                              \
    }
TN_MAXPOOL(f32, float)
TN_MAXPOOL(f64, double)

/* The same where every window lies inside its plane (no padding, dilation
 * 1, no ceil_mode overhang): no bounds checks, and the first element
 * starts the scan. */
#define TN_MAXPOOL_INSIDE(SFX, T)                                                              \
    static void maxpool_inside_##SFX(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                          \
        const struct maxpool_job *j = ctx;                                                     \
        const struct pool *g = j->g;                                                           \
        const int64_t w = g->w, kh = g->kh, kw = g->kw, ow = g->ow, sw = g->sw;                \
        for (int64_t p = begin; p < end; p++)                                                  \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                           \
                const T *x = (const T *)j->x + p * g->h * w;                                   \
                T *y = (T *)j->y + (p * g->oh + oy) * ow;                                      \
                int64_t *ix = j->ix + (p * g->oh + oy) * ow, y0 = oy * g->sh;                  \
                for (int64_t ox = 0; ox < ow; ox++) {                                          \
                    int64_t at = y0 * w + ox * sw;                                             \
                    T best = x[at];                                                            \
                    for (int64_t i = 0; i < kh; i++)                                           \
                        for (int64_t k = 0; k < kw; k++) {                                     \
                            int64_t o = (y0 + i) * w + ox * sw + k;                            \
                            T v = x[o];                                                        \
                            int64_t take = -(int64_t)((v > best) | (v != v));                  \
                            best = pick_##SFX(take, v, best);                                  \
                            at = (take & o) | (~take & at);                                    \
                        }                                                                      \
                    y[ox] = best;                                                              \
                    ix[ox] = at;                                                               \
                }                                                                              \
            }                                                                                  \
    }
TN_MAXPOOL_INSIDE(f32, float)
TN_MAXPOOL_INSIDE(f64, double)

#ifdef __SSE2__
#include <emmintrin.h>

/* Four outputs of maxpool_inside_f32 for windows two wide at stride 2:
 * window row i's 8 inputs at src + i * ld split into the left (even) and
 * right (odd) columns, scanned in the scalar order with the same take rule.
 * at0 holds the plane indices of the four windows' first elements. */
static inline void max4_f32(const float *src, int64_t ld, int64_t kh, int64_t w, __m128i at0,
                            __m128 *best, __m128i *at)
{
    for (int64_t i = 0; i < kh; i++) {
        __m128 a = _mm_loadu_ps(src + i * ld), b = _mm_loadu_ps(src + i * ld + 4);
        __m128 v[2] = {_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))};
        __m128i o = _mm_add_epi32(at0, _mm_set1_epi32((int)(i * w)));
        for (int k = 0; k < 2; k++) {
            __m128 take = _mm_or_ps(_mm_cmpgt_ps(v[k], *best), _mm_cmpunord_ps(v[k], v[k]));
            if (i == 0 && k == 0)
                take = _mm_castsi128_ps(_mm_set1_epi32(-1));
            __m128i t = _mm_castps_si128(take), ok = _mm_add_epi32(o, _mm_set1_epi32(k));
            *best = _mm_or_ps(_mm_and_ps(take, v[k]), _mm_andnot_ps(take, *best));
            *at = _mm_or_si128(_mm_and_si128(t, ok), _mm_andnot_si128(t, *at));
        }
    }
}

/* maxpool_inside_f32 for windows two wide at stride 2 and at most 8 high
 * (MaxPool2d(2)), four outputs at a time; a row's last one to three, when
 * the row has four or more, as the last four again (the same values and
 * indices written twice: the copied-window path below took about half
 * the time of rows 14 or 7 wide, bench/compile/train.sh's CNN), else
 * from a copy of their windows. Indices in int32: planes under 2^31. */
static void maxpool2w_f32(int64_t begin, int64_t end, void *ctx)
{
    const struct maxpool_job *j = ctx;
    const struct pool *g = j->g;
    const int64_t w = g->w, ow = g->ow, kh = g->kh;
    for (int64_t p = begin; p < end; p++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const float *x = (const float *)j->x + (p * g->h + oy * g->sh) * w;
            float *y = (float *)j->y + (p * g->oh + oy) * ow;
            int64_t *ix = j->ix + (p * g->oh + oy) * ow;
            for (int64_t ox = 0; ox < ow; ox += 4) {
                __m128 best = _mm_setzero_ps();
                __m128i at = _mm_setzero_si128();
                __m128i at0 = _mm_add_epi32(_mm_set1_epi32((int)(oy * g->sh * w + 2 * ox)),
                                            _mm_setr_epi32(0, 2, 4, 6));
                int64_t n = ow - ox < 4 ? ow - ox : 4;
                if (n < 4 && ow >= 4) {
                    ox = ow - 4;
                    n = 4;
                    at0 = _mm_add_epi32(_mm_set1_epi32((int)(oy * g->sh * w + 2 * ox)),
                                        _mm_setr_epi32(0, 2, 4, 6));
                }
                if (n == 4) {
                    max4_f32(x + 2 * ox, w, kh, w, at0, &best, &at);
                    _mm_storeu_ps(y + ox, best);
                    _mm_storeu_si128((__m128i *)(void *)(ix + ox), _mm_unpacklo_epi32(at, _mm_setzero_si128()));
                    _mm_storeu_si128((__m128i *)(void *)(ix + ox + 2),
                                     _mm_unpackhi_epi32(at, _mm_setzero_si128()));
                    continue;
                }
                float tail[8 * 8], yv[4];
                int32_t iv[4];
                for (int64_t i = 0; i < kh; i++) {
                    memcpy(tail + 8 * i, x + i * w + 2 * ox, sizeof(float) * (size_t)(2 * n));
                    memset(tail + 8 * i + 2 * n, 0, sizeof(float) * (size_t)(8 - 2 * n));
                }
                max4_f32(tail, 8, kh, w, at0, &best, &at);
                _mm_storeu_ps(yv, best);
                _mm_storeu_si128((__m128i *)(void *)iv, at);
                for (int64_t i = 0; i < n; i++) {
                    y[ox + i] = yv[i];
                    ix[ox + i] = iv[i];
                }
            }
        }
}
#endif

/* Runs the max pool kernel of self's dtype (fn32 for float32 in float32,
 * fn64 for the rest in float64, planes on the thread pool, `per`
 * comparisons a plane) into new values and int64 indices of self's shape
 * with the last two dims g->oh, g->ow. */
static int maxpool_run(const struct tn_tensor *self, const struct pool *g, tn_range_fn fn32,
                       tn_range_fn fn64, int64_t per, struct tn_tensor **result0,
                       struct tn_tensor **result1)
{
    int64_t os[4];
    out_shape(self, g, os);
    bool f32 = self->dtype == TN_FLOAT32;
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    struct tn_tensor *x = tn__nn_as(self, ct), *y = tn_empty(os, self->ndim, ct);
    struct tn_tensor *ix = tn_empty(os, self->ndim, TN_INT64);
    if (!x || !y || !ix)
        return tn__nn_drop(tn_last_status(), x, y, ix, NULL);
    struct maxpool_job j = {g, tn_data(x), tn_data(y), tn_data(ix)};
    tn_parallel_for(g->planes, tn__grain_of(per), f32 ? fn32 : fn64, &j);
    tn_release(x);
    *result0 = tn__nn_to(y, self->dtype);
    *result1 = ix;
    if (!*result0) {
        tn_release(ix);
        *result1 = NULL;
        return tn_last_status();
    }
    return TN_OK;
}

int tn__cpu_max_pool2d_with_indices(tn_keyset ks, const struct tn_tensor *self,
                                    const int64_t *kernel_size, int kernel_size_len,
                                    const int64_t *stride, int stride_len, const int64_t *padding,
                                    int padding_len, const int64_t *dilation, int dilation_len,
                                    bool ceil_mode, struct tn_tensor **result0,
                                    struct tn_tensor **result1)
{
    struct pool g; /* (integers too, as 2.x: 1.13 refuses them) */
    int rc = pool_geometry(TN_POOL_MAX2D, self, kernel_size, kernel_size_len, stride, stride_len,
                           padding, padding_len, dilation, dilation_len, ceil_mode, NULL, &g);
    if (rc == TN_OK)
        rc = tn__nn_check_dtype("max_pool2d", self->dtype,
                                self->dtype != TN_BOOL && !tn_dtype_is_complex(self->dtype));
    if (rc < 0)
        return rc;
    bool inside = !g.ph && !g.pw && g.dh == 1 && g.dw == 1 && (g.oh - 1) * g.sh + g.kh <= g.h &&
                  (g.ow - 1) * g.sw + g.kw <= g.w;
    tn_range_fn fn32 = inside ? maxpool_inside_f32 : maxpool_f32;
#ifdef __SSE2__
    if (inside && g.kw == 2 && g.sw == 2 && g.kh <= 8 && g.h * g.w < INT32_MAX)
        fn32 = maxpool2w_f32;
#endif
    rc = maxpool_run(self, &g, fn32, inside ? maxpool_inside_f64 : maxpool_f64,
                     g.oh * g.ow * g.kh * g.kw, result0, result1);
    /* PyTorch's max_pool2d_with_indices_out_cpu: self's suggest_memory_format */
    return tn__channels_last_outs(rc, tn__strides_like_channels_last(self, 4), result0, result1,
                                  NULL);
}

/* ------------------------------------------- max_pool2d without indices
 * max_pool2d's values alone (no autograd to record, float32, dilation 1):
 * the max is separable, so each input row is first reduced across its
 * windows' kw columns (for stride 2 from the row split into its even and
 * odd columns, so that every tap is a contiguous run), then kh of those
 * rows into an output row; both passes are vectorised and no index is
 * computed. The padding is -inf; NaN wins as in PyTorch. resnet18's
 * 3x3/2 pool took as long as PyTorch's (11.6% of the model) through the
 * kernel with indices (issue 27). */
struct maxv_job {
    const struct pool *g;
    const float *x;
    float *y, *scratch;
    int64_t ranges, per, wp; /* scratch floats per range, padded row length */
};

#define MAXV(a, v) ((v) > (a) || (v) != (v) ? (v) : (a))

/* row xr (w values) reduced across each output column's window into t */
static TN_KERNEL_CLONES void maxv_row(const struct maxv_job *j, const float *xr, float *pad,
                                      float *t)
{
    const struct pool *g = j->g;
    int64_t wp = j->wp, half = wp / 2;
    for (int64_t i = 0; i < wp; i++)
        pad[i] = -INFINITY;
    if (g->sw == 2) {
        float *e = pad + wp, *o = e + half;
        for (int64_t i = 0; i < 2 * half; i++)
            e[i] = -INFINITY;
        tn__conv_split2(e, o, xr, g->w, g->pw, half);
        for (int64_t ox = 0; ox < g->ow; ox++)
            t[ox] = e[ox];
        for (int64_t k = 1; k < g->kw; k++) {
            const float *src = (k % 2 ? o : e) + k / 2;
            TN_IVDEP
            for (int64_t ox = 0; ox < g->ow; ox++)
                t[ox] = MAXV(t[ox], src[ox]);
        }
        return;
    }
    memcpy(pad + g->pw, xr, sizeof(float) * (size_t)g->w);
    for (int64_t ox = 0; ox < g->ow; ox++)
        t[ox] = pad[ox * g->sw];
    for (int64_t k = 1; k < g->kw; k++) {
        const float *src = pad + k;
        if (g->sw == 1) {
            TN_IVDEP
            for (int64_t ox = 0; ox < g->ow; ox++)
                t[ox] = MAXV(t[ox], src[ox]);
        } else {
            for (int64_t ox = 0; ox < g->ow; ox++)
                t[ox] = MAXV(t[ox], src[ox * g->sw]);
        }
    }
}

/* ranges [begin, end): range r is planes [r P / R, (r + 1) P / R) */
static TN_KERNEL_CLONES void maxv_range(int64_t begin, int64_t end, void *ctx)
{
    const struct maxv_job *j = ctx;
    const struct pool *g = j->g;
    for (int64_t r = begin; r < end; r++) {
        float *pad = j->scratch + r * j->per, *rows = pad + 2 * j->wp;
        for (int64_t p = r * g->planes / j->ranges; p < (r + 1) * g->planes / j->ranges; p++) {
            const float *xp = j->x + p * g->h * g->w;
            for (int64_t y = 0; y < g->h; y++)
                maxv_row(j, xp + y * g->w, pad, rows + y * g->ow);
            for (int64_t oy = 0; oy < g->oh; oy++) {
                float *yr = j->y + (p * g->oh + oy) * g->ow;
                for (int64_t ox = 0; ox < g->ow; ox++)
                    yr[ox] = -INFINITY;
                for (int64_t i = 0; i < g->kh; i++) {
                    int64_t y = oy * g->sh - g->ph + i;
                    if (y < 0 || y >= g->h)
                        continue;
                    const float *t = rows + y * g->ow;
                    TN_IVDEP
                    for (int64_t ox = 0; ox < g->ow; ox++)
                        yr[ox] = MAXV(yr[ox], t[ox]);
                }
            }
        }
    }
}

struct tn_tensor *tn__cpu_max_pool2d_values(const struct tn_tensor *self,
                                            const int64_t *kernel_size, int kernel_size_len,
                                            const int64_t *stride, int stride_len,
                                            const int64_t *padding, int padding_len,
                                            const int64_t *dilation, int dilation_len,
                                            bool ceil_mode, bool *handled)
{
    struct pool g;
    *handled = false;
    if (self->dtype != TN_FLOAT32 || self->device.type != TN_DEVICE_CPU ||
        pool_geometry(TN_POOL_MAX2D, self, kernel_size, kernel_size_len, stride, stride_len,
                      padding, padding_len, dilation, dilation_len, ceil_mode, NULL, &g) < 0 ||
        g.dh != 1 || g.dw != 1 || g.planes == 0)
        return NULL; /* the kernel with indices answers, errors included */
#ifdef __SSE2__
    /* MaxPool2d(2) on small planes: maxpool2w_f32, indices and all, took a
     * quarter of this path's time (its per-row set-up dominates rows of 14
     * or 28: 0.9 ms against 0.2 ms for 32x16x28x28 in bench/compile/train.sh's
     * CNN); the same taps in the same order, so the same values and NaNs */
    if (!g.ph && !g.pw && (g.oh - 1) * g.sh + g.kh <= g.h && (g.ow - 1) * g.sw + g.kw <= g.w &&
        g.kw == 2 && g.sw == 2 && g.kh <= 8 && g.h * g.w < INT32_MAX && g.w <= 64)
        return NULL;
#endif
    *handled = true;
    int64_t os[4], t = tn_get_num_threads();
    out_shape(self, &g, os);
    struct maxv_job j = {&g, NULL, NULL, NULL, 1, 0, 0};
    /* every column any window reads, padding and ceil_mode's overhang
     * included, rounded to even for the stride-2 halves, and 16 spare */
    int64_t need = (g.ow - 1) * g.sw + g.kw, wide = g.w + 2 * g.pw;
    j.wp = ((need > wide ? need : wide) + 1) / 2 * 2 + 16;
    j.per = 2 * j.wp + g.h * g.ow;
    j.ranges = g.planes < t ? g.planes : t;
    int64_t n = j.ranges * j.per;
    struct tn_tensor *x = tn__nn_as(self, TN_FLOAT32), *y = tn_empty(os, self->ndim, TN_FLOAT32);
    struct tn_tensor *sc = tn_empty(&n, 1, TN_FLOAT32);
    if (!x || !y || !sc) {
        tn__nn_drop(0, x, y, sc, NULL);
        return NULL;
    }
    j.x = tn_data(x);
    j.y = tn_data(y);
    j.scratch = tn_data(sc);
    tn_parallel_for(j.ranges, 1, maxv_range, &j);
    tn__nn_drop(0, x, sc, NULL, NULL);
    return y;
}

/* max_pool2d's backward over planes [begin, end): each plane zeroed, then
 * each output's gradient added at its index (planes are disjoint, so they
 * run on the pool and each is zeroed while it is in cache). */
struct maxpool_bw_job {
    const struct pool *g;
    bool f32;
    const void *go;
    const int64_t *ix;
    void *gi;
};

#define TN_MAXPOOL_BW(SFX, T)                                                                  \
    static void maxpool_bw_plane_##SFX(const struct maxpool_bw_job *j, int64_t p)              \
    {                                                                                          \
        const struct pool *g = j->g;                                                           \
        int64_t ohw = g->oh * g->ow, hw = g->h * g->w;                                         \
        const T *go = (const T *)j->go + p * ohw;                                              \
        const int64_t *ix = j->ix + p * ohw;                                                   \
        T *gi = (T *)j->gi + p * hw;                                                           \
        memset(gi, 0, sizeof(T) * (size_t)hw);                                                 \
        for (int64_t o = 0; o < ohw; o++)                                                      \
            if (ix[o] >= 0 && ix[o] < hw)                                                      \
                gi[ix[o]] += go[o];                                                            \
    }
TN_MAXPOOL_BW(f32, float)
TN_MAXPOOL_BW(f64, double)

static void maxpool_bw_planes(int64_t begin, int64_t end, void *ctx)
{
    const struct maxpool_bw_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        if (j->f32)
            maxpool_bw_plane_f32(j, p);
        else
            maxpool_bw_plane_f64(j, p);
    }
}

/* The gradient of a max pool of self: grad_output added at the indices of
 * each plane, planes on the thread pool; in float32 for float32, else in
 * float64 rounded into self's dtype. */
static struct tn_tensor *maxpool_backward(const struct tn_tensor *grad_output,
                                          const struct tn_tensor *self,
                                          const struct tn_tensor *indices, const struct pool *g)
{
    bool f32 = self->dtype == TN_FLOAT32;
    enum tn_dtype ct = f32 ? TN_FLOAT32 : TN_FLOAT64;
    struct tn_tensor *go = tn__nn_as(grad_output, ct), *gi = tn_empty(self->sizes, self->ndim, ct);
    struct tn_tensor *ix = tn__nn_as(indices, TN_INT64);
    if (!go || !gi || !ix) {
        tn__nn_drop(0, go, gi, ix, NULL);
        return NULL;
    }
    struct maxpool_bw_job j = {g, f32, tn_data(go), tn_data(ix), tn_data(gi)};
    tn_parallel_for(g->planes, tn__grain_of(g->h * g->w), maxpool_bw_planes, &j);
    tn__nn_drop(0, go, ix, NULL, NULL);
    return tn__channels_last_if(tn__nn_to(gi, self->dtype),
                                tn__strides_like_channels_last(self, 4));
}

struct tn_tensor *tn__cpu_max_pool2d_with_indices_backward(
    tn_keyset ks, const struct tn_tensor *grad_output, const struct tn_tensor *self,
    const int64_t *kernel_size, int kernel_size_len, const int64_t *stride, int stride_len,
    const int64_t *padding, int padding_len, const int64_t *dilation, int dilation_len,
    bool ceil_mode, const struct tn_tensor *indices)
{
    struct pool g;
    if (pool_geometry(TN_POOL_MAX2D, self, kernel_size, kernel_size_len, stride, stride_len,
                      padding, padding_len, dilation, dilation_len, ceil_mode, NULL, &g) < 0)
        return NULL;
    if (tn_numel(grad_output) != g.planes * g.oh * g.ow || tn_numel(indices) != tn_numel(grad_output)) {
        tn_set_error(TN_ESHAPE, "max_pool2d_with_indices_backward: grad_output and indices must "
                     "hold %lld values", (long long)(g.planes * g.oh * g.ow));
        return NULL;
    }
    return tn__channels_last_if(maxpool_backward(grad_output, self, indices, &g),
                                tn__strides_like_channels_last(self, 4));
}

/* The window of output (oy, ox) of an average pool and its divisor. */
static void avg_window(const struct pool *g, int64_t oy, int64_t ox, bool count_include_pad,
                       const int64_t *divisor_override, int64_t *y0, int64_t *y1, int64_t *x0,
                       int64_t *x1, double *div)
{
    int64_t hs = oy * g->sh - g->ph, ws = ox * g->sw - g->pw;
    int64_t he = hs + g->kh < g->h + g->ph ? hs + g->kh : g->h + g->ph;
    int64_t we = ws + g->kw < g->w + g->pw ? ws + g->kw : g->w + g->pw;
    int64_t size = (he - hs) * (we - ws);
    *y0 = hs < 0 ? 0 : hs;
    *x0 = ws < 0 ? 0 : ws;
    *y1 = he < g->h ? he : g->h;
    *x1 = we < g->w ? we : g->w;
    if (divisor_override)
        *div = (double)*divisor_override;
    else
        *div = (double)(count_include_pad ? size : (*y1 - *y0) * (*x1 - *x0));
}

static int avg_geometry(const struct tn_tensor *self, const int64_t *ks, int ks_len,
                        const int64_t *st, int st_len, const int64_t *pd, int pd_len,
                        bool ceil_mode, const int64_t *divisor_override, struct pool *g)
{
    return pool_geometry(TN_POOL_AVG2D, self, ks, ks_len, st, st_len, pd, pd_len, NULL, 0,
                         ceil_mode, divisor_override, g);
}

struct tn_tensor *tn__cpu_avg_pool2d(tn_keyset ks, const struct tn_tensor *self,
                                     const int64_t *kernel_size, int kernel_size_len,
                                     const int64_t *stride, int stride_len, const int64_t *padding,
                                     int padding_len, bool ceil_mode, bool count_include_pad,
                                     const int64_t *divisor_override)
{
    struct pool g; /* floating and Long only, as PyTorch's kernel */
    if (avg_geometry(self, kernel_size, kernel_size_len, stride, stride_len, padding, padding_len,
                     ceil_mode, divisor_override, &g) < 0 ||
        tn__nn_check_dtype("avg_pool2d", self->dtype,
                           tn_dtype_is_floating(self->dtype) || self->dtype == TN_INT64) < 0)
        return NULL;
    int64_t os[4];
    out_shape(self, &g, os);
    struct tn_tensor *x = tn__nn_f64(self), *y = tn__nn_zeros64(os, self->ndim);
    if (!x || !y) {
        tn__nn_drop(0, x, y, NULL, NULL);
        return NULL;
    }
    const double *xp = tn_data(x);
    double *yp = tn_data(y);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t y0, y1, x0, x1;
                double div, s = 0;
                avg_window(&g, oy, ox, count_include_pad, divisor_override, &y0, &y1, &x0, &x1, &div);
                for (int64_t yy = y0; yy < y1; yy++)
                    for (int64_t xx = x0; xx < x1; xx++)
                        s += xp[(p * g.h + yy) * g.w + xx];
                yp[(p * g.oh + oy) * g.ow + ox] = s / div;
            }
    tn_release(x);
    return tn__channels_last_if(tn__nn_to(y, self->dtype), tn__strides_like_channels_last(self, 4));
}

struct tn_tensor *tn__cpu_avg_pool2d_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                              const struct tn_tensor *self,
                                              const int64_t *kernel_size, int kernel_size_len,
                                              const int64_t *stride, int stride_len,
                                              const int64_t *padding, int padding_len,
                                              bool ceil_mode, bool count_include_pad,
                                              const int64_t *divisor_override)
{
    struct pool g;
    if (avg_geometry(self, kernel_size, kernel_size_len, stride, stride_len, padding, padding_len,
                     ceil_mode, divisor_override, &g) < 0)
        return NULL;
    if (tn_numel(grad_output) != g.planes * g.oh * g.ow) {
        tn_set_error(TN_ESHAPE, "avg_pool2d_backward: grad_output must hold %lld values",
                     (long long)(g.planes * g.oh * g.ow));
        return NULL;
    }
    struct tn_tensor *go = tn__nn_f64(grad_output), *gi = tn__nn_zeros64(self->sizes, self->ndim);
    if (!go || !gi) {
        tn__nn_drop(0, go, gi, NULL, NULL);
        return NULL;
    }
    const double *gp = tn_data(go);
    double *dp = tn_data(gi);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t y0, y1, x0, x1;
                double div;
                avg_window(&g, oy, ox, count_include_pad, divisor_override, &y0, &y1, &x0, &x1, &div);
                double v = gp[(p * g.oh + oy) * g.ow + ox] / div;
                for (int64_t yy = y0; yy < y1; yy++)
                    for (int64_t xx = x0; xx < x1; xx++)
                        dp[(p * g.h + yy) * g.w + xx] += v;
            }
    tn_release(go);
    return tn__channels_last_if(tn__nn_to(gi, self->dtype),
                                tn__strides_like_channels_last(self, 4));
}

/* adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)) */
static int64_t a_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
static int64_t a_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

/* The adaptive average pool between planes of h x w and oh x ow: forward
 * averages each window of src into dst; backward spreads each value of src
 * (a gradient of the output) evenly over its window of dst. */
static void adaptive(bool backward, const double *src, double *dst, int64_t planes, int64_t h,
                     int64_t w, int64_t oh, int64_t ow)
{
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t y0 = a_start(oy, h, oh), y1 = a_end(oy, h, oh);
                int64_t x0 = a_start(ox, w, ow), x1 = a_end(ox, w, ow);
                double n = (double)((y1 - y0) * (x1 - x0)), s = 0;
                double *o = (backward ? (double *)src : dst) + (p * oh + oy) * ow + ox;
                for (int64_t yy = y0; yy < y1; yy++)
                    for (int64_t xx = x0; xx < x1; xx++) {
                        int64_t at = (p * h + yy) * w + xx;
                        if (backward)
                            dst[at] += *o / n;
                        else
                            s += src[at];
                    }
                if (!backward)
                    *o = s / n;
            }
}

static int adaptive_check(const struct tn_tensor *self, const int64_t *os, int os_len)
{
    if (os_len != 2)
        return tn_set_error(TN_EINVAL, "adaptive_avg_pool2d: output_size must be 2");
    if (self->ndim != 3 && self->ndim != 4)
        return tn_set_error(TN_ESHAPE, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
                            "a tensor of another rank");
    for (int i = 1; i < self->ndim; i++)
        if (self->sizes[i] == 0)
            return tn_set_error(TN_ESHAPE, "adaptive_avg_pool2d(): Expected input to have non-zero "
                                "size for non-batch dimensions, but input has sizes with dimension "
                                "%d being empty", i);
    if (os[0] < 0 || os[1] < 0)
        return tn_set_error(TN_EINVAL, "adaptive_avg_pool2d: elements of output_size must be "
                            "greater than or equal to 0 but received {%lld, %lld}",
                            (long long)os[0], (long long)os[1]);
    return tn__nn_check_float("adaptive_avg_pool2d", self);
}

/* The global average pool (output 1 x 1) of float32 planes of n values:
 * each plane summed in float64 straight from float32, instead of through a
 * float64 copy (11% of efficientnet_b0's interpreter time, issue 27). */
static struct tn_tensor *global_avg_f32(const struct tn_tensor *self, const int64_t *os, int nd,
                                        int64_t planes, int64_t n)
{
    struct tn_tensor *x = tn__nn_as(self, TN_FLOAT32), *y = tn_empty(os, nd, TN_FLOAT32);
    if (!x || !y) {
        tn__nn_drop(0, x, y, NULL, NULL);
        return NULL;
    }
    const float *xp = tn_data(x);
    float *yp = tn_data(y);
    for (int64_t p = 0; p < planes; p++) {
        const float *v = xp + p * n;
        double sum = 0;
#ifdef TN_HAVE_AVX2
        if (tn__have_avx2())
            sum = tn__sum_f32_avx2(v, n);
        else
#endif
            for (int64_t i = 0; i < n; i++)
                sum += v[i];
        yp[p] = (float)(sum / (double)n);
    }
    tn_release(x);
    return y;
}

struct tn_tensor *tn__cpu__adaptive_avg_pool2d(tn_keyset ks, const struct tn_tensor *self,
                                               const int64_t *output_size, int output_size_len)
{
    if (adaptive_check(self, output_size, output_size_len) < 0)
        return NULL;
    int nd = self->ndim;
    int64_t h = self->sizes[nd - 2], w = self->sizes[nd - 1], oh = output_size[0], ow = output_size[1];
    int64_t planes = tn_numel(self) / (h * w), os[4];
    memcpy(os, self->sizes, sizeof(int64_t) * (size_t)nd);
    os[nd - 2] = oh;
    os[nd - 1] = ow;
    if (self->dtype == TN_FLOAT32 && oh == 1 && ow == 1)
        return global_avg_f32(self, os, nd, planes, h * w);
    struct tn_tensor *x = tn__nn_f64(self), *y = tn__nn_zeros64(os, nd);
    if (!x || !y) {
        tn__nn_drop(0, x, y, NULL, NULL);
        return NULL;
    }
    adaptive(false, tn_data(x), tn_data(y), planes, h, w, oh, ow);
    tn_release(x);
    return tn__channels_last_if(tn__nn_to(y, self->dtype), tn__strides_like_channels_last(self, 4));
}

struct tn_tensor *tn__cpu__adaptive_avg_pool2d_backward(tn_keyset ks,
                                                        const struct tn_tensor *grad_output,
                                                        const struct tn_tensor *self)
{
    int nd = self->ndim;
    if ((nd != 3 && nd != 4) || grad_output->ndim != nd) {
        tn_set_error(TN_ESHAPE, "adaptive_avg_pool2d_backward: expected 3D or 4D grad_output "
                     "and input of the same rank");
        return NULL;
    }
    int64_t h = self->sizes[nd - 2], w = self->sizes[nd - 1];
    int64_t oh = grad_output->sizes[nd - 2], ow = grad_output->sizes[nd - 1];
    int64_t planes = h * w > 0 ? tn_numel(self) / (h * w) : 0;
    struct tn_tensor *go = tn__nn_f64(grad_output), *gi = tn__nn_zeros64(self->sizes, nd);
    if (!go || !gi) {
        tn__nn_drop(0, go, gi, NULL, NULL);
        return NULL;
    }
    adaptive(true, tn_data(go), tn_data(gi), planes, h, w, oh, ow);
    tn_release(go);
    return tn__channels_last_if(tn__nn_to(gi, self->dtype),
                                tn__strides_like_channels_last(self, 4));
}

/* adaptive_max_pool2d over planes [begin, end): the adaptive windows of
 * _adaptive_avg_pool2d, maxpool_inside's rule (a NaN wins, the last; else
 * the first of the greatest, so a window of -inf gives its first index).
 * BRANCH: a branch rather than maxpool's select, for large windows, where
 * the greatest so far seldom changes and the branch predicts (at 8x8, 2.5x
 * faster than the select; at 2x2 the select is 1.6x faster) */
#define TN_AMAXPOOL(NAME, T, SFX, BRANCH)                                                      \
    static void NAME(int64_t begin, int64_t end, void *ctx)                                    \
    {                                                                                          \
        const struct maxpool_job *j = ctx;                                                     \
        const struct pool *g = j->g;                                                           \
        for (int64_t p = begin; p < end; p++)                                                  \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                           \
                const T *x = (const T *)j->x + p * g->h * g->w;                                \
                int64_t y0 = a_start(oy, g->h, g->oh), y1 = a_end(oy, g->h, g->oh);           \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                       \
                    int64_t x0 = a_start(ox, g->w, g->ow), x1 = a_end(ox, g->w, g->ow);        \
                    int64_t at = y0 * g->w + x0;                                               \
                    T best = x[at];                                                            \
                    for (int64_t yy = y0; yy < y1; yy++)                                       \
                        for (int64_t xx = x0; xx < x1; xx++) {                                 \
                            int64_t o = yy * g->w + xx;                                        \
                            T v = x[o];                                                        \
                            if (BRANCH) {                                                      \
                                if (v > best || v != v) {                                      \
                                    best = v;                                                  \
                                    at = o;                                                    \
                                }                                                              \
                            } else {                                                           \
                                int64_t take = -(int64_t)((v > best) | (v != v));              \
                                best = pick_##SFX(take, v, best);                              \
                                at = (take & o) | (~take & at);                                \
                            }                                                                  \
                        }                                                                      \
                    ((T *)j->y)[(p * g->oh + oy) * g->ow + ox] = best;                         \
                    j->ix[(p * g->oh + oy) * g->ow + ox] = at;                                 \
                }                                                                              \
            }                                                                                  \
    }
TN_AMAXPOOL(amaxpool_f32, float, f32, true)
TN_AMAXPOOL(amaxpool_f64, double, f64, true)
TN_AMAXPOOL(amaxpool_select_f32, float, f32, false)
TN_AMAXPOOL(amaxpool_select_f64, double, f64, false)

/* The planes and sizes of an adaptive max pool of self (3-D or 4-D) to
 * (oh, ow), with PyTorch's checks and words (2.x's for the backward). */
static int amax_geometry(const char *op, const struct tn_tensor *self, int64_t oh, int64_t ow,
                         struct pool *g)
{
    char a[128];
    if (self->ndim != 3 && self->ndim != 4)
        return tn_set_error(TN_ESHAPE, "%s(): Expected 3D or 4D tensor, but got: %s", op,
                            tn_shape_format(self->sizes, self->ndim, a, sizeof a));
    for (int i = 1; i < self->ndim; i++)
        if (self->sizes[i] == 0)
            return tn_set_error(TN_ESHAPE, "%s(): Expected input to have non-zero size for "
                                "non-batch dimensions, but input has sizes %s with dimension %d "
                                "being empty", op,
                                tn_shape_format(self->sizes, self->ndim, a, sizeof a), i);
    *g = (struct pool){.h = self->sizes[self->ndim - 2], .w = self->sizes[self->ndim - 1],
                       .oh = oh, .ow = ow};
    g->planes = tn_numel(self) / (g->h * g->w);
    return TN_OK;
}

int tn__cpu_adaptive_max_pool2d(tn_keyset ks, const struct tn_tensor *self,
                                const int64_t *output_size, int output_size_len,
                                struct tn_tensor **result0, struct tn_tensor **result1)
{
    struct pool g;
    int rc = amax_geometry("adaptive_max_pool2d", self, 0, 0, &g);
    if (rc < 0)
        return rc;
    if (output_size_len != 2)
        return tn_set_error(TN_EINVAL, "adaptive_max_pool2d(): internal error: "
                            "output_size.size() must be 2");
    int64_t os[4];
    g.oh = output_size[0];
    g.ow = output_size[1];
    out_shape(self, &g, os);
    if (g.oh < 0 || g.ow < 0) {
        char a[128];
        return tn_set_error(TN_ESHAPE, "Trying to create tensor with negative dimension %lld: %s",
                            (long long)(g.oh < 0 ? g.oh : g.ow),
                            tn_shape_format(os, self->ndim, a, sizeof a));
    }
    if ((rc = tn__nn_check_float("adaptive_max_pool2d", self)) < 0)
        return rc;
    /* the windows of a dim overlap by at most one element: about
     * (h / oh + 1) * (w / ow + 1) comparisons an output */
    int64_t win = (g.h / (g.oh ? g.oh : 1) + 1) * (g.w / (g.ow ? g.ow : 1) + 1);
    bool big = win >= 16;
    return maxpool_run(self, &g, big ? amaxpool_f32 : amaxpool_select_f32,
                       big ? amaxpool_f64 : amaxpool_select_f64, g.oh * g.ow * win, result0,
                       result1);
}

struct tn_tensor *tn__cpu_adaptive_max_pool2d_backward(tn_keyset ks,
                                                       const struct tn_tensor *grad_output,
                                                       const struct tn_tensor *self,
                                                       const struct tn_tensor *indices)
{
    char a[128], b[128];
    struct pool g;
    int nd = grad_output->ndim;
    if (nd != 3 && nd != 4) {
        tn_set_error(TN_ESHAPE, "adaptive_max_pooling2d_backward(): Expected 3D or 4D "
                     "grad_output, but got: %s",
                     tn_shape_format(grad_output->sizes, nd, a, sizeof a));
        return NULL;
    }
    if (amax_geometry("adaptive_max_pool2d_backward", self, grad_output->sizes[nd - 2],
                      grad_output->sizes[nd - 1], &g) < 0)
        return NULL;
    if (grad_output->dtype != self->dtype) {
        tn_set_error(TN_EDTYPE, "expected dtype %s for `grad_output` but got dtype %s",
                     tn__dtype_meta_name(self->dtype), tn__dtype_meta_name(grad_output->dtype));
        return NULL;
    }
    if (indices->ndim != nd || memcmp(indices->sizes, grad_output->sizes,
                                      sizeof(int64_t) * (size_t)nd) != 0 ||
        self->ndim != nd || tn_numel(self) != g.planes * g.h * g.w ||
        tn_numel(grad_output) != g.planes * g.oh * g.ow) {
        tn_set_error(TN_ESHAPE, "expected sizes %s for `grad_output` but got sizes %s",
                     tn_shape_format(indices->sizes, indices->ndim, a, sizeof a),
                     tn_shape_format(grad_output->sizes, nd, b, sizeof b));
        return NULL;
    }
    if (indices->dtype != TN_INT64) {
        tn_set_error(TN_EDTYPE, "expected scalar type Long but found %s",
                     tn_dtype_info(indices->dtype)->c10_name);
        return NULL;
    }
    if (tn__nn_check_float("adaptive_max_pool2d_backward", self) < 0)
        return NULL;
    return tn__channels_last_if(maxpool_backward(grad_output, self, indices, &g),
                                tn__strides_like_channels_last(self, 4));
}
