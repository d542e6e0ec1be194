/*
 * ops/histogram.c: torch.histogram (.bin_ct and .bins_tensor) as PyTorch
 * 2.x's CPU kernel computes it (Histogram.cpp's checks and words, in their
 * order; HistogramKernel.cpp's histogramdd_cpu_contiguous on self viewed as
 * [numel, 1]): bin_ct's edges are linspace over the range (or self's
 * extrema) in self's dtype and an element's bin is found by division in
 * that dtype, then corrected by std::upper_bound over the edges next to it
 * (LINEAR_INTERPOLATION_WITH_LOCAL_SEARCH); a bins tensor's edges are
 * searched whole (BINARY_SEARCH). Elements outside the edges and NaNs are
 * skipped, the last bin keeps its right edge, the weights are added in
 * self's dtype in input order within each of at::parallel_for's chunks
 * (200 elements or more a thread) and the chunks' sums added in thread
 * order; density divides by the sum and then by each bin's width.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"

/* HISTOGRAM_GRAIN_SIZE: the elements at::parallel_for gives a thread at least. */
#define HIST_GRAIN 200

/* (x - left) * nbins / (right - left) as input_t computes it (each
 * operation rounded to dt; nbins converted to dt first), truncated. */
static int64_t linear_pos(double x, double left, double right, int64_t nbins, enum tn_dtype dt)
{
    double d = tn__round_to(x - left, dt), w = tn__round_to(right - left, dt);
    return (int64_t)tn__round_to(tn__round_to(d * tn__round_to((double)nbins, dt), dt) / w, dt);
}

/* std::upper_bound over e[lo, hi) (libstdc++'s halving loop, so an
 * unsorted bins tensor answers as PyTorch's). */
static int64_t upper_bound(const double *e, int64_t lo, int64_t hi, double x)
{
    int64_t len = hi - lo;
    while (len > 0) {
        int64_t half = len >> 1, mid = lo + half;
        if (x < e[mid])
            len = half;
        else {
            lo = mid + 1;
            len = len - half - 1;
        }
    }
    return lo;
}

/* hist[nb] (dt's values, kept in double) of x[lo, hi) against the edges
 * e[nb + 1]. */
static void fill_chunk(const double *x, const double *w, int64_t lo, int64_t hi,
                       const double *e, int64_t nb, bool linear, enum tn_dtype dt, double *hist)
{
    double left = e[0], right = e[nb];
    for (int64_t i = lo; i < hi; i++) {
        double v = x[i];
        if (!(v >= left && v <= right))
            continue;
        int64_t pos;
        if (linear) {
            pos = linear_pos(v, left, right, nb, dt);
            int64_t pmin = pos - 1 > 0 ? pos - 1 : 0, pmax = pos + 2 < nb + 1 ? pos + 2 : nb + 1;
            pos = upper_bound(e, pmin, pmax, v) - 1;
        } else
            pos = upper_bound(e, 0, nb + 1, v) - 1;
        if (pos == nb)
            pos -= 1;
        hist[pos] = tn__round_to(hist[pos] + (w ? w[i] : 1.0), dt);
    }
}

/* The counts (or weights) of self against edges (self's dtype, nb + 1 of
 * them), divided as density asks: a new [nb] tensor of self's dtype. */
