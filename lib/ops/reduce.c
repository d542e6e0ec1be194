/*
 * ops/reduce.c: meta functions of the reductions (sum, mean, amax, amin over
 * dims, keepdim, dtype) with PyTorch's checks and words, and the full
 * reductions sum(t) and mean(t) as decompositions into the dim overloads.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

int tn__reduce_mask(const char *op, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                    bool *mask)
{
    int nd = self->ndim;
    memset(mask, 0, sizeof(bool) * TN_MAX_DIMS);
    if (!dim || dim_len == 0) {
        for (int i = 0; i < nd; i++)
            mask[i] = true;
        return TN_OK;
    }
    for (int i = 0; i < dim_len; i++) {
        int d = tn_wrap_dim(dim[i], nd);
        if (d < 0)
            return tn_last_status();
        if (nd == 0)
            continue; /* a 0-dim tensor reduces over nothing */
        if (mask[d])
            return tn_set_error(TN_EINVAL, "dim %d appears multiple times in the list of dims", d);
        mask[d] = true;
    }
    (void)op;
    return TN_OK;
}

static int reduce_meta(const char *op, const struct tn_tensor *self, const int64_t *dim,
                       int dim_len, bool keepdim, enum tn_dtype dtype, struct tn_meta *m)
{
    bool mask[TN_MAX_DIMS];
    int rc = tn__reduce_mask(op, self, dim, dim_len, mask);
    if (rc < 0)
        return rc;
    m->ndim = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (!mask[i])
            m->sizes[m->ndim++] = self->sizes[i];
        else if (keepdim)
            m->sizes[m->ndim++] = 1;
    }
    m->dtype = dtype;
    return TN_OK;
}

int tn__meta_sum_intlist_out(const struct tn_tensor *self, const int64_t *dim, int dim_len,
                             bool keepdim, enum tn_dtype dtype, struct tn_meta *m)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_dtype_is_integral(self->dtype, true) ? TN_INT64 : self->dtype;
    return reduce_meta("sum", self, dim, dim_len, keepdim, dtype, m);
}

int tn__meta_mean_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      enum tn_dtype dtype, struct tn_meta *m)
{
    enum tn_dtype dt = dtype == TN_DTYPE_UNSET ? self->dtype : dtype;
    if (!tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt)) {
        static const char *names[TN_NUM_DTYPES] = {
            [TN_INT64] = "Long", [TN_INT32] = "Int", [TN_INT16] = "Short", [TN_INT8] = "Char",
            [TN_UINT8] = "Byte", [TN_BOOL] = "Bool"};
        return tn_set_error(TN_EDTYPE, "mean(): could not infer output dtype. %s dtype must be "
                            "either a floating point or complex dtype. Got: %s",
                            dtype == TN_DTYPE_UNSET ? "Input" : "Optional", names[dt]);
    }
    return reduce_meta("mean", self, dim, dim_len, keepdim, dt, m);
}

static int minmax_meta(const char *op, const struct tn_tensor *self, const int64_t *dim,
                       int dim_len, bool keepdim, struct tn_meta *m)
{
    int rc = reduce_meta(op, self, dim, dim_len, keepdim, self->dtype, m);
    if (rc < 0 || tn_numel(self) != 0)
        return rc;
    if (dim_len == 0)
        return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim to be specified for "
                            "input.numel() == 0. Specify the reduction dim with the 'dim' "
                            "argument.", op);
    for (int i = 0; i < dim_len; i++) {
        int d = tn_wrap_dim(dim[i], self->ndim);
        if (self->ndim > 0 && self->sizes[d] == 0)
            return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim %d to have non-zero size.",
                                op, d);
    }
    return TN_OK;
}

int tn__meta_amax_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      struct tn_meta *m)
{
    return minmax_meta("amax", self, dim, dim_len, keepdim, m);
}

int tn__meta_amin_out(const struct tn_tensor *self, const int64_t *dim, int dim_len, bool keepdim,
                      struct tn_meta *m)
{
    return minmax_meta("amin", self, dim, dim_len, keepdim, m);
}

struct tn_tensor *tn__composite_sum(tn_keyset ks, const struct tn_tensor *self, enum tn_dtype dtype)
{
    return tn_sum_dim_intlist(self, NULL, 0, false, dtype);
}

struct tn_tensor *tn__composite_mean(tn_keyset ks, const struct tn_tensor *self, enum tn_dtype dtype)
{
    return tn_mean_dim(self, NULL, 0, false, dtype);
}

/* --- prod, any, all over one dim; logsumexp, var and std ------------------ */

