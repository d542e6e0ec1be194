/*
 * ops/index.c: advanced indexing, the device-independent half: resolving
 * self[indices] (PyTorch's expandTensors, broadcasting and transposition
 * rule, with its checks and words), the meta functions of index.Tensor_out
 * and index_put_, and the decompositions index_put, index_put.out and
 * tn::index_backward. The CPU loops are in ops/cpu/index.c.
 */
#include <config.h>

#include <string.h>

#include "ops/index_internal.h"

static bool is_mask(const struct tn_tensor *t)
{
    return t->dtype == TN_BOOL || t->dtype == TN_UINT8;
}

void tn__index_plan_free(struct tn__index_plan *p)
{
    for (int a = 0; a < p->nadv; a++) {
        tn_release(p->idx[a]);
        p->idx[a] = NULL;
    }
}

/* Replaces mask t, standing at self dim d, by its nonzero indices in
 * ent[d..d + t->ndim) (new references in own[]). */
static int expand_mask(const struct tn_tensor *self, const struct tn_tensor *t, int d,
                       const struct tn_tensor **ent, struct tn_tensor **own)
{
    for (int j = 0; j < t->ndim; j++) {
        if (tn_wrap_dim(d + j, self->ndim) < 0)
            return tn_last_status();
        if (t->sizes[j] != self->sizes[d + j]) {
            char a[128], b[128];
            return tn_set_error(TN_EINDEX, "The shape of the mask %s at index %d does not match "
                                "the shape of the indexed tensor %s at index %d",
                                tn_shape_format(t->sizes, t->ndim, a, sizeof a), j,
                                tn_shape_format(self->sizes, self->ndim, b, sizeof b), d + j);
        }
    }
    /* (on Meta: nonzero's "Could not run 'aten::nonzero' with arguments
     * from the 'Meta' backend.", as PyTorch 1.13) */
    struct tn_tensor *nz = tn_nonzero(t);
    if (!nz)
        return tn_last_status();
    for (int j = 0; j < t->ndim; j++)
        if (!(own[d + j] = tn_select(nz, 1, j))) {
            tn_release(nz);
            return tn_last_status();
        }
        else
            ent[d + j] = own[d + j];
    tn_release(nz);
    return TN_OK;
}

/* The broadcast shape of the index tensors, or PyTorch's error naming all
 * their shapes. */
static int broadcast_indices(const struct tn_tensor *const *ent, struct tn__index_plan *p)
{
    const struct tn_tensor *first = ent[p->adv_dim[0]];
    p->bndim = first->ndim;
    memcpy(p->bshape, first->sizes, sizeof(int64_t) * (size_t)first->ndim);
    for (int a = 1; a < p->nadv; a++) {
        const struct tn_tensor *t = ent[p->adv_dim[a]];
        int64_t out[TN_MAX_DIMS];
        int nd = tn_broadcast_shapes(p->bshape, p->bndim, t->sizes, t->ndim, out);
        if (nd >= 0) {
            p->bndim = nd;
            memcpy(p->bshape, out, sizeof(int64_t) * (size_t)nd);
            continue;
        }
        char msg[512], s[128];
        size_t at = (size_t)snprintf(msg, sizeof msg, "shape mismatch: indexing tensors could not "
                                     "be broadcast together with shapes ");
        for (int k = 0; k < p->nadv && at < sizeof msg; k++) {
            const struct tn_tensor *u = ent[p->adv_dim[k]];
            at += (size_t)snprintf(msg + at, sizeof msg - at, "%s%s", k ? ", " : "",
                                   tn_shape_format(u->sizes, u->ndim, s, sizeof s));
        }
        return tn_set_error(TN_EINDEX, "%s", msg);
    }
    return TN_OK;
}

/* The result's dims: the broadcast dims replace the advanced ones when
 * those are adjacent, else they come first (PyTorch's transposition). */
static int place_dims(const struct tn_tensor *self, struct tn__index_plan *p)
{
    bool adjacent = p->adv_dim[p->nadv - 1] - p->adv_dim[0] == p->nadv - 1;
    int before = adjacent ? p->adv_dim[0] : 0, a = 0, j = 0;
    if (self->ndim - p->nadv + p->bndim > TN_MAX_DIMS)
        return tn_set_error(TN_ESHAPE, "tensors may have at most %d dimensions, got %d",
                            TN_MAX_DIMS, self->ndim - p->nadv + p->bndim);
    for (int i = 0; i < before; i++)
        p->src[j++] = i;
    for (int b = 0; b < p->bndim; b++)
        p->src[j++] = -1 - b;
    for (int i = before; i < self->ndim; i++) {
        if (a < p->nadv && p->adv_dim[a] == i) {
            a++;
            continue;
        }
        p->src[j++] = i;
    }
    p->ndim = j;
    for (j = 0; j < p->ndim; j++)
        p->sizes[j] = p->src[j] >= 0 ? self->sizes[p->src[j]] : p->bshape[-1 - p->src[j]];
    return TN_OK;
}

