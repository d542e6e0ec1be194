/*
 * ops/cpu/nn_grid_sample3d.c: grid_sampler_3d (F.grid_sample on 5-D
 * inputs) and grid_sampler_3d_backward, after PyTorch's GridSampler.cpp:
 * interpolation 0 bilinear (trilinear over the eight corners tnw ... bse),
 * 1 nearest, 2 bicubic (tricubic: 2.x's separable cubic kernel over 4 x 4
 * x 4 taps, each tap padded; 1.13 refuses it); padding 0 zeros, 1 border,
 * 2 reflection;
 * align_corners both ways. The grid's last dim holds (x, y, z): x indexes
 * W, y H, z D. As nn_grid_sample.c: values read as float64, each result
 * rounded once into the dtype (but the float16 and bfloat16 forward of
 * bilinear and nearest rounds every step as PyTorch's scalar kernel does:
 * nn_grid_sample16.c; its bicubic matches PyTorch's rounded once); the
 * backward spreads each output's gradient over the corners with their
 * weights, and gives the grid the weights' derivatives times the input
 * values through the unnormalisation and the padding (nearest gives the
 * grid zeros).
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };

/* One grid point's source: the nearest voxel (near, -1 outside), or the
 * eight corners (at[k], -1 outside) with their weights and the weights'
 * derivatives along x, y and z; m* the coordinates' derivatives. */
struct corners {
    int64_t near;
    int64_t at[8];
    double w[8], dx[8], dy[8], dz[8];
    double mx, my, mz;
    /* bicubic: per axis (x, y, z) the taps' padded indices and weights */
    int64_t t[3][4];
    double cw[3][4], cd[3][4];
};

static void locate_cubic(const double *g, const int64_t size[3], int pad, bool al,
                         struct corners *c)
{
    double *m[3] = {&c->mx, &c->my, &c->mz};
    for (int a = 0; a < 3; a++) {
        int64_t n = size[2 - a]; /* x: W, y: H, z: D */
        double i = tn__gs_unnormalize(g[a], n, al, m[a]), f = floor(i);
        tn__gs_cubic_coeffs(c->cw[a], i - f);
        tn__gs_cubic_coeffs_grad(c->cd[a], i - f);
        for (int k = 0; k < 4; k++)
            c->t[a][k] = tn__gs_tap1((int64_t)f - 1 + k, n, pad, al);
    }
}

static void locate(const double *g, const int64_t size[3], int mode, int pad, bool al,
                   struct corners *c)
{
    int64_t d = size[0], h = size[1], w = size[2];
    double ix = tn__gs_source_index(g[0], w, pad, al, &c->mx);
    double iy = tn__gs_source_index(g[1], h, pad, al, &c->my);
    double iz = tn__gs_source_index(g[2], d, pad, al, &c->mz);
    if (mode == GS_NEAREST) {
        int64_t nx = (int64_t)nearbyint(ix), ny = (int64_t)nearbyint(iy);
        int64_t nz = (int64_t)nearbyint(iz);
        bool in = nx >= 0 && nx < w && ny >= 0 && ny < h && nz >= 0 && nz < d;
        c->near = in ? (nz * h + ny) * w + nx : -1;
        return;
    }
    int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy), z0 = (int64_t)floor(iz);
    /* per axis: the low corner's weight (1 - t) and the high one's (t) */
    double wx[2] = {(double)(x0 + 1) - ix, ix - (double)x0};
    double wy[2] = {(double)(y0 + 1) - iy, iy - (double)y0};
    double wz[2] = {(double)(z0 + 1) - iz, iz - (double)z0};
    static const double sign[2] = {-1, 1};
    /* k = (z bit, y bit, x bit): tnw, tne, tsw, tse, bnw, bne, bsw, bse */
    for (int k = 0; k < 8; k++) {
        int bx = k & 1, by = (k >> 1) & 1, bz = k >> 2;
        int64_t x = x0 + bx, y = y0 + by, z = z0 + bz;
        bool in = x >= 0 && x < w && y >= 0 && y < h && z >= 0 && z < d;
        c->at[k] = in ? (z * h + y) * w + x : -1;
        c->w[k] = wx[bx] * wy[by] * wz[bz];
        c->dx[k] = sign[bx] * wy[by] * wz[bz];
        c->dy[k] = wx[bx] * sign[by] * wz[bz];
        c->dz[k] = wx[bx] * wy[by] * sign[bz];
    }
}

