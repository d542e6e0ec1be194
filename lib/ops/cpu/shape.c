/*
 * ops/cpu/shape.c: CPU kernels that move data by index: index_select (and
 * through it embedding) and embedding_dense_backward.
 */
#include <config.h>

#include <math.h>
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
    if (self->device.type == TN_DEVICE_META || index->device.type == TN_DEVICE_META) {
        /* on Meta: self's shape with dim as long as index, no data */
        int64_t sz[TN_MAX_DIMS];
        memcpy(sz, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
        if (self->ndim)
            sz[d] = tn_numel(index);
        return tn_empty_on(sz, self->ndim, self->dtype, (struct tn_device){TN_DEVICE_META, 0});
    }
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

enum { G_GATHER, G_SCATTER, G_SCATTER_ADD, G_SCATTER_REDUCE };

/* The reductions of scatter.reduce ('add', 'multiply') and scatter_reduce
 * ('sum', 'prod', 'mean', 'amax', 'amin'), and whether self's own values
 * take part (scatter_reduce's include_self). */
enum { R_SUM, R_PROD, R_MEAN, R_MAX, R_MIN };
struct reduce {
    int op;
    bool include_self;
};

/* *dst = *dst op *from in dst's dtype (floats through double, rounded once
 * as PyTorch's float arithmetic; integers wrapping; bool as or/and). amax
 * and amin as PyTorch's: a NaN from src wins, one in dst stays. */
static void reduce_at(void *dst, const void *from, enum tn_dtype dt, int op)
{
    struct tn_scalar x = tn_scalar_load(dst, dt), y = tn_scalar_load(from, dt);
    bool sum = op == R_SUM || op == R_MEAN;
    if (x.kind == TN_SCALAR_FLOAT) {
        double a = x.v.f, b = y.v.f;
        x.v.f = sum ? a + b : op == R_PROD ? a * b
              : op == R_MAX ? (isnan(b) || a < b ? b : a) : (isnan(b) || b < a ? b : a);
    } else if (x.kind == TN_SCALAR_INT) {
        int64_t a = x.v.i, b = y.v.i;
        x.v.i = sum ? (int64_t)((uint64_t)a + (uint64_t)b)
              : op == R_PROD ? (int64_t)((uint64_t)a * (uint64_t)b)
              : op == R_MAX ? (a < b ? b : a) : (b < a ? b : a);
    } else if (x.kind == TN_SCALAR_BOOL) {
        x.v.b = sum || op == R_MAX ? x.v.b || y.v.b : x.v.b && y.v.b;
    } else {
        double re = x.v.c.re, im = x.v.c.im;
        x.v.c.re = sum ? re + y.v.c.re : re * y.v.c.re - im * y.v.c.im;
        x.v.c.im = sum ? im + y.v.c.im : re * y.v.c.im + im * y.v.c.re;
    }
    tn_scalar_store(dst, dt, x);
}

/* What a place scattered to starts from without self's value: 0, 1, or
 * the lowest/highest value (an infinity where the dtype has one). */
static struct tn_scalar reduce_identity(enum tn_dtype dt, int op)
{
    const struct tn_dtype_info *in = tn_dtype_info(dt);
    if (op != R_MAX && op != R_MIN)
        return tn_int(op == R_PROD);
    if (in->kind == 'f')
        return tn_float(op == R_MAX ? -INFINITY : INFINITY);
    if (in->kind == 'b')
        return tn_bool(op == R_MIN);
    int bits = 8 * (int)in->size;
    if (in->kind == 'u')
        return tn_int(op == R_MAX ? 0 : (int64_t)((UINT64_C(1) << bits) - 1));
    int64_t hi = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
    return tn_int(op == R_MAX ? -hi - 1 : hi);
}

/* The row-major number of out's element at pos (dim d at k). */
static int64_t linear_of(const struct tn_tensor *t, const int64_t *pos, int d, int64_t k)
{
    int64_t li = 0;
    for (int i = 0; i < t->ndim; i++)
        li = li * t->sizes[i] + (i == d ? k : pos[i]);
    return li;
}

static struct tn_tensor *index_loop(int kind, const char *op, const struct tn_tensor *self,
                                    int d, const struct tn_tensor *index,
                                    const struct tn_tensor *src, const struct tn_scalar *value,
                                    const struct reduce *how);

/* out (gather) or self's clone (scatter) with index applied along dim. */
static struct tn_tensor *index_op(int kind, const char *op, const struct tn_tensor *self,
                                  int64_t dim, const struct tn_tensor *index_,
                                  const struct tn_tensor *src, const struct tn_scalar *value,
                                  const struct reduce *how)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0 || index_check(op, self, d, index_, kind == G_GATHER ? NULL : src) < 0)
        return NULL;
    /* on Meta: a gather has index's shape, a scatter self's; self's
     * dtype, no data */
    if (self->device.type == TN_DEVICE_META || index_->device.type == TN_DEVICE_META ||
        (src && src->device.type == TN_DEVICE_META)) {
        const struct tn_tensor *shape = kind == G_GATHER ? index_ : self;
        return tn_empty_on(shape->sizes, shape->ndim, self->dtype,
                           (struct tn_device){TN_DEVICE_META, 0});
    }
    struct tn_tensor *index = tn_to_dtype(index_, TN_INT64);
    if (!index)
        return NULL;
    struct tn_tensor *out = index_loop(kind, op, self, d, index, src, value, how);
    tn_release(index);
    return out;
}

