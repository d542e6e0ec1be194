/*
 * core/view.c: views (view, reshape, permute, transpose, expand, narrow,
 * slice, select, squeeze, unsqueeze, flatten, unflatten, as_strided,
 * diagonal, unfold) and shape broadcasting, with PyTorch's rules and errors.
 */
#include "core/internal.h"

#include <string.h>

int tn_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = n - 1; i >= 0; i--) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            tn_set_error(TN_ESHAPE,
                         "The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                         "non-singleton dimension %d",
                         (long long)sa, (long long)sb, i);
            return -1;
        }
        out[i] = sa == 1 ? sb : sa;
    }
    return n;
}

/* "tensors may have at most 16 dimensions" for results that would need more. */
static int tn_check_ndim(int ndim)
{
    if (ndim < 0 || ndim > TN_MAX_DIMS)
        return tn_set_error(TN_ESHAPE, "tensors may have at most %d dimensions, got %d",
                            TN_MAX_DIMS, ndim);
    return TN_OK;
}

/* PyTorch counts a new tensor's elements in uint64 (a negative size as a
 * huge one), and an overflow along the way sticks even when a later size 0
 * brings the product back to 0. */
static int tn_check_numel(const int64_t *sizes, int ndim)
{
    uint64_t numel = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        overflow |= __builtin_mul_overflow(numel, (uint64_t)sizes[i], &numel);
        overflow |= sizes[i] < 0;
    }
    if (overflow || numel > INT64_MAX)
        return tn_set_error(TN_ESHAPE, "numel: integer multiplication overflow");
    return TN_OK;
}

int tn__infer_size(const int64_t *shape, int ndim, int64_t numel, int64_t *out)
{
    char buf[512];
    int infer = -1;
    int64_t newsize = 1;
    bool overflow = false;
    for (int d = 0; d < ndim; d++) {
        out[d] = shape[d];
        if (shape[d] == -1) {
            if (infer >= 0)
                return tn_set_error(TN_ESHAPE, "only one dimension can be inferred");
            infer = d;
        } else if (shape[d] >= 0) {
            /* An overflowing product can never equal numel: remember it
             * rather than wrap around as PyTorch does. */
            if (shape[d] && newsize > INT64_MAX / shape[d])
                overflow = true;
            else
                newsize *= shape[d];
        } else {
            /* PyTorch 1.13 stops after the number; 2.x adds where it is. */
            return tn_set_error(TN_ESHAPE, "invalid shape dimension %lld at index %d of shape %s",
                                (long long)shape[d], d, tn_shape_format(shape, ndim, buf, sizeof buf));
        }
    }
    /* a size 0 makes the product 0 however large the others are */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            overflow = false;
            newsize = 0;
        }
    }
    if (!overflow &&
        (numel == newsize || (infer >= 0 && newsize > 0 && numel % newsize == 0))) {
        if (infer >= 0) {
            if (newsize == 0)
                return tn_set_error(TN_ESHAPE,
                                    "cannot reshape tensor of 0 elements into shape %s because "
                                    "the unspecified dimension size -1 can be any value and is "
                                    "ambiguous",
                                    tn_shape_format(shape, ndim, buf, sizeof buf));
            out[infer] = numel / newsize;
        }
        return TN_OK;
    }
    return tn_set_error(TN_ESHAPE, "shape '%s' is invalid for input of size %lld",
                        tn_shape_format(shape, ndim, buf, sizeof buf), (long long)numel);
}

/*
 * A view of (oldshape, oldstride) as newshape exists when each run of old
 * dims that is laid out contiguously (a "chunk": each dim steps over the
 * whole of the one inside it) is split or merged only within itself.  We walk
 * the old dims from the innermost, closing a chunk where the stride breaks,
 * and hand out new dims from the innermost until they cover the chunk's
 * element count exactly; new dims of size 1 ride along with any chunk.  The
 * strides chosen are PyTorch's computeStride's, so tests compare them.
 */