struct tn_tensor *tn__cpu_grid_sampler_3d(tn_keyset ks, const struct tn_tensor *input,
                                          const struct tn_tensor *grid,
                                          int64_t interpolation_mode, int64_t padding_mode,
                                          bool align_corners)
{
    (void)ks;
    if (tn__gs_check(input, grid, interpolation_mode, padding_mode, 5) < 0)
        return NULL;
    int64_t n = input->sizes[0], c = input->sizes[1];
    int64_t vol = input->sizes[2] * input->sizes[3] * input->sizes[4];
    const int64_t hw[2] = {input->sizes[3], input->sizes[4]};
    int64_t od = grid->sizes[1], oh = grid->sizes[2], ow = grid->sizes[3], np = od * oh * ow;
    if (input->device.type == TN_DEVICE_META)
        return tn_empty_on(TN_SHAPE(n, c, od, oh, ow), input->dtype, input->device);
    if ((input->dtype == TN_FLOAT16 || input->dtype == TN_BFLOAT16) &&
        interpolation_mode != GS_BICUBIC)
        return tn__gs_forward16(input, grid, (int)interpolation_mode, (int)padding_mode,
                                align_corners);
    struct tn_tensor *x, *gr, *out;
    if (tn__gs_f64(input, grid, TN_SHAPE(n, c, od, oh, ow), &x, &gr, &out) < 0)
        return NULL;
    const double *xp = tn_data(x), *gp = tn_data(gr);
    double *op = tn_data(out);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < np; p++) {
            struct corners k;
            locate(gp + (b * np + p) * 3, input->sizes + 2, (int)interpolation_mode,
                   (int)padding_mode, align_corners, &k);
            const double *img = xp + b * c * vol;
            double *o = op + b * c * np + p;
            if (interpolation_mode == GS_BICUBIC) {
                locate_cubic(gp + (b * np + p) * 3, input->sizes + 2, (int)padding_mode,
                             align_corners, &k);
                for (int64_t ch = 0; ch < c; ch++) {
                    const double *v = img + ch * vol;
                    double s = 0;
                    for (int zi = 0; zi < 4; zi++) {
                        double sy = 0;
                        for (int yi = 0; yi < 4; yi++) {
                            double sx = 0;
                            for (int xi = 0; xi < 4; xi++)
                                if (k.t[0][xi] >= 0 && k.t[1][yi] >= 0 && k.t[2][zi] >= 0)
                                    sx += k.cw[0][xi] *
                                          v[(k.t[2][zi] * hw[0] + k.t[1][yi]) * hw[1] + k.t[0][xi]];
                            sy += sx * k.cw[1][yi];
                        }
                        s += sy * k.cw[2][zi];
                    }
                    o[ch * np] = s;
                }
                continue;
            }
            if (interpolation_mode == GS_NEAREST) {
                for (int64_t ch = 0; k.near >= 0 && ch < c; ch++)
                    o[ch * np] = img[ch * vol + k.near];
                continue;
            }
            for (int64_t ch = 0; ch < c; ch++) {
                double s = 0;
                for (int j = 0; j < 8; j++)
                    if (k.at[j] >= 0)
                        s += img[ch * vol + k.at[j]] * k.w[j];
                o[ch * np] = s;
            }
        }
    tn__nn_drop(0, x, gr, NULL, NULL);
    return tn__nn_to(out, input->dtype);
}

