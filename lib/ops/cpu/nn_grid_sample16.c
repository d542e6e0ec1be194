/*
 * ops/cpu/nn_grid_sample16.c: the forward of grid_sampler_2d and
 * grid_sampler_3d (bilinear and nearest) in float16 and bfloat16, as
 * PyTorch 2.x computes it: every arithmetic step in float32, its result
 * rounded into the dtype (c10::BFloat16 / c10::Half arithmetic), not the
 * whole in float64 rounded once. The steps follow PyTorch's CPU kernels:
 * the 2-D one is the vectorized GridSamplerKernel.cpp (Vectorized<scalar_t>
 * ops: unnormalise as (c + 1) * scale [- 0.5], reflection by a double span,
 * weights from the distances to the four sides, out-of-bounds corners read
 * as zeros and still added), the 3-D one the scalar grid_sampler_3d_cpu_impl
 * with GridSampler.h's helpers (unnormalise as ((c + 1) * size - 1) / 2 or
 * (c + 1) / 2 * (size - 1), reflection by fmod, weights as products of
 * three distances, only in-bounds corners added). tests/unit/test_nn_grid_sample
 * compares both with PyTorch's values for every mode, padding and
 * align_corners.
 */
#include <config.h>

#include <limits.h>
#include <math.h>

#include "ops/nn_internal.h"

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

/* one dim of the source: its size, the padding, align_corners and the
 * dtype every step rounds into */
struct dim16 {
    int64_t size;
    int pad;
    bool align;
    enum tn_dtype dt;
};

static float rnd(const struct dim16 *d, float x) { return tn__round16(x, d->dt); }

/* PyTorch's clip: NaN goes to 0 in the 2-D kernel (clamp_min(0, x) first) */
static float clip2(const struct dim16 *d, float x)
{
    float max = rnd(d, (float)(d->size - 1));
    x = x > 0 ? x : 0;
    return x < max ? x : max;
}

/* ComputeLocationBase::reflect_coordinates: about low = -0.5 or 0 with a
 * span of twice the size (or size - 1) */
static float reflect2(const struct dim16 *d, float x)
{
    if (d->align && d->size <= 1)
        return 0;
    float low = d->align ? 0 : -0.5f;
    float twice = rnd(d, rnd(d, (float)(d->align ? d->size - 1 : d->size)) * 2);
    float a = fabsf(d->align ? x : rnd(d, x - low));
    float flips = truncf(rnd(d, a / twice));
    float extra = rnd(d, a - rnd(d, flips * twice));
    float other = rnd(d, twice - extra);
    float m = isnan(extra) || isnan(other) ? NAN : fminf(extra, other);
    return d->align ? m : rnd(d, m + low);
}

static float unnormalize2(const struct dim16 *d, float g)
{
    float scale = rnd(d, rnd(d, (float)(d->align ? d->size - 1 : d->size)) / 2);
    float x = rnd(d, rnd(d, g + 1) * scale);
    return d->align ? x : rnd(d, x - 0.5f);
}

/* compute_coordinates: the padding of an (unnormalised) coordinate */
static float pad2(const struct dim16 *d, float x)
{
    if (d->pad == GS_BORDER)
        return clip2(d, x);
    if (d->pad == GS_REFLECTION)
        return clip2(d, reflect2(d, x));
    return x;
}

/* an index from a whole float; -1 (out of bounds) for NaN and huge values */
static int64_t index_of(float x, int64_t size)
{
    if (!(x > -2.0f && x < (float)size))
        return -1;
    int64_t i = (int64_t)x;
    return i < size ? i : -1;
}

/* the value at (x, y) of a channel, zero outside */
static float at2(const double *img, const struct dim16 *dx, const struct dim16 *dy, float x,
                 float y)
{
    int64_t ix = index_of(x, dx->size), iy = index_of(y, dy->size);
    return ix >= 0 && iy >= 0 ? (float)img[iy * dx->size + ix] : 0;
}

