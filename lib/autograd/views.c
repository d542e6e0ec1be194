/*
 * autograd/views.c: the backward of lib/core's views, copy_ and fill_,
 * reached through the hook table the core calls (core/internal.h), which
 * this file fills when libtensor loads.
 *
 * Every view is one geometry (sizes, strides, offset) over its input's
 * storage, so one pair of functions serves them all: scatter puts a
 * gradient of the view's shape where the view's elements sit in a zero
 * tensor of the input's shape (summing where the view repeats an element,
 * as expand does), and gather takes the view's elements out of a tensor of
 * the input's shape. Each is the other's backward, so second derivatives
 * through views work.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"

struct geom {
    enum tn_dtype dtype;
    int in_ndim, v_ndim;
    int64_t in_off, v_off;
    int64_t in_sizes[TN_MAX_DIMS], in_strides[TN_MAX_DIMS];
    int64_t v_sizes[TN_MAX_DIMS], v_strides[TN_MAX_DIMS];
    /* view or reshape: the view's elements are the input's in row-major
     * order whatever the strides, so the backward is a reshape, also of an
     * input whose elements overlap (an expanded one) */
    bool reshape;
};

struct geom_node {
    struct tn_node n;
    struct geom g;
};

static struct tn_tensor *scatter(const struct tn_tensor *grad, const struct geom *g);
static struct tn_tensor *gather(const struct tn_tensor *x, const struct geom *g);

static int scatter_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    out[0] = scatter(grads[0], &((struct geom_node *)n)->g);
    return out[0] ? TN_OK : tn_last_status();
}

static int gather_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    out[0] = gather(grads[0], &((struct geom_node *)n)->g);
    return out[0] ? TN_OK : tn_last_status();
}

/* Records `r = f(x)` as a node named `name` whose backward is apply. */
static int record(struct tn_tensor *r, const struct tn_tensor *x, const struct geom *g,
                  const char *name, tn_node_apply_fn apply)
{
    struct geom_node *n =
        (struct geom_node *)tn__node_new(sizeof *n, name, apply, NULL, 1, 1);
    if (!n)
        return tn_last_status();
    n->g = *g;
    int rc = tn__ad_set_edge(&n->n, 0, x);
    if (rc == TN_OK)
        tn__ad_set_history(r, &n->n, 0);
    tn__node_release(&n->n);
    return rc;
}

