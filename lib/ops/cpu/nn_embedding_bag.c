/*
 * ops/cpu/nn_embedding_bag.c: _embedding_bag (the core ATen form of
 * F.embedding_bag: sums, means or maxima of weight's rows over bags of
 * indices given by offsets; Meta shapes from the same kernel) and the two
 * backward ops its derivative calls. Values are computed in float64 and
 * rounded once into weight's dtype (float16, bfloat16, float32, float64).
 * The three integer results follow PyTorch 2.x's CPU kernel exactly, since
 * its backward reads them: offset2bag (each index's bag; empty on PyTorch's
 * fast path: mode sum without padding_idx, weight not float64, rows of
 * stride 1), bag_size (the indices other than padding_idx in each bag; zeros
 * for sum) and max_indices (for max the row each maximum came from, first
 * one on ties, 0 in an empty bag; for sum and mean a copy of bag_size).
 * Integer results are int32 when indices and offsets both are, else int64.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

enum { EB_SUM = 0, EB_MEAN = 1, EB_MAX = 2 };

/* t as a new contiguous int64 tensor */
static struct tn_tensor *as64(const struct tn_tensor *t)
{
    return tn__nn_as(t, TN_INT64);
}

/* PyTorch's argument checks, shared by the CPU and Meta kernels. */
static int eb_check(const struct tn_tensor *weight, const struct tn_tensor *indices,
                    const struct tn_tensor *offsets, int64_t mode,
                    const struct tn_tensor *psw)
{
    enum tn_dtype wd = weight->dtype;
    if (wd != TN_FLOAT16 && wd != TN_BFLOAT16 && wd != TN_FLOAT32 && wd != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, "Expected tensor for argument #1 'weight' to have one of "
                            "the following scalar types: Half, BFloat16, Float, Double; but got "
                            "torch.%sTensor instead (while checking arguments for embedding_bag)",
                            tn_dtype_info(wd)->c10_name);
    const struct tn_tensor *io[2] = {indices, offsets};
    const char *nm[2] = {"indices", "offsets"};
    for (int k = 0; k < 2; k++)
        if (io[k]->dtype != TN_INT64 && io[k]->dtype != TN_INT32)
            return tn_set_error(TN_EDTYPE, "Expected tensor for argument #%d '%s' to have one of "
                                "the following scalar types: Long, Int; but got torch.%sTensor "
                                "instead (while checking arguments for embedding_bag)", k + 2,
                                nm[k], tn_dtype_info(io[k]->dtype)->c10_name);
    if (weight->ndim != 2)
        return tn_set_error(TN_ESHAPE, "embedding_bag: weight must be 2-D, got %d-D",
                            weight->ndim);
    if (indices->ndim != 1 || offsets->ndim != 1)
        return tn_set_error(TN_ESHAPE, "embedding_bag: input and offsets must be 1-D (got %d-D "
                            "and %d-D)", indices->ndim, offsets->ndim);
    if (mode < 0 || mode > 2)
        return tn_set_error(TN_EINVAL, "`mode` must be sum, mean, or max.");
    if (psw) {
        if (mode != EB_SUM)
            return tn_set_error(TN_EINVAL, "embedding_bag: per_sample_weights only supported "
                                "with mode='sum'");
        if (psw->dtype != wd)
            return tn_set_error(TN_EDTYPE, "Expected tensor for argument #1 'weight' to have the "
                                "same type as tensor for argument #1 'per_sample_weights'; but "
                                "type torch.%sTensor does not equal torch.%sTensor (while "
                                "checking arguments for embedding_bag)",
                                tn_dtype_info(wd)->c10_name, tn_dtype_info(psw->dtype)->c10_name);
        if (psw->ndim != 1 || tn_numel(psw) != tn_numel(indices))
            return tn_set_error(TN_ESHAPE, "Expected per_sample_weights.value().numel() == "
                                "indices.numel() to be true, but got false.  (Could this error "
                                "message be improved?  If so, please report an enhancement "
                                "request to PyTorch.)");
    }
    return TN_OK;
}