bool tn__compute_view_strides(const int64_t *oldshape, const int64_t *oldstride, int oldndim,
                              const int64_t *newshape, int newndim, int64_t *newstride)
{
    if (oldndim == 0) {
        for (int d = 0; d < newndim; d++)
            newstride[d] = 1;
        return true;
    }
    int64_t numel = 1;
    for (int d = 0; d < oldndim; d++)
        numel *= oldshape[d];
    if (numel == 0) {
        /* Nothing to address: keep the old strides for the same shape, else
         * contiguous strides (size-0 dims counted as 1). */
        bool same = oldndim == newndim;
        for (int d = 0; same && d < newndim; d++)
            same = oldshape[d] == newshape[d];
        if (same) {
            memcpy(newstride, oldstride, sizeof *newstride * (size_t)newndim);
            return true;
        }
        for (int d = newndim - 1; d >= 0; d--)
            newstride[d] = d == newndim - 1 ? 1
                                            : (newshape[d + 1] > 1 ? newshape[d + 1] : 1) *
                                                  newstride[d + 1];
        return true;
    }
    int nd = newndim - 1;
    int64_t chunk_stride = oldstride[oldndim - 1];
    int64_t chunk_numel = 1, view_numel = 1;
    for (int od = oldndim - 1; od >= 0; od--) {
        chunk_numel *= oldshape[od];
        bool chunk_ends = od == 0 || (oldshape[od - 1] != 1 &&
                                      oldstride[od - 1] != chunk_numel * chunk_stride);
        if (!chunk_ends)
            continue;
        while (nd >= 0 && (view_numel < chunk_numel || newshape[nd] == 1)) {
            newstride[nd] = view_numel * chunk_stride;
            view_numel *= newshape[nd];
            nd--;
        }
        if (view_numel != chunk_numel)
            return false;
        if (od > 0) {
            chunk_stride = oldstride[od - 1];
            chunk_numel = 1;
            view_numel = 1;
        }
    }
    return nd == -1;
}