/* Index's element at pos, checked against dim d of self (whose sizes a
 * scatter's out shares): TN_OK with it in *k, or the error. */
static int index_at(const struct tn_tensor *self, const struct tn_tensor *index, int d,
                    const int64_t *pos, int64_t *k)
{
    int64_t n = self->ndim ? self->sizes[d] : 1;
    *k = *(const int64_t *)((const char *)tn_data(index) + offset_of(index, pos, -1, 0));
    if (*k < 0 || *k >= n) /* (negative too, as PyTorch's gather and scatter) */
        return tn_set_error(TN_EINVAL, "index %lld is out of bounds for dimension %d with "
                            "size %lld", (long long)*k, d, (long long)n);
    return TN_OK;
}

/* The element of a scatter's out that index's element at pos names, or
 * NULL with the error set; its index along d in *k. */
static char *target_of(struct tn_tensor *out, const struct tn_tensor *index, int d,
                       const int64_t *pos, int64_t *k)
{
    if (index_at(out, index, d, pos, k) < 0)
        return NULL;
    return (char *)tn_data(out) + offset_of(out, pos, d, *k);
}

/* scatter_reduce's mean: each place scattered to divided by its count
 * (self's value counting once with include_self), floor division for
 * integers, as PyTorch's. */
static int reduce_mean(struct tn_tensor *out, const struct tn_tensor *index, int d,
                       bool include_self)
{
    int64_t *count = calloc((size_t)tn_numel(out) + 1, sizeof *count), pos[TN_MAX_DIMS] = {0}, k;
    if (!count)
        return tn_set_error(TN_ENOMEM, "scatter_reduce: out of memory");
    for (int pass = 0; pass < 2; pass++) {
        memset(pos, 0, sizeof pos);
        do {
            char *dst = target_of(out, index, d, pos, &k);
            int64_t *c = &count[linear_of(out, pos, d, k)];
            if (pass == 0) {
                *c += 1;
                continue;
            }
            if (*c < 0)
                continue; /* divided already */
            struct tn_scalar x = tn_scalar_load(dst, out->dtype);
            int64_t by = *c + include_self;
            if (x.kind == TN_SCALAR_FLOAT)
                x.v.f /= (double)by;
            else if (x.kind == TN_SCALAR_INT)
                x.v.i = x.v.i / by - (x.v.i % by != 0 && (x.v.i < 0) != (by < 0));
            else if (x.kind == TN_SCALAR_COMPLEX)
                x.v.c.re /= (double)by, x.v.c.im /= (double)by;
            tn_scalar_store(dst, out->dtype, x);
            *c = -1;
        } while (next_pos(index, pos));
    }
    free(count);
    return TN_OK;
}