/* p->idx: each index as int64 of the broadcast shape (a copy we own),
 * wrapped into [0, size); the first out-of-range entry in element order is
 * PyTorch's error, its dimension counted among the advanced ones. */
static int load_indices(const struct tn_tensor *self, const struct tn_tensor *const *ent,
                        struct tn__index_plan *p)
{
    const int64_t *ix[TN_MAX_DIMS];
    for (int a = 0; a < p->nadv; a++) {
        struct tn_device cpu = {TN_DEVICE_CPU, 0};
        p->idx[a] = tn_empty_on(p->bshape, p->bndim, TN_INT64, cpu);
        if (!p->idx[a] || tn_copy_(p->idx[a], ent[p->adv_dim[a]]) < 0)
            return tn_last_status();
        ix[a] = tn_data(p->idx[a]);
    }
    int64_t n = tn_numel(p->idx[0]);
    for (int64_t e = 0; e < n; e++)
        for (int a = 0; a < p->nadv; a++) {
            int64_t *v = (int64_t *)&ix[a][e], size = self->sizes[p->adv_dim[a]];
            if (*v < -size || *v >= size) {
                if (size == 0)
                    return tn_set_error(TN_EINDEX, "index is out of bounds for dimension with "
                                        "size 0");
                return tn_set_error(TN_EINDEX, "index %lld is out of bounds for dimension %d "
                                    "with size %lld", (long long)*v, a, (long long)size);
            }
            if (*v < 0)
                *v += size;
        }
    return TN_OK;
}