struct tn_tensor *tn_view(const struct tn_tensor *t, const int64_t *sizes, int ndim)
{
    int64_t shape[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    if (tn_check_ndim(ndim) != TN_OK || tn__infer_size(sizes, ndim, tn_numel(t), shape) != TN_OK ||
        tn_check_numel(shape, ndim) != TN_OK)
        return NULL;
    if (!tn__compute_view_strides(t->sizes, t->strides, t->ndim, shape, ndim, strides)) {
        tn_set_error(TN_ESHAPE, "view size is not compatible with input tensor's size and stride "
                                "(at least one dimension spans across two contiguous subspaces). "
                                "Use .reshape(...) instead.");
        return NULL;
    }
    return tn__view_make(t, t->offset, shape, strides, ndim, "ViewBackward0");
}

struct tn_tensor *tn_reshape(const struct tn_tensor *t, const int64_t *sizes, int ndim)
{
    int64_t shape[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    if (tn_check_ndim(ndim) != TN_OK || tn__infer_size(sizes, ndim, tn_numel(t), shape) != TN_OK ||
        tn_check_numel(shape, ndim) != TN_OK)
        return NULL;
    if (tn__compute_view_strides(t->sizes, t->strides, t->ndim, shape, ndim, strides))
        return tn__view_make(t, t->offset, shape, strides, ndim, "ViewBackward0");
    /* No view exists: reshape a contiguous copy (not a view of t). */
    struct tn_tensor *c = tn_contiguous(t);
    if (!c)
        return NULL;
    struct tn_tensor *r = tn__tensor_make(c->storage, c->offset, shape, NULL, ndim, c->dtype);
    if (r && c->requires_grad && tn__autograd_hooks) {
        /* a view of the copy, for autograd (which made c's history) */
        r->requires_grad = true;
        if (tn__autograd_hooks->on_view(c, r, "UnsafeViewBackward0") < 0) {
            tn_release(r);
            r = NULL;
        }
    }
    tn_release(c);
    return r;
}

struct tn_tensor *tn_permute(const struct tn_tensor *t, const int64_t *dims, int ndim)
{
    if (ndim != t->ndim) {
        /* PyTorch's words, "sparse_coo" included, for dense tensors too. */
        tn_set_error(TN_ESHAPE,
                     "permute(sparse_coo): number of dimensions in the tensor input does not "
                     "match the length of the desired ordering of dimensions i.e. input.dim() = %d "
                     "is not equal to len(dims) = %d",
                     t->ndim, ndim);
        return NULL;
    }
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    bool seen[TN_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d = tn_wrap_dim(dims[i], t->ndim);
        if (d < 0)
            return NULL;
        if (seen[d]) {
            tn_set_error(TN_ESHAPE, "permute(): duplicate dims are not allowed.");
            return NULL;
        }
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return tn__view_make(t, t->offset, sizes, strides, ndim, "PermuteBackward0");
}

static struct tn_tensor *transpose_as(const struct tn_tensor *t, int64_t dim0, int64_t dim1,
                                      const char *grad_fn)
{
    int d0 = tn_wrap_dim(dim0, t->ndim);
    int d1 = d0 < 0 ? -1 : tn_wrap_dim(dim1, t->ndim);
    if (d1 < 0)
        return NULL;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim) {
        sizes[d0] = t->sizes[d1];
        sizes[d1] = t->sizes[d0];
        strides[d0] = t->strides[d1];
        strides[d1] = t->strides[d0];
    }
    return tn__view_make(t, t->offset, sizes, strides, t->ndim, grad_fn);
}

struct tn_tensor *tn_transpose(const struct tn_tensor *t, int64_t dim0, int64_t dim1)
{
    return transpose_as(t, dim0, dim1, "TransposeBackward0");
}

struct tn_tensor *tn_t(const struct tn_tensor *t)
{
    if (t->ndim > 2) {
        tn_set_error(TN_ESHAPE, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                     t->ndim);
        return NULL;
    }
    return transpose_as(t, 0, t->ndim < 2 ? 0 : 1, "TBackward0");
}

/* "torch.FloatTensor": the legacy type name PyTorch's expand error prints. */
static void tn_legacy_type(enum tn_dtype dtype, char *buf, size_t len)
{
    const char *sc = tn_dtype_info(dtype)->storage_class;
    size_t n = strlen(sc) - strlen("Storage");
    snprintf(buf, len, "torch.%.*sTensor", (int)n, sc);
}

struct tn_tensor *tn_expand(const struct tn_tensor *t, const int64_t *sizes, int ndim)
{
    char a[512], b[512], ty[64];
    if (tn_check_ndim(ndim) != TN_OK)
        return NULL;
    if (ndim < t->ndim) {
        tn_legacy_type(t->dtype, ty, sizeof ty);
        tn_set_error(TN_ESHAPE,
                     "expand(%s{%s}, size=%s): the number of sizes provided (%d) must be greater "
                     "or equal to the number of dimensions in the tensor (%d)",
                     ty, tn_shape_format(t->sizes, t->ndim, a, sizeof a),
                     tn_shape_format(sizes, ndim, b, sizeof b), ndim, t->ndim);
        return NULL;
    }
    int64_t rs[TN_MAX_DIMS], rst[TN_MAX_DIMS];
    if (t->ndim == 0) {
        /* PyTorch keeps the sizes as given, every stride 0 */
        for (int i = 0; i < ndim; i++) {
            rs[i] = sizes[i];
            rst[i] = 0;
        }
    } else {
        for (int i = ndim - 1; i >= 0; i--) {
            int d = i - (ndim - t->ndim);
            int64_t size = d >= 0 ? t->sizes[d] : 1;
            /* a new leading dim of size 1 steps over everything inside it */
            int64_t stride = d >= 0 ? t->strides[d] : rs[i + 1] * rst[i + 1];
            int64_t target = sizes[i];
            if (target == -1) {
                if (d < 0) {
                    tn_set_error(TN_ESHAPE,
                                 "The expanded size of the tensor (-1) isn't allowed in a leading, "
                                 "non-existing dimension %d",
                                 i);
                    return NULL;
                }
                target = size;
            }
            if (size != target) {
                if (size != 1) {
                    tn_set_error(TN_ESHAPE,
                                 "The expanded size of the tensor (%lld) must match the existing "
                                 "size (%lld) at non-singleton dimension %d.  Target sizes: %s.  "
                                 "Tensor sizes: %s",
                                 (long long)target, (long long)size, i,
                                 tn_shape_format(sizes, ndim, a, sizeof a),
                                 tn_shape_format(t->sizes, t->ndim, b, sizeof b));
                    return NULL;
                }
                size = target;
                stride = 0;
            }
            rs[i] = size;
            rst[i] = stride;
        }
    }
    /* PyTorch counts the elements in uint64 (a negative size as a huge one)
     * and fails when that overflows int64; when a size 0 hides a negative
     * size it builds the tensor anyway, which tensorkit never does. */
    if (tn_check_numel(rs, ndim) != TN_OK)
        return NULL;
    return tn__view_make(t, t->offset, rs, rst, ndim, "ExpandBackward0");
}

struct tn_tensor *tn_broadcast_to(const struct tn_tensor *t, const int64_t *sizes, int ndim)
{
    return tn_expand(t, sizes, ndim);
}

struct tn_tensor *tn_slice(const struct tn_tensor *t, int64_t dim, int64_t start, int64_t end,
                           int64_t step)
{
    if (t->ndim == 0) {
        tn_set_error(TN_EINDEX, "slice() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tn_wrap_dim(dim, t->ndim);
    if (d < 0)
        return NULL;
    if (step <= 0) {
        tn_set_error(TN_EINVAL, "slice step must be positive");
        return NULL;
    }
    int64_t n = t->sizes[d];
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    /* PyTorch's arithmetic, wrapping included: with a step near INT64_MAX
     * the rounded-up count wraps negative and the slice comes out empty */
    int64_t n_up = (int64_t)((uint64_t)(end - start) + (uint64_t)step - 1);
    sizes[d] = n_up / step;
    strides[d] = (int64_t)((uint64_t)strides[d] * (uint64_t)step);
    if (sizes[d] < 0) {
        /* where it wraps to -1 PyTorch's storage check refuses the view */
        char a[512], b[512];
        tn_set_error(TN_ESHAPE, "Storage size calculation overflowed with sizes=%s and strides=%s",
                     tn_shape_format(sizes, t->ndim, a, sizeof a),
                     tn_shape_format(strides, t->ndim, b, sizeof b));
        return NULL;
    }
    return tn__view_make(t, t->offset + start * t->strides[d], sizes, strides, t->ndim,
                         "SliceBackward0");
}

/* narrow follows PyTorch 2.x, which checks the length first and names a
 * start out of range; 1.13 reported both as "start (s) + length (l) exceeds
 * dimension size" or "Dimension out of range". */
struct tn_tensor *tn_narrow(const struct tn_tensor *t, int64_t dim, int64_t start, int64_t length)
{
    if (t->ndim == 0) {
        tn_set_error(TN_ESHAPE, "narrow() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    if (length < 0) {
        tn_set_error(TN_EINVAL, "narrow(): length must be non-negative.");
        return NULL;
    }
    int d = tn_wrap_dim(dim, t->ndim);
    if (d < 0)
        return NULL;
    int64_t n = t->sizes[d];
    if (start < -n || start > n) {
        tn_set_error(TN_EINDEX,
                     "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
                     (long long)-n, (long long)n, (long long)start);
        return NULL;
    }
    if (start < 0)
        start += n;
    if (start > n - length) {
        tn_set_error(TN_ESHAPE, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                     (long long)start, (long long)length, (long long)n);
        return NULL;
    }
    return tn_slice(t, d, start, start + length, 1);
}

struct tn_tensor *tn_select(const struct tn_tensor *t, int64_t dim, int64_t index)
{
    if (t->ndim == 0) {
        tn_set_error(TN_EINDEX, "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tn_wrap_dim(dim, t->ndim);
    if (d < 0)
        return NULL;
    int64_t n = t->sizes[d];
    if (index < -n || index >= n) {
        char buf[512];
        tn_set_error(TN_EINDEX, "select(): index %lld out of range for tensor of size %s at "
                                "dimension %d",
                     (long long)index, tn_shape_format(t->sizes, t->ndim, buf, sizeof buf), d);
        return NULL;
    }
    if (index < 0)
        index += n;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        sizes[k] = t->sizes[i];
        strides[k++] = t->strides[i];
    }
    return tn__view_make(t, t->offset + index * t->strides[d], sizes, strides, k,
                         "SelectBackward0");
}

/* A view of t without the dims marked in `drop`. */
static struct tn_tensor *tn_drop_dims(const struct tn_tensor *t, const bool *drop,
                                      const char *grad_fn)
{
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (drop[i])
            continue;
        sizes[k] = t->sizes[i];
        strides[k++] = t->strides[i];
    }
    return tn__view_make(t, t->offset, sizes, strides, k, grad_fn);
}

struct tn_tensor *tn_squeeze(const struct tn_tensor *t)
{
    bool drop[TN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        drop[i] = t->sizes[i] == 1;
    return tn_drop_dims(t, drop, "SqueezeBackward0");
}

/* squeeze(dims) as PyTorch 2.x has it (1.13 takes a single dim only): every
 * dim is checked, a dim listed twice is an error, dims not of size 1 stay. */
struct tn_tensor *tn_squeeze_dims(const struct tn_tensor *t, const int64_t *dims, int ndims)
{
    bool seen[TN_MAX_DIMS] = {false}, drop[TN_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int d = tn_wrap_dim(dims[i], t->ndim);
        if (d < 0)
            return NULL;
        if (seen[d]) {
            tn_set_error(TN_ESHAPE, "dim %d appears multiple times in the list of dims", d);
            return NULL;
        }
        seen[d] = true;
        if (t->ndim)
            drop[d] = t->sizes[d] == 1;
    }
    /* squeeze.dim's node, or 2.x's squeeze.dims' */
    return tn_drop_dims(t, drop, ndims == 1 ? "SqueezeBackward1" : "SqueezeBackward2");
}

struct tn_tensor *tn_unsqueeze(const struct tn_tensor *t, int64_t dim)
{
    int d = tn_wrap_dim(dim, t->ndim + 1);
    if (d < 0 || tn_check_ndim(t->ndim + 1) != TN_OK)
        return NULL;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    for (int i = 0, k = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d >= t->ndim ? 1 : t->sizes[d] * t->strides[d];
        } else {
            sizes[i] = t->sizes[k];
            strides[i] = t->strides[k++];
        }
    }
    return tn__view_make(t, t->offset, sizes, strides, t->ndim + 1, "UnsqueezeBackward0");
}

struct tn_tensor *tn_flatten(const struct tn_tensor *t, int64_t start_dim, int64_t end_dim)
{
    int s = tn_wrap_dim(start_dim, t->ndim);
    int e = s < 0 ? -1 : tn_wrap_dim(end_dim, t->ndim);
    if (e < 0)
        return NULL;
    if (s > e) {
        tn_set_error(TN_ESHAPE, "flatten() has invalid args: start_dim cannot come after end_dim");
        return NULL;
    }
    if (t->ndim == 0)
        return tn_reshape(t, TN_SHAPE(1));
    if (s == e) /* self itself, as PyTorch's */
        return tn_retain((struct tn_tensor *)t);
    /* The flattened size is the product itself, not a -1: with a size-0 dim
     * elsewhere a -1 could take any value. */
    int64_t shape[TN_MAX_DIMS], n = 1;
    int k = 0;
    for (int i = 0; i < s; i++)
        shape[k++] = t->sizes[i];
    for (int i = s; i <= e; i++)
        n *= t->sizes[i];
    shape[k++] = n;
    for (int i = e + 1; i < t->ndim; i++)
        shape[k++] = t->sizes[i];
    return tn_reshape(t, shape, k);
}

/* unflatten follows PyTorch 2.x, which reports every failure of inferring
 * the sizes other than a wrong product as "unflatten got an unexpected
 * error:" followed by the cause on the next line (1.13 gave the cause
 * alone). */
struct tn_tensor *tn_unflatten(const struct tn_tensor *t, int64_t dim, const int64_t *sizes,
                               int nsizes)
{
    char buf[512];
    int d = tn_wrap_dim(dim, t->ndim);
    if (d < 0)
        return NULL;
    if (nsizes == 0) {
        tn_set_error(TN_ESHAPE, "unflatten: sizes must be non-empty");
        return NULL;
    }
    if (t->ndim == 0) {
        tn_set_error(TN_EINDEX, "unflatten got an unexpected error:\n"
                                "Dimension specified as 0 but tensor has no dimensions");
        return NULL;
    }
    if (tn_check_ndim(t->ndim - 1 + nsizes) != TN_OK)
        return NULL;
    int64_t inferred[TN_MAX_DIMS];
    if (tn__infer_size(sizes, nsizes, t->sizes[d], inferred) != TN_OK) {
        if (strstr(tn_last_error(), "is invalid for input of size"))
            tn_set_error(TN_ESHAPE,
                         "unflatten: Provided sizes %s don't multiply up to the size of dim %d "
                         "(%lld) in the input tensor",
                         tn_shape_format(sizes, nsizes, buf, sizeof buf), d,
                         (long long)t->sizes[d]);
        else
            tn_set_error(TN_ESHAPE, "unflatten got an unexpected error:\n%s", tn_last_error());
        return NULL;
    }
    int64_t shape[TN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < d; i++)
        shape[k++] = t->sizes[i];
    for (int i = 0; i < nsizes; i++)
        shape[k++] = inferred[i];
    for (int i = d + 1; i < t->ndim; i++)
        shape[k++] = t->sizes[i];
    return tn_view(t, shape, k);
}

struct tn_tensor *tn_as_strided(const struct tn_tensor *t, const int64_t *sizes, int ndim,
                                const int64_t *strides, int64_t storage_offset)
{
    char a[512], b[512];
    if (tn_check_ndim(ndim) != TN_OK)
        return NULL;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) {
            tn_set_error(TN_ESHAPE,
                         "as_strided: Negative strides are not supported at the moment, got "
                         "strides: %s",
                         tn_shape_format(strides, ndim, a, sizeof a));
            return NULL;
        }
    }
    /* The bytes the geometry reaches (0 when it holds no element). PyTorch
     * accepts a negative size after a size 0; tensorkit never builds a
     * tensor with a negative size, so any is refused with PyTorch's words
     * for the other negative sizes. */
    uint64_t es = tn_dtype_size(t->dtype), need = 1;
    bool empty = false, overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            overflow = true;
        else if (sizes[i] == 0)
            empty = true;
    }
    for (int i = 0; i < ndim && !overflow && !empty; i++) {
        uint64_t span;
        overflow = __builtin_mul_overflow((uint64_t)strides[i], (uint64_t)(sizes[i] - 1), &span) ||
                   __builtin_add_overflow(need, span, &need);
    }
    if (!overflow && !empty)
        overflow = __builtin_mul_overflow(need, es, &need) || need > INT64_MAX;
    if (overflow) {
        tn_set_error(TN_ESHAPE, "Storage size calculation overflowed with sizes=%s and strides=%s",
                     tn_shape_format(sizes, ndim, a, sizeof a),
                     tn_shape_format(strides, ndim, b, sizeof b));
        return NULL;
    }
    if (!empty) {
        /* PyTorch adds the offset in bytes to the size needed before it
         * checks that the offset is not negative */
        int64_t total;
        if (__builtin_mul_overflow(storage_offset, (int64_t)es, &total) ||
            __builtin_add_overflow(total, (int64_t)need, &total) ||
            total > (int64_t)t->storage->nbytes) {
            tn_set_error(TN_ESHAPE,
                         "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %d "
                         "requiring a storage size of %lld are out of bounds for storage of size "
                         "%zu",
                         tn_shape_format(sizes, ndim, a, sizeof a),
                         tn_shape_format(strides, ndim, b, sizeof b), (long long)storage_offset,
                         (int)es, (long long)total, t->storage->nbytes);
            return NULL;
        }
    }
    if (storage_offset < 0) {
        tn_set_error(TN_ESHAPE, "Tensor: invalid storage offset %lld", (long long)storage_offset);
        return NULL;
    }
    return tn__view_make(t, storage_offset, sizes, strides, ndim, "AsStridedBackward0");
}

struct tn_tensor *tn_diagonal(const struct tn_tensor *t, int64_t offset, int64_t dim1,
                              int64_t dim2)
{
    int d1 = tn_wrap_dim(dim1, t->ndim);
    int d2 = d1 < 0 ? -1 : tn_wrap_dim(dim2, t->ndim);
    if (d2 < 0)
        return NULL;
    if (d1 == d2) {
        tn_set_error(TN_ESHAPE, "diagonal dimensions cannot be identical %lld, %lld",
                     (long long)dim1, (long long)dim2);
        return NULL;
    }
    int64_t n1 = t->sizes[d1], n2 = t->sizes[d2], size;
    if (offset >= 0)
        size = n1 < n2 - offset ? n1 : n2 - offset;
    else
        size = n1 + offset < n2 ? n1 + offset : n2;
    if (size < 0)
        size = 0;
    /* Off the end the offset stays put: no element is addressed. */
    int64_t off = t->offset;
    if (size > 0)
        off += offset >= 0 ? offset * t->strides[d2] : -offset * t->strides[d1];
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d1 || i == d2)
            continue;
        sizes[k] = t->sizes[i];
        strides[k++] = t->strides[i];
    }
    sizes[k] = size;
    strides[k++] = t->strides[d1] + t->strides[d2];
    return tn__view_make(t, off, sizes, strides, k, "DiagonalBackward0");
}

