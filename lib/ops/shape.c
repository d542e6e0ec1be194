/*
 * ops/shape.c: decompositions of data-movement and product ops into other
 * ops, with PyTorch's checks and words: masked_fill, dot, mv, outer,
 * baddbmm, linalg_vector_norm, norm, stack and einsum (with "...").
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_internal.h"

/* PyTorch's masked_fill_ refuses masks that are not bool. */
static int check_mask(const struct tn_tensor *mask)
{
    if (mask->dtype == TN_BOOL)
        return TN_OK;
    /* c10's type names, as PyTorch prints them here */
    static const char *const names[TN_NUM_DTYPES] = {
        [TN_INT64] = "long int", [TN_INT32] = "int", [TN_INT16] = "short int",
        [TN_INT8] = "signed char", [TN_UINT8] = "unsigned char", [TN_FLOAT32] = "float",
        [TN_FLOAT64] = "double", [TN_FLOAT16] = "c10::Half", [TN_BFLOAT16] = "c10::BFloat16",
        [TN_COMPLEX64] = "c10::complex<float>", [TN_COMPLEX128] = "c10::complex<double>"};
    const char *nm = (int)mask->dtype < TN_NUM_DTYPES ? names[mask->dtype] : NULL;
    return tn_set_error(TN_EDTYPE, "masked_fill_ only supports boolean masks, but got mask with "
                        "dtype %s", nm ? nm : tn_dtype_name(mask->dtype));
}

/* where(mask, v, self): self and mask broadcast together, as PyTorch's
 * expand_outplace; the result keeps self's dtype. Takes v. */
static struct tn_tensor *fill_where(const struct tn_tensor *self, const struct tn_tensor *mask,
                                    struct tn_tensor *v)
{
    if (!v)
        return NULL;
    struct tn_tensor *r = tn_where_self(mask, v, self);
    tn_release(v);
    return r;
}

/* self where mask is false, value where it is true. */
struct tn_tensor *tn__composite_masked_fill_scalar(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_tensor *mask,
                                                   struct tn_scalar value)
{
    if (check_mask(mask) < 0)
        return NULL;
    return fill_where(self, mask, tn_scalar_tensor(value, self->dtype));
}

/* The same with a 0-dim value tensor, converted to self's dtype (its
 * gradient is the sum of grad where mask is true, through where). */
struct tn_tensor *tn__composite_masked_fill_tensor(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_tensor *mask,
                                                   const struct tn_tensor *value)
{
    if (value->ndim != 0) {
        tn_set_error(TN_EINVAL, "masked_fill_ only supports a 0-dimensional value tensor, but "
                     "got tensor with %d dimension(s).", value->ndim);
        return NULL;
    }
    if (check_mask(mask) < 0)
        return NULL;
    /* PyTorch's value.item() in self's dtype refuses what overflows it; a
     * floating self (or a Meta value, which has none) takes the value
     * tensor itself, for its gradient */
    if (tn_dtype_is_floating(self->dtype) || tn_dtype_is_complex(self->dtype) ||
        value->device.type == TN_DEVICE_META)
        return fill_where(self, mask, tn_to_dtype(value, self->dtype));
    return fill_where(self, mask, tn_scalar_tensor(tn_item(value), self->dtype));
}

static int same_dtype(const char *op, const struct tn_tensor *a, const struct tn_tensor *b)
{
    if (a->dtype == b->dtype)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "%s expected both vectors to have same dtype, but found %s and "
                        "%s", op, tn_dtype_info(a->dtype)->c10_name,
                        tn_dtype_info(b->dtype)->c10_name);
}

/* PyTorch's kernels of dot, addmv, bmm and baddbmm have no Bool case. */
static int not_bool(const char *kernel, const struct tn_tensor *t)
{
    if (t->dtype != TN_BOOL)
        return TN_OK;
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for 'Bool'", kernel);
}

