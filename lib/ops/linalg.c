/*
 * ops/linalg.c: the device-independent half of the matrix products: meta
 * functions of mm, bmm and addmm (shapes, dtypes, PyTorch's messages), and
 * the decompositions of matmul (every broadcasting case) and linear.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

/* The C++ type names PyTorch's dtype messages use. */
static const char *cpp_type_name(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT32: return "float";
    case TN_FLOAT64: return "double";
    case TN_FLOAT16: return "c10::Half";
    case TN_BFLOAT16: return "c10::BFloat16";
    case TN_INT64: return "long int";
    case TN_INT32: return "int";
    case TN_INT16: return "short int";
    case TN_INT8: return "signed char";
    case TN_UINT8: return "unsigned char";
    case TN_BOOL: return "bool";
    case TN_COMPLEX64: return "c10::complex<float>";
    case TN_COMPLEX128: return "c10::complex<double>";
    default: return "?";
    }
}

static int same_dtype(const struct tn_tensor *a, const struct tn_tensor *b)
{
    if (a->dtype != b->dtype)
        return tn_set_error(TN_EDTYPE, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                            cpp_type_name(a->dtype), cpp_type_name(b->dtype));
    return TN_OK;
}

/* PyTorch 2.x's checks and words (1.13 said "self must be a matrix"). */
static int mm_shapes(const char *op, const struct tn_tensor *a, const struct tn_tensor *b,
                     struct tn_meta *m)
{
    if (a->ndim != 2)
        return tn_set_error(TN_ESHAPE, "%s: self must be a matrix, got %d-D tensor", op, a->ndim);
    if (b->ndim != 2)
        return tn_set_error(TN_ESHAPE, "%s: mat2 must be a matrix, got %d-D tensor", op, b->ndim);
    if (a->sizes[1] != b->sizes[0])
        return tn_set_error(TN_ESHAPE, "%s: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                            "%lldx%lld)", op, (long long)a->sizes[0], (long long)a->sizes[1],
                            (long long)b->sizes[0], (long long)b->sizes[1]);
    int rc = same_dtype(a, b);
    m->ndim = 2;
    m->sizes[0] = a->sizes[0];
    m->sizes[1] = b->sizes[1];
    m->dtype = a->dtype;
    return rc;
}

int tn__meta_mm_out(const struct tn_tensor *self, const struct tn_tensor *mat2, struct tn_meta *m)
{
    return mm_shapes("mm", self, mat2, m);
}

int tn__meta_bmm_out(const struct tn_tensor *self, const struct tn_tensor *mat2, struct tn_meta *m)
{
    if (self->ndim != 3)
        return tn_set_error(TN_ESHAPE, "batch1 must be a 3D tensor");
    if (mat2->ndim != 3)
        return tn_set_error(TN_ESHAPE, "batch2 must be a 3D tensor");
    if (mat2->sizes[0] != self->sizes[0] || mat2->sizes[1] != self->sizes[2])
        return tn_set_error(TN_ESHAPE, "Expected size for first two dimensions of batch2 tensor to "
                            "be: [%lld, %lld] but got: [%lld, %lld].", (long long)self->sizes[0],
                            (long long)self->sizes[2], (long long)mat2->sizes[0],
                            (long long)mat2->sizes[1]);
    m->ndim = 3;
    m->sizes[0] = self->sizes[0];
    m->sizes[1] = self->sizes[1];
    m->sizes[2] = mat2->sizes[2];
    m->dtype = self->dtype;
    return same_dtype(self, mat2);
}

int tn__meta_addmm_out(const struct tn_tensor *self, const struct tn_tensor *mat1,
                       const struct tn_tensor *mat2, struct tn_scalar beta, struct tn_scalar alpha,
                       struct tn_meta *m)
{
    int rc = mm_shapes("addmm", mat1, mat2, m);
    if (rc < 0)
        return rc;
    if (self->dtype != mat1->dtype)
        return tn_set_error(TN_EDTYPE, "self and mat2 must have the same dtype, but got %s and %s",
                            tn_dtype_name(self->dtype), tn_dtype_name(mat2->dtype));
    /* self broadcasts to the product's shape; expand() says why when not */
    struct tn_tensor *e = tn_expand(self, m->sizes, 2);
    if (!e)
        return tn_last_status();
    tn_release(e);
    return TN_OK;
}