static struct tn_tensor *index_loop(int kind, const char *op, const struct tn_tensor *self,
                                    int d, const struct tn_tensor *index,
                                    const struct tn_tensor *src, const struct tn_scalar *value,
                                    const struct reduce *how)
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
    int64_t pos[TN_MAX_DIMS] = {0}, k;
    size_t es = tn_dtype_size(self->dtype);
    char value_buf[16];
    if (value)
        tn_scalar_store(value_buf, self->dtype, *value);
    const char *sb = tn_data(self);
    if (how && !how->include_self) { /* the places scattered to start from the identity */
        do {
            char *dst = target_of(out, index, d, pos, &k);
            if (!dst)
                goto fail;
            tn_scalar_store(dst, out->dtype, reduce_identity(out->dtype, how->op));
        } while (next_pos(index, pos));
    }
    do {
        if (kind == G_GATHER) {
            if (index_at(self, index, d, pos, &k) < 0)
                goto fail;
            memcpy((char *)tn_data(out) + offset_of(out, pos, -1, 0),
                   sb + offset_of(self, pos, d, k), es);
            continue;
        }
        char *dst = target_of(out, index, d, pos, &k);
        if (!dst)
            goto fail;
        const char *from = value ? value_buf : (const char *)tn_data(src) + offset_of(src, pos, -1, 0);
        if (kind == G_SCATTER)
            memcpy(dst, from, es);
        else if (kind == G_SCATTER_ADD)
            tn__cpu_add_at(dst, from, self->dtype);
        else
            reduce_at(dst, from, self->dtype, how->op);
    } while (next_pos(index, pos));
    if (how && how->op == R_MEAN && reduce_mean(out, index, d, how->include_self) < 0)
        goto fail;
    return out;
fail:
    tn_release(out);
    return NULL;
}

struct tn_tensor *tn__cpu_gather(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                 const struct tn_tensor *index, bool sparse_grad)
{
    return index_op(G_GATHER, "gather", self, dim, index, NULL, NULL, NULL);
}

struct tn_tensor *tn__cpu_scatter_src(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                      const struct tn_tensor *index, const struct tn_tensor *src)
{
    return index_op(G_SCATTER, "scatter", self, dim, index, src, NULL, NULL);
}

struct tn_tensor *tn__cpu_scatter_value(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                        const struct tn_tensor *index, struct tn_scalar value)
{
    return index_op(G_SCATTER, "scatter", self, dim, index, NULL, &value, NULL);
}

struct tn_tensor *tn__cpu_scatter_add(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                      const struct tn_tensor *index, const struct tn_tensor *src)
{
    return index_op(G_SCATTER_ADD, "scatter_add", self, dim, index, src, NULL, NULL);
}

/* scatter.reduce's 'add' or 'multiply'; -1 with the error set otherwise */
static int add_or_multiply(const char *reduce)
{
    if (reduce && !strcmp(reduce, "add"))
        return R_SUM;
    if (reduce && !strcmp(reduce, "multiply"))
        return R_PROD;
    tn_set_error(TN_EINVAL, "reduce argument must be either add or multiply.");
    return -1;
}

struct tn_tensor *tn__cpu_scatter_reduce(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                                         const struct tn_tensor *index,
                                         const struct tn_tensor *src, const char *reduce)
{
    struct reduce how = {add_or_multiply(reduce), true};
    return how.op < 0 ? NULL : index_op(G_SCATTER_REDUCE, "scatter", self, dim, index, src,
                                        NULL, &how);
}

