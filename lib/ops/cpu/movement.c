/*
 * ops/cpu/movement.c: CPU kernels of the data-movement ops (tril, triu,
 * flip, roll). Each output element is copied byte for byte from the one
 * element of self that a per-op index map names (or zeroed: every dtype's
 * zero is all zero bytes), so one walk serves every dtype.
 */
#include <config.h>

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

struct tn_tensor *tn__cpu_flip(tn_keyset ks, const struct tn_tensor *self, const int64_t *dims,
                               int dims_len)
{
    (void)ks;
    bool mask[TN_MAX_DIMS] = {false};
    /* an empty list flips nothing (tn__reduce_mask reads it as every dim) */
    if (dims_len > 0 && tn__reduce_mask("flip", self, dims, dims_len, mask) < 0)
        return NULL;
    struct tn_tensor *out = like(self);
    if (!out)
        return NULL;
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
    struct tn_tensor *out = like(self);
    if (out && tn_numel(self) > 0)
        remap(self, out, roll_map, &r);
    return out;
}
