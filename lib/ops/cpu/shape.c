/*
 * ops/cpu/shape.c: CPU kernels that move data by index: index_select (and
 * through it embedding) and embedding_dense_backward.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/index_internal.h"
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

/* ------------------------------------------------ gather, scatter, scatter_add */

/* PyTorch's checks of gather/scatter: same rank, int64 index, index no
 * larger than self (and src) except along dim. */
static int index_check(const char *op, const struct tn_tensor *self, int d,
                       const struct tn_tensor *index, const struct tn_tensor *src)
{
    char a[128], b[128];
    int nd = self->ndim ? self->ndim : 1, id = index->ndim ? index->ndim : 1;
    if (tn_numel(index) == 0) /* any dtype, as PyTorch (op_db's gather samples) */
        return TN_OK;
    if (index->dtype != TN_INT64 && index->dtype != TN_INT32) /* (2.x takes int32 too) */
        return tn_set_error(TN_EDTYPE, "%s(): Expected dtype int64 for index", op);
    if (id != nd)
        return tn_set_error(TN_ESHAPE, "Index tensor must have the same number of dimensions as "
                            "%s tensor", src ? "self" : "input");
    if (src && src->ndim != index->ndim)
        return tn_set_error(TN_ESHAPE, "Index tensor must have the same number of dimensions as "
                            "src tensor");
    for (int i = 0; i < index->ndim; i++) {
        if (i != d && index->sizes[i] > self->sizes[i])
            return tn_set_error(TN_ESHAPE, "Size does not match at dimension %d expected index %s "
                                "to be no larger than self %s apart from dimension %d", i,
                                tn_shape_format(index->sizes, index->ndim, a, sizeof a),
                                tn_shape_format(self->sizes, self->ndim, b, sizeof b), d);
        if (src && index->sizes[i] > src->sizes[i])
            return tn_set_error(TN_ESHAPE, "Size does not match at dimension %d expected index %s "
                                "to be no larger than src %s apart from dimension %d", i,
                                tn_shape_format(index->sizes, index->ndim, a, sizeof a),
                                tn_shape_format(src->sizes, src->ndim, b, sizeof b), d);
    }
    return TN_OK;
}

/* Visits every element of index: pos receives its coordinates. */
static bool next_pos(const struct tn_tensor *index, int64_t *pos)
{
    for (int i = index->ndim - 1; i >= 0; i--) {
        if (++pos[i] < index->sizes[i])
            return true;
        pos[i] = 0;
    }
    return false;
}

static int64_t offset_of(const struct tn_tensor *t, const int64_t *pos, int d, int64_t at)
{
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++)
        off += (i == d ? at : pos[i]) * t->strides[i];
    return off * (int64_t)tn_dtype_size(t->dtype);
}

enum { G_GATHER, G_SCATTER, G_SCATTER_ADD };

static struct tn_tensor *index_loop(int kind, const char *op, const struct tn_tensor *self,
                                    int d, const struct tn_tensor *index,
                                    const struct tn_tensor *src, const struct tn_scalar *value);

/* out (gather) or self's clone (scatter) with index applied along dim. */
static struct tn_tensor *index_op(int kind, const char *op, const struct tn_tensor *self,
                                  int64_t dim, const struct tn_tensor *index_,
                                  const struct tn_tensor *src, const struct tn_scalar *value)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0 || index_check(op, self, d, index_, kind == G_GATHER ? NULL : src) < 0)
        return NULL;
    struct tn_tensor *index = tn_to_dtype(index_, TN_INT64);
    if (!index)
        return NULL;
    struct tn_tensor *out = index_loop(kind, op, self, d, index, src, value);
    tn_release(index);
    return out;
}

static struct tn_tensor *index_loop(int kind, const char *op, const struct tn_tensor *self,
                                    int d, const struct tn_tensor *index,
                                    const struct tn_tensor *src, const struct tn_scalar *value)
{
    if (src && src->dtype != self->dtype) {
        tn_set_error(TN_EDTYPE, "%s(): Expected self.dtype to be equal to src.dtype", op);
        return NULL;
    }
    struct tn_tensor *out = kind == G_GATHER
                                ? tn_empty_on(index->sizes, index->ndim, self->dtype, self->device)
                                : tn_clone(self);
    if (!out || tn_numel(index) == 0)
        return out;
    int64_t pos[TN_MAX_DIMS] = {0}, n = self->ndim ? self->sizes[d] : 1;
    size_t es = tn_dtype_size(self->dtype);
    char value_buf[16];
    if (value)
        tn_scalar_store(value_buf, self->dtype, *value);
    const char *ib = tn_data(index), *sb = tn_data(self);
    char *ob = tn_data(out);
    do {
        int64_t k = *(const int64_t *)(ib + offset_of(index, pos, -1, 0));
        if (k < -n || k >= n) {
            tn_set_error(TN_EINVAL, "index %lld is out of bounds for dimension %d with size %lld",
                         (long long)k, d, (long long)n);
            tn_release(out);
            return NULL;
        }
        k = k < 0 ? k + n : k;
        if (kind == G_GATHER) {
            memcpy(ob + offset_of(out, pos, -1, 0), sb + offset_of(self, pos, d, k), es);
            continue;
        }
        char *dst = ob + offset_of(out, pos, d, k);
        const char *from = value ? value_buf : (const char *)tn_data(src) + offset_of(src, pos, -1, 0);
        if (kind == G_SCATTER) {
            memcpy(dst, from, es);
            continue;
        }
        tn__cpu_add_at(dst, from, self->dtype);
    } while (next_pos(index, pos));
    return out;
}