/* The lowest and highest element offsets of a geometry (numel > 0). */
static void extent(int ndim, const int64_t *sizes, const int64_t *strides, int64_t off,
                   int64_t *lo, int64_t *hi)
{
    *lo = *hi = off;
    for (int d = 0; d < ndim; d++) {
        int64_t span = (sizes[d] - 1) * strides[d];
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}

/* True when no two elements of the geometry share an offset. */
static bool non_overlapping(int ndim, const int64_t *sizes, const int64_t *strides)
{
    int order[TN_MAX_DIMS], n = 0;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] > 1)
            order[n++] = d;
    for (int i = 1; i < n; i++) /* by |stride|, smallest first */
        for (int j = i; j > 0 && llabs(strides[order[j]]) < llabs(strides[order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t reach = 0; /* the highest offset the inner dims reach */
    for (int i = 0; i < n; i++) {
        int64_t s = llabs(strides[order[i]]);
        if (s <= reach)
            return false;
        reach += s * (sizes[order[i]] - 1);
    }
    return true;
}

static int64_t numel_of(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= sizes[d];
    return n;
}

/* A zero buffer laid out as the input of g, and the tensors of the input
 * and of the view over it. */
static int layout(const struct geom *g, struct tn_tensor **in, struct tn_tensor **view)
{
    *in = *view = NULL;
    if (!non_overlapping(g->in_ndim, g->in_sizes, g->in_strides))
        return tn_set_error(TN_ERUNTIME, "backward through a view of a tensor whose elements "
                            "overlap (an expanded tensor) is not supported; clone it first");
    int64_t lo, hi;
    extent(g->in_ndim, g->in_sizes, g->in_strides, g->in_off, &lo, &hi);
    struct tn_tensor *buf = tn_zeros(TN_SHAPE(hi - lo + 1), g->dtype);
    if (!buf)
        return tn_last_status();
    *in = tn_tensor_from_storage(buf->storage, g->in_off - lo, g->in_sizes, g->in_ndim,
                                 g->in_strides, g->dtype);
    *view = tn_tensor_from_storage(buf->storage, g->v_off - lo, g->v_sizes, g->v_ndim,
                                   g->v_strides, g->dtype);
    tn_release(buf);
    if (!*in || !*view) {
        tn_release(*in);
        tn_release(*view);
        return tn_last_status();
    }
    return TN_OK;
}

/* The views whose backward is itself a view of grad: a permutation of the
 * input's dims (t, transpose, permute) goes back by the inverse permutation,
 * a new shape of a contiguous input over all its elements (view, reshape,
 * flatten, squeeze, unsqueeze) by the input's shape. NULL with no error
 * when g is neither. */
static struct tn_tensor *view_back(const struct tn_tensor *grad, const struct geom *g)
{
    if (g->in_off != g->v_off || numel_of(g->in_ndim, g->in_sizes) != numel_of(g->v_ndim, g->v_sizes))
        return NULL;
    if (g->in_ndim == g->v_ndim) {
        int64_t inv[TN_MAX_DIMS];
        bool used[TN_MAX_DIMS] = {false}, ok = true;
        for (int i = 0; i < g->v_ndim && ok; i++) {
            int j = 0;
            while (j < g->in_ndim && (used[j] || g->in_sizes[j] != g->v_sizes[i] ||
                                      g->in_strides[j] != g->v_strides[i]))
                j++;
            ok = j < g->in_ndim;
            if (ok) {
                used[j] = true;
                inv[j] = i;
            }
        }
        if (ok)
            return tn_permute(grad, inv, g->in_ndim);
    }
    int64_t cs[TN_MAX_DIMS], vs[TN_MAX_DIMS];
    tn_contiguous_strides(g->in_sizes, g->in_ndim, cs);
    tn_contiguous_strides(g->v_sizes, g->v_ndim, vs);
    for (int d = 0; d < g->in_ndim; d++)
        if (g->in_sizes[d] != 1 && g->in_strides[d] != cs[d])
            return NULL;
    for (int d = 0; d < g->v_ndim; d++)
        if (g->v_sizes[d] != 1 && g->v_strides[d] != vs[d])
            return NULL;
    return tn_reshape(grad, g->in_sizes, g->in_ndim);
}

/* A view whose elements overlap (unfold, as_strided with strides smaller
 * than its sizes): each element of src is added at the storage position
 * its element of dst sits at, so a position the view repeats gets the sum,
 * as PyTorch's as_strided_backward gives (index_put_ with accumulate over
 * the positions, an arange seen through dst's geometry). */
static int scatter_add(const struct tn_tensor *dst, const struct tn_tensor *src)
{
    int64_t lo, hi;
    extent(dst->ndim, dst->sizes, dst->strides, dst->offset, &lo, &hi);
    struct tn_tensor *flat = tn_tensor_from_storage(dst->storage, 0, TN_SHAPE(hi + 1),
                                                    (const int64_t[]){1}, dst->dtype);
    struct tn_tensor *pos = tn_arange(tn_int(0), tn_int(hi + 1), tn_int(1), TN_INT64);
    struct tn_tensor *idx = pos ? tn_as_strided(pos, dst->sizes, dst->ndim, dst->strides,
                                                dst->offset)
                                : NULL;
    int rc = flat && idx ? tn_index_put_(flat, (const struct tn_tensor *const *)&idx, 1, src, true)
                         : tn_last_status();
    tn_release(flat);
    tn_release(pos);
    tn_release(idx);
    return rc;
}

static struct tn_tensor *scatter(const struct tn_tensor *grad, const struct geom *g)
{
    if (numel_of(g->in_ndim, g->in_sizes) == 0 || numel_of(g->v_ndim, g->v_sizes) == 0)
        return tn_zeros(g->in_sizes, g->in_ndim, g->dtype);
    struct tn_tensor *fast = g->reshape ? tn_reshape(grad, g->in_sizes, g->in_ndim)
                                        : view_back(grad, g);
    if (fast || g->reshape)
        return fast;
    struct tn_tensor *in, *view;
    if (layout(g, &in, &view) < 0)
        return NULL;
    bool prev = tn_set_grad_enabled(false);
    /* dims the view repeats (stride 0, as expand makes) are summed first */
    int64_t rep[TN_MAX_DIMS], vs[TN_MAX_DIMS];
    int nrep = 0;
    for (int d = 0; d < g->v_ndim; d++) {
        vs[d] = g->v_sizes[d];
        if (g->v_strides[d] == 0 && g->v_sizes[d] > 1) {
            rep[nrep++] = d;
            vs[d] = 1;
        }
    }
    struct tn_tensor *src = nrep ? tn_sum_dim_intlist(grad, rep, nrep, true, TN_DTYPE_UNSET)
                                 : tn_retain((struct tn_tensor *)grad);
    struct tn_tensor *dst = NULL;
    int rc = src ? TN_OK : tn_last_status();
    if (rc == TN_OK) {
        dst = nrep ? tn_as_strided(view, vs, g->v_ndim, view->strides, view->offset)
                   : tn_retain(view);
        rc = dst ? TN_OK : tn_last_status();
    }
    if (rc == TN_OK)
        rc = non_overlapping(dst->ndim, dst->sizes, dst->strides) ? tn_copy_(dst, src)
                                                                  : scatter_add(dst, src);
    tn_set_grad_enabled(prev);
    tn_release(src);
    tn_release(dst);
    tn_release(view);
    if (rc == TN_OK && tn__ad_needed(&grad, 1))
        rc = record(in, grad, g, "AsStridedScatterBackward0", gather_apply);
    if (rc < 0) {
        tn_release(in);
        return NULL;
    }
    return in;
}

static struct tn_tensor *gather(const struct tn_tensor *x, const struct geom *g)
{
    if (numel_of(g->v_ndim, g->v_sizes) == 0)
        return tn_zeros(g->v_sizes, g->v_ndim, g->dtype);
    if (g->reshape)
        return tn_reshape(x, g->v_sizes, g->v_ndim);
    struct tn_tensor *in, *view;
    if (layout(g, &in, &view) < 0)
        return NULL;
    bool prev = tn_set_grad_enabled(false);
    int rc = tn_copy_(in, x);
    /* a copy of its own (contiguous() could hand back the view itself) */
    struct tn_tensor *r = rc == TN_OK ? tn_clone(view) : NULL;
    tn_set_grad_enabled(prev);
    tn_release(in);
    tn_release(view);
    if (r && tn__ad_needed(&x, 1) && record(r, x, g, "AsStridedBackward0", scatter_apply) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}

/* ------------------------------------------------------------ core hooks */

static void geom_of(struct geom *g, const struct tn_tensor *in, const struct tn_tensor *view)
{
    g->dtype = in->dtype;
    g->in_ndim = in->ndim;
    g->in_off = in->offset;
    memcpy(g->in_sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim);
    memcpy(g->in_strides, in->strides, sizeof(int64_t) * (size_t)in->ndim);
    g->v_ndim = view->ndim;
    g->v_off = view->offset;
    memcpy(g->v_sizes, view->sizes, sizeof(int64_t) * (size_t)view->ndim);
    memcpy(g->v_strides, view->strides, sizeof(int64_t) * (size_t)view->ndim);
    g->reshape = false;
}

int tn__ad_on_view(const struct tn_tensor *in, struct tn_tensor *view, const char *grad_fn)
{
    if (!tn_is_grad_enabled()) {
        view->requires_grad = false;
        return TN_OK;
    }
    struct geom g;
    geom_of(&g, in, view);
    g.reshape = !grad_fn || !strcmp(grad_fn, "ViewBackward0") ||
                !strcmp(grad_fn, "UnsafeViewBackward0");
    return record(view, in, &g, grad_fn ? grad_fn : "ViewBackward0", scatter_apply);
}

/* PyTorch's CopySlices: after an in-place write into a view, the base's
 * gradient goes to its old history with the view's elements zeroed, and
 * the view's elements go to what was written (edge 1). Second derivatives
 * through it are not recorded. */
static int slices_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    const struct geom *g = &((struct geom_node *)n)->g;
    if (tn__ad_edge(n, 1) && !(out[1] = gather(grads[0], g)))
        return tn_last_status();
    if (!tn__ad_edge(n, 0))
        return TN_OK;
    struct tn_tensor *in, *view;
    if (layout(g, &in, &view) < 0)
        return tn_last_status();
    bool prev = tn_set_grad_enabled(false);
    int rc = tn_copy_(in, grads[0]);
    if (rc == TN_OK)
        rc = tn_fill_(view, tn_int(0));
    tn_set_grad_enabled(prev);
    tn_release(view);
    if (rc < 0) {
        tn_release(in);
        return rc;
    }
    out[0] = in;
    return TN_OK;
}

int tn__ad_copy_slices(struct tn_tensor *view, const struct tn_tensor *value)
{
    struct tn_tensor *base = view->base;
    struct geom_node *n =
        (struct geom_node *)tn__node_new(sizeof *n, "CopySlices", slices_apply, NULL, 2, 1);
    if (!n)
        return tn_last_status();
    geom_of(&n->g, base, view);
    int rc = tn__ad_set_edge(&n->n, 0, base);
    if (rc == TN_OK)
        rc = tn__ad_set_edge(&n->n, 1, value);
    if (rc == TN_OK) {
        tn__ad_set_history(base, &n->n, 0);
        /* the view now reads the base's new history */
        rc = tn__ad_on_view(base, view, "AsStridedBackward0");
    }
    tn__node_release(&n->n);
    return rc;
}

/* copy_: the old value of dst gets no gradient, src gets dst's (the
 * engine sums it to src's shape and casts it to src's dtype). */
static int copy_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    (void)n;
    out[1] = tn_retain(grads[0]);
    return TN_OK;
}

static int fill_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    (void)n, (void)grads, (void)out;
    return TN_OK;
}

int tn__ad_after_inplace(struct tn_tensor *dst, const struct tn_tensor *src)
{
    if (!tn_is_grad_enabled() || !tn__ad_differentiable(dst))
        return TN_OK; /* an integer or bool dst never records the copy */
    bool src_grad = src && src->requires_grad;
    if (!src_grad && !dst->requires_grad)
        return TN_OK;
    if (dst->base && (src_grad || dst->base->requires_grad))
        return tn__ad_copy_slices(dst, src);
    struct tn_node *n = src ? tn__node_new(sizeof *n, "CopyBackwards", copy_apply, NULL, 2, 1)
                            : tn__node_new(sizeof *n, "FillBackward2", fill_apply, NULL, 1, 1);
    if (!n)
        return tn_last_status();
    int rc = tn__ad_set_edge(n, 0, dst);
    if (rc == TN_OK && src)
        rc = tn__ad_set_edge(n, 1, src);
    if (rc == TN_OK)
        tn__ad_set_history(dst, n, 0);
    tn__node_release(n);
    return rc;
}