int tn__cpu_grid_sampler_3d_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                     const struct tn_tensor *input, const struct tn_tensor *grid,
                                     int64_t interpolation_mode, int64_t padding_mode,
                                     bool align_corners, const bool *output_mask,
                                     int output_mask_len, struct tn_tensor **result0,
                                     struct tn_tensor **result1)
{
    (void)ks;
    char a[128];
    int rc = tn__gs_check(input, grid, interpolation_mode, padding_mode, 5);
    if (rc < 0)
        return rc;
    int64_t n = input->sizes[0], c = input->sizes[1];
    int64_t vol = input->sizes[2] * input->sizes[3] * input->sizes[4];
    const int64_t hw[2] = {input->sizes[3], input->sizes[4]};
    int64_t od = grid->sizes[1], oh = grid->sizes[2], ow = grid->sizes[3], np = od * oh * ow;
    const int64_t want[5] = {n, c, od, oh, ow};
    if (grad_output->ndim != 5 || memcmp(grad_output->sizes, want, sizeof want))
        return tn_set_error(TN_ESHAPE, "grid_sampler_3d_backward: grad_output of sizes %s, "
                            "expected [%lld, %lld, %lld, %lld, %lld]",
                            tn_shape_format(grad_output->sizes, grad_output->ndim, a, sizeof a),
                            (long long)n, (long long)c, (long long)od, (long long)oh,
                            (long long)ow);
    bool want_in = output_mask_len < 1 || output_mask[0];
    /* PyTorch's CPU kernel gives the grid's gradient whatever output_mask[1] */
    bool want_grid = true;
    *result0 = *result1 = NULL;
    struct tn_tensor *go = tn__nn_f64(grad_output), *x = go ? tn__nn_f64(input) : NULL;
    struct tn_tensor *gr = x ? tn__nn_f64(grid) : NULL;
    struct tn_tensor *gin = gr ? tn__nn_zeros64(input->sizes, 5) : NULL;
    struct tn_tensor *ggr = gin ? tn__nn_zeros64(grid->sizes, 5) : NULL;
    if (!ggr) {
        tn__nn_drop(0, go, x, gr, gin);
        return tn_last_status();
    }
    const double *gop = tn_data(go), *xp = tn_data(x), *gp = tn_data(gr);
    double *gip = tn_data(gin), *ggp = tn_data(ggr);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < np; p++) {
            struct corners k;
            locate(gp + (b * np + p) * 3, input->sizes + 2, (int)interpolation_mode,
                   (int)padding_mode, align_corners, &k);
            const double *img = xp + b * c * vol, *g0 = gop + b * c * np + p;
            double *gi = gip + b * c * vol, gx = 0, gy = 0, gz = 0;
            if (interpolation_mode == GS_BICUBIC) {
                locate_cubic(gp + (b * np + p) * 3, input->sizes + 2, (int)padding_mode,
                             align_corners, &k);
                for (int zi = 0; zi < 4; zi++)
                    for (int yi = 0; yi < 4; yi++)
                        for (int xi = 0; xi < 4; xi++) {
                            if (k.t[0][xi] < 0 || k.t[1][yi] < 0 || k.t[2][zi] < 0)
                                continue;
                            int64_t at = (k.t[2][zi] * hw[0] + k.t[1][yi]) * hw[1] + k.t[0][xi];
                            double wx = k.cw[0][xi], wy = k.cw[1][yi], wz = k.cw[2][zi];
                            for (int64_t ch = 0; ch < c; ch++) {
                                double gout = g0[ch * np], v = img[ch * vol + at];
                                gi[ch * vol + at] += gout * wx * wy * wz;
                                gx -= v * k.cd[0][xi] * wy * wz * gout;
                                gy -= v * wx * k.cd[1][yi] * wz * gout;
                                gz -= v * wx * wy * k.cd[2][zi] * gout;
                            }
                        }
            } else if (interpolation_mode == GS_NEAREST) {
                for (int64_t ch = 0; k.near >= 0 && ch < c; ch++)
                    gi[ch * vol + k.near] += g0[ch * np];
                continue;
            }
            for (int j = 0; interpolation_mode == GS_BILINEAR && j < 8; j++) {
                if (k.at[j] < 0)
                    continue;
                for (int64_t ch = 0; ch < c; ch++) {
                    double gout = g0[ch * np], v = img[ch * vol + k.at[j]];
                    gi[ch * vol + k.at[j]] += k.w[j] * gout;
                    gx += v * k.dx[j] * gout;
                    gy += v * k.dy[j] * gout;
                    gz += v * k.dz[j] * gout;
                }
            }
            double *gg = ggp + (b * np + p) * 3;
            gg[0] = k.mx * gx;
            gg[1] = k.my * gy;
            gg[2] = k.mz * gz;
        }
    tn__nn_drop(0, go, x, gr, NULL);
    return tn__gs_results(gin, ggr, want_in, want_grid, input->dtype, result0, result1);
}