/* --------------------------------------------------------------- matmul */

/* The rows of t folded to a matrix over its last dim: the product of the
 * other sizes (not -1, which a size-0 last dim makes ambiguous). */
static int64_t tn_rows(const struct tn_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim - 1; d++)
        n *= t->sizes[d];
    return n;
}

static struct tn_tensor *squeeze_dim(struct tn_tensor *t, int64_t dim)
{
    if (!t)
        return NULL;
    struct tn_tensor *r = tn_squeeze_dims(t, &dim, 1);
    tn_release(t);
    return r;
}

/* PyTorch's should_fold: one operand of 3 or more dims, the other of 1 or
 * 2, and the larger's batch dims folding into rows without a copy (or the
 * smaller requiring grad, where PyTorch folds anyway to keep the backward
 * small, or nothing to multiply). The larger is b transposed when b is. */
static bool should_fold(const struct tn_tensor *a, const struct tn_tensor *b)
{
    bool a_larger = a->ndim >= b->ndim;
    const struct tn_tensor *big = a_larger ? a : b, *small = a_larger ? b : a;
    int n = big->ndim;
    if (!(n >= 3 && small->ndim <= 2))
        return false;
    if (small->requires_grad || small->grad_fn)
        return true;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    memcpy(sizes, big->sizes, sizeof(int64_t) * (size_t)n);
    memcpy(strides, big->strides, sizeof(int64_t) * (size_t)n);
    if (!a_larger) { /* b.mT */
        int64_t t = sizes[n - 1]; sizes[n - 1] = sizes[n - 2]; sizes[n - 2] = t;
        t = strides[n - 1]; strides[n - 1] = strides[n - 2]; strides[n - 2] = t;
    }
    if (tn_numel(big) == 0)
        return true;
    for (int i = 0; i < n - 2; i++)
        if (strides[i] != strides[i + 1] * sizes[i + 1])
            return false;
    return true;
}

struct tn_tensor *tn__composite_matmul(tn_keyset ks, const struct tn_tensor *a,
                                       const struct tn_tensor *b)
{
    int da = a->ndim, db = b->ndim;
    if (da == 0 || db == 0)
        return tn_set_error(TN_ESHAPE, "both arguments to matmul need to be at least 1D, but they "
                            "are %dD and %dD", da, db), NULL;
    struct tn_tensor *r = NULL, *x = NULL, *y = NULL;
    if (da <= 2 && db <= 2) {
        /* vectors become 1-row / 1-column matrices, squeezed after */
        x = da == 1 ? tn_unsqueeze(a, 0) : tn_retain((struct tn_tensor *)a);
        y = db == 1 ? tn_unsqueeze(b, 1) : tn_retain((struct tn_tensor *)b);
        if (x && y)
            r = tn_mm(x, y);
        if (db == 1)
            r = squeeze_dim(r, -1);
        if (da == 1)
            r = squeeze_dim(r, 0);
    } else if (should_fold(a, b)) {
        /* the larger operand's batch dims folded into the rows of one mm
         * (or mv), b transposed when it is the larger, as PyTorch's
         * _matmul_impl */
        bool transpose = db > da;
        x = transpose ? tn_transpose(b, -1, -2) : tn_retain((struct tn_tensor *)a);
        y = !transpose ? tn_retain((struct tn_tensor *)b)
                       : da == 2 ? tn_t(a) : tn_retain((struct tn_tensor *)a);
        if (x && y) {
            int64_t shape[TN_MAX_DIMS];
            int nd = x->ndim - 1;
            memcpy(shape, x->sizes, sizeof(int64_t) * (size_t)nd);
            if (y->ndim == 2)
                shape[nd++] = y->sizes[1];
            struct tn_tensor *f = tn_reshape(x, TN_SHAPE(tn_rows(x), x->sizes[x->ndim - 1]));
            struct tn_tensor *p = !f ? NULL : y->ndim == 2 ? tn_mm(f, y) : tn_mv(f, y);
            struct tn_tensor *v = p ? tn_view(p, shape, nd) : NULL;
            if (v && transpose && y->ndim == 2) {
                struct tn_tensor *m = tn_transpose(v, -1, -2);
                r = m ? tn_contiguous(m) : NULL;
                tn_release(m);
                tn_release(v);
            } else {
                r = v;
            }
            tn_release(f);
            tn_release(p);
        }
    } else {
        /* broadcast the batch dims and run one bmm */
        struct tn_tensor *a2 = da == 1 ? tn_unsqueeze(a, 0) : tn_retain((struct tn_tensor *)a);
        struct tn_tensor *b2 = db == 1 ? tn_unsqueeze(b, 1) : tn_retain((struct tn_tensor *)b);
        if (!a2 || !b2) {
            tn_release(a2);
            tn_release(b2);
            return NULL;
        }
        int64_t batch[TN_MAX_DIMS], sa[TN_MAX_DIMS], sb[TN_MAX_DIMS], so[TN_MAX_DIMS];
        int nb = tn_broadcast_shapes(a2->sizes, a2->ndim - 2, b2->sizes, b2->ndim - 2, batch);
        int64_t n = a2->sizes[a2->ndim - 2], k = a2->sizes[a2->ndim - 1];
        int64_t k2 = b2->sizes[b2->ndim - 2], p = b2->sizes[b2->ndim - 1];
        if (nb >= 0 && nb + 2 <= TN_MAX_DIMS) {
            int64_t nbatch = 1;
            for (int i = 0; i < nb; i++)
                nbatch *= batch[i];
            memcpy(sa, batch, sizeof(int64_t) * (size_t)nb);
            memcpy(sb, batch, sizeof(int64_t) * (size_t)nb);
            sa[nb] = n, sa[nb + 1] = k;
            sb[nb] = k2, sb[nb + 1] = p;
            struct tn_tensor *ea = tn_expand(a2, sa, nb + 2), *eb = tn_expand(b2, sb, nb + 2);
            x = ea ? tn_reshape(ea, TN_SHAPE(nbatch, n, k)) : NULL;
            y = eb ? tn_reshape(eb, TN_SHAPE(nbatch, k2, p)) : NULL;
            struct tn_tensor *q = x && y ? tn_bmm(x, y) : NULL;
            if (q) {
                memcpy(so, batch, sizeof(int64_t) * (size_t)nb);
                int nd = nb;
                if (da > 1)
                    so[nd++] = n;
                if (db > 1)
                    so[nd++] = p;
                r = tn_view(q, so, nd);
                tn_release(q);
            }
            tn_release(ea);
            tn_release(eb);
        }
        tn_release(a2);
        tn_release(b2);
    }
    tn_release(x);
    tn_release(y);
    return r;
}

