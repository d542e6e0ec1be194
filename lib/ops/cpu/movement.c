/*
 * ops/cpu/movement.c: CPU kernels of the data-movement ops (tril, triu,
 * flip, roll, repeat). Each output element is copied byte for byte from the one
 * element of self that a per-op index map names (or zeroed: every dtype's
 * zero is all zero bytes), so one walk serves every dtype.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "ops/internal.h"

/* Maps out's multi-index idx onto self's, in place; false: a zero. */
typedef bool (*src_index_fn)(int64_t *idx, int ndim, const void *ctx);

/* out[idx] = self[map(idx)] for every element of out (self's shape).
 * Reads and writes the same position only when map is the identity, so
 * tril_/triu_ may run with out == self. */
static void remap(const struct tn_tensor *self, struct tn_tensor *out, src_index_fn map,
                  const void *ctx)
{
    int64_t n = tn_numel(out), idx[TN_MAX_DIMS] = {0}, src[TN_MAX_DIMS];
    size_t es = tn_dtype_size(self->dtype);
    const char *sbase = tn_data(self);
    char *obase = tn_data(out);
    for (int64_t k = 0; k < n; k++) {
        int64_t so = 0, oo = 0;
        memcpy(src, idx, sizeof(int64_t) * (size_t)out->ndim);
        bool keep = map(src, out->ndim, ctx);
        for (int i = 0; i < out->ndim; i++) {
            so += src[i] * self->strides[i];
            oo += idx[i] * out->strides[i];
        }
        if (keep)
            memmove(obase + oo * (int64_t)es, sbase + so * (int64_t)es, es);
        else
            memset(obase + oo * (int64_t)es, 0, es);
        for (int i = out->ndim - 1; i >= 0; i--) { /* next multi-index */
            if (++idx[i] < out->sizes[i])
                break;
            idx[i] = 0;
        }
    }
}

/* ---------------------------------------------------------- tril, triu */

struct triangle {
    int64_t diagonal;
    bool lower;
};

static bool triangle_map(int64_t *idx, int ndim, const void *ctx)
{
    const struct triangle *t = ctx;
    int64_t off = idx[ndim - 1] - idx[ndim - 2]; /* column - row */
    return t->lower ? off <= t->diagonal : off >= t->diagonal;
}

int tn__cpu_tril_out(tn_keyset ks, const struct tn_tensor *self, int64_t diagonal,
                     struct tn_tensor *out)
{
    (void)ks;
    struct triangle t = {diagonal, true};
    remap(self, out, triangle_map, &t);
    return TN_OK;
}

int tn__cpu_triu_out(tn_keyset ks, const struct tn_tensor *self, int64_t diagonal,
                     struct tn_tensor *out)
{
    (void)ks;
    struct triangle t = {diagonal, false};
    remap(self, out, triangle_map, &t);
    return TN_OK;
}

/* ------------------------------------------------------------------ flip */

static bool flip_map(int64_t *idx, int ndim, const void *ctx)
{
    const struct tn_tensor *self = ((const struct tn_tensor *const *)ctx)[0];
    const bool *mask = ((const bool *const *)ctx)[1];
    for (int i = 0; i < ndim; i++)
        if (mask[i])
            idx[i] = self->sizes[i] - 1 - idx[i];
    return true;
}

/* A new tensor of self's shape on self's device, or NULL (error set). */
static struct tn_tensor *like(const struct tn_tensor *self)
{
    return tn_empty_on(self->sizes, self->ndim, self->dtype, self->device);
}

/* like(), laid out as PyTorch lays out the result of an op on self: flip
 * as its TensorIterator does (self's order where self is dense), roll
 * (one dim at a time) in self's suggest_memory_format (channels_last or
 * channels_last_3d where self's strides look so, else contiguous). */
static struct tn_tensor *like_laid(const struct tn_tensor *self, bool iter)
{
    struct tn_meta m = {.ndim = self->ndim, .dtype = self->dtype};
    memcpy(m.sizes, self->sizes, (size_t)self->ndim * sizeof *m.sizes);
    if (iter) {
        tn__meta_iter_layout(&m, &self, 1);
    } else if (tn__strides_like_channels_last(self, 4) ||
               tn__strides_like_channels_last(self, 5)) {
        /* channels first, then the last spatial dim back to the first, then N */
        int nd = self->ndim;
        int64_t st = 1;
        m.strides[1] = st;
        st *= self->sizes[1];
        for (int d = nd - 1; d >= 2; d--) {
            m.strides[d] = st;
            st *= self->sizes[d];
        }
        m.strides[0] = st;
        m.strided = true;
    }
    return tn_dispatch_meta_alloc(&m, self->device);
}