/* The four results' shapes and dtypes, as new tensors on `dev`. */
static int eb_results(const struct tn_tensor *weight, const struct tn_tensor *indices,
                      const struct tn_tensor *offsets, const struct tn_tensor *psw,
                      int64_t mode, bool include_last_offset,
                      int64_t padding_idx, struct tn_device dev, struct tn_tensor **r)
{
    int64_t nb = tn_numel(offsets) - (include_last_offset ? 1 : 0), d = weight->sizes[1];
    if (nb < 0)
        nb = 0;
    enum tn_dtype it = indices->dtype == TN_INT32 && offsets->dtype == TN_INT32 ? TN_INT32
                                                                                 : TN_INT64;
    /* PyTorch's is_fast_path: no float64, unit row stride, no padding_idx */
    bool fast = mode == EB_SUM && padding_idx < 0 && weight->dtype != TN_FLOAT64 &&
                (weight->sizes[1] <= 1 || weight->strides[1] == 1) &&
                (!psw || tn_numel(psw) <= 1 || psw->strides[0] == 1);
    int64_t o2b = fast ? 0 : tn_numel(indices);
    r[0] = tn_empty_on(TN_SHAPE(nb, d), weight->dtype, dev);
    r[1] = tn_empty_on(TN_SHAPE(o2b), it, dev);
    r[2] = tn_empty_on(TN_SHAPE(nb), it, dev);
    r[3] = mode == EB_MAX ? tn_empty_on(TN_SHAPE(nb, d), it, dev) : tn_empty_on(TN_SHAPE(nb), it, dev);
    for (int k = 0; k < 4; k++)
        if (!r[k]) {
            for (int j = 0; j < 4; j++)
                tn_release(r[j]);
            return tn_last_status();
        }
    return TN_OK;
}

/* Each index's bag (length n) from offsets (nb bags; the last runs to the
 * end of the indices), after PyTorch's checks of offsets. NULL with an
 * error. */