struct tn_tensor *tn__composite_linear(tn_keyset ks, const struct tn_tensor *input,
                                       const struct tn_tensor *weight, const struct tn_tensor *bias)
{
    struct tn_tensor *wt = tn_t(weight);
    if (!wt)
        return NULL;
    struct tn_tensor *r;
    if (input->ndim == 2 && bias) {
        r = tn_addmm(bias, input, wt, tn_int(1), tn_int(1));
    } else if (input->ndim != 2 && input->ndim > 0 && bias && bias->ndim <= 1) {
        /* the batch dims folded into the rows of one addmm (a vector as
         * one row), as PyTorch 2.x's _flatten_nd_linear does: the bias
         * goes in as the product's start (beta 1), not as a second pass
         * over the output, so bfloat16 rounds once */
        int nd = input->ndim;
        struct tn_tensor *x = tn_reshape(input, TN_SHAPE(tn_rows(input), input->sizes[nd - 1]));
        struct tn_tensor *p = x ? tn_addmm(bias, x, wt, tn_int(1), tn_int(1)) : NULL;
        r = NULL;
        if (p) {
            int64_t shape[TN_MAX_DIMS];
            memcpy(shape, input->sizes, sizeof(int64_t) * (size_t)(nd - 1));
            shape[nd - 1] = p->sizes[1];
            r = tn_view(p, shape, nd);
        }
        tn_release(x);
        tn_release(p);
    } else {
        r = tn_matmul(input, wt);
        if (r && bias) {
            int rc = tn_add_(r, bias, tn_int(1));
            if (rc < 0) {
                tn_release(r);
                r = NULL;
            }
        }
    }
    tn_release(wt);
    return r;
}

/* ------------------------------------------------- cdist and pdist */

/* releases each of the tensors named (NULL ones skipped) */
#define RELEASE_ALL(...)                                                        \
    do {                                                                        \
        struct tn_tensor *all_[] = {__VA_ARGS__};                               \
        for (size_t i_ = 0; i_ < sizeof all_ / sizeof *all_; i_++)              \
            tn_release(all_[i_]);                                               \
    } while (0)