static void cubic_coeffs(const struct dim16 *d, float c[4], float t)
{
    const float a = -0.75f;
    float x = rnd(d, t + 1);
    c[0] = rnd(d, rnd(d, rnd(d, rnd(d, rnd(d, a * x) - 5 * a) * x) + 8 * a) * x);
    c[0] = rnd(d, c[0] - 4 * a);
    for (int k = 1; k < 3; k++) {
        x = k == 1 ? t : rnd(d, 1 - t);
        c[k] = rnd(d, rnd(d, rnd(d, rnd(d, (a + 2) * x) - (a + 3)) * x) * x);
        c[k] = rnd(d, c[k] + 1);
    }
    x = rnd(d, 2 - t);
    c[3] = rnd(d, rnd(d, rnd(d, rnd(d, rnd(d, a * x) - 5 * a) * x) + 8 * a) * x);
    c[3] = rnd(d, c[3] - 4 * a);
}

/* one output point of every channel (o steps by ostep) of the 2-D kernel */
static void point2(const double *img, int64_t c, double *o, int64_t ostep, float gx, float gy,
                   int mode, const struct dim16 *dx, const struct dim16 *dy)
{
    int64_t hw = dx->size * dy->size;
    if (mode == GS_BICUBIC) {
        float x = unnormalize2(dx, gx), y = unnormalize2(dy, gy);
        float fx = floorf(x), fy = floorf(y), cx[4], cy[4];
        cubic_coeffs(dx, cx, rnd(dx, x - fx));
        cubic_coeffs(dy, cy, rnd(dy, y - fy));
        for (int64_t ch = 0; ch < c; ch++) {
            float s = 0;
            for (int i = 0; i < 4; i++) {
                float yy = pad2(dy, rnd(dy, fy - 1 + (float)i)), r = 0;
                for (int j = 0; j < 4; j++) {
                    float v = at2(img + ch * hw, dx, dy, pad2(dx, rnd(dx, fx - 1 + (float)j)), yy);
                    float p = rnd(dx, cx[j] * v);
                    r = j ? rnd(dx, r + p) : p;
                }
                s = i ? rnd(dx, s + rnd(dx, cy[i] * r)) : rnd(dx, cy[i] * r);
            }
            o[ch * ostep] = s;
        }
        return;
    }
    float x = pad2(dx, unnormalize2(dx, gx)), y = pad2(dy, unnormalize2(dy, gy));
    if (mode == GS_NEAREST) {
        float nx = nearbyintf(x), ny = nearbyintf(y);
        for (int64_t ch = 0; ch < c; ch++)
            o[ch * ostep] = at2(img + ch * hw, dx, dy, nx, ny);
        return;
    }
    float xw = floorf(x), yn = floorf(y);
    float w = rnd(dx, x - xw), e = rnd(dx, 1 - w), n = rnd(dx, y - yn), s = rnd(dx, 1 - n);
    float wt[4] = {rnd(dx, s * e), rnd(dx, s * w), rnd(dx, n * e), rnd(dx, n * w)};
    for (int64_t ch = 0; ch < c; ch++) {
        float r = 0;
        for (int k = 0; k < 4; k++) {
            float v = at2(img + ch * hw, dx, dy, xw + (float)(k & 1), yn + (float)(k >> 1));
            float p = rnd(dx, v * wt[k]);
            r = k ? rnd(dx, r + p) : p;
        }
        o[ch * ostep] = r;
    }
}

/* GridSampler.h's scalar source index, each step rounded */
static float source3(const struct dim16 *d, float c)
{
    float size = rnd(d, (float)d->size), last = rnd(d, (float)(d->size - 1));
    float x = d->align ? rnd(d, rnd(d, rnd(d, c + 1) / 2) * last)
                       : rnd(d, rnd(d, rnd(d, rnd(d, c + 1) * size) - 1) / 2);
    if (d->pad == GS_REFLECTION) {
        int64_t lo = d->align ? 0 : -1, hi = d->align ? 2 * (d->size - 1) : 2 * d->size - 1;
        if (lo == hi)
            x = 0;
        else {
            float min = rnd(d, rnd(d, (float)lo) / 2), span = rnd(d, rnd(d, (float)(hi - lo)) / 2);
            x = fabsf(rnd(d, x - min));
            float extra = rnd(d, fmodf(x, span));
            int64_t flips = (int64_t)floorf(rnd(d, x / span));
            x = flips % 2 == 0 ? rnd(d, extra + min) : rnd(d, rnd(d, span - extra) + min);
        }
    }
    if (d->pad != GS_ZEROS) { /* std::min(size - 1, std::max(x, 0)) */
        x = x < 0 ? 0 : x;
        x = x < last ? x : last;
    }
    return isfinite(x) && x > (float)INT_MIN && x < (float)INT_MAX - 1 ? x : -100;
}