static int64_t *bags_of(const int64_t *off, int64_t noff, int64_t nb, int64_t n)
{
    if (noff > 0 && n > 0 && off[0] != 0) {
        tn_set_error(TN_EINVAL, "offsets[0] has to be 0, i.e., the first sequence in the "
                     "mini-batch has to start from position 0. However, got %lld",
                     (long long)off[0]);
        return NULL;
    }
    if (noff > 0 && off[noff - 1] > n) {
        tn_set_error(TN_EINVAL, "offsets[-1] can not be greater than input's length %lld but "
                     "got offsets[-1] of %lld", (long long)n, (long long)off[noff - 1]);
        return NULL;
    }
    int64_t *bag = malloc((size_t)(n ? n : 1) * sizeof *bag);
    if (!bag) {
        tn_set_error(TN_ENOMEM, "embedding_bag: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        bag[i] = nb ? 0 : -1; /* PyTorch's -1 where there are no bags */
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = off[b], hi = b + 1 < nb ? off[b + 1] : n;
        for (int64_t i = lo < 0 ? 0 : lo; i < hi && i < n; i++)
            bag[i] = b;
    }
    return bag;
}

static void put_int(struct tn_tensor *t, int64_t i, int64_t v)
{
    if (t->dtype == TN_INT32)
        ((int32_t *)tn_data(t))[i] = (int32_t)v;
    else
        ((int64_t *)tn_data(t))[i] = v;
}

int tn__cpu__embedding_bag(tn_keyset ks, const struct tn_tensor *weight,
                           const struct tn_tensor *indices, const struct tn_tensor *offsets,
                           bool scale_grad_by_freq, int64_t mode, bool sparse,
                           const struct tn_tensor *per_sample_weights, bool include_last_offset,
                           int64_t padding_idx, struct tn_tensor **result0,
                           struct tn_tensor **result1, struct tn_tensor **result2,
                           struct tn_tensor **result3)
{
    struct tn_tensor *r[4] = {NULL, NULL, NULL, NULL};
    int rc = eb_check(weight, indices, offsets, mode, per_sample_weights);
    if (rc < 0)
        return rc;
    if (weight->device.type == TN_DEVICE_META) { /* the shapes alone */
        if ((rc = eb_results(weight, indices, offsets, per_sample_weights, mode,
                             include_last_offset, padding_idx, weight->device, r)) < 0)
            return rc;
        *result0 = r[0], *result1 = r[1], *result2 = r[2], *result3 = r[3];
        return TN_OK;
    }
    int64_t n = tn_numel(indices), noff = tn_numel(offsets), nw = weight->sizes[0];
    int64_t nb = noff - (include_last_offset ? 1 : 0), d = weight->sizes[1];
    if (nb < 0)
        nb = 0;
    struct tn_tensor *idx = as64(indices), *off = idx ? as64(offsets) : NULL;
    struct tn_tensor *w = off ? tn__nn_f64(weight) : NULL;
    struct tn_tensor *ps = w && per_sample_weights ? tn__nn_f64(per_sample_weights) : NULL;
    struct tn_tensor *acc = w && (ps || !per_sample_weights) ? tn__nn_zeros64(TN_SHAPE(nb, d))
                                                             : NULL;
    int64_t *bag = acc ? bags_of(tn_data(off), noff, nb, n) : NULL;
    if (!bag)
        goto fail;
    const int64_t *ip = tn_data(idx);
    for (int64_t i = 0; i < n; i++)
        if (ip[i] < 0 || ip[i] >= nw) {
            tn_set_error(TN_EINDEX, "Index %lld of input takes value %lld which is not in the "
                         "valid range [0, %lld)", (long long)i, (long long)ip[i], (long long)nw);
            goto fail;
        }
    if (eb_results(weight, indices, offsets, per_sample_weights, mode, include_last_offset,
                   padding_idx, TN_CPU, r) < 0)
        goto fail;
    const double *wp = tn_data(w), *pp = ps ? tn_data(ps) : NULL;
    double *ap = tn_data(acc);
    int64_t *count = calloc((size_t)(nb ? nb : 1), sizeof *count);
    int64_t *arg = mode == EB_MAX ? calloc((size_t)(nb * d > 0 ? nb * d : 1), sizeof *arg) : NULL;
    if (!count || (mode == EB_MAX && !arg)) {
        free(count);
        free(arg);
        tn_set_error(TN_ENOMEM, "embedding_bag: out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t b = bag[i], j = ip[i];
        if (j == padding_idx || b < 0 || b >= nb) /* (b -1: no bags) */
            continue;
        const double *row = wp + j * d;
        double *o = ap + b * d;
        for (int64_t k = 0; k < d; k++) {
            if (mode != EB_MAX)
                o[k] += pp ? row[k] * pp[i] : row[k];
            else if (!count[b] || (!isnan(o[k]) && (isnan(row[k]) || row[k] > o[k]))) {
                o[k] = row[k]; /* the first maximum (or NaN) wins, as PyTorch's */
                arg[b * d + k] = j;
            }
        }
        count[b]++;
    }
    for (int64_t b = 0; b < nb; b++) {
        if (mode == EB_MEAN && count[b])
            for (int64_t k = 0; k < d; k++)
                ap[b * d + k] /= (double)count[b];
        int64_t bs = mode == EB_SUM ? 0 : count[b];
        put_int(r[2], b, bs);
        if (mode == EB_MAX)
            for (int64_t k = 0; k < d; k++)
                put_int(r[3], b * d + k, arg[b * d + k]);
        else
            put_int(r[3], b, bs);
    }
    for (int64_t i = 0; i < tn_numel(r[1]); i++)
        put_int(r[1], i, bag[i]);
    free(count);
    free(arg);
    struct tn_tensor *o = tn__nn_to(acc, weight->dtype);
    acc = NULL;
    if (!o || tn_copy_(r[0], o) < 0) {
        tn_release(o);
        goto fail;
    }
    tn_release(o);
    free(bag);
    tn__nn_drop(0, idx, off, w, ps);
    *result0 = r[0], *result1 = r[1], *result2 = r[2], *result3 = r[3];
    return TN_OK;
fail:
    free(bag);
    for (int k = 0; k < 4; k++)
        tn_release(r[k]);
    tn_release(acc);
    return tn__nn_drop(tn_last_status(), idx, off, w, ps);
}

/* Each index's bag for the backward ops: offset2bag where the forward
 * wrote one, else from offsets (PyTorch's make_offset2bag); nb bags. */
static int64_t *bags_back(const struct tn_tensor *indices, const struct tn_tensor *offsets,
                          const struct tn_tensor *offset2bag, int64_t nb)
{
    int64_t n = tn_numel(indices);
    struct tn_tensor *src = as64(offset2bag && tn_numel(offset2bag) == n ? offset2bag : offsets);
    if (!src)
        return NULL;
    int64_t *bag = NULL;
    if (offset2bag && tn_numel(offset2bag) == n) {
        if ((bag = malloc((size_t)(n ? n : 1) * sizeof *bag)))
            memcpy(bag, tn_data(src), (size_t)n * sizeof *bag);
        else
            tn_set_error(TN_ENOMEM, "embedding_bag backward: out of memory");
    } else
        bag = bags_of(tn_data(src), tn_numel(src), nb, n);
    tn_release(src);
    return bag;
}

/* weight's gradient of _embedding_bag (PyTorch's _embedding_bag_backward
 * with num_weights taken from the weight): grad's rows (scaled by
 * per_sample_weights, divided by bag_size for mean, by each index's count
 * with scale_grad_by_freq) added into the rows the indices name, padding_idx
 * skipped; for max each maximum's row only. */
struct tn_tensor *tn__cpu_embedding_bag_backward_weight(
    tn_keyset ks, const struct tn_tensor *grad, const struct tn_tensor *weight,
    const struct tn_tensor *indices, const struct tn_tensor *offsets,
    const struct tn_tensor *offset2bag, const struct tn_tensor *bag_size,
    const struct tn_tensor *maximum_indices, bool scale_grad_by_freq, int64_t mode,
    const struct tn_tensor *per_sample_weights, int64_t padding_idx)
{
    int64_t nw = weight->sizes[0], d = weight->sizes[1], n = tn_numel(indices);
    int64_t nb = grad->ndim == 2 ? grad->sizes[0] : 0;
    if (grad->ndim != 2 || grad->sizes[1] != d)
        return tn_set_error(TN_ESHAPE, "embedding_bag backward: grad must be [bags, %lld]",
                            (long long)d), NULL;
    struct tn_tensor *g = tn__nn_f64(grad), *idx = g ? as64(indices) : NULL;
    struct tn_tensor *bs = idx ? as64(bag_size) : NULL, *mi = bs ? as64(maximum_indices) : NULL;
    struct tn_tensor *ps = mi && per_sample_weights ? tn__nn_f64(per_sample_weights) : NULL;
    struct tn_tensor *gw = mi && (ps || !per_sample_weights) ? tn__nn_zeros64(TN_SHAPE(nw, d))
                                                             : NULL;
    int64_t *bag = gw && mode != EB_MAX ? bags_back(indices, offsets, offset2bag, nb) : NULL;
    int64_t *count = gw && scale_grad_by_freq ? calloc((size_t)nw + 1, sizeof *count) : NULL;
    if (!gw || (mode != EB_MAX && !bag) || (scale_grad_by_freq && !count)) {
        if (gw && scale_grad_by_freq && !count)
            tn_set_error(TN_ENOMEM, "embedding_bag backward: out of memory");
        free(bag);
        tn_release(gw);
        tn_release(ps);
        tn__nn_drop(0, g, idx, bs, mi);
        return NULL;
    }
    const double *gp = tn_data(g), *pp = ps ? tn_data(ps) : NULL;
    const int64_t *ip = tn_data(idx), *bp = tn_data(bs), *mp = tn_data(mi);
    double *wp = tn_data(gw);
    if (mode == EB_MAX) {
        for (int64_t b = 0; b < nb; b++)
            for (int64_t k = 0; bp[b] > 0 && k < d; k++)
                wp[mp[b * d + k] * d + k] += gp[b * d + k];
    } else {
        for (int64_t i = 0; count && i < n; i++)
            count[ip[i]]++;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = ip[i], b = bag[i];
            if (j == padding_idx || b < 0 || b >= nb)
                continue;
            double s = pp ? pp[i] : 1.0;
            if (mode == EB_MEAN)
                s /= (double)(bp[b] ? bp[b] : 1);
            if (count)
                s /= (double)count[j];
            for (int64_t k = 0; k < d; k++)
                wp[j * d + k] += gp[b * d + k] * s;
        }
    }
    free(bag);
    free(count);
    tn_release(ps);
    tn__nn_drop(0, g, idx, bs, mi);
    return tn__nn_to(gw, weight->dtype);
}

/* per_sample_weights' gradient (mode sum only): grad's row of each index's
 * bag times the weight row it names; 0 at padding_idx. */
struct tn_tensor *tn__cpu__embedding_bag_per_sample_weights_backward(
    tn_keyset ks, const struct tn_tensor *grad, const struct tn_tensor *weight,
    const struct tn_tensor *indices, const struct tn_tensor *offsets,
    const struct tn_tensor *offset2bag, int64_t mode, int64_t padding_idx)
{
    if (mode != EB_SUM)
        return tn_set_error(TN_EINVAL, "embedding_bag_backward: per_sample_weights only "
                            "supported for mode='sum'"), NULL;
    int64_t n = tn_numel(indices), d = weight->ndim == 2 ? weight->sizes[1] : 0;
    int64_t nb = grad->ndim == 2 ? grad->sizes[0] : 0;
    if (grad->ndim != 2 || grad->sizes[1] != d)
        return tn_set_error(TN_ESHAPE, "embedding_bag backward: grad must be [bags, %lld]",
                            (long long)d), NULL;
    struct tn_tensor *g = tn__nn_f64(grad), *w = g ? tn__nn_f64(weight) : NULL;
    struct tn_tensor *idx = w ? as64(indices) : NULL;
    struct tn_tensor *out = idx ? tn__nn_zeros64(TN_SHAPE(n)) : NULL;
    int64_t *bag = out ? bags_back(indices, offsets, offset2bag, nb) : NULL;
    if (!bag) {
        tn__nn_drop(0, g, w, idx, out);
        return NULL;
    }
    const double *gp = tn_data(g), *wp = tn_data(w);
    const int64_t *ip = tn_data(idx);
    double *op = tn_data(out);
    for (int64_t i = 0; i < n; i++) {
        if (ip[i] == padding_idx || bag[i] < 0 || bag[i] >= nb)
            continue;
        double s = 0;
        for (int64_t k = 0; k < d; k++)
            s += gp[bag[i] * d + k] * wp[ip[i] * d + k];
        op[i] = s;
    }
    free(bag);
    tn__nn_drop(0, g, w, idx, NULL);
    return tn__nn_to(out, grad->dtype);
}

/* embedding_renorm (the functional form of embedding_renorm_, which
 * F.embedding and F.embedding_bag call with max_norm): a copy of self whose
 * rows named by indices (each once) have a norm_type norm of at most
 * max_norm, scaled by max_norm / (norm + 1e-7) where larger, as PyTorch's. */
struct tn_tensor *tn__cpu_embedding_renorm(tn_keyset ks, const struct tn_tensor *self,
                                           const struct tn_tensor *indices, double max_norm,
                                           double norm_type)
{
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "norm(): input dtype should be either floating point or "
                            "complex. Got %s instead.", tn_dtype_info(self->dtype)->c10_name),
               NULL;
    if (self->ndim != 2)
        return tn_set_error(TN_ESHAPE, "embedding_renorm: self must be 2-D, got %d-D",
                            self->ndim), NULL;
    if (indices->dtype != TN_INT64 && indices->dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "embedding_renorm_: indices must be Long or Int, got %s",
                            tn_dtype_info(indices->dtype)->c10_name), NULL;
    int64_t nw = self->sizes[0], d = self->sizes[1], n = tn_numel(indices);
    struct tn_tensor *w = tn__nn_f64(self), *idx = w ? as64(indices) : NULL;
    bool *seen = idx ? calloc((size_t)nw + 1, 1) : NULL;
    if (!seen) {
        if (idx)
            tn_set_error(TN_ENOMEM, "embedding_renorm: out of memory");
        tn__nn_drop(0, w, idx, NULL, NULL);
        return NULL;
    }
    const int64_t *ip = tn_data(idx);
    double *wp = tn_data(w);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ip[i];
        if (j < 0 || j >= nw) {
            free(seen);
            tn__nn_drop(0, w, idx, NULL, NULL);
            return tn_set_error(TN_EINDEX, "index out of range in self"), NULL;
        }
        if (seen[j])
            continue;
        seen[j] = true;
        double norm = 0, *row = wp + j * d;
        for (int64_t k = 0; k < d; k++) {
            double a = fabs(row[k]);
            norm = norm_type == 1 ? norm + a : norm_type == 2 ? norm + a * a
                   : isinf(norm_type) ? fmax(norm, a) : norm + pow(a, norm_type);
        }
        norm = norm_type == 2 ? sqrt(norm) : norm_type == 1 || isinf(norm_type)
                                                 ? norm : pow(norm, 1.0 / norm_type);
        if (norm > max_norm)
            for (int64_t k = 0; k < d; k++)
                row[k] *= max_norm / (norm + 1e-7);
    }
    free(seen);
    tn_release(idx);
    return tn__nn_to(w, self->dtype);
}