int tn__meta_prod_int_out(const struct tn_tensor *self, int64_t dim, bool keepdim,
                          enum tn_dtype dtype, struct tn_meta *m)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_dtype_is_integral(self->dtype, true) ? TN_INT64 : self->dtype;
    return reduce_meta("prod", self, &dim, 1, keepdim, dtype, m);
}

int tn__meta_any_out(const struct tn_tensor *self, int64_t dim, bool keepdim, struct tn_meta *m)
{
    return reduce_meta("any", self, &dim, 1, keepdim,
                       self->dtype == TN_UINT8 ? TN_UINT8 : TN_BOOL, m);
}

int tn__meta_all_out(const struct tn_tensor *self, int64_t dim, bool keepdim, struct tn_meta *m)
{
    return reduce_meta("all", self, &dim, 1, keepdim,
                       self->dtype == TN_UINT8 ? TN_UINT8 : TN_BOOL, m);
}

/* log(sum(exp(x - m))) + m with m the max over dim, made 0 where it is
 * infinite (so a row of -inf gives -inf and one with +inf gives +inf, not
 * NaN). Integer inputs become the default float dtype; complex inputs
 * (PyTorch 2.x; 1.13 refuses them) shift by the max of their real parts. */
struct tn_tensor *tn__composite_logsumexp(tn_keyset ks, const struct tn_tensor *self,
                                          const int64_t *dim, int dim_len, bool keepdim)
{
    struct tn_tensor *x = tn_dtype_is_integral(self->dtype, true)
                              ? tn_to_dtype(self, tn_get_default_dtype())
                              : tn_retain((struct tn_tensor *)self);
    if (!x)
        return NULL;
    if (tn_numel(x) == 0) {
        /* nothing to take a max of: log(0) = -inf over empty dims */
        struct tn_tensor *e = tn_exp(x);
        struct tn_tensor *s = e ? tn_sum_dim_intlist(e, dim, dim_len, keepdim, TN_DTYPE_UNSET) : NULL;
        struct tn_tensor *r = s ? tn_log(s) : NULL;
        tn_release(e);
        tn_release(s);
        tn_release(x);
        return r;
    }
    /* complex (2.x): the shift is the max of the real parts */
    struct tn_tensor *xr = tn_dtype_is_complex(x->dtype) ? tn_to_dtype(x, tn__dtype_real(x->dtype))
                                                        : tn_retain(x);
    if (!xr) {
        tn_release(x);
        return NULL;
    }
    double zero = 0.0;
    struct tn_tensor *r = NULL, *mk = NULL, *mkf = NULL, *d = NULL, *e = NULL, *s = NULL,
                     *l = NULL, *m = NULL, *mf = NULL;
    if (!(mk = tn_amax(xr, dim, dim_len, true)) || !(mkf = tn_nan_to_num(mk, NULL, &zero, &zero)) ||
        !(d = tn_sub(x, mkf, tn_int(1))) || !(e = tn_exp(d)) ||
        !(s = tn_sum_dim_intlist(e, dim, dim_len, keepdim, TN_DTYPE_UNSET)) || !(l = tn_log(s)) ||
        !(m = tn_amax(xr, dim, dim_len, keepdim)) || !(mf = tn_nan_to_num(m, NULL, &zero, &zero)))
        goto done;
    r = tn_add(l, mf, tn_int(1));
done:
    tn_release(mk);
    tn_release(mkf);
    tn_release(d);
    tn_release(e);
    tn_release(s);
    tn_release(l);
    tn_release(m);
    tn_release(mf);
    tn_release(xr);
    tn_release(x);
    return r;
}

/* sum(|x - mean|^2) / max(0, N - correction), two passes; N is the number
 * of elements reduced into each output. */
struct tn_tensor *tn__composite_var(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                                    int dim_len, const struct tn_scalar *correction, bool keepdim)
{
    if (!tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "std and var only support floating point and complex "
                            "dtypes"), NULL;
    struct tn_tensor *r = NULL, *mean = NULL, *d = NULL, *a = NULL, *sq = NULL, *s = NULL;
    if (!(mean = tn_mean_dim(self, dim, dim_len, true, TN_DTYPE_UNSET)) ||
        !(d = tn_sub(self, mean, tn_int(1))))
        goto done;
    if (tn_dtype_is_complex(self->dtype)) {
        if (!(a = tn_abs(d)))
            goto done;
    } else {
        a = tn_retain(d);
    }
    if (!(sq = tn_mul(a, a)) || !(s = tn_sum_dim_intlist(sq, dim, dim_len, keepdim, TN_DTYPE_UNSET)))
        goto done;
    int64_t nout = tn_numel(s);
    double n = nout ? (double)tn_numel(self) / (double)nout : 0.0;
    double c = correction ? tn_scalar_to_double(*correction) : 1.0;
    double dof = n - c > 0 ? n - c : 0.0;
    r = tn_div_scalar(s, tn_float(dof));
done:
    tn_release(mean);
    tn_release(d);
    tn_release(a);
    tn_release(sq);
    tn_release(s);
    return r;
}