/* one output point of every channel of the 3-D kernel (bilinear, nearest) */
static void point3(const double *img, int64_t c, double *o, int64_t ostep, const float g[3],
                   int mode, const struct dim16 d[3])
{
    float i[3];
    int64_t vol = d[0].size * d[1].size * d[2].size;
    for (int a = 0; a < 3; a++)
        i[a] = source3(&d[a], g[a]);
    if (mode == GS_NEAREST) {
        int64_t x = index_of(nearbyintf(i[0]), d[0].size);
        int64_t y = index_of(nearbyintf(i[1]), d[1].size);
        int64_t z = index_of(nearbyintf(i[2]), d[2].size);
        for (int64_t ch = 0; x >= 0 && y >= 0 && z >= 0 && ch < c; ch++)
            o[ch * ostep] = img[ch * vol + (z * d[1].size + y) * d[0].size + x];
        return;
    }
    float f[3], dist[3][2];
    for (int a = 0; a < 3; a++) {
        f[a] = floorf(i[a]);
        dist[a][0] = rnd(&d[a], (f[a] + 1) - i[a]);
        dist[a][1] = rnd(&d[a], i[a] - f[a]);
    }
    for (int64_t ch = 0; ch < c; ch++) {
        float r = 0;
        /* tnw, tne, tsw, tse, bnw, bne, bsw, bse: bit 0 x, bit 1 y, bit 2 z */
        for (int k = 0; k < 8; k++) {
            int b[3] = {k & 1, (k >> 1) & 1, k >> 2};
            int64_t x = index_of(f[0] + (float)b[0], d[0].size);
            int64_t y = index_of(f[1] + (float)b[1], d[1].size);
            int64_t z = index_of(f[2] + (float)b[2], d[2].size);
            if (x < 0 || y < 0 || z < 0)
                continue;
            float w = rnd(d, rnd(d, dist[0][b[0]] * dist[1][b[1]]) * dist[2][b[2]]);
            float v = (float)img[ch * vol + (z * d[1].size + y) * d[0].size + x];
            r = rnd(d, r + rnd(d, v * w));
        }
        o[ch * ostep] = r;
    }
}

struct tn_tensor *tn__gs_forward16(const struct tn_tensor *input, const struct tn_tensor *grid,
                                   int mode, int pad, bool align)
{
    int nd = input->ndim, sp = nd - 2;
    int64_t n = input->sizes[0], c = input->sizes[1], np = 1, vol = 1, osz[5] = {n, c};
    struct dim16 d[3];
    for (int a = 0; a < sp; a++) { /* d[0] x (W), d[1] y (H), d[2] z (D) */
        d[a] = (struct dim16){input->sizes[nd - 1 - a], pad, align, input->dtype};
        vol *= input->sizes[2 + a];
        np *= grid->sizes[1 + a];
        osz[2 + a] = grid->sizes[1 + a];
    }
    struct tn_tensor *x, *gr, *out;
    if (tn__gs_f64(input, grid, osz, nd, &x, &gr, &out) < 0)
        return NULL;
    const double *xp = tn_data(x), *gp = tn_data(gr);
    double *op = tn_data(out);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < np; p++) {
            const double *g = gp + (b * np + p) * sp;
            float gf[3] = {(float)g[0], (float)g[1], sp == 3 ? (float)g[2] : 0};
            double *o = op + b * c * np + p;
            if (sp == 2)
                point2(xp + b * c * vol, c, o, np, gf[0], gf[1], mode, &d[0], &d[1]);
            else
                point3(xp + b * c * vol, c, o, np, gf, mode, d);
        }
    tn__nn_drop(0, x, gr, NULL, NULL);
    return tn__nn_to(out, input->dtype);
}
