/*
 * ops/index_reduce.c: index_reduce (prod, mean, amax, amin, include_self)
 * as scatter_reduce.two with the index broadcast along dim over source's
 * shape: source's slice k reduces into self's slice index[k], which is
 * index_reduce's definition. The gradient is scatter_reduce's rule, which
 * is PyTorch's index_reduce_backward with gather/scatter_add over the
 * broadcast index standing for its index_select/index_add.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

/* PyTorch's index_reduce meta checks (index_func_meta_impl), in its order
 * and words; d is the wrapped dim. */
static int check(const struct tn_tensor *self, int d, const struct tn_tensor *index,
                 const struct tn_tensor *source, const char *reduce)
{
    char a[128], b[128];
    static const char *const ok[] = {"prod", "mean", "amax", "amin"};
    bool known = false;
    for (int i = 0; i < 4; i++)
        known |= reduce && !strcmp(reduce, ok[i]);
    if (!known)
        return tn_set_error(TN_EINVAL, "index_reduce(): Expected reduce to be one of prod, mean, "
                            "amax or amin but got %s.", reduce ? reduce : "None");
    if (index->ndim > 1)
        return tn_set_error(TN_EINDEX, "index_reduce_(): Index is supposed to be a vector, but "
                            "got dim: %d with type: %s and size: %s", index->ndim,
                            tn_dtype_info(index->dtype)->c10_name,
                            tn_shape_format(index->sizes, index->ndim, a, sizeof a));
    if (index->dtype != TN_INT64 && index->dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "index_reduce_(): Expected dtype int32/int64 for index "
                            "but got: %s", tn_dtype_info(index->dtype)->c10_name);
    if (self->dtype != source->dtype)
        return tn_set_error(TN_EDTYPE, "index_reduce_(): self (%s) and source (%s) must have the "
                            "same scalar type", tn_dtype_info(self->dtype)->c10_name,
                            tn_dtype_info(source->dtype)->c10_name);
    if (d != 0 && d >= source->ndim)
        return tn_set_error(TN_EINDEX, "index_reduce_(): Indexing dim %d is out of bounds of the "
                            "source tensor with dim %d", d, source->ndim);
    int64_t n = tn_numel(index), want = source->ndim == 0 ? 1 : source->sizes[d];
    if (n != want)
        return tn_set_error(TN_EINDEX, "index_reduce_(): Number of indices (%lld) should be "
                            "equal to source.size(dim): (%lld), for dim: %d", (long long)n,
                            (long long)want, d);
    int64_t ss[TN_MAX_DIMS], rs[TN_MAX_DIMS];
    int ns = 0, nr = 0;
    for (int i = 0; i < self->ndim; i++)
        if (i != d)
            ss[ns++] = self->sizes[i];
    for (int i = 0; i < source->ndim; i++)
        if (i != d)
            rs[nr++] = source->sizes[i];
    if (ns != nr || memcmp(ss, rs, sizeof(int64_t) * (size_t)ns) != 0)
        return tn_set_error(TN_ESHAPE, "source tensor shape must match self tensor shape, "
                            "excluding the specified dimension. Got self.shape = %s "
                            "source.shape = %s",
                            tn_shape_format(self->sizes, self->ndim, a, sizeof a),
                            tn_shape_format(source->sizes, source->ndim, b, sizeof b));
    if (self->dtype == TN_BOOL && !strcmp(reduce, "mean"))
        return tn_set_error(TN_EDTYPE, "\"div_floor_cpu\" not implemented for 'Bool'");
    return TN_OK;
}

/* index as int64 of source's shape, index[k] along d (every index checked
 * against self's size there on the CPU, in PyTorch's words) */
static struct tn_tensor *spread(const struct tn_tensor *index, const struct tn_tensor *source,
                                int d, int64_t limit)
{
    struct tn_tensor *ix = tn_to_dtype(index, TN_INT64), *c = ix ? tn_contiguous(ix) : NULL;
    tn_release(ix);
    if (!c)
        return NULL;
    if (c->device.type == TN_DEVICE_CPU) {
        const int64_t *v = tn_data(c);
        for (int64_t k = 0; k < tn_numel(c); k++)
            if (v[k] < 0 || v[k] >= limit) {
                tn_release(c);
                tn_set_error(TN_EINDEX, "index out of range in self");
                return NULL;
            }
    }
    int64_t shape[TN_MAX_DIMS];
    for (int i = 0; i < source->ndim; i++)
        shape[i] = i == d ? -1 : 1;
    struct tn_tensor *v = tn_reshape(c, shape, source->ndim);
    struct tn_tensor *e = v ? tn_expand(v, source->sizes, source->ndim) : NULL;
    tn_release(c);
    tn_release(v);
    return e;
}

struct tn_tensor *tn__composite_index_reduce(tn_keyset ks, const struct tn_tensor *self,
                                             int64_t dim, const struct tn_tensor *index,
                                             const struct tn_tensor *source, const char *reduce,
                                             bool include_self)
{
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0 || check(self, d, index, source, reduce) < 0)
        return NULL;
    /* a 0-dim self and source: one slice, as (1,) */
    bool scalar = self->ndim == 0;
    struct tn_tensor *s = scalar ? tn_reshape(self, TN_SHAPE(1))
                                 : tn_retain((struct tn_tensor *)self);
    struct tn_tensor *src = s ? (source->ndim == 0 ? tn_reshape(source, TN_SHAPE(1))
                                                   : tn_retain((struct tn_tensor *)source))
                              : NULL;
    struct tn_tensor *ix = src ? spread(index, src, d, s->sizes[d]) : NULL;
    struct tn_tensor *r = ix ? tn__redispatch_scatter_reduce_two(ks, s, d, ix, src, reduce,
                                                                 include_self)
                             : NULL;
    tn_release(s);
    tn_release(src);
    tn_release(ix);
    if (r && scalar) {
        static const int64_t none[1];
        struct tn_tensor *o = tn_reshape(r, none, 0);
        tn_release(r);
        r = o;
    }
    return r;
}
