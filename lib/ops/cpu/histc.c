/*
 * ops/cpu/histc.c: torch.histc as PyTorch's CPU kernel computes it
 * (histogram_histc_out with the LINEAR_INTERPOLATION algorithm of
 * HistogramKernel.cpp, without the local search torch.histogram adds): the
 * outer edges are those of linspace(min, max, bins + 1) in self's dtype; an
 * element's bin is found by division in that dtype alone.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"

/* (x - lo) * bins / (hi - lo) as input_t computes it: each step rounded to
 * float16/bfloat16 (c10's Half and BFloat16 operators), float32 in float */
static int64_t interpolate(double x, double lo, double hi, int64_t bins, enum tn_dtype dt)
{
    if (dt == TN_FLOAT64)
        return (int64_t)((x - lo) * (double)bins / (hi - lo));
    if (dt == TN_FLOAT32)
        return (int64_t)(((float)x - (float)lo) * (float)bins / ((float)hi - (float)lo));
    float d = tn__round16((float)x - (float)lo, dt);
    float m = tn__round16(d * tn__round16((float)bins, dt), dt);
    return (int64_t)tn__round16(m / tn__round16((float)hi - (float)lo, dt), dt);
}

/* The outer edges as histc_select_outer_bin_edges picks them: min and
 * max, or self's extrema where they are equal, widened by 1 where still
 * equal; PyTorch's errors. */
static int outer_edges(const struct tn_tensor *self, struct tn_scalar min, struct tn_scalar max,
                       double *lo, double *hi)
{
    *lo = tn_scalar_to_double(min), *hi = tn_scalar_to_double(max);
    if (*lo == *hi && tn_numel(self) > 0) {
        if (tn_dtype_is_complex(self->dtype))
            return tn_set_error(TN_EDTYPE, "aminmax not implemented for %s",
                                tn_dtype_info(self->dtype)->c10_name);
        struct tn_tensor *a = tn_amin(self, NULL, 0, false), *b = a ? tn_amax(self, NULL, 0, false) : NULL;
        if (b) {
            *lo = tn_item_double(a);
            *hi = tn_item_double(b);
        }
        tn_release(a);
        tn_release(b);
        if (!b)
            return TN_EINVAL;
    }
    if (*lo == *hi)
        *lo -= 1, *hi += 1;
    if (isinf(*lo) || isinf(*hi) || isnan(*lo) || isnan(*hi))
        return tn_set_error(TN_EINVAL, "torch.histc: range of [%g, %g] is not finite", *lo, *hi);
    if (!(*lo < *hi))
        return tn_set_error(TN_EINVAL, "torch.histc: max must be larger than min");
    return TN_OK;
}

/* histc (CPU and Meta): [bins] counts in self's dtype of the elements in
 * [min, max] (the last bin holds its right edge; NaNs and the elements
 * outside are not counted). float32, float64, float16 and bfloat16, as
 * PyTorch's histogram_cpu. */
struct tn_tensor *tn__cpu_histc(tn_keyset ks, const struct tn_tensor *self, int64_t bins,
                                struct tn_scalar min, struct tn_scalar max)
{
    if (bins <= 0)
        return tn_set_error(TN_EINVAL, "torch.histogram(): bins must be > 0, but got %lld for "
                            "dimension 0", (long long)bins), NULL;
    if (self->device.type == TN_DEVICE_META) {
        if (!tn_dtype_is_floating(self->dtype))
            return tn_set_error(TN_EDTYPE, "\"histogram_cpu\" not implemented for '%s'",
                                tn_dtype_info(self->dtype)->c10_name), NULL;
        return tn_empty_on(&bins, 1, self->dtype, self->device);
    }
    double lo, hi;
    if (outer_edges(self, min, max, &lo, &hi) < 0)
        return NULL;
    struct tn_tensor *edges = tn_linspace(tn_float(lo), tn_float(hi), bins + 1, self->dtype);
    if (!edges)
        return NULL;
    if (!tn_dtype_is_floating(self->dtype)) {
        tn_release(edges);
        return tn_set_error(TN_EDTYPE, "\"histogram_cpu\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    }
    struct tn_tensor *e64 = tn_to_dtype(edges, TN_FLOAT64);
    struct tn_tensor *x64 = e64 ? tn_to_dtype(self, TN_FLOAT64) : NULL;
    struct tn_tensor *xc = x64 ? tn_contiguous(x64) : NULL;
    double *counts = xc ? calloc((size_t)bins, sizeof *counts) : NULL;
    struct tn_tensor *h = NULL, *r = NULL;
    if (xc && !counts)
        tn_set_error(TN_ENOMEM, "histc: out of memory for %lld bins", (long long)bins);
    if (counts) {
        const double *e = tn_data(e64), *x = tn_data(xc);
        double left = e[0], right = e[bins];
        int64_t n = tn_numel(xc);
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            if (!(v >= left && v <= right))
                continue;
            int64_t pos = interpolate(v, left, right, bins, self->dtype);
            if (pos >= bins) /* the last bin holds its right edge */
                pos = bins - 1;
            counts[pos < 0 ? 0 : pos] += 1;
        }
        h = tn_from_data(counts, &bins, 1, TN_FLOAT64);
        r = h ? tn_to_dtype(h, self->dtype) : NULL;
    }
    free(counts);
    tn_release(edges);
    tn_release(e64);
    tn_release(x64);
    tn_release(xc);
    tn_release(h);
    return r;
}