int tn__index_plan(const struct tn_tensor *self, const struct tn_tensor *const *indices, int n,
                   bool need_index, bool none_ok, struct tn__index_plan *p)
{
    memset(p, 0, sizeof *p);
    if (n > self->ndim)
        return tn_set_error(TN_EINDEX, "too many indices for tensor of dimension %d (got %d)",
                            self->ndim, n);
    for (int k = 0; k < n; k++) {
        const struct tn_tensor *t = indices[k];
        if (t && t->dtype != TN_INT64 && t->dtype != TN_INT32 && !is_mask(t))
            return tn_set_error(TN_EINDEX, "tensors used as indices must be long, int, byte or "
                                "bool tensors");
    }
    /* ent[i]: the index of self dim i, NULL for none */
    const struct tn_tensor *ent[TN_MAX_DIMS] = {NULL};
    struct tn_tensor *own[TN_MAX_DIMS] = {NULL};
    int rc = TN_OK, d = 0;
    for (int k = 0; k < n && rc >= 0; k++) {
        const struct tn_tensor *t = indices[k];
        if (t && is_mask(t)) {
            rc = expand_mask(self, t, d, ent, own);
            d += t->ndim;
        } else if (tn_wrap_dim(d, self->ndim) < 0) { /* after a mask: PyTorch's words */
            rc = tn_last_status();
        } else {
            ent[d++] = t;
        }
    }
    for (int i = 0; rc >= 0 && i < self->ndim; i++)
        if (ent[i])
            p->adv_dim[p->nadv++] = i;
    if (rc >= 0 && p->nadv == 0) {
        if (!none_ok) {
            rc = tn_set_error(TN_EINDEX, "at least one index must be provided");
        } else { /* index_put over every element */
            p->ndim = self->ndim;
            memcpy(p->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
            for (int i = 0; i < self->ndim; i++)
                p->src[i] = i;
        }
    } else if (rc >= 0) {
        if ((rc = broadcast_indices(ent, p)) >= 0 && (rc = place_dims(self, p)) >= 0 && need_index)
            rc = load_indices(self, ent, p);
    }
    for (int i = 0; i < TN_MAX_DIMS; i++)
        tn_release(own[i]);
    if (rc < 0)
        tn__index_plan_free(p);
    return rc;
}

int tn__index_put_overlap(const struct tn_tensor *self, const struct tn_tensor *const *indices,
                          int n, const struct tn_tensor *values, bool accumulate)
{
    int given = 0, masks = 0;
    for (int k = 0; k < n; k++)
        if (indices[k]) {
            given++;
            masks += is_mask(indices[k]) && indices[k]->device.type == self->device.type;
        }
    if (!accumulate && given == 1 && masks == 1 && tn_numel(values) == 1 &&
        values->device.type == TN_DEVICE_CPU)
        return TN_OK; /* PyTorch's masked_fill_ dispatch */
    if (tn__check_overlap(self, values, true) < 0)
        return tn_last_status();
    for (int k = 0; k < n; k++)
        if (indices[k] && tn__check_overlap(self, indices[k], true) < 0)
            return tn_last_status();
    return TN_OK;
}

struct tn_tensor *tn__index_put_values(const struct tn_tensor *self, const struct tn_tensor *values,
                                       const struct tn__index_plan *p)
{
    bool fits = values->ndim <= p->ndim;
    for (int i = 1; fits && i <= values->ndim; i++) {
        int64_t v = values->sizes[values->ndim - i], r = p->sizes[p->ndim - i];
        fits = v == r || v == 1;
    }
    if (!fits) {
        char a[128], b[128];
        tn_set_error(TN_ESHAPE, "shape mismatch: value tensor of shape %s cannot be broadcast "
                     "to indexing result of shape %s",
                     tn_shape_format(values->sizes, values->ndim, a, sizeof a),
                     tn_shape_format(p->sizes, p->ndim, b, sizeof b));
        return NULL;
    }
    if (values->dtype != self->dtype) {
        tn_set_error(TN_EDTYPE, "Index put requires the source and destination dtypes match, got "
                     "%s for the destination and %s for the source.",
                     tn_dtype_info(self->dtype)->c10_name, tn_dtype_info(values->dtype)->c10_name);
        return NULL;
    }
    return tn_expand(values, p->sizes, p->ndim);
}

/* ------------------------------------------------------ meta functions */

int tn__meta_index_out(const struct tn_tensor *self, const struct tn_tensor *const *indices,
                       int indices_len, struct tn_meta *m)
{
    struct tn__index_plan p;
    int rc = tn__index_plan(self, indices, indices_len, false, false, &p);
    if (rc < 0)
        return rc;
    m->ndim = p.ndim;
    memcpy(m->sizes, p.sizes, sizeof(int64_t) * (size_t)p.ndim);
    m->dtype = self->dtype;
    tn__index_plan_free(&p);
    return TN_OK;
}

/* index_put_ on the Meta device: the checks, and self left as it is. A
 * mask's count is its data's, so with one PyTorch checks nothing and
 * neither do we. */
int tn__meta_index_put_(tn_keyset ks, struct tn_tensor *self,
                        const struct tn_tensor *const *indices, int indices_len,
                        const struct tn_tensor *values, bool accumulate)
{
    for (int k = 0; k < indices_len; k++)
        if (indices[k] && is_mask(indices[k]) && indices[k]->device.type == TN_DEVICE_META)
            return TN_OK;
    struct tn__index_plan p;
    int rc = tn__index_plan(self, indices, indices_len, false, true, &p);
    if (rc < 0)
        return rc;
    struct tn_tensor *v = tn__index_put_values(self, values, &p);
    tn__index_plan_free(&p);
    if (!v)
        return tn_last_status();
    tn_release(v);
    return TN_OK;
}

/* ------------------------------------------------------- decompositions */

struct tn_tensor *tn__composite_index_put(tn_keyset ks, const struct tn_tensor *self,
                                          const struct tn_tensor *const *indices, int indices_len,
                                          const struct tn_tensor *values, bool accumulate)
{
    struct tn_tensor *r = tn_clone(self);
    if (r && tn_index_put_(r, indices, indices_len, values, accumulate) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

int tn__composite_index_put_out(tn_keyset ks, const struct tn_tensor *self,
                                const struct tn_tensor *const *indices, int indices_len,
                                const struct tn_tensor *values, bool accumulate,
                                struct tn_tensor *out)
{
    struct tn_tensor *r = tn_index_put(self, indices, indices_len, values, accumulate);
    if (!r)
        return tn_last_status();
    struct tn_meta m = {.ndim = r->ndim, .dtype = r->dtype};
    memcpy(m.sizes, r->sizes, sizeof(int64_t) * (size_t)r->ndim);
    struct tn_tensor *t;
    int rc = tn_dispatch_prepare_out(&m, out, false, &t);
    if (rc >= 0)
        rc = tn_dispatch_finish_out(tn_copy_(t, r), out, t);
    tn_release(r);
    return rc;
}

/* The gradient of self[indices]: grad summed into zeros of self's shape
 * at the indexed places (duplicates add up). Built from ops, so that it
 * is differentiable itself. */
struct tn_tensor *tn__composite_index_backward(tn_keyset ks, const struct tn_tensor *grad,
                                               const int64_t *self_sizes, int self_sizes_len,
                                               const struct tn_tensor *const *indices,
                                               int indices_len)
{
    struct tn_tensor *z = tn_empty_on(self_sizes, self_sizes_len, grad->dtype, grad->device);
    if (!z || tn_fill_(z, tn_int(0)) < 0) {
        tn_release(z);
        return NULL;
    }
    struct tn_tensor *r = tn_index_put(z, indices, indices_len, grad, true);
    tn_release(z);
    return r;
}

/* slice_scatter: index_put over the slice's indices along dim (an arange
 * of its clamped start, end and step) with None before them, so autograd
 * comes from index_put's derivatives; src is cast to self's dtype, as the
 * slice's copy_ would, and must have the slice's sizes. */
/* slice_scatter's and select_scatter's check: src has the view's sizes */
static int src_fits(const struct tn_tensor *src, const struct tn_tensor *v)
{
    if (src->ndim == v->ndim &&
        !memcmp(src->sizes, v->sizes, sizeof *src->sizes * (size_t)src->ndim))
        return TN_OK;
    char a[128], b[128];
    return tn_set_error(TN_ESHAPE, "expected src to have a size equal to the slice of self. src "
                        "size = %s, slice size = %s",
                        tn_shape_format(src->sizes, src->ndim, a, sizeof a),
                        tn_shape_format(v->sizes, v->ndim, b, sizeof b));
}

struct tn_tensor *tn__composite_slice_scatter(tn_keyset ks, const struct tn_tensor *self,
                                              const struct tn_tensor *src, int64_t dim,
                                              const int64_t *start, const int64_t *end,
                                              int64_t step)
{
    struct tn_tensor *v = tn_slice(self, dim, start ? *start : 0, end ? *end : TN_END, step);
    if (!v)
        return NULL;
    int d = tn_wrap_dim(dim, self->ndim);
    if (src_fits(src, v) < 0) {
        tn_release(v);
        return NULL;
    }
    int64_t size = self->sizes[d], lo = start ? *start : 0;
    lo = lo < 0 ? lo + size : lo;
    lo = lo < 0 ? 0 : lo > size ? size : lo;
    int64_t n = v->sizes[d];
    tn_release(v);
    struct tn_tensor *idx = tn_arange(tn_int(lo), tn_int(lo + n * step), tn_int(step), TN_INT64);
    const struct tn_tensor *indices[TN_MAX_DIMS] = {0};
    indices[d] = idx;
    struct tn_tensor *s = idx && src->dtype != self->dtype ? tn_to_dtype(src, self->dtype)
                                                          : tn_retain((struct tn_tensor *)src);
    struct tn_tensor *r = idx && s ? tn_index_put(self, indices, d + 1, s, false) : NULL;
    tn_release(s);
    tn_release(idx);
    return r;
}

struct tn_tensor *tn__composite_select_scatter(tn_keyset ks, const struct tn_tensor *self,
                                               const struct tn_tensor *src, int64_t dim,
                                               int64_t index)
{
    struct tn_tensor *v = tn_select(self, dim, index);
    if (!v)
        return NULL;
    int rc = src_fits(src, v);
    tn_release(v);
    if (rc < 0)
        return NULL;
    int d = tn_wrap_dim(dim, self->ndim);
    int64_t lo = index < 0 ? index + self->sizes[d] : index, hi = lo + 1;
    struct tn_tensor *u = tn_unsqueeze(src, d);
    struct tn_tensor *r = u ? tn_slice_scatter(self, u, d, &lo, &hi, 1) : NULL;
    tn_release(u);
    return r;
}

struct tn_tensor *tn__composite_masked_scatter(tn_keyset ks, const struct tn_tensor *self,
                                               const struct tn_tensor *mask,
                                               const struct tn_tensor *source)
{
    if (mask->dtype != TN_BOOL) {
        tn_set_error(TN_EDTYPE, "masked_scatter_ only supports boolean masks, but got mask with "
                     "dtype %s", tn_dtype_info(mask->dtype)->c10_name);
        return NULL;
    }
    if (source->dtype != self->dtype) {
        tn_set_error(TN_EDTYPE, "masked_scatter: expected self and source to have same dtypes "
                     "but got%s and %s", tn_dtype_info(self->dtype)->c10_name,
                     tn_dtype_info(source->dtype)->c10_name);
        return NULL;
    }
    int64_t shape[TN_MAX_DIMS], all = -1;
    int nd = tn_broadcast_shapes(self->sizes, self->ndim, mask->sizes, mask->ndim, shape);
    if (nd < 0)
        return NULL;
    struct tn_tensor *s = tn_expand(self, shape, nd), *m = tn_expand(mask, shape, nd);
    struct tn_tensor *mf = m ? tn_reshape(m, &all, 1) : NULL;
    struct tn_tensor *c = mf ? tn_cumsum(mf, 0, TN_INT64) : NULL;
    struct tn_tensor *r = NULL, *idx = NULL, *src = NULL, *g = NULL, *gs = NULL;
    if (!s || !c)
        goto out;
    int64_t n = tn_numel(c), ones = 0;
    if (n > 0 && c->device.type != TN_DEVICE_META) {
        struct tn_tensor *last = tn_select(c, 0, n - 1);
        if (!last)
            goto out;
        ones = (int64_t)tn_item_double(last);
        tn_release(last);
        if (ones > tn_numel(source)) {
            tn_set_error(TN_ESHAPE, "Number of elements of source < number of ones in mask");
            goto out;
        }
    }
    if (tn_numel(source) == 0) { /* nothing to take (and no one in mask) */
        r = tn_where_self(m, s, s);
        goto out;
    }
    idx = tn_sub_scalar(c, tn_int(1), tn_int(1));
    struct tn_tensor *ic = idx ? tn_clamp_min(idx, tn_int(0)) : NULL;
    tn_release(idx);
    idx = ic;
    src = idx ? tn_reshape(source, &all, 1) : NULL;
    const struct tn_tensor *ix[1] = {idx};
    g = src ? tn_index(src, ix, 1) : NULL;
    gs = g ? tn_reshape(g, shape, nd) : NULL;
    r = gs ? tn_where_self(m, gs, s) : NULL;
out:
    tn_release(s);
    tn_release(m);
    tn_release(mf);
    tn_release(c);
    tn_release(idx);
    tn_release(src);
    tn_release(g);
    tn_release(gs);
    return r;
}

/* take: self flattened, indexed by index (negative ones from the end), in
 * index's shape; PyTorch's checks and words. The gradient is
 * index_select's. */
struct tn_tensor *tn__composite_take(tn_keyset ks, const struct tn_tensor *self,
                                     const struct tn_tensor *index)
{
    if (index->dtype != TN_INT64) {
        tn_set_error(TN_EDTYPE, "take(): Expected a long tensor for index, but got %s",
                     tn_dtype_info(index->dtype)->c10_name);
        return NULL;
    }
    int64_t n = tn_numel(self), m = tn_numel(index);
    if (n == 0 && m > 0) {
        tn_set_error(TN_EINVAL, "take(): tried to take from an empty tensor");
        return NULL;
    }
    struct tn_tensor *flat = tn_reshape(self, &n, 1), *ic = tn_contiguous(index);
    struct tn_tensor *w = NULL, *sel = NULL, *r = NULL;
    if (ic && ic->device.type != TN_DEVICE_META) /* (Meta: the shape only, no values) */
        w = tn_empty(&m, 1, TN_INT64);
    else if (ic)
        w = tn_retain(ic);
    if (flat && w && w != ic) {
        const int64_t *ip = tn_data(ic);
        int64_t *wp = tn_data(w);
        int64_t i = 0;
        for (; i < m; i++) {
            if (ip[i] < -n || ip[i] >= n) {
                tn_set_error(TN_EINDEX, "out of range: tried to access index %lld on a tensor "
                             "of %lld elements.", (long long)ip[i], (long long)n);
                break;
            }
            wp[i] = ip[i] < 0 ? ip[i] + n : ip[i];
        }
        if (i == m && (sel = tn_index_select(flat, 0, w)))
            r = tn_reshape(sel, index->sizes, index->ndim);
    } else if (flat && w) {
        struct tn_tensor *w1 = tn_reshape(w, &m, 1);
        if (w1 && (sel = tn_index_select(flat, 0, w1)))
            r = tn_reshape(sel, index->sizes, index->ndim);
        tn_release(w1);
    }
    tn_release(flat);
    tn_release(ic);
    tn_release(w);
    tn_release(sel);
    return r;
}