struct tn_tensor *tn__composite_std(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                                    int dim_len, const struct tn_scalar *correction, bool keepdim)
{
    struct tn_tensor *v = tn__composite_var(ks, self, dim, dim_len, correction, keepdim);
    struct tn_tensor *r = v ? tn_sqrt(v) : NULL;
    tn_release(v);
    return r;
}

/* The older overloads: unbiased picks a correction of 1 or 0 (through the
 * dispatcher, so that autograd records var.correction's node). */
struct tn_tensor *tn__composite_var_unbiased(tn_keyset ks, const struct tn_tensor *self,
                                             bool unbiased)
{
    struct tn_scalar c = tn_int(unbiased);
    return tn_var_correction(self, NULL, 0, &c, false);
}

struct tn_tensor *tn__composite_var_dim(tn_keyset ks, const struct tn_tensor *self,
                                        const int64_t *dim, int dim_len, bool unbiased,
                                        bool keepdim)
{
    struct tn_scalar c = tn_int(unbiased);
    return tn_var_correction(self, dim, dim_len, &c, keepdim);
}

struct tn_tensor *tn__composite_std_unbiased(tn_keyset ks, const struct tn_tensor *self,
                                             bool unbiased)
{
    struct tn_scalar c = tn_int(unbiased);
    return tn_std_correction(self, NULL, 0, &c, false);
}

struct tn_tensor *tn__composite_std_dim(tn_keyset ks, const struct tn_tensor *self,
                                        const int64_t *dim, int dim_len, bool unbiased,
                                        bool keepdim)
{
    struct tn_scalar c = tn_int(unbiased);
    return tn_std_correction(self, dim, dim_len, &c, keepdim);
}

/* var_mean and std_mean: (var or std, mean) over dim, each through the
 * dispatcher so that autograd records var.correction's (std's) and
 * mean.dim's nodes. */
static int moments(const struct tn_tensor *self, const int64_t *dim, int dim_len,
                   const struct tn_scalar *correction, bool keepdim, bool is_std,
                   struct tn_tensor **spread, struct tn_tensor **mean)
{
    *spread = is_std ? tn_std_correction(self, dim, dim_len, correction, keepdim)
                     : tn_var_correction(self, dim, dim_len, correction, keepdim);
    *mean = *spread ? tn_mean_dim(self, dim, dim_len, keepdim, TN_DTYPE_UNSET) : NULL;
    if (*mean)
        return TN_OK;
    tn_release(*spread);
    *spread = NULL;
    return tn_last_status();
}

#define TN__MOMENTS(op, is_std)                                                               \
    int tn__composite_##op##_mean_correction(tn_keyset ks, const struct tn_tensor *self,      \
                                             const int64_t *dim, int dim_len,                 \
                                             const struct tn_scalar *correction, bool keepdim, \
                                             struct tn_tensor **result0,                       \
                                             struct tn_tensor **result1)                       \
    {                                                                                         \
        (void)ks;                                                                             \
        return moments(self, dim, dim_len, correction, keepdim, is_std, result0, result1);    \
    }                                                                                         \
    int tn__composite_##op##_mean_unbiased(tn_keyset ks, const struct tn_tensor *self,        \
                                           bool unbiased, struct tn_tensor **result0,         \
                                           struct tn_tensor **result1)                        \
    {                                                                                         \
        (void)ks;                                                                             \
        struct tn_scalar c = tn_int(unbiased);                                                \
        return moments(self, NULL, 0, &c, false, is_std, result0, result1);                   \
    }                                                                                         \
    int tn__composite_##op##_mean_dim(tn_keyset ks, const struct tn_tensor *self,             \
                                      const int64_t *dim, int dim_len, bool unbiased,         \
                                      bool keepdim, struct tn_tensor **result0,               \
                                      struct tn_tensor **result1)                             \
    {                                                                                         \
        (void)ks;                                                                             \
        struct tn_scalar c = tn_int(unbiased);                                                \
        return moments(self, dim, dim_len, &c, keepdim, is_std, result0, result1);            \
    }