static struct tn_tensor *fill(const struct tn_tensor *self, const struct tn_tensor *weight,
                              const struct tn_tensor *edges, bool density, bool linear)
{
    enum tn_dtype dt = self->dtype;
    int64_t nb = tn_numel(edges) - 1, m = tn_numel(self);
    if (!tn_dtype_is_floating(dt))
        return tn_set_error(TN_EDTYPE, "\"histogram_cpu\" not implemented for '%s'",
                            tn_dtype_info(dt)->c10_name), NULL;
    struct tn_tensor *xd = tn_to_dtype(self, TN_FLOAT64), *xc = xd ? tn_contiguous(xd) : NULL;
    struct tn_tensor *wd = xc && weight ? tn_to_dtype(weight, TN_FLOAT64) : NULL;
    struct tn_tensor *wc = wd ? tn_contiguous(wd) : NULL;
    struct tn_tensor *ed = xc && (!weight || wc) ? tn_to_dtype(edges, TN_FLOAT64) : NULL;
    struct tn_tensor *ec = ed ? tn_contiguous(ed) : NULL;
    int64_t threads = tn_get_num_threads(), parts = 1;
    if (m > HIST_GRAIN && threads > 1)
        parts = threads < (m + HIST_GRAIN - 1) / HIST_GRAIN ? threads : (m + HIST_GRAIN - 1) / HIST_GRAIN;
    double *part = ec ? calloc((size_t)(nb * (parts + 1)), sizeof *part) : NULL;
    struct tn_tensor *h = NULL, *r = NULL;
    if (ec && !part)
        tn_set_error(TN_ENOMEM, "histogram: out of memory for %lld bins", (long long)nb);
    if (part) {
        int64_t chunk = (m + parts - 1) / parts;
        double *sum = part + nb * parts;
        for (int64_t p = 0; p < parts; p++) {
            int64_t lo = p * chunk, hi = lo + chunk < m ? lo + chunk : m;
            fill_chunk(tn_data(xc), wc ? tn_data(wc) : NULL, lo, hi, tn_data(ec), nb, linear, dt,
                       part + p * nb);
            for (int64_t b = 0; b < nb; b++)
                sum[b] = p ? tn__round_to(sum[b] + part[p * nb + b], dt) : part[b];
        }
        h = tn_from_data(sum, &nb, 1, TN_FLOAT64);
        r = h ? tn_to_dtype(h, dt) : NULL;
    }
    free(part);
    tn_release(h);
    tn_release(ec);
    tn_release(ed);
    tn_release(wc);
    tn_release(wd);
    tn_release(xc);
    tn_release(xd);
    if (r && density) {
        /* hist.div_(hist.sum().item()), then hist.div_(bin_edges.diff()) */
        struct tn_tensor *s = tn_sum(r, TN_DTYPE_UNSET);
        struct tn_tensor *ws = s ? tn__wrapped_scalar(tn_float(tn_item_double(s))) : NULL;
        struct tn_tensor *dw = ws ? tn_diff(edges, 1, -1, NULL, NULL) : NULL;
        int st = dw ? tn_div_(r, ws) : tn_last_status();
        if (st >= 0)
            st = tn_div_(r, dw);
        tn_release(dw);
        tn_release(ws);
        tn_release(s);
        if (st < 0) {
            tn_release(r);
            r = NULL;
        }
    }
    return r;
}

static int bins_positive(int64_t bins)
{
    if (bins <= 0)
        return tn_set_error(TN_EINVAL, "torch.histogram(): bins must be > 0, but got %lld for "
                            "dimension 0", (long long)bins);
    return TN_OK;
}

/* histogramdd_check_inputs's weight checks for self viewed as [numel, 1]. */
static int weight_check(const struct tn_tensor *self, const struct tn_tensor *weight)
{
    if (!weight)
        return TN_OK;
    if (weight->dtype != self->dtype)
        return tn_set_error(TN_EDTYPE, "torch.histogramdd: if weight tensor is provided, input "
                            "tensor and weight tensor should have the same dtype, but got "
                            "input(%s), and weight(%s)", tn__dtype_meta_name(self->dtype),
                            tn__dtype_meta_name(weight->dtype));
    if (tn_numel(weight) != tn_numel(self))
        return tn_set_error(TN_ESHAPE, "torch.histogramdd: if weight tensor is provided it should "
                            "have the same shape as the input tensor excluding its innermost "
                            "dimension, but got input with shape [%lld, 1] and weight with shape "
                            "[%lld]", (long long)tn_numel(self), (long long)tn_numel(weight));
    return TN_OK;
}

/* select_outer_bin_edges: range, or self's extrema (0 and 1 when empty);
 * PyTorch's checks; an empty range widened by 0.5 each way. */
