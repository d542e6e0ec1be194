/*
 * ops/cpu/shape.c: CPU kernels that move data by index: index_select (and
 * through it embedding) and embedding_dense_backward.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

/* index as a contiguous int64 tensor, each entry checked against n. */
static struct tn_tensor *indices64(const struct tn_tensor *index, int64_t n, const char *msg)
{
    struct tn_tensor *i64 = tn_to_dtype(index, TN_INT64), *c = i64 ? tn_contiguous(i64) : NULL;
    tn_release(i64);
    if (!c)
        return NULL;
    const int64_t *p = tn_data(c);
    for (int64_t i = 0; msg && i < tn_numel(c); i++)
        if (p[i] < -n || p[i] >= n) {
            tn_set_error(TN_EINVAL, "%s", msg);
            tn_release(c);
            return NULL;
        }
    return c;
}

struct tn_tensor *tn__cpu_index_select(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                       const struct tn_tensor *index)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return NULL;
    if (index->ndim > 1) {
        tn_set_error(TN_ESHAPE, "index_select(): Index is supposed to be a vector");
        return NULL;
    }
    if (index->dtype != TN_INT64 && index->dtype != TN_INT32) {
        tn_set_error(TN_EDTYPE, "index_select(): Expected dtype int32 or int64 for index");
        return NULL;
    }
    int64_t n = self->ndim ? self->sizes[d] : 1;
    struct tn_tensor *idx = indices64(index, n, "index out of range in self");
    if (!idx)
        return NULL;
    int64_t sizes[TN_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    int64_t m = tn_numel(idx);
    if (self->ndim)
        sizes[d] = m;
    struct tn_tensor *out = tn_empty_on(sizes, self->ndim, self->dtype, self->device);
    if (!out || self->ndim == 0) {
        if (out && tn_copy_(out, self) < 0) {
            tn_release(out);
            out = NULL;
        }
        tn_release(idx);
        return out;
    }
    const int64_t *ip = tn_data(idx);
    /* one slice at a time: rows of a contiguous matrix are one memcpy each */
    size_t es = tn_dtype_size(self->dtype);
    bool rows = d == 0 && tn_is_contiguous(self);
    int64_t row = rows ? tn_numel(self) / (n ? n : 1) : 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t j = ip[i] < 0 ? ip[i] + n : ip[i];
        if (rows) {
            memcpy((char *)tn_data(out) + (size_t)(i * row) * es,
                   (const char *)tn_data(self) + (size_t)(j * row) * es, (size_t)row * es);
            continue;
        }
        struct tn_tensor *dst = tn_select(out, d, i), *src = tn_select(self, d, j);
        int rc = dst && src ? tn_copy_(dst, src) : -1;
        tn_release(dst);
        tn_release(src);
        if (rc < 0) {
            tn_release(out);
            tn_release(idx);
            return NULL;
        }
    }
    tn_release(idx);
    return out;
}

struct tn_tensor *tn__cpu_embedding_dense_backward(tn_keyset ks,
                                                   const struct tn_tensor *grad_output,
                                                   const struct tn_tensor *indices,
                                                   int64_t num_weights, int64_t padding_idx,
                                                   bool scale_grad_by_freq)
{
    int64_t n = tn_numel(indices), dim = grad_output->ndim ? grad_output->sizes[grad_output->ndim - 1] : 1;
    if (tn_numel(grad_output) != n * dim) {
        tn_set_error(TN_ESHAPE, "embedding_dense_backward: grad_output holds %lld values, "
                     "indices %lld rows of %lld", (long long)tn_numel(grad_output),
                     (long long)n, (long long)dim);
        return NULL;
    }
    struct tn_tensor *idx = indices64(indices, num_weights, "index out of range in self");
    struct tn_tensor *g = tn__nn_f64(grad_output), *gw = tn__nn_zeros64(TN_SHAPE(num_weights, dim));
    int64_t *count = NULL;
    if (idx && g && gw && scale_grad_by_freq && !(count = calloc((size_t)num_weights + 1, 8)))
        tn_set_error(TN_ENOMEM, "embedding_dense_backward: out of memory");
    if (!idx || !g || !gw || (scale_grad_by_freq && !count)) {
        free(count);
        tn__nn_drop(0, idx, g, gw, NULL);
        return NULL;
    }
    const int64_t *ip = tn_data(idx);
    const double *gp = tn_data(g);
    double *wp = tn_data(gw);
    for (int64_t i = 0; count && i < n; i++)
        count[ip[i] < 0 ? ip[i] + num_weights : ip[i]]++;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ip[i] < 0 ? ip[i] + num_weights : ip[i];
        if (ip[i] == padding_idx)
            continue;
        double s = count ? 1.0 / (double)count[j] : 1.0;
        for (int64_t k = 0; k < dim; k++)
            wp[j * dim + k] += gp[i * dim + k] * s;
    }
    free(count);
    tn__nn_drop(0, idx, g, NULL, NULL);
    return tn__nn_to(gw, grad_output->dtype);
}