TN__MOMENTS(var, false)
TN__MOMENTS(std, true)

/* max() and min() of every element: amax/amin over all dims (NaN wins, the
 * gradient spread evenly over ties, as PyTorch's max() does), with
 * PyTorch's own words for what they refuse. */
static struct tn_tensor *max_all(const char *op, const struct tn_tensor *self, bool is_max)
{
    if (tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"%s_all\" not implemented for '%s'", op,
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    if (tn_numel(self) == 0)
        return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim to be specified for "
                            "input.numel() == 0. Specify the reduction dim with the 'dim' "
                            "argument.", op), NULL;
    return is_max ? tn_amax(self, NULL, 0, false) : tn_amin(self, NULL, 0, false);
}

struct tn_tensor *tn__composite_max(tn_keyset ks, const struct tn_tensor *self)
{
    return max_all("max", self, true);
}

struct tn_tensor *tn__composite_min(tn_keyset ks, const struct tn_tensor *self)
{
    return max_all("min", self, false);
}

/* argmax/argmin: int64 indices over one dim, or over everything (a 0-dim
 * result, all ones with keepdim). */
static int arg_meta(const char *op, const struct tn_tensor *self, const int64_t *dim,
                    bool keepdim, struct tn_meta *m)
{
    /* PyTorch 2.x's words (1.13 named the kernel) */
    if (self->dtype == TN_BOOL || tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "%s(): does not support %s input", op,
                            self->dtype == TN_BOOL ? "bool" : "complex");
    if (dim) {
        int rc = minmax_meta(op, self, dim, 1, keepdim, m);
        m->dtype = TN_INT64;
        return rc;
    }
    if (tn_numel(self) == 0)
        return tn_set_error(TN_EINVAL, "%s(): Expected reduction dim to be specified for "
                            "input.numel() == 0.", op);
    m->ndim = keepdim ? self->ndim : 0;
    for (int i = 0; i < m->ndim; i++)
        m->sizes[i] = 1;
    m->dtype = TN_INT64;
    return TN_OK;
}

int tn__meta_argmax_out(const struct tn_tensor *self, const int64_t *dim, bool keepdim,
                        struct tn_meta *m)
{
    return arg_meta("argmax", self, dim, keepdim, m);
}

int tn__meta_argmin_out(const struct tn_tensor *self, const int64_t *dim, bool keepdim,
                        struct tn_meta *m)
{
    return arg_meta("argmin", self, dim, keepdim, m);
}

/* cumsum/cumprod: self's shape; integers and bool accumulate in int64
 * unless dtype= says otherwise. */