static int outer_edges(const struct tn_tensor *self, const double *range, int range_len,
                       double *lo, double *hi)
{
    *lo = 0, *hi = 1;
    if (range) {
        if (range_len != 2)
            return tn_set_error(TN_EINVAL, "torch.histogramdd: for a 1-dimensional histogram "
                                "range should have 2 elements, but got %d", range_len);
        *lo = range[0], *hi = range[1];
    } else if (tn_numel(self) > 0) {
        /* PyTorch's extrema here are a float32/float64 kernel's */
        if (self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64)
            return tn_set_error(TN_EDTYPE, "\"histogramdd\" not implemented for '%s'",
                                tn_dtype_info(self->dtype)->c10_name);
        struct tn_tensor *a = tn_amin(self, NULL, 0, false);
        struct tn_tensor *b = a ? tn_amax(self, NULL, 0, false) : NULL;
        if (b)
            *lo = tn_item_double(a), *hi = tn_item_double(b);
        tn_release(a);
        tn_release(b);
        if (!b)
            return tn_last_status();
    }
    if (!isfinite(*lo) || !isfinite(*hi))
        return tn_set_error(TN_EINVAL, "torch.histogramdd: dimension 0's range [%g, %g] is not "
                            "finite", *lo, *hi);
    if (*lo > *hi)
        return tn_set_error(TN_EINVAL, "torch.histogramdd: min should not exceed max, but got min "
                            "%g max %g for dimension 0", *lo, *hi);
    if (*lo == *hi)
        *lo -= 0.5, *hi += 0.5;
    return TN_OK;
}

int tn__cpu_histogram_bin_ct(tn_keyset ks, const struct tn_tensor *self, int64_t bins,
                             const double *range, int range_len, const struct tn_tensor *weight,
                             bool density, struct tn_tensor **hist, struct tn_tensor **bin_edges)
{
    (void)ks;
    double lo, hi;
    if (bins_positive(bins) < 0 || outer_edges(self, range, range_len, &lo, &hi) < 0)
        return tn_last_status();
    struct tn_tensor *e = tn_linspace(tn_float(lo), tn_float(hi), bins + 1, self->dtype);
    struct tn_tensor *h = e && weight_check(self, weight) >= 0 ? fill(self, weight, e, density, true)
                                                               : NULL;
    if (!h) {
        tn_release(e);
        return tn_last_status();
    }
    *hist = h;
    *bin_edges = e;
    return TN_OK;
}

int tn__cpu_histogram_bins_tensor(tn_keyset ks, const struct tn_tensor *self,
                                  const struct tn_tensor *bins, const struct tn_tensor *weight,
                                  bool density, struct tn_tensor **hist,
                                  struct tn_tensor **bin_edges)
{
    (void)ks;
    if (bins->dtype != self->dtype)
        return tn_set_error(TN_EDTYPE, "torch.histogramdd: input tensor and bins tensors should "
                            "have the same dtype, but got input with dtype %s and bins for "
                            "dimension 0 with dtype %s", tn__dtype_meta_name(self->dtype),
                            tn__dtype_meta_name(bins->dtype));
    if (bins->ndim != 1)
        return tn_set_error(TN_ESHAPE, "torch.histogramdd: bins tensor should have one dimension, "
                            "but got %d dimensions in the bins tensor for dimension 0", bins->ndim);
    if (tn_numel(bins) == 0)
        return tn_set_error(TN_ESHAPE, "torch.histogramdd: bins tensor should have at least 1 "
                            "element, but got 0 elements in the bins tensor for dimension 0");
    if (weight_check(self, weight) < 0 || bins_positive(tn_numel(bins) - 1) < 0)
        return tn_last_status();
    struct tn_tensor *e = tn_contiguous(bins);
    struct tn_tensor *c = e ? tn_clone(e) : NULL; /* bin_edges: a copy of bins */
    struct tn_tensor *h = c ? fill(self, weight, c, density, false) : NULL;
    tn_release(e);
    if (!h) {
        tn_release(c);
        return tn_last_status();
    }
    *hist = h;
    *bin_edges = c;
    return TN_OK;
}