/* unfold follows PyTorch 2.x, which refuses a negative size in its own words
 * (1.13 failed later on the storage size). */
struct tn_tensor *tn_unfold(const struct tn_tensor *t, int64_t dim, int64_t size, int64_t step)
{
    int d = tn_wrap_dim(dim, t->ndim);
    if (d < 0 || tn_check_ndim(t->ndim + 1) != TN_OK)
        return NULL;
    int64_t max = t->ndim == 0 ? 1 : t->sizes[d];
    if (size > max) {
        tn_set_error(TN_ESHAPE, "maximum size for tensor at dimension %d is %lld but size is %lld",
                     d, (long long)max, (long long)size);
        return NULL;
    }
    if (size < 0) {
        tn_set_error(TN_ESHAPE, "size is %lld but must be >= 0", (long long)size);
        return NULL;
    }
    if (step <= 0) {
        tn_set_error(TN_ESHAPE, "step is %lld but must be > 0", (long long)step);
        return NULL;
    }
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        sizes[i] = i == d ? (t->sizes[i] - size) / step + 1 : t->sizes[i];
        strides[i] = i == d ? (int64_t)((uint64_t)step * (uint64_t)t->strides[i]) : t->strides[i];
    }
    sizes[t->ndim] = size;
    strides[t->ndim] = t->ndim == 0 ? 1 : t->strides[d];
    return tn__view_make(t, t->offset, sizes, strides, t->ndim + 1, "UnfoldBackward0");
}