static int scan_meta(const struct tn_tensor *self, int64_t dim, enum tn_dtype dtype,
                     struct tn_meta *m)
{
    if (tn_wrap_dim(dim, self->ndim) < 0)
        return tn_last_status();
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_dtype_is_integral(self->dtype, true) ? TN_INT64 : self->dtype;
    m->ndim = self->ndim;
    memcpy(m->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    m->dtype = dtype;
    return TN_OK;
}

int tn__meta_cumsum_out(const struct tn_tensor *self, int64_t dim, enum tn_dtype dtype,
                        struct tn_meta *m)
{
    return scan_meta(self, dim, dtype, m);
}

int tn__meta_cumprod_out(const struct tn_tensor *self, int64_t dim, enum tn_dtype dtype,
                         struct tn_meta *m)
{
    return scan_meta(self, dim, dtype, m);
}

/* any.dims and all.dims: dim NULL (None) reduces every dim, an empty list
 * none (then only the test != 0, in uint8 for uint8 as any's and all's
 * result), each listed dim through any.dim or all.dim in turn */
static struct tn_tensor *bool_reduce_dims(const char *name, const struct tn_tensor *self,
                                          const int64_t *dim, int dim_len, bool keepdim,
                                          struct tn_tensor *(*one)(const struct tn_tensor *,
                                                                   int64_t, bool))
{
    bool mask[TN_MAX_DIMS];
    if (dim && dim_len == 0) {
        memset(mask, 0, sizeof mask);
    } else if (tn__reduce_mask(name, self, dim, dim_len, mask) < 0) {
        return NULL;
    }
    struct tn_tensor *r = tn_ne_scalar(self, tn_int(0));
    if (r && self->dtype == TN_UINT8) {
        struct tn_tensor *u = tn_to_dtype(r, TN_UINT8);
        tn_release(r);
        r = u;
    }
    int64_t sizes[TN_MAX_DIMS];
    int nd = 0;
    for (int i = 0; r && i < self->ndim; i++) {
        if (!mask[i]) {
            sizes[nd++] = self->sizes[i];
            continue;
        }
        if (keepdim)
            sizes[nd++] = 1;
        struct tn_tensor *a = one(r, i, true);
        tn_release(r);
        r = a;
    }
    if (!r || nd == r->ndim)
        return r;
    struct tn_tensor *v = tn_reshape(r, sizes, nd);
    tn_release(r);
    return v;
}

struct tn_tensor *tn__composite_any_dims(tn_keyset ks, const struct tn_tensor *self,
                                         const int64_t *dim, int dim_len, bool keepdim)
{
    (void)ks;
    return bool_reduce_dims("any", self, dim, dim_len, keepdim, tn_any_dim);
}

struct tn_tensor *tn__composite_all_dims(tn_keyset ks, const struct tn_tensor *self,
                                         const int64_t *dim, int dim_len, bool keepdim)
{
    (void)ks;
    return bool_reduce_dims("all", self, dim, dim_len, keepdim, tn_all_dim);
}

/* nanmean as PyTorch's: nansum over the count of values that are not NaN */
struct tn_tensor *tn__composite_nanmean(tn_keyset ks, const struct tn_tensor *self,
                                        const int64_t *dim, int dim_len, bool keepdim,
                                        enum tn_dtype dtype)
{
    (void)ks;
    if (!tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype)) {
        tn_set_error(TN_EDTYPE, "nanmean(): expected input to have floating point or complex "
                     "dtype but got %s", tn_dtype_info(self->dtype)->c10_name);
        return NULL;
    }
    struct tn_tensor *nan = tn_isnan(self), *ok = nan ? tn_logical_not(nan) : NULL;
    struct tn_tensor *n = ok ? tn_sum_dim_intlist(ok, dim, dim_len, keepdim, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *s = n ? tn_nansum(self, dim, dim_len, keepdim, dtype) : NULL;
    struct tn_tensor *r = s ? tn_div(s, n) : NULL;
    tn_release(nan);
    tn_release(ok);
    tn_release(n);
    tn_release(s);
    return r;
}

/* count_nonzero: the int64 count of self != 0 over dim (every dim when
 * none is given) */
struct tn_tensor *tn__composite_count_nonzero_dim_intlist(tn_keyset ks,
                                                          const struct tn_tensor *self,
                                                          const int64_t *dim, int dim_len)
{
    (void)ks;
    struct tn_tensor *nz = tn_ne_scalar(self, tn_int(0));
    struct tn_tensor *r = nz ? tn_sum_dim_intlist(nz, dim_len ? dim : NULL, dim_len, false,
                                                  TN_INT64)
                             : NULL;
    tn_release(nz);
    return r;
}

struct tn_tensor *tn__composite_count_nonzero(tn_keyset ks, const struct tn_tensor *self,
                                              const int64_t *dim)
{
    return tn__composite_count_nonzero_dim_intlist(ks, self, dim, dim ? 1 : 0);
}

/* sum_to_size: self summed down to size, which self must expand from: the
 * leading dims self has beyond size, and those size holds as 1; self
 * itself (a view) where nothing is summed */
struct tn_tensor *tn__composite_sum_to_size(tn_keyset ks, const struct tn_tensor *self,
                                            const int64_t *size, int size_len)
{
    (void)ks;
    if (size_len == 0) /* PyTorch's sum_to: a sum of all, int64 for integers and bool */
        return tn_sum(self, TN_DTYPE_UNSET);
    int lead = self->ndim - size_len;
    bool ok = lead >= 0;
    int64_t dims[TN_MAX_DIMS];
    int nd = 0;
    for (int i = 0; ok && i < self->ndim; i++) {
        if (i < lead) {
            dims[nd++] = i;
            continue;
        }
        int64_t s = size[i - lead], t = self->sizes[i];
        if (s == 1 && t != 1)
            dims[nd++] = i;
        else if (s != t)
            ok = false;
    }
    if (!ok) {
        char want[256], have[256];
        tn_set_error(TN_ESHAPE, "size {%s} is not expandable to size {%s}.",
                     tn_shape_format(size, size_len, want, sizeof want),
                     tn_shape_format(self->sizes, self->ndim, have, sizeof have));
        return NULL;
    }
    if (!nd)
        return tn_view(self, self->sizes, self->ndim);
    struct tn_tensor *s = tn_sum_dim_intlist(self, dims, nd, true, TN_DTYPE_UNSET);
    struct tn_tensor *r = s && lead ? tn_view(s, size, size_len) : tn_retain(s);
    tn_release(s);
    return r;
}