/* PyTorch's cdist/pdist kernels: float32 and float64 only */
static int dist_dtype(const char *op, const char *which, const struct tn_tensor *t)
{
    if (t->dtype == TN_FLOAT32 || t->dtype == TN_FLOAT64)
        return TN_OK;
    if (!tn_dtype_is_floating(t->dtype))
        return !strcmp(op, "cdist")
                   ? tn_set_error(TN_EDTYPE, "cdist only supports floating-point dtypes, %s got: %s",
                                  which, tn_dtype_info(t->dtype)->c10_name)
                   : tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op,
                                  tn_dtype_info(t->dtype)->c10_name);
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op,
                        tn_dtype_info(t->dtype)->c10_name);
}

/* The p-norm over the last dim of the differences a - b (broadcast):
 * PyTorch's direct kernels (p 0: the count of differing columns, 1, 2,
 * inf: the largest, else (sum |d|^p)^(1/p)), as linalg_vector_norm
 * computes them, so the gradient is its. */
static struct tn_tensor *pnorm_of_diff(const struct tn_tensor *a, const struct tn_tensor *b,
                                       double p)
{
    struct tn_tensor *d = tn_sub(a, b, tn_int(1));
    if (!d)
        return NULL;
    int64_t last = -1;
    struct tn_tensor *r = tn_linalg_vector_norm(d, tn_float(p), &last, 1, false, TN_DTYPE_UNSET);
    tn_release(d);
    return r;
}

/* _euclidean_dist of PyTorch's Distance.cpp (cdist's p = 2 through mm):
 * [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, clamped to 1e-30, square-rooted */
static struct tn_tensor *euclidean_dist(const struct tn_tensor *x1, const struct tn_tensor *x2)
{
    int64_t last = -1;
    struct tn_tensor *q1 = tn_pow_scalar(x1, tn_int(2)), *q2 = tn_pow_scalar(x2, tn_int(2));
    struct tn_tensor *n1 = q1 ? tn_sum_dim_intlist(q1, &last, 1, true, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *n2 = q2 ? tn_sum_dim_intlist(q2, &last, 1, true, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *o1 = n1 ? tn_ones_like(n1, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *o2 = n2 ? tn_ones_like(n2, TN_DTYPE_UNSET) : NULL;
    struct tn_tensor *m1 = tn_mul_scalar(x1, tn_int(-2));
    struct tn_tensor *a = NULL, *b = NULL, *bt = NULL, *mm = NULL, *c = NULL, *r = NULL;
    if (o1 && o2 && m1) {
        const struct tn_tensor *la[3] = {m1, n1, o1}, *lb[3] = {x2, o2, n2};
        a = tn_cat(la, 3, -1);
        b = a ? tn_cat(lb, 3, -1) : NULL;
    }
    bt = b ? tn_transpose(b, -2, -1) : NULL;
    mm = bt ? tn_matmul(a, bt) : NULL;
    c = mm ? tn_clamp_min(mm, tn_float(1e-30)) : NULL;
    r = c ? tn_sqrt(c) : NULL;
    RELEASE_ALL(q1, q2, n1, n2, o1, o2, m1, a, b, bt, mm, c);
    return r;
}

/* _cdist_forward (core ATen): x1 [*, P, M], x2 [*, R, M], batch dims
 * broadcast, -> [*, P, R]; p = 2 goes through mm (euclidean_dist) when
 * compute_mode is 1, or None/0 with P or R over 25, as PyTorch's
 * cdist_impl; otherwise the p-norm of the differences. PyTorch's errors. */
struct tn_tensor *tn__composite__cdist_forward(tn_keyset ks, const struct tn_tensor *x1,
                                               const struct tn_tensor *x2, double p,
                                               const int64_t *compute_mode)
{
    if (x1->ndim < 2 || x2->ndim < 2) {
        tn_set_error(TN_ESHAPE, "cdist only supports at least 2D tensors, %s got: %dD",
                     x1->ndim < 2 ? "X1" : "X2", x1->ndim < 2 ? x1->ndim : x2->ndim);
        return NULL;
    }
    int64_t c1 = x1->sizes[x1->ndim - 1], c2 = x2->sizes[x2->ndim - 1];
    if (c1 != c2) {
        tn_set_error(TN_ESHAPE, "X1 and X2 must have the same number of columns. X1: %lld X2: %lld",
                     (long long)c1, (long long)c2);
        return NULL;
    }
    if (dist_dtype("cdist", "X1", x1) < 0 || dist_dtype("cdist", "X2", x2) < 0)
        return NULL;
    if (!(p >= 0)) {
        tn_set_error(TN_EINVAL, "cdist only supports non-negative p values");
        return NULL;
    }
    int64_t mode = compute_mode ? *compute_mode : 0;
    if (mode < 0 || mode > 2) {
        tn_set_error(TN_EINVAL, "possible modes: 0, 1, 2, but was: %lld", (long long)mode);
        return NULL;
    }
    if (x1->dtype != x2->dtype) {
        tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                     tn_dtype_info(x1->dtype)->c10_name, tn_dtype_info(x2->dtype)->c10_name);
        return NULL;
    }
    int64_t r1 = x1->sizes[x1->ndim - 2], r2 = x2->sizes[x2->ndim - 2];
    if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25))))
        return euclidean_dist(x1, x2);
    struct tn_tensor *a = tn_unsqueeze(x1, -2), *b = tn_unsqueeze(x2, -3);
    struct tn_tensor *r = a && b ? pnorm_of_diff(a, b, p) : NULL;
    tn_release(a);
    tn_release(b);
    return r;
}