struct tn_tensor *tn__cpu_flip(tn_keyset ks, const struct tn_tensor *self, const int64_t *dims,
                               int dims_len)
{
    (void)ks;
    bool mask[TN_MAX_DIMS] = {false};
    /* an empty list flips nothing (tn__reduce_mask reads it as every dim) */
    if (dims_len > 0 && tn__reduce_mask("flip", self, dims, dims_len, mask) < 0)
        return NULL;
    struct tn_tensor *out = like_laid(self, true);
    if (!out || self->device.type == TN_DEVICE_META) /* Meta: the shape only */
        return out;
    const void *ctx[2] = {self, mask};
    remap(self, out, flip_map, ctx);
    return out;
}

/* ------------------------------------------------------------------ roll */

struct roll {
    const struct tn_tensor *self;
    int64_t shift[TN_MAX_DIMS]; /* per dim, summed over repeats */
    bool flat;                  /* no dims: roll the flattened tensor */
};

/* (i - shift) mod n in [0, n). */
static int64_t wrap_back(int64_t i, int64_t shift, int64_t n)
{
    int64_t r = (i - shift % n) % n;
    return r < 0 ? r + n : r;
}

static bool roll_map(int64_t *idx, int ndim, const void *ctx)
{
    const struct roll *r = ctx;
    const int64_t *sizes = r->self->sizes;
    if (r->flat) {
        int64_t lin = 0, n = 1;
        for (int i = 0; i < ndim; i++) {
            lin = lin * sizes[i] + idx[i];
            n *= sizes[i];
        }
        lin = wrap_back(lin, r->shift[0], n);
        for (int i = ndim - 1; i >= 0; i--) {
            idx[i] = lin % sizes[i];
            lin /= sizes[i];
        }
        return true;
    }
    for (int i = 0; i < ndim; i++)
        idx[i] = wrap_back(idx[i], r->shift[i], sizes[i]);
    return true;
}

/* Dims t.. that roll by 0 and are contiguous in self and in out (a row
 * of `block` elements each): their rows are copied whole, the rolled
 * outer dims walked (swin_t's shifted windows, [1, 21, 21, 96] rolled
 * over dims 1 and 2: 441 rows of 96, 70x faster than remap's element
 * walk). False when no trailing dim is such a row. */
static bool roll_rows(const struct roll *r, struct tn_tensor *out)
{
    const struct tn_tensor *self = r->self;
    int nd = self->ndim, t = nd;
    int64_t block = 1;
    while (t > 0 && r->shift[t - 1] % self->sizes[t - 1] == 0 &&
           self->strides[t - 1] == block && out->strides[t - 1] == block)
        block *= self->sizes[--t];
    if (t == nd || block == 0)
        return false;
    size_t es = tn_dtype_size(self->dtype), len = (size_t)block * es;
    const char *sbase = tn_data(self);
    char *obase = tn_data(out);
    int64_t idx[TN_MAX_DIMS] = {0}, n = tn_numel(out) / block;
    for (int64_t k = 0; k < n; k++) {
        int64_t so = 0, oo = 0;
        for (int i = 0; i < t; i++) {
            so += wrap_back(idx[i], r->shift[i], self->sizes[i]) * self->strides[i];
            oo += idx[i] * out->strides[i];
        }
        memcpy(obase + oo * (int64_t)es, sbase + so * (int64_t)es, len);
        for (int i = t - 1; i >= 0; i--) { /* next outer index */
            if (++idx[i] < out->sizes[i])
                break;
            idx[i] = 0;
        }
    }
    return true;
}

struct tn_tensor *tn__cpu_roll(tn_keyset ks, const struct tn_tensor *self, const int64_t *shifts,
                               int shifts_len, const int64_t *dims, int dims_len)
{
    (void)ks;
    struct roll r = {self, {0}, dims_len == 0};
    if (shifts_len == 0) {
        tn_set_error(TN_EINVAL, "`shifts` required");
        return NULL;
    }
    if (!(dims_len == 0 && shifts_len == 1) && shifts_len != dims_len) {
        tn_set_error(TN_EINVAL, "shifts and dimensions must align. shifts: %d, dims:%d",
                     shifts_len, dims_len);
        return NULL;
    }
    if (r.flat) {
        r.shift[0] = shifts[0];
    } else {
        for (int i = 0; i < dims_len; i++) {
            int d = tn_wrap_dim(dims[i], self->ndim);
            if (d < 0)
                return NULL;
            r.shift[d] += shifts[i];
        }
    }
    /* no dims: PyTorch rolls the flattened tensor, and views it back
     * contiguous */
    struct tn_tensor *out = r.flat ? like(self) : like_laid(self, false);
    if (out && tn_numel(self) > 0 && self->device.type != TN_DEVICE_META &&
        (r.flat || !roll_rows(&r, out)))
        remap(self, out, roll_map, &r);
    return out;
}

