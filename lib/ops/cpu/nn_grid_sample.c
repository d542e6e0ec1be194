/*
 * ops/cpu/nn_grid_sample.c: grid_sampler_2d (the core ATen op behind
 * F.grid_sample on 4-D inputs) and grid_sampler_2d_backward, after PyTorch's
 * GridSampler.h: interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0
 * zeros, 1 border, 2 reflection; align_corners both ways. The input's and
 * grid's values are read as float64 and each result is rounded once into
 * their dtype (float32, float64; the float16 and bfloat16 forward rounds
 * every step as PyTorch's does: nn_grid_sample16.c). The backward gives the
 * input's gradient (each output's gradient spread with its weights) and the
 * grid's (the weights' derivatives times the input values, through the
 * unnormalisation, clipping and reflection: PyTorch's *_set_grad helpers);
 * nearest gives the grid none (zeros).
 */
#include <config.h>

#include <limits.h>
#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

/* [-1, 1] to pixel coordinates; *g the derivative */
double tn__gs_unnormalize(double c, int64_t size, bool align, double *g)
{
    if (align) {
        *g = (double)(size - 1) / 2;
        return (c + 1) / 2 * (double)(size - 1);
    }
    *g = (double)size / 2;
    return ((c + 1) * (double)size - 1) / 2;
}

/* borders count as out of bounds for the gradient, as PyTorch's */
static double clip(double in, int64_t limit, double *g)
{
    if (in <= 0) {
        *g = 0;
        return 0;
    }
    double max = (double)(limit - 1);
    if (in >= max) {
        *g = 0;
        return max;
    }
    *g = 1;
    return in;
}

static double reflect(double in, int64_t twice_low, int64_t twice_high, double *g)
{
    if (twice_low == twice_high) {
        *g = 0;
        return 0;
    }
    double min = (double)twice_low / 2, span = (double)(twice_high - twice_low) / 2;
    int mult = 1;
    in -= min;
    if (in < 0) {
        mult = -1;
        in = -in;
    }
    double extra = fmod(in, span);
    int64_t flips = (int64_t)floor(in / span);
    if (flips % 2 == 0) {
        *g = mult;
        return extra + min;
    }
    *g = -mult;
    return span - extra + min;
}

/* border and reflection padding of a pixel coordinate; *g its derivative */
static double pad_coord(double c, int64_t size, int padding, bool align, double *g)
{
    double g1 = 1, g2 = 1;
    if (padding == GS_BORDER)
        c = clip(c, size, &g1);
    else if (padding == GS_REFLECTION) {
        c = align ? reflect(c, 0, 2 * (size - 1), &g2) : reflect(c, -1, 2 * size - 1, &g2);
        c = clip(c, size, &g1);
    }
    *g = g1 * g2;
    return c;
}

/* NaN and values far outside int's range become -100 (out of bounds) */
static double safe_int(double c)
{
    return isfinite(c) && c > (double)INT_MIN && c < (double)INT_MAX ? c : -100;
}

double tn__gs_source_index(double c, int64_t size, int padding, bool align, double *g)
{
    double gu, gp;
    c = tn__gs_unnormalize(c, size, align, &gu);
    c = pad_coord(c, size, padding, align, &gp);
    *g = gu * gp;
    return safe_int(c);
}

static bool inside(int64_t x, int64_t y, int64_t w, int64_t h)
{
    return x >= 0 && x < w && y >= 0 && y < h;
}