struct tn_tensor *tn__cpu_gather(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                 const struct tn_tensor *index, bool sparse_grad)
{
    return index_op(G_GATHER, "gather", self, dim, index, NULL, NULL);
}

struct tn_tensor *tn__cpu_scatter_src(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                      const struct tn_tensor *index, const struct tn_tensor *src)
{
    return index_op(G_SCATTER, "scatter", self, dim, index, src, NULL);
}

struct tn_tensor *tn__cpu_scatter_value(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                        const struct tn_tensor *index, struct tn_scalar value)
{
    return index_op(G_SCATTER, "scatter", self, dim, index, NULL, &value);
}

struct tn_tensor *tn__cpu_scatter_add(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                      const struct tn_tensor *index, const struct tn_tensor *src)
{
    return index_op(G_SCATTER_ADD, "scatter_add", self, dim, index, src, NULL);
}

/* ------------------------------------------------------------------- cat */

/* torch.cat: the tensors' common dtype; 1-D empty tensors are skipped as
 * PyTorch's legacy rule says. */
struct tn_tensor *tn__cpu_cat(tn_keyset ks, const struct tn_tensor *const *tensors,
                              int tensors_len, int64_t dim)
{
    if (tensors_len == 0) {
        tn_set_error(TN_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
        return NULL;
    }
    const struct tn_tensor *ref = NULL;
    enum tn_dtype dt = tensors[0]->dtype;
    for (int i = 0; i < tensors_len; i++) {
        const struct tn_tensor *t = tensors[i];
        if (!t) {
            tn_set_error(TN_EINVAL, "torch.cat(): tensor %d of the list is None", i);
            return NULL;
        }
        if (i && (dt = tn_promote_types(dt, t->dtype)) == TN_DTYPE_UNSET)
            return NULL;
        if (!ref && !(t->ndim == 1 && t->sizes[0] == 0))
            ref = t;
    }
    if (!ref) /* all 1-D and empty */
        return tn_empty_on(TN_SHAPE(0), dt, tensors[0]->device);
    if (ref->ndim == 0) {
        int at = 0;
        while (tensors[at] != ref)
            at++;
        tn_set_error(TN_ESHAPE, "zero-dimensional tensor (at position %d) cannot be "
                     "concatenated", at);
        return NULL;
    }
    int d = tn_wrap_dim(dim, ref->ndim);
    if (d < 0)
        return NULL;
    int64_t sizes[TN_MAX_DIMS], total = 0;
    memcpy(sizes, ref->sizes, sizeof(int64_t) * (size_t)ref->ndim);
    for (int i = 0; i < tensors_len; i++) {
        const struct tn_tensor *t = tensors[i];
        if (t->ndim == 1 && t->sizes[0] == 0)
            continue;
        if (t->ndim != ref->ndim) {
            tn_set_error(TN_ESHAPE, "Tensors must have same number of dimensions: got %d and %d",
                         ref->ndim, t->ndim);
            return NULL;
        }
        for (int k = 0; k < t->ndim; k++)
            if (k != d && t->sizes[k] != ref->sizes[k]) {
                tn_set_error(TN_ESHAPE, "Sizes of tensors must match except in dimension %d. "
                             "Expected size %lld but got size %lld for tensor number %d in the "
                             "list.", d, (long long)ref->sizes[k], (long long)t->sizes[k], i);
                return NULL;
            }
        total += t->sizes[d];
    }
    sizes[d] = total;
    struct tn_tensor *out = tn_empty_on(sizes, ref->ndim, dt, ref->device);
    int64_t at = 0;
    for (int i = 0; out && i < tensors_len; i++) {
        const struct tn_tensor *t = tensors[i];
        if ((t->ndim == 1 && t->sizes[0] == 0) || t->sizes[d] == 0)
            continue;
        struct tn_tensor *part = tn_narrow(out, d, at, t->sizes[d]);
        int rc = part ? tn_copy_(part, t) : -1;
        tn_release(part);
        if (rc < 0) {
            tn_release(out);
            return NULL;
        }
        at += t->sizes[d];
    }
    return out;
}