/* ---------------------------------------------------------------- repeat */

static bool repeat_map(int64_t *idx, int ndim, const void *ctx)
{
    const struct tn_tensor *v = ctx;
    for (int i = 0; i < ndim; i++)
        idx[i] %= v->sizes[i];
    return true;
}

/* self (with leading size-1 dims up to len(repeats)) repeated along each
 * dim. */
struct tn_tensor *tn__cpu_repeat(tn_keyset ks, const struct tn_tensor *self,
                                 const int64_t *repeats, int repeats_len)
{
    (void)ks;
    if (repeats_len < self->ndim) {
        tn_set_error(TN_EINVAL, "Number of dimensions of repeat dims can not be smaller than "
                                "number of dimensions of tensor");
        return NULL;
    }
    if (repeats_len > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "repeat: %d dims, more than the %d a tensor can have",
                     repeats_len, TN_MAX_DIMS);
        return NULL;
    }
    int64_t padded[TN_MAX_DIMS], sizes[TN_MAX_DIMS];
    int lead = repeats_len - self->ndim;
    for (int i = 0; i < repeats_len; i++) {
        padded[i] = i < lead ? 1 : self->sizes[i - lead];
        sizes[i] = padded[i] * repeats[i];
    }
    for (int i = 0; i < repeats_len; i++)
        if (repeats[i] < 0) {
            char list[TN_MAX_DIMS * 24 + 3] = "[";
            size_t len = 1;
            for (int j = 0; j < repeats_len; j++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", j ? ", " : "",
                                        (long long)sizes[j]);
            tn_set_error(TN_EINVAL, "Trying to create tensor with negative dimension %lld: %s]",
                         (long long)sizes[i], list);
            return NULL;
        }
    struct tn_tensor *v = tn_view(self, padded, repeats_len); /* adds size-1 dims only */
    struct tn_tensor *out = v ? tn_empty_on(sizes, repeats_len, self->dtype, self->device) : NULL;
    if (out && tn_numel(out) > 0)
        remap(v, out, repeat_map, v);
    tn_release(v);
    return out;
}

/* ------------------------------------------ nonzero, masked_select, one_hot */

/* Whether the element at p is not zero (-0.0 is zero, NaN is not). */
static bool element_nonzero(const char *p, enum tn_dtype dtype)
{
    if (tn_dtype_is_complex(dtype)) {
        tn_complex128 c;
        tn__convert_strided((char *)&c, TN_COMPLEX128, 16, p, dtype, 0, 1);
        return c != 0;
    }
    if (tn_dtype_is_floating(dtype)) {
        double d;
        tn__convert_strided((char *)&d, TN_FLOAT64, 8, p, dtype, 0, 1);
        return d != 0.0;
    }
    for (size_t i = 0; i < tn_dtype_size(dtype); i++) /* integers and bool */
        if (p[i])
            return true;
    return false;
}

/* Calls fn(ctx, idx, element) for each element of t in row-major order. */
typedef void (*visit_fn)(void *ctx, const int64_t *idx, const char *element);

static void visit(const struct tn_tensor *t, visit_fn fn, void *ctx)
{
    int64_t n = tn_numel(t), idx[TN_MAX_DIMS] = {0};
    size_t es = tn_dtype_size(t->dtype);
    const char *base = tn_data(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int i = 0; i < t->ndim; i++)
            off += idx[i] * t->strides[i];
        fn(ctx, idx, base + off * (int64_t)es);
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (++idx[i] < t->sizes[i])
                break;
            idx[i] = 0;
        }
    }
}

struct nonzero_walk {
    enum tn_dtype dtype;
    int ndim;
    int64_t count;
    int64_t *out; /* NULL: count only */
    int64_t n;    /* the count, once known: the stride of out's dim 1 */
};

static void nonzero_visit(void *ctx, const int64_t *idx, const char *element)
{
    struct nonzero_walk *w = ctx;
    if (!element_nonzero(element, w->dtype))
        return;
    for (int d = 0; w->out && d < w->ndim; d++)
        w->out[w->count + d * w->n] = idx[d];
    w->count++;
}

/* The indices of self's non-zero elements, one row each (int64 [n, ndim]),
 * laid out as PyTorch's: the transpose of an [ndim, n] buffer (strides
 * (1, n)), one index of every element after another. */