void tn__gs_cubic_coeffs(double c[4], double t)
{
    const double a = -0.75;
    double x = t + 1;
    c[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    x = 1 - t;
    c[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t;
    c[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

void tn__gs_cubic_coeffs_grad(double c[4], double t)
{
    const double a = -0.75;
    double x = -1 - t;
    c[0] = (-3 * a * x - 10 * a) * x - 8 * a;
    x = -t;
    c[1] = (-3 * (a + 2) * x - 2 * (a + 3)) * x;
    x = 1 - t;
    c[2] = (3 * (a + 2) * x - 2 * (a + 3)) * x;
    x = 2 - t;
    c[3] = (3 * a * x - 10 * a) * x + 8 * a;
}

int64_t tn__gs_tap1(int64_t x, int64_t size, int padding, bool align)
{
    double g;
    int64_t i = (int64_t)safe_int(pad_coord((double)x, size, padding, align, &g));
    return i >= 0 && i < size ? i : -1;
}

/* bicubic's tap (x, y), padded; -1 when it reads zeros */
static int64_t tap(int64_t x, int64_t y, int64_t w, int64_t h, int padding, bool align)
{
    int64_t ix = tn__gs_tap1(x, w, padding, align), iy = tn__gs_tap1(y, h, padding, align);
    return ix >= 0 && iy >= 0 ? iy * w + ix : -1;
}

int tn__gs_check(const struct tn_tensor *input, const struct tn_tensor *grid,
                 int64_t interpolation_mode, int64_t padding_mode, int nd)
{
    char a[128], b[128];
    enum tn_dtype dt = input->dtype;
    if (dt != TN_FLOAT32 && dt != TN_FLOAT64 && dt != TN_FLOAT16 && dt != TN_BFLOAT16)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'",
                            nd == 4 ? "grid_sampler_2d_cpu_kernel_impl" : "grid_sampler3d_cpu",
                            tn_dtype_info(dt)->c10_name);
    if (grid->dtype != dt)
        return tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                            tn_dtype_info(dt)->c10_name, tn_dtype_info(grid->dtype)->c10_name);
    tn_shape_format(input->sizes, input->ndim, a, sizeof a);
    tn_shape_format(grid->sizes, grid->ndim, b, sizeof b);
    if (input->ndim < 1 || grid->ndim < 1 || input->sizes[0] != grid->sizes[0])
        return tn_set_error(TN_ESHAPE, "grid_sampler(): expected grid and input to have same "
                            "batch size, but got input with sizes %s and grid with sizes %s", a,
                            b);
    if (grid->sizes[grid->ndim - 1] != input->ndim - 2)
        return tn_set_error(TN_ESHAPE, "grid_sampler(): expected grid to have size %d in last "
                            "dimension, but got grid with sizes %s", input->ndim - 2, b);
    for (int i = 2; i < input->ndim; i++)
        if (input->sizes[i] <= 0)
            return tn_set_error(TN_ESHAPE, "grid_sampler(): expected input to have non-empty "
                                "spatial dimensions, but input has sizes %s with dimension %d "
                                "being empty", a, i);
    if (input->ndim != nd || grid->ndim != nd)
        return tn_set_error(TN_ESHAPE, "grid_sampler(): expected %dD input and grid with same "
                            "number of dimensions, but got input with sizes %s and grid with "
                            "sizes %s", nd, a, b);
    if (interpolation_mode < 0 || interpolation_mode > 2 || padding_mode < 0 || padding_mode > 2)
        return tn_set_error(TN_EINVAL, "grid_sampler_%dd: interpolation_mode must be 0, 1 or 2 "
                            "and padding_mode 0, 1 or 2 (got %lld and %lld)", nd - 2,
                            (long long)interpolation_mode, (long long)padding_mode);
    return TN_OK;
}

struct tn_tensor *tn__cpu_grid_sampler_2d(tn_keyset ks, const struct tn_tensor *input,
                                          const struct tn_tensor *grid,
                                          int64_t interpolation_mode, int64_t padding_mode,
                                          bool align_corners)
{
    if (tn__gs_check(input, grid, interpolation_mode, padding_mode, 4) < 0)
        return NULL;
    int64_t n = input->sizes[0], c = input->sizes[1], h = input->sizes[2], w = input->sizes[3];
    int64_t oh = grid->sizes[1], ow = grid->sizes[2];
    if (input->device.type == TN_DEVICE_META)
        return tn_empty_on(TN_SHAPE(n, c, oh, ow), input->dtype, input->device);
    if (input->dtype == TN_FLOAT16 || input->dtype == TN_BFLOAT16)
        return tn__gs_forward16(input, grid, (int)interpolation_mode, (int)padding_mode,
                                align_corners);
    struct tn_tensor *x, *gr, *out;
    if (tn__gs_f64(input, grid, TN_SHAPE(n, c, oh, ow), &x, &gr, &out) < 0)
        return NULL;
    const double *xp = tn_data(x), *gp = tn_data(gr);
    double *op = tn_data(out);
    int pad = (int)padding_mode;
    bool al = align_corners;
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < oh * ow; p++) {
            double gx = gp[(b * oh * ow + p) * 2], gy = gp[(b * oh * ow + p) * 2 + 1], g;
            const double *img = xp + b * c * h * w;
            double *o = op + b * c * oh * ow + p;
            if (interpolation_mode == GS_BICUBIC) {
                double ix = tn__gs_unnormalize(gx, w, al, &g);
                double iy = tn__gs_unnormalize(gy, h, al, &g);
                double fx = floor(ix), fy = floor(iy), cx[4], cy[4];
                tn__gs_cubic_coeffs(cx, ix - fx);
                tn__gs_cubic_coeffs(cy, iy - fy);
                int64_t t[16];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++)
                        t[i * 4 + j] = tap((int64_t)fx - 1 + j, (int64_t)fy - 1 + i, w, h, pad, al);
                for (int64_t ch = 0; ch < c; ch++) {
                    double s = 0;
                    for (int i = 0; i < 4; i++) {
                        double r = 0;
                        for (int j = 0; j < 4; j++)
                            r += (t[i * 4 + j] >= 0 ? img[ch * h * w + t[i * 4 + j]] : 0) * cx[j];
                        s += r * cy[i];
                    }
                    o[ch * oh * ow] = s;
                }
                continue;
            }
            double ix = tn__gs_source_index(gx, w, pad, al, &g);
            double iy = tn__gs_source_index(gy, h, pad, al, &g);
            if (interpolation_mode == GS_NEAREST) {
                int64_t nx = (int64_t)nearbyint(ix), ny = (int64_t)nearbyint(iy);
                for (int64_t ch = 0; inside(nx, ny, w, h) && ch < c; ch++)
                    o[ch * oh * ow] = img[ch * h * w + ny * w + nx];
                continue;
            }
            int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy);
            int64_t cxs[4] = {x0, x0 + 1, x0, x0 + 1}, cys[4] = {y0, y0, y0 + 1, y0 + 1};
            /* PyTorch's nw, ne, sw, se weights from the corners */
            double xw = (double)(x0 + 1) - ix, xe = ix - (double)x0;
            double yn = (double)(y0 + 1) - iy, ys = iy - (double)y0;
            double wt[4] = {xw * yn, xe * yn, xw * ys, xe * ys};
            for (int k = 0; k < 4; k++) {
                if (!inside(cxs[k], cys[k], w, h))
                    continue;
                for (int64_t ch = 0; ch < c; ch++)
                    o[ch * oh * ow] += img[ch * h * w + cys[k] * w + cxs[k]] * wt[k];
            }
        }
    tn__nn_drop(0, x, gr, NULL, NULL);
    return tn__nn_to(out, input->dtype);
}