/* _pdist_forward (core ATen): self [N, M] -> the N(N-1)/2 distances of
 * rows i < j in row-major order of (i, j), as torch.pdist's; the p-norm of
 * the differences of the rows those indices pick. F.pdist's errors (the
 * aten op itself reads a 3-D input as rows, which we refuse). */
struct tn_tensor *tn__composite__pdist_forward(tn_keyset ks, const struct tn_tensor *self,
                                               double p)
{
    if (self->ndim != 2) {
        tn_set_error(TN_ESHAPE, "pdist only supports 2D tensors, got: %dD", self->ndim);
        return NULL;
    }
    if (dist_dtype("pdist", NULL, self) < 0)
        return NULL;
    if (!(p >= 0)) {
        tn_set_error(TN_EINVAL, "pdist only supports non-negative p values");
        return NULL;
    }
    int64_t n = self->sizes[0], k = n > 1 ? n * (n - 1) / 2 : 0, at = 0;
    /* the pairs (i, j), i < j, on self's device (no values on Meta) */
    struct tn_tensor *ii = tn_empty_on(&k, 1, TN_INT64, self->device);
    struct tn_tensor *jj = tn_empty_on(&k, 1, TN_INT64, self->device);
    struct tn_tensor *hi = NULL, *hj = NULL, *a = NULL, *b = NULL, *r = NULL;
    if (!ii || !jj)
        goto out;
    if (self->device.type != TN_DEVICE_META) {
        bool cpu = self->device.type == TN_DEVICE_CPU;
        hi = cpu ? tn_retain(ii) : tn_zeros(&k, 1, TN_INT64);
        hj = cpu ? tn_retain(jj) : tn_zeros(&k, 1, TN_INT64);
        if (!hi || !hj)
            goto out;
        int64_t *pi = tn_data(hi), *pj = tn_data(hj);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i + 1; j < n; j++, at++)
                pi[at] = i, pj[at] = j;
        if (!cpu && (tn_copy_(ii, hi) < 0 || tn_copy_(jj, hj) < 0))
            goto out;
    }
    const struct tn_tensor *xi[1] = {ii}, *xj[1] = {jj};
    a = tn_index(self, xi, 1);
    b = a ? tn_index(self, xj, 1) : NULL;
    r = b ? pnorm_of_diff(a, b, p) : NULL;
out:
    RELEASE_ALL(ii, jj, hi, hj, a, b);
    return r;
}

/* cdist and pdist (what torch.export writes for torch.cdist and
 * F.pdist): the forwards above */
struct tn_tensor *tn__composite_cdist(tn_keyset ks, const struct tn_tensor *x1,
                                      const struct tn_tensor *x2, double p,
                                      const int64_t *compute_mode)
{
    return tn__composite__cdist_forward(ks, x1, x2, p, compute_mode);
}

struct tn_tensor *tn__composite_pdist(tn_keyset ks, const struct tn_tensor *self, double p)
{
    return tn__composite__pdist_forward(ks, self, p);
}