struct tn_tensor *tn__cpu_scatter_value_reduce(tn_keyset ks, const struct tn_tensor *self,
                                               int64_t dim, const struct tn_tensor *index,
                                               struct tn_scalar value, const char *reduce)
{
    struct reduce how = {add_or_multiply(reduce), true};
    return how.op < 0 ? NULL : index_op(G_SCATTER_REDUCE, "scatter", self, dim, index, NULL,
                                        &value, &how);
}

struct tn_tensor *tn__cpu_scatter_reduce_two(tn_keyset ks, const struct tn_tensor *self,
                                             int64_t dim, const struct tn_tensor *index,
                                             const struct tn_tensor *src, const char *reduce,
                                             bool include_self)
{
    /* (2.x takes max and min for amax and amin) */
    static const char *const names[] = {"sum", "prod", "mean", "amax", "amin", "max", "min"};
    struct reduce how = {-1, include_self};
    for (int i = 0; i < 7; i++)
        if (reduce && !strcmp(reduce, names[i]))
            how.op = i < 5 ? i : i - 2;
    if (how.op < 0) {
        tn_set_error(TN_EINVAL, "reduce argument must be either sum, prod, mean, amax or amin, "
                     "got %s", reduce ? reduce : "None");
        return NULL;
    }
    if ((tn_dtype_is_complex(self->dtype) && (how.op == R_MAX || how.op == R_MIN)) ||
        (self->dtype == TN_BOOL && how.op == R_MEAN)) {
        tn_set_error(TN_EDTYPE, "\"scatter_gather_tensor_cpu_reduce_%s\" not implemented for "
                     "'%s'", names[how.op], tn_dtype_info(self->dtype)->c10_name);
        return NULL;
    }
    return index_op(G_SCATTER_REDUCE, "scatter", self, dim, index, src, NULL, &how);
}

/* ------------------------------------------------------------------- cat */

/* An input cat skips (the legacy 1-D empty one, or one empty along dim)
 * that requires grad still reaches the autograd graph, as PyTorch's
 * CatBackward0 gives it an empty gradient: copied into an empty view of
 * out at `at`. */
static int cat_empty(struct tn_tensor *out, const struct tn_tensor *t, int d, int64_t at)
{
    if (!t->requires_grad)
        return TN_OK;
    struct tn_tensor *part = tn_narrow(out, d, at, 0);
    struct tn_tensor *v = part ? tn_reshape(part, t->sizes, t->ndim) : NULL;
    int rc = v ? tn_copy_(v, t) : tn_last_status();
    tn_release(v);
    tn_release(part);
    return rc;
}

/* torch.cat: the tensors' common dtype; 1-D empty tensors are skipped as
 * PyTorch's legacy rule says. */
static struct tn_tensor *cats(tn_keyset ks, const struct tn_tensor *const *tensors,
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
    if (!ref) { /* all 1-D and empty */
        struct tn_tensor *out = tn_empty_on(TN_SHAPE(0), dt, tensors[0]->device);
        for (int i = 0; out && i < tensors_len; i++)
            if (cat_empty(out, tensors[i], 0, 0) < 0) {
                tn_release(out);
                return NULL;
            }
        return out;
    }
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
        if ((t->ndim == 1 && t->sizes[0] == 0) || t->sizes[d] == 0) {
            if (cat_empty(out, t, d, at) < 0) {
                tn_release(out);
                return NULL;
            }
            continue;
        }
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

struct tn_tensor *tn__cpu_cat(tn_keyset ks, const struct tn_tensor *const *tensors,
                              int tensors_len, int64_t dim)
{
    /* PyTorch's cat: channels_last when every input suggests it
     * (compute_output_memory_format), else contiguous */
    bool cl = tensors_len > 0;
    for (int i = 0; cl && i < tensors_len; i++)
        cl = tensors[i] && tn__strides_like_channels_last(tensors[i], 4);
    return tn__channels_last_if(cats(ks, tensors, tensors_len, dim), cl);
}