struct tn_tensor *tn__composite_dot(tn_keyset ks, const struct tn_tensor *self,
                                    const struct tn_tensor *tensor)
{
    if (self->ndim != 1 || tensor->ndim != 1) {
        tn_set_error(TN_ESHAPE, "1D tensors expected, but got %dD and %dD tensors", self->ndim,
                     tensor->ndim);
        return NULL;
    }
    if (same_dtype("dot :", self, tensor) < 0 || not_bool("dot", self) < 0)
        return NULL;
    if (self->sizes[0] != tensor->sizes[0]) {
        tn_set_error(TN_ESHAPE, "inconsistent tensor size, expected tensor [%lld] and src [%lld] "
                     "to have the same number of elements, but got %lld and %lld elements "
                     "respectively", (long long)self->sizes[0], (long long)tensor->sizes[0],
                     (long long)self->sizes[0], (long long)tensor->sizes[0]);
        return NULL;
    }
    /* (no conjugation: vdot's job); an integer dot keeps its dtype and
     * wraps, as PyTorch's */
    struct tn_keep k = {0};
    struct tn_tensor *p, *r;
    TN_KEEP(&k, p, tn_mul(self, tensor));
    TN_KEEP(&k, r, tn_sum(p, self->dtype));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_mv(tn_keyset ks, const struct tn_tensor *self,
                                   const struct tn_tensor *vec)
{
    if (self->ndim != 2 || vec->ndim != 1) {
        tn_set_error(TN_ESHAPE, "vector + matrix @ vector expected, got 1, %d, %d", self->ndim,
                     vec->ndim);
        return NULL;
    }
    if (not_bool("addmv_impl_cpu", self) < 0)
        return NULL;
    struct tn_keep k = {0};
    struct tn_tensor *b, *p, *r;
    TN_KEEP(&k, b, tn_unsqueeze(vec, 1));
    TN_KEEP(&k, p, tn_mm(self, b));
    TN_KEEP(&k, r, tn_squeeze_dims(p, TN_SHAPE(1)));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_outer(tn_keyset ks, const struct tn_tensor *self,
                                      const struct tn_tensor *vec2)
{
    if (self->ndim != 1 || vec2->ndim != 1) {
        tn_set_error(TN_ESHAPE, "outer: Expected 1-D argument self, but got %d-D",
                     self->ndim != 1 ? self->ndim : vec2->ndim);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *a, *r;
    TN_KEEP(&k, a, tn_unsqueeze(self, 1));
    TN_KEEP(&k, r, tn_mul(a, vec2));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* beta * self + alpha * (batch1 @ batch2); self is ignored when beta is 0
 * (its NaN do not propagate), as in PyTorch. */
struct tn_tensor *tn__composite_baddbmm(tn_keyset ks, const struct tn_tensor *self,
                                        const struct tn_tensor *batch1,
                                        const struct tn_tensor *batch2, struct tn_scalar beta,
                                        struct tn_scalar alpha)
{
    if (not_bool("baddbmm", self) < 0)
        return NULL;
    struct tn_keep k = {0};
    struct tn_tensor *p, *s, *r;
    if ((self->dtype == TN_BFLOAT16 || self->dtype == TN_FLOAT16) &&
        batch1->dtype == self->dtype && batch2->dtype == self->dtype) {
        /* PyTorch's kernels sum and scale in float and round once */
        struct tn_tensor *a, *b, *c;
        TN_KEEP(&k, c, tn_to_dtype(self, TN_FLOAT32));
        TN_KEEP(&k, a, tn_to_dtype(batch1, TN_FLOAT32));
        TN_KEEP(&k, b, tn_to_dtype(batch2, TN_FLOAT32));
        TN_KEEP(&k, r, tn__composite_baddbmm(ks, c, a, b, beta, alpha));
        TN_KEEP(&k, r, tn_to_dtype(r, self->dtype));
        return tn__keep_out(&k, r);
    }
    if (tn_dtype_is_integral(self->dtype, false)) {
        /* integer tensors take alpha and beta as integers (truncated), as
         * PyTorch's kernel converts them to its int64 math type */
        if (beta.kind == TN_SCALAR_FLOAT)
            beta = tn_int((int64_t)beta.v.f);
        if (alpha.kind == TN_SCALAR_FLOAT)
            alpha = tn_int((int64_t)alpha.v.f);
    }
    TN_KEEP(&k, p, tn_bmm(batch1, batch2));
    if (tn_scalar_to_double(beta) == 0) {
        /* self (broadcast to the product's shape) is not read */
        TN_KEEP(&k, r, tn_mul_scalar(p, alpha));
        TN_KEEP(&k, r, tn_to_dtype(r, self->dtype));
        return tn__keep_out(&k, r);
    }
    s = (struct tn_tensor *)self;
    if (!(beta.kind == TN_SCALAR_INT && beta.v.i == 1))
        TN_KEEP(&k, s, tn_mul_scalar(self, beta));
    TN_KEEP(&k, r, tn_add(s, p, alpha));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* s^(1/p) (s a sum of |x|^p), whose gradient is 0 where s is 0 when s
 * requires grad: PyTorch's norm_backward masks a zero norm (a subgradient
 * at 0, where the chain rule gives 0 * inf). The unused branch of the
 * where sees 1 there, so no NaN reaches it. */
static struct tn_tensor *root(const struct tn_tensor *s, double p)
{
    if (p == 2)
        return tn_sqrt(s);
    struct tn_tensor *e = tn_scalar_tensor(tn_float(1.0 / p), TN_FLOAT64);
    if (!e)
        return NULL;
    e->flags |= TN_TENSOR_WRAPPED_NUMBER;
    struct tn_tensor *r = tn_pow(s, e);
    tn_release(e);
    return r;
}

static struct tn_tensor *norm_root(const struct tn_tensor *s, double p)
{
    if (!s->requires_grad)
        return root(s, p);
    struct tn_keep k = {0};
    struct tn_tensor *z, *one, *s1, *r, *zero;
    TN_KEEP(&k, z, tn_eq_scalar(s, tn_int(0)));
    TN_KEEP(&k, one, tn_ones_like(s, TN_DTYPE_UNSET));
    TN_KEEP(&k, s1, tn_where_self(z, one, s));
    TN_KEEP(&k, r, root(s1, p));
    TN_KEEP(&k, zero, tn_zeros_like(s, TN_DTYPE_UNSET));
    TN_KEEP(&k, r, tn_where_self(z, zero, r));
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* sum(|x|^ord)^(1/ord) over dim; inf: max |x|, -inf: min |x|, 0: the count
 * of non-zeros. Integer inputs are refused, as in PyTorch. */
struct tn_tensor *tn__composite_linalg_vector_norm(tn_keyset ks, const struct tn_tensor *self,
                                                   struct tn_scalar ord, const int64_t *dim,
                                                   int dim_len, bool keepdim, enum tn_dtype dtype)
{
    double p = tn_scalar_to_double(ord);
    if (!tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype)) {
        tn_set_error(TN_EDTYPE, "linalg.vector_norm: Expected a floating point or complex "
                     "tensor as input. Got %s", tn_dtype_info(self->dtype)->c10_name);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *x = (struct tn_tensor *)self, *a, *r;
    if (dtype != TN_DTYPE_UNSET)
        TN_KEEP(&k, x, tn_to_dtype(self, dtype));
    TN_KEEP(&k, a, tn_abs(x));
    if (isinf(p) && x->requires_grad && a->device.type != TN_DEVICE_META) {
        /* PyTorch's linalg_vector_norm_backward for ord inf: grad sgn(x) /
         * count over the maxima (minima) of |x|, NaNs counted among them,
         * so in a reduced slice that holds a NaN every element gets 0
         * (sgn(NaN) is 0) where amax's (amin's) own rule gives NaN; in the
         * others the two rules agree, an infinite extremum included. So |x|
         * leaves the autograd graph in the slices that hold a NaN. */
        struct tn_tensor *ad, *n, *hn;
        TN_KEEP(&k, ad, tn_detach(a));
        TN_KEEP(&k, n, tn_isnan(ad));
        TN_KEEP(&k, hn, tn_amax(n, dim, dim_len, true));
        TN_KEEP(&k, a, tn_where_self(hn, ad, a));
    }
    if (isinf(p)) {
        r = p > 0 ? tn_amax(a, dim, dim_len, keepdim) : tn_amin(a, dim, dim_len, keepdim);
        TN_KEEP(&k, r, r);
    } else if (p == 0) {
        struct tn_tensor *nz;
        TN_KEEP(&k, nz, tn_ne_scalar(a, tn_int(0)));
        TN_KEEP(&k, nz, tn_to_dtype(nz, a->dtype));
        TN_KEEP(&k, r, tn_sum_dim_intlist(nz, dim, dim_len, keepdim, TN_DTYPE_UNSET));
        if (x->requires_grad) {
            /* the count's derivative is 0 (PyTorch's norm_backward for ord
             * 0): the result kept in the autograd graph through a sum of
             * nothing of x (where, not x * 0, which is NaN at inf) */
            struct tn_tensor *no, *zero, *w, *s;
            TN_KEEP(&k, no, tn_zeros_like(a, TN_BOOL));
            TN_KEEP(&k, zero, tn_zeros_like(a, TN_DTYPE_UNSET));
            TN_KEEP(&k, w, tn_where_self(no, a, zero));
            TN_KEEP(&k, s, tn_sum_dim_intlist(w, dim, dim_len, keepdim, TN_DTYPE_UNSET));
            TN_KEEP(&k, r, tn_add(r, s, tn_int(1)));
        }
    } else if (p == 1) {
        TN_KEEP(&k, r, tn_sum_dim_intlist(a, dim, dim_len, keepdim, TN_DTYPE_UNSET));
    } else if (p == 2) {
        struct tn_tensor *sq, *s;
        TN_KEEP(&k, sq, tn_mul(a, a));
        TN_KEEP(&k, s, tn_sum_dim_intlist(sq, dim, dim_len, keepdim, TN_DTYPE_UNSET));
        TN_KEEP(&k, r, norm_root(s, 2));
    } else {
        struct tn_tensor *e, *pw, *s;
        TN_KEEP(&k, e, tn_scalar_tensor(tn_float(p), TN_FLOAT64));
        e->flags |= TN_TENSOR_WRAPPED_NUMBER;
        TN_KEEP(&k, pw, tn_pow(a, e));
        if (p < 1 && a->requires_grad) {
            /* PyTorch's norm_backward for ord < 1 gives a zero element 0
             * (where p |x|^(p-1) is infinite): the power of a zero taken
             * off the autograd graph, that of 1 in the branch not taken */
            struct tn_tensor *z, *one, *a1, *p1, *pv;
            TN_KEEP(&k, z, tn_eq_scalar(a, tn_int(0)));
            TN_KEEP(&k, one, tn_ones_like(a, TN_DTYPE_UNSET));
            TN_KEEP(&k, a1, tn_where_self(z, one, a));
            TN_KEEP(&k, p1, tn_pow(a1, e));
            TN_KEEP(&k, pv, tn_detach(pw));
            TN_KEEP(&k, pw, tn_where_self(z, pv, p1));
        }
        TN_KEEP(&k, s, tn_sum_dim_intlist(pw, dim, dim_len, keepdim, TN_DTYPE_UNSET));
        TN_KEEP(&k, r, norm_root(s, p));
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

struct tn_tensor *tn__composite_norm_scalaropt_dim(tn_keyset ks, const struct tn_tensor *self,
                                                   const struct tn_scalar *p, const int64_t *dim,
                                                   int dim_len, bool keepdim)
{
    if (!tn_dtype_is_floating(self->dtype) && !tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "norm(): input dtype should be either floating point or "
                            "complex. Got %s instead.", tn_dtype_info(self->dtype)->c10_name),
               NULL;
    return tn__composite_linalg_vector_norm(ks, self, p ? *p : tn_int(2), dim, dim_len, keepdim,
                                            TN_DTYPE_UNSET);
}

/* stack: each tensor unsqueezed at dim, then cat. */
struct tn_tensor *tn__composite_stack(tn_keyset ks, const struct tn_tensor *const *tensors,
                                      int tensors_len, int64_t dim)
{
    if (tensors_len == 0) {
        tn_set_error(TN_EINVAL, "stack expects a non-empty TensorList");
        return NULL;
    }
    for (int i = 1; i < tensors_len; i++) {
        const struct tn_tensor *a = tensors[0], *b = tensors[i];
        if (a && b && (a->ndim != b->ndim ||
                       memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim))) {
            char x[128], y[128];
            tn_set_error(TN_ESHAPE, "stack expects each tensor to be equal size, but got %s at "
                         "entry 0 and %s at entry %d", tn_shape_format(a->sizes, a->ndim, x, sizeof x),
                         tn_shape_format(b->sizes, b->ndim, y, sizeof y), i);
            return NULL;
        }
    }
    int d = tensors[0] ? tn_wrap_dim(dim, tensors[0]->ndim + 1) : 0;
    if (d < 0)
        return NULL;
    struct tn_tensor **u = calloc((size_t)tensors_len, sizeof *u), *r = NULL;
    if (!u) {
        tn_set_error(TN_ENOMEM, "stack: out of memory");
        return NULL;
    }
    int i = 0;
    for (; i < tensors_len; i++)
        if (!tensors[i] || !(u[i] = tn_unsqueeze(tensors[i], d)))
            break;
    if (i == tensors_len)
        r = tn__redispatch_cat(ks, (const struct tn_tensor *const *)u, tensors_len, d);
    else if (!tensors[i])
        tn_set_error(TN_EINVAL, "stack: tensor %d of the list is None", i);
    for (int k = 0; k < tensors_len; k++)
        tn_release(u[k]);
    free(u);
    return r;
}

/* ---------------------------------------------------------------- einsum */

/* einsum over letters: every operand is permuted and viewed onto all the
 * equation's letters (the output's first, then the summed ones), the
 * operands multiplied with broadcasting, and the summed letters reduced.
 * `ell` holds the letters einsum_ellipsis put in place of "..." ("" when
 * none), for PyTorch's words about them. */
static struct tn_tensor *einsum_letters(const char *equation, const struct tn_tensor *const *tensors,
                                        int tensors_len, const char *ell)
{
    char terms[TN_MAX_DIMS][TN_MAX_DIMS + 1], out[TN_MAX_DIMS + 1] = "", letters[53] = "";
    int nterms = 0, nout = 0, nl = 0, count[128] = {0};
    bool arrow = false;
    const char *p = equation;
    size_t tl = 0;
    for (;; p++) {
        char c = *p;
        if (c == ' ')
            continue;
        if (c == ',' || c == '-' || c == 0) {
            if (!arrow) {
                if (nterms == TN_MAX_DIMS) {
                    tn_set_error(TN_EINVAL, "einsum(): too many operands");
                    return NULL;
                }
                terms[nterms][tl] = 0;
                nterms++;
                tl = 0;
            }
            if (c == '-') {
                if (p[1] != '>' || arrow) {
                    tn_set_error(TN_EINVAL, "einsum(): invalid equation subscript '-'");
                    return NULL;
                }
                arrow = true;
                p++;
            }
            if (c == 0)
                break;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            tn_set_error(TN_EINVAL, "einsum(): invalid subscript given at index %d in the equation "
                         "string, subscripts must be in [a-zA-Z]", (int)(p - equation));
            return NULL;
        }
        if (arrow) {
            if (!count[(int)c] || strchr(out, c) || nout == TN_MAX_DIMS) {
                tn_set_error(TN_EINVAL, count[(int)c] ? "einsum(): output subscript %c appears "
                             "more than once in the output" : "einsum(): output subscript %c does "
                             "not appear in the equation for any input operand", c);
                return NULL;
            }
            out[nout++] = c;
            out[nout] = 0;
            continue;
        }
        if (tl == TN_MAX_DIMS) {
            tn_set_error(TN_EINVAL, "einsum(): too many subscripts for operand %d", nterms);
            return NULL;
        }
        terms[nterms][tl++] = c;
        if (!count[(int)c]++)
            letters[nl++] = c;
    }
    if (nterms != tensors_len) {
        tn_set_error(TN_EINVAL, "einsum(): %s operands were provided than specified in the "
                     "equation", tensors_len < nterms ? "fewer" : "more");
        return NULL;
    }
    if (!arrow) { /* implicit output: the letters seen once, in alphabetical order */
        for (int c = 'A'; c <= 'z'; c++)
            if (c < 128 && count[c] == 1 && nout < TN_MAX_DIMS)
                out[nout++] = (char)c;
        out[nout] = 0;
    }
    /* the order of all letters: output first, then summed */
    char order[53];
    int no = 0;
    memcpy(order, out, (size_t)nout);
    no = nout;
    for (int i = 0; i < nl; i++)
        if (!strchr(out, letters[i]))
            order[no++] = letters[i];
    if (no > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "einsum(): more than %d distinct subscripts", TN_MAX_DIMS);
        return NULL;
    }
    struct tn_keep k = {0};
    struct tn_tensor *acc = NULL, *r;
    int64_t seen[128] = {0};
    for (int t = 0; t < nterms; t++) {
        const struct tn_tensor *x = tensors[t];
        int len = (int)strlen(terms[t]);
        if (!x || len != x->ndim) {
            tn_set_error(TN_EINVAL, "einsum(): the number of subscripts in the equation (%d) does "
                         "not match the number of dimensions (%d) for operand %d and no ellipsis "
                         "was given", len, x ? x->ndim : 0, t);
            goto fail;
        }
        /* a subscript repeated in one operand ('ii->i', 'iji->j'): its
         * diagonal, which diagonal() puts last, as PyTorch's einsum does */
        for (int a = 0; a < len; a++) {
            const char *again = strchr(terms[t] + a + 1, terms[t][a]);
            if (!again)
                continue;
            int b = (int)(again - terms[t]);
            char c = terms[t][a];
            if (x->sizes[a] != x->sizes[b]) {
                tn_set_error(TN_ESHAPE, "einsum(): subscript %c is repeated for operand %d but "
                             "the sizes don't match, %lld != %lld", c, t,
                             (long long)x->sizes[a], (long long)x->sizes[b]);
                goto fail;
            }
            struct tn_tensor *dg;
            TN_KEEP(&k, dg, tn_diagonal(x, 0, a, b));
            x = dg;
            memmove(terms[t] + b, terms[t] + b + 1, (size_t)(len - b));
            memmove(terms[t] + a, terms[t] + a + 1, (size_t)(len - a));
            len -= 2;
            terms[t][len++] = c;
            terms[t][len] = 0;
            a = -1; /* again from the start: the letters moved */
        }
        int64_t perm[TN_MAX_DIMS], sizes[TN_MAX_DIMS];
        int np = 0;
        for (int j = 0; j < no; j++) {
            const char *at = strchr(terms[t], order[j]);
            sizes[j] = 1;
            if (!at)
                continue;
            perm[np++] = at - terms[t];
            sizes[j] = x->sizes[at - terms[t]];
            int64_t *prev = &seen[(int)order[j]];
            if (*prev > 1 && sizes[j] != 1 && sizes[j] != *prev && strchr(ell, order[j])) {
                tn_set_error(TN_ESHAPE, "einsum(): dimension %d covered by ellipsis in operand %d"
                             "has size %lld which does not broadcast with previously seen "
                             "ellipsis with size %lld for the respective dimension",
                             (int)(at - terms[t]), t, (long long)sizes[j], (long long)*prev);
                goto fail;
            }
            if (*prev > 1 && sizes[j] != 1 && sizes[j] != *prev) {
                tn_set_error(TN_ESHAPE, "einsum(): subscript %c has size %lld for operand %d which "
                             "does not broadcast with previously seen size %lld", order[j],
                             (long long)sizes[j], t, (long long)*prev);
                goto fail;
            }
            if (sizes[j] != 1)
                *prev = sizes[j];
        }
        struct tn_tensor *pt, *v;
        TN_KEEP(&k, pt, tn_permute(x, perm, np));
        TN_KEEP(&k, v, tn_reshape(pt, sizes, no));
        if (acc)
            TN_KEEP(&k, acc, tn_mul(acc, v));
        else
            acc = v;
    }
    if (no > nout) {
        int64_t dims[TN_MAX_DIMS];
        for (int j = nout; j < no; j++)
            dims[j - nout] = j;
        TN_KEEP(&k, r, tn_sum_dim_intlist(acc, dims, no - nout, false, TN_DTYPE_UNSET));
    } else {
        r = acc;
    }
    return tn__keep_out(&k, r);
fail:
    tn__keep_free(&k);
    return NULL;
}

/* The equation with "..." written out (PyTorch's rules): each operand's
 * ellipsis covers the dims its letters leave, the widest one gets one
 * letter the equation does not use per dim (into ell), and a narrower one
 * the last of them (operands broadcast right-aligned). The output's "..."
 * stands for all of them; without "->", the output is made explicit:
 * "..." first, then the letters seen once in ASCII order. 0 or PyTorch's
 * error. */
static int einsum_ellipsis(const char *eq, const struct tn_tensor *const *tensors, int n,
                           char *buf, size_t len, char *ell)
{
    int count[128] = {0}, nell = 0, t = 0;
    const char *arrow = strstr(eq, "->");
    const char *end = arrow ? arrow : eq + strlen(eq);
    /* pass 1: the dots of each operand, its letters and so its ellipsis' width */
    int width[TN_MAX_DIMS] = {0};
    bool has[TN_MAX_DIMS] = {false};
    int letters = 0;
    for (const char *p = eq; p <= end; p++) {
        if (p == end || *p == ',') {
            if (t < n && t < TN_MAX_DIMS && has[t] && tensors[t]) {
                if (letters > tensors[t]->ndim)
                    return tn_set_error(TN_EINVAL, "einsum(): the number of subscripts in the "
                                        "equation (%d) is more than the number of dimensions (%d) "
                                        "for operand %d", letters, tensors[t]->ndim, t);
                width[t] = tensors[t]->ndim - letters;
                nell = width[t] > nell ? width[t] : nell;
            }
            t++;
            letters = 0;
            continue;
        }
        if (*p == '.') {
            if (t < TN_MAX_DIMS && has[t])
                return tn_set_error(TN_EINVAL, "einsum(): found '.' for operand %d for which an "
                                    "ellipsis was already found", t);
            if (strncmp(p, "...", 3) != 0)
                return tn_set_error(TN_EINVAL, "einsum(): found '.' for operand %d that is not "
                                    "part of any ellipsis", t);
            if (t < TN_MAX_DIMS)
                has[t] = true;
            p += 2;
        } else if (*p != ' ') {
            letters++;
            count[(unsigned char)*p & 127]++;
        }
    }
    for (const char *p = arrow ? arrow + 2 : ""; *p; p++)
        count[(unsigned char)*p & 127] += 0x100; /* used, not counted */
    int k = 0;
    for (int c = 'a'; c <= 'z' + 26 && k < nell; c++) {
        int l = c <= 'z' ? c : 'A' + (c - 'z' - 1);
        if (!count[l])
            ell[k++] = (char)l;
    }
    if (k < nell || nell > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "einsum(): too many dimensions under the ellipsis (%d)",
                            nell);
    ell[k] = 0;
    /* pass 2: write the equation out */
    size_t o = 0;
#define PUT(ch)                                                                                \
    do {                                                                                       \
        if (o + 1 >= len)                                                                      \
            return tn_set_error(TN_EINVAL, "einsum(): equation too long");                     \
        buf[o++] = (ch);                                                                       \
    } while (0)
    t = 0;
    for (const char *p = eq; p < end; p++) {
        if (*p == ',')
            t++;
        if (*p != '.') {
            PUT(*p);
            continue;
        }
        for (int j = nell - (t < TN_MAX_DIMS ? width[t] : 0); j < nell; j++)
            PUT(ell[j]);
        p += 2;
    }
    PUT('-');
    PUT('>');
    if (arrow) {
        bool seen = false;
        for (const char *p = arrow + 2; *p; p++) {
            if (*p != '.') {
                PUT(*p);
                continue;
            }
            if (seen)
                return tn_set_error(TN_EINVAL, "einsum(): found '.' for output but an ellipsis "
                                    "(...) was already found");
            if (strncmp(p, "...", 3) != 0)
                return tn_set_error(TN_EINVAL, "einsum(): found '.' for output that is not part "
                                    "of any ellipsis (...)");
            seen = true;
            for (int j = 0; j < nell; j++)
                PUT(ell[j]);
            p += 2;
        }
    } else {
        for (int j = 0; j < nell; j++)
            PUT(ell[j]);
        for (int c = 'A'; c <= 'z'; c++)
            if (count[c] == 1)
                PUT((char)c);
    }
#undef PUT
    buf[o] = 0;
    return TN_OK;
}

struct tn_tensor *tn__composite_einsum(tn_keyset ks, const char *equation,
                                       const struct tn_tensor *const *tensors, int tensors_len,
                                       const int64_t *path, int path_len)
{
    (void)path; /* the contraction order: one product here, so no order to choose */
    (void)path_len;
    if (tensors_len >= 1 && tensors_len <= 2 &&
        (tensors[0]->dtype == TN_BFLOAT16 || tensors[0]->dtype == TN_FLOAT16) &&
        tensors[tensors_len - 1]->dtype == tensors[0]->dtype) {
        /* PyTorch contracts one or two operands in one sum or bmm, which
         * accumulate in float and round once (ours would round each
         * product): in float32, rounded at the end */
        struct tn_tensor *up[2] = {NULL, NULL}, *r = NULL;
        for (int i = 0; i < tensors_len; i++)
            if (!(up[i] = tn_to_dtype(tensors[i], TN_FLOAT32)))
                goto low_fail;
        struct tn_tensor *f = tn__composite_einsum(ks, equation, (const struct tn_tensor *const *)up,
                                                   tensors_len, path, path_len);
        r = f ? tn_to_dtype(f, tensors[0]->dtype) : NULL;
        tn_release(f);
    low_fail:
        tn_release(up[0]);
        tn_release(up[1]);
        return r;
    }
    if (!strchr(equation, '.'))
        return einsum_letters(equation, tensors, tensors_len, "");
    char buf[512], ell[TN_MAX_DIMS + 1];
    if (einsum_ellipsis(equation, tensors, tensors_len, buf, sizeof buf, ell) < 0)
        return NULL;
    return einsum_letters(buf, tensors, tensors_len, ell);
}