int tn__cpu_grid_sampler_2d_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                     const struct tn_tensor *input, const struct tn_tensor *grid,
                                     int64_t interpolation_mode, int64_t padding_mode,
                                     bool align_corners, const bool *output_mask,
                                     int output_mask_len, struct tn_tensor **result0,
                                     struct tn_tensor **result1)
{
    char a[128];
    int rc = tn__gs_check(input, grid, interpolation_mode, padding_mode, 4);
    if (rc < 0)
        return rc;
    int64_t n = input->sizes[0], c = input->sizes[1], h = input->sizes[2], w = input->sizes[3];
    int64_t oh = grid->sizes[1], ow = grid->sizes[2];
    if (grad_output->ndim != 4 || grad_output->sizes[0] != n || grad_output->sizes[1] != c ||
        grad_output->sizes[2] != oh || grad_output->sizes[3] != ow)
        return tn_set_error(TN_ESHAPE, "grid_sampler_2d_backward: grad_output of sizes %s, "
                            "expected [%lld, %lld, %lld, %lld]",
                            tn_shape_format(grad_output->sizes, grad_output->ndim, a, sizeof a),
                            (long long)n, (long long)c, (long long)oh, (long long)ow);
    bool want_in = output_mask_len < 1 || output_mask[0];
    bool want_grid = output_mask_len < 2 || output_mask[1];
    *result0 = *result1 = NULL;
    struct tn_tensor *go = tn__nn_f64(grad_output), *x = go ? tn__nn_f64(input) : NULL;
    struct tn_tensor *gr = x ? tn__nn_f64(grid) : NULL;
    struct tn_tensor *gin = gr ? tn__nn_zeros64(input->sizes, 4) : NULL;
    struct tn_tensor *ggr = gin ? tn__nn_zeros64(grid->sizes, 4) : NULL;
    if (!ggr) {
        tn__nn_drop(0, go, x, gr, gin);
        return tn_last_status();
    }
    const double *gop = tn_data(go), *xp = tn_data(x), *gp = tn_data(gr);
    double *gip = tn_data(gin), *ggp = tn_data(ggr);
    int pad = (int)padding_mode;
    bool al = align_corners;
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < oh * ow; p++) {
            double gx = gp[(b * oh * ow + p) * 2], gy = gp[(b * oh * ow + p) * 2 + 1];
            const double *img = xp + b * c * h * w, *g0 = gop + b * c * oh * ow + p;
            double *gi = gip + b * c * h * w, gix = 0, giy = 0, mx, my;
            if (interpolation_mode == GS_BICUBIC) {
                double ix = tn__gs_unnormalize(gx, w, al, &mx);
                double iy = tn__gs_unnormalize(gy, h, al, &my);
                double fx = floor(ix), fy = floor(iy), cx[4], cy[4], dx[4], dy[4];
                tn__gs_cubic_coeffs(cx, ix - fx);
                tn__gs_cubic_coeffs(cy, iy - fy);
                tn__gs_cubic_coeffs_grad(dx, ix - fx);
                tn__gs_cubic_coeffs_grad(dy, iy - fy);
                for (int i = 0; i < 4; i++)      /* x */
                    for (int j = 0; j < 4; j++) { /* y */
                        int64_t t = tap((int64_t)fx - 1 + i, (int64_t)fy - 1 + j, w, h, pad, al);
                        if (t < 0)
                            continue;
                        for (int64_t ch = 0; ch < c; ch++) {
                            double gout = g0[ch * oh * ow], v = img[ch * h * w + t];
                            gi[ch * h * w + t] += gout * cx[i] * cy[j];
                            gix -= v * dx[i] * cy[j] * gout;
                            giy -= v * dy[j] * cx[i] * gout;
                        }
                    }
                ggp[(b * oh * ow + p) * 2] = mx * gix;
                ggp[(b * oh * ow + p) * 2 + 1] = my * giy;
                continue;
            }
            double ix = tn__gs_source_index(gx, w, pad, al, &mx);
            double iy = tn__gs_source_index(gy, h, pad, al, &my);
            if (interpolation_mode == GS_NEAREST) {
                int64_t nx = (int64_t)nearbyint(ix), ny = (int64_t)nearbyint(iy);
                for (int64_t ch = 0; inside(nx, ny, w, h) && ch < c; ch++)
                    gi[ch * h * w + ny * w + nx] += g0[ch * oh * ow];
                continue;
            }
            int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy);
            double xw = (double)(x0 + 1) - ix, xe = ix - (double)x0;
            double yn = (double)(y0 + 1) - iy, ys = iy - (double)y0;
            int64_t cxs[4] = {x0, x0 + 1, x0, x0 + 1}, cys[4] = {y0, y0, y0 + 1, y0 + 1};
            double wt[4] = {xw * yn, xe * yn, xw * ys, xe * ys};
            /* d weight / d ix and d iy for nw, ne, sw, se */
            double dwx[4] = {-yn, yn, -ys, ys}, dwy[4] = {-xw, -xe, xw, xe};
            for (int k = 0; k < 4; k++) {
                if (!inside(cxs[k], cys[k], w, h))
                    continue;
                int64_t at = cys[k] * w + cxs[k];
                for (int64_t ch = 0; ch < c; ch++) {
                    double gout = g0[ch * oh * ow], v = img[ch * h * w + at];
                    gi[ch * h * w + at] += wt[k] * gout;
                    gix += v * dwx[k] * gout;
                    giy += v * dwy[k] * gout;
                }
            }
            ggp[(b * oh * ow + p) * 2] = mx * gix;
            ggp[(b * oh * ow + p) * 2 + 1] = my * giy;
        }
    tn__nn_drop(0, go, x, gr, NULL);
    return tn__gs_results(gin, ggr, want_in, want_grid, input->dtype, result0, result1);
}

int tn__gs_f64(const struct tn_tensor *input, const struct tn_tensor *grid, const int64_t *osz,
               int nd, struct tn_tensor **x, struct tn_tensor **gr, struct tn_tensor **out)
{
    *x = tn__nn_f64(input);
    *gr = *x ? tn__nn_f64(grid) : NULL;
    *out = *gr ? tn__nn_zeros64(osz, nd) : NULL;
    if (*out)
        return TN_OK;
    return tn__nn_drop(tn_last_status(), *x, *gr, NULL, NULL);
}

int tn__gs_results(struct tn_tensor *gin, struct tn_tensor *ggr, bool want_in, bool want_grid,
                   enum tn_dtype dt, struct tn_tensor **result0, struct tn_tensor **result1)
{
    *result0 = want_in ? tn__nn_to(gin, dt) : NULL;
    *result1 = want_grid ? tn__nn_to(ggr, dt) : NULL;
    if (!want_in)
        tn_release(gin);
    if (!want_grid)
        tn_release(ggr);
    if ((want_in && !*result0) || (want_grid && !*result1)) {
        tn_release(*result0);
        tn_release(*result1);
        *result0 = *result1 = NULL;
        return tn_last_status();
    }
    return TN_OK;
}