struct tn_tensor *tn__cpu_nonzero(tn_keyset ks, const struct tn_tensor *self)
{
    (void)ks;
    struct nonzero_walk w = {self->dtype, self->ndim, 0, NULL, 0};
    visit(self, nonzero_visit, &w); /* count first: the result's size */
    struct tn_meta m = {.ndim = 2, .sizes = {w.count, self->ndim}, .dtype = TN_INT64,
                        .strided = true, .strides = {1, w.count}};
    struct tn_tensor *out = tn_dispatch_meta_alloc(&m, self->device);
    if (!out)
        return NULL;
    w.n = w.count;
    w.count = 0;
    w.out = tn_data(out);
    visit(self, nonzero_visit, &w);
    return out;
}

struct select_walk {
    const struct tn_tensor *mask; /* bool, of the values' shape */
    size_t es;
    char *out;
    int64_t count;
};

static void select_visit(void *ctx, const int64_t *idx, const char *element)
{
    struct select_walk *w = ctx;
    int64_t off = 0;
    for (int i = 0; i < w->mask->ndim; i++)
        off += idx[i] * w->mask->strides[i];
    if (!((const bool *)tn_data(w->mask))[off])
        return;
    if (w->out)
        memcpy(w->out + (size_t)w->count * w->es, element, w->es);
    w->count++;
}

/* self's elements where mask (broadcast with self) is true, in order, 1-D. */
struct tn_tensor *tn__cpu_masked_select(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *mask)
{
    (void)ks;
    if (mask->dtype != TN_BOOL) {
        tn_set_error(TN_EDTYPE, "masked_select: expected BoolTensor for mask");
        return NULL;
    }
    int64_t shape[TN_MAX_DIMS];
    /* mask first: PyTorch's message names the mask as tensor a */
    int nd = tn_broadcast_shapes(mask->sizes, mask->ndim, self->sizes, self->ndim, shape);
    if (nd < 0)
        return NULL;
    struct tn_tensor *v = tn_broadcast_to(self, shape, nd);
    struct tn_tensor *m = v ? tn_broadcast_to(mask, shape, nd) : NULL;
    struct tn_tensor *out = NULL;
    if (m) {
        struct select_walk w = {m, tn_dtype_size(self->dtype), NULL, 0};
        visit(v, select_visit, &w);
        out = tn_empty_on(TN_SHAPE(w.count), self->dtype, self->device);
        if (out) {
            w.out = tn_data(out);
            w.count = 0;
            visit(v, select_visit, &w);
        }
    }
    tn_release(v);
    tn_release(m);
    return out;
}

struct one_hot_walk {
    int64_t lo, hi, num_classes;
    int64_t *out; /* NULL: find the range only */
    int64_t k;
};

static void one_hot_visit(void *ctx, const int64_t *idx, const char *element)
{
    (void)idx;
    struct one_hot_walk *w = ctx;
    int64_t c;
    memcpy(&c, element, sizeof c);
    if (!w->out) {
        w->lo = w->k == 0 || c < w->lo ? c : w->lo;
        w->hi = w->k == 0 || c > w->hi ? c : w->hi;
    } else {
        w->out[w->k * w->num_classes + c] = 1;
    }
    w->k++;
}

/* (PyTorch: a decomposition; here a CPU kernel) int64 self + [classes]. */
struct tn_tensor *tn__cpu_one_hot(tn_keyset ks, const struct tn_tensor *self, int64_t num_classes)
{
    (void)ks;
    if (self->dtype != TN_INT64) {
        tn_set_error(TN_EDTYPE, "one_hot is only applicable to index tensor of type LongTensor.");
        return NULL;
    }
    struct one_hot_walk w = {0, 0, num_classes, NULL, 0};
    int64_t n = tn_numel(self);
    if (n == 0 && num_classes <= 0) {
        tn_set_error(TN_EINVAL, "Can not infer total number of classes from empty tensor.");
        return NULL;
    }
    visit(self, one_hot_visit, &w);
    if (n > 0 && w.lo < 0) {
        tn_set_error(TN_EINVAL, "Class values must be non-negative.");
        return NULL;
    }
    if (num_classes == -1) {
        w.num_classes = w.hi + 1;
    } else if (n > 0 && w.hi >= num_classes) {
        tn_set_error(TN_EINVAL, "Class values must be smaller than num_classes.");
        return NULL;
    }
    if (self->ndim >= TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "one_hot: a %d-dim input has no room for the class dim",
                     self->ndim);
        return NULL;
    }
    int64_t sizes[TN_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    sizes[self->ndim] = w.num_classes;
    struct tn_tensor *out = tn_zeros(sizes, self->ndim + 1, TN_INT64);
    if (!out)
        return NULL;
    w.out = tn_data(out);
    w.k = 0;
    visit(self, one_hot_visit, &w);
    return out;
}
