/*
 * ops/fft.c: the FFTs. The three core ATen transforms (_fft_r2c, _fft_c2r,
 * _fft_c2c: CPU and Meta kernels over ops/fft_plan.c's engine, which says
 * why we have our own), their backward helpers (derivatives.yaml), and
 * torch.fft's functions (fft_fft ... fft_ihfftn, fftshift) composed of
 * them as PyTorch's SpectralOps.cpp composes them (the conjugates through
 * _conj_physical).
 *
 * Normalization is ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by
 * 1/n, n the product of the signal sizes over `dim` (the output's for
 * c2r). float32 gives complex64, float64 complex128.
 */
#include "ops/internal.h"
#include "ops/fft_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum pass_kind { PASS_C2C, PASS_R2C, PASS_C2R };

/* One pass over the lines along a dimension of contiguous tensors: in has
 * in_n values along it, out out_n, the transform is of length n. */
struct fft_pass {
    enum pass_kind kind;
    const struct tn__fft_plan *plan;
    int64_t n, in_n, out_n, inner;
    const void *in;
    void *out;
    bool in_complex, out_complex, inverse;
    bool half; /* an even real transform of n through plan (n/2's): real_half */
    bool flt;  /* complex64/float32 lines computed in float (pass_float) */
    double scale;
    atomic_bool failed;
};

/* Whether a pass over complex64/float32 lines computes in float, as
 * PyTorch's own (MKL, pocketfft) do: the mixed-radix plans' c2c lines and
 * even r2c ones (real_half); the rest runs in double (Bluestein's chirp
 * needs it). c2r stays in double: in float (real_half's float form) it
 * put fft.hfft2's int64 sample 5 1.9e-5 off PyTorch's, 1e-5 allowed at an
 * output of 0.85 among ones up to 251, below float's step there. On 20
 * such int samples (5 x 6 x 7 -> 12) the float c2r was 3.4e-5 off float64
 * on average, PyTorch's 2.4e-5, the double one 2.3e-5; the join in double
 * left 3.2e-5, so the loss is in the float half-length transform (6 = 2 x
 * 3), not the join nor the twiddles (rounded once from double). The one
 * place that picks. */
static bool pass_float(enum pass_kind kind, bool half, const struct tn__fft_plan *plan)
{
    return tn__fft_float_ok(plan) && (kind == PASS_C2C || (kind == PASS_R2C && half));
}

#define R float
#define SUF f
#define FFTL_FLOAT
#include "ops/fft_lines.h"
#undef FFTL_FLOAT
#undef R
#undef SUF
#define R double
#define SUF d
#include "ops/fft_lines.h"
#undef R
#undef SUF

/* Runs one pass along dimension d of shape (sizes, ndim) of `in` (its
 * size there in_n; the output's out_n); 0 or an error. */
static int run_pass(enum pass_kind kind, bool dbl, const int64_t *sizes, int ndim, int d,
                    int64_t n, int64_t in_n, int64_t out_n, const void *in, void *out,
                    bool inverse, double scale)
{
    int64_t inner = 1, outer = 1;
    for (int i = d + 1; i < ndim; i++)
        inner *= sizes[i];
    for (int i = 0; i < d; i++)
        outer *= sizes[i];
    int64_t lines = outer * inner;
    if (lines == 0 || n == 0)
        return 0;
    bool half = kind != PASS_C2C && n % 2 == 0;
    struct tn__fft_plan *plan = tn__fft_plan_get(half ? n / 2 : n);
    if (!plan)
        return tn_last_status();
    struct fft_pass ps = {kind, plan, n, in_n, out_n, inner, in, out,
                          kind != PASS_R2C, kind != PASS_C2R, inverse, half,
                          !dbl && pass_float(kind, half, plan), scale, false};
    int64_t grain = 16384 / n + 1;
    tn_parallel_for(lines, grain, dbl ? pass_range_d : pass_range_f, &ps);
    tn__fft_plan_put(plan);
    if (atomic_load(&ps.failed))
        return tn_set_error(TN_ENOMEM, "out of memory in an FFT of length %lld", (long long)n);
    return 0;
}

/* dim wrapped and checked (in range, unique, at least one where `need`)
 * into out; 0 or PyTorch's error. */
static int fft_dims(const char *op, const struct tn_tensor *self, const int64_t *dim, int n,
                    bool need, int *out)
{
    if (need && n == 0)
        return tn_set_error(TN_EINVAL, "%s: at least one dimension to transform is needed", op);
    for (int i = 0; i < n; i++) {
        int d = tn_wrap_dim(dim[i], self->ndim);
        if (d < 0)
            return tn_last_status();
        for (int j = 0; j < i; j++)
            if (out[j] == d)
                return tn_set_error(TN_EINVAL, "FFT dims must be unique");
        out[i] = d;
    }
    return 0;
}

static double norm_scale(int64_t mode, const int64_t *sizes, const int *dims, int n)
{
    double prod = 1;
    for (int i = 0; i < n; i++)
        prod *= (double)sizes[dims[i]];
    return mode == 0 || prod == 0 ? 1.0 : mode == 1 ? 1.0 / sqrt(prod) : 1.0 / prod;
}

static int check_norm(const char *op, int64_t mode)
{
    if (mode < 0 || mode > 2)
        return tn_set_error(TN_EINVAL, "%s: normalization must be 0 (none), 1 (1/sqrt(n)) or "
                            "2 (1/n), got %lld", op, (long long)mode);
    return 0;
}

static int check_points(const struct tn_tensor *t, const int *dims, int n)
{
    for (int i = 0; i < n; i++)
        if (t->sizes[dims[i]] < 1)
            return tn_set_error(TN_EINVAL, "Invalid number of data points (%lld) specified",
                                (long long)t->sizes[dims[i]]);
    return 0;
}

static bool is_meta(const struct tn_tensor *t) { return t->device.type == TN_DEVICE_META; }

/* c2c over dims[0..n) of the contiguous complex tensor t, in place. */
static int c2c_passes(struct tn_tensor *t, const int *dims, int n, bool inverse, double scale)
{
    bool dbl = t->dtype == TN_COMPLEX128;
    void *p = tn_data(t);
    for (int i = 0; i < n; i++) {
        int64_t len = t->sizes[dims[i]];
        if (run_pass(PASS_C2C, dbl, t->sizes, t->ndim, dims[i], len, len, len, p, p, inverse,
                     i == n - 1 ? scale : 1.0) < 0)
            return -1;
    }
    return 0;
}

/* A contiguous copy of t (never t's own storage). */
static struct tn_tensor *fresh_copy(const struct tn_tensor *t)
{
    struct tn_tensor *c = tn_empty_on(t->sizes, t->ndim, t->dtype, t->device);
    if (c && !is_meta(t) && tn_copy_(c, t) < 0) {
        tn_release(c);
        return NULL;
    }
    return c;
}

/* The layout PyTorch 2.x's CPU FFT (MKL's _exec_fft) gives its result of
 * shape (sizes, ndim) transformed over order[0..n): the other (batch)
 * dims outermost, by the strides `ref` (its input's) gives them, largest
 * first, then the transformed ones in `order`, dense. */
static void fft_layout(const int64_t *sizes, int ndim, const int64_t *ref, const int *order,
                       int n, int64_t *strides)
{
    int perm[TN_MAX_DIMS], nb = 0;
    bool transformed[TN_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++)
        transformed[order[i]] = true;
    for (int d = 0; d < ndim; d++)
        if (!transformed[d]) {
            int j = nb++; /* insertion sort, stable: ties keep their order */
            while (j > 0 && ref[perm[j - 1]] < ref[d]) {
                perm[j] = perm[j - 1];
                j--;
            }
            perm[j] = d;
        }
    for (int i = 0; i < n; i++)
        perm[nb + i] = order[i];
    int64_t step = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[perm[i]] = step;
        step *= sizes[perm[i]];
    }
}

/* Sorts dims[0..n) by ref's strides, largest first (ATen's _sort_dims),
 * the last one left in place where keep_last. */
static void sort_dims(int *dims, int n, const int64_t *ref, bool keep_last)
{
    int m = keep_last ? n - 1 : n;
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && ref[dims[j - 1]] < ref[dims[j]]; j--) {
            int t = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = t;
        }
}

/* out (contiguous, ours) laid out with `strides`: out itself when they
 * agree where it matters (dims longer than 1), else a copy; out is
 * consumed. */
static struct tn_tensor *relayout(struct tn_tensor *out, const int64_t *strides)
{
    if (!out)
        return NULL;
    bool same = true;
    for (int d = 0; d < out->ndim; d++)
        if (out->sizes[d] > 1 && out->strides[d] != strides[d])
            same = false;
    if (same)
        return out;
    struct tn_tensor *t = tn_empty_on(out->sizes, out->ndim, out->dtype, out->device);
    if (t) {
        memcpy(t->strides, strides, sizeof(int64_t) * out->ndim);
        if (!is_meta(out) && tn_copy_(t, out) < 0) {
            tn_release(t);
            t = NULL;
        }
    }
    tn_release(out);
    return t;
}

/* out laid out (relayout), or NULL with out released where rc < 0. */
static struct tn_tensor *finish(struct tn_tensor *out, int rc, const int64_t *layout)
{
    if (rc < 0) {
        tn_release(out);
        return NULL;
    }
    return relayout(out, layout);
}

/* The checks the three kernels share: self's dtype (complex or real
 * float), dim (wrapped into dims; at least one where `need`),
 * normalization and, where `points`, no empty transformed dim. 0 or the
 * error (PyTorch 2.x's words). */
static int check_args(const char *op, const struct tn_tensor *self, bool want_complex,
                      const int64_t *dim, int dim_len, bool need, int64_t normalization,
                      bool points, int *dims)
{
    const char *name = tn_dtype_info(self->dtype)->c10_name;
    if (want_complex && !tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "Only supports complex dtypes, but found: %s", name);
    if (!want_complex && self->dtype != TN_FLOAT32 && self->dtype != TN_FLOAT64)
        return tn_set_error(TN_EDTYPE, tn_dtype_is_floating(self->dtype)
                                           ? "Unsupported dtype %s"
                                           : "Only supports floating-point dtypes, but found: %s",
                            name);
    if (dim_len > self->ndim)
        return tn_set_error(TN_EINVAL, "%s: %d dims for a %d-dim tensor", op, dim_len, self->ndim);
    if (fft_dims(op, self, dim, dim_len, need, dims) < 0 || check_norm(op, normalization) < 0 ||
        (points && check_points(self, dims, dim_len) < 0))
        return -1;
    return 0;
}

/* The layout of a transform of self over dims (sorted as ATen's _sort_dims
 * sorts them, the last kept last where keep_last) with result sizes. */
static void result_layout(const struct tn_tensor *self, const int64_t *sizes, const int *dims,
                          int dim_len, bool keep_last, int64_t *layout)
{
    int sorted[TN_MAX_DIMS];
    memcpy(sorted, dims, sizeof(int) * dim_len);
    sort_dims(sorted, dim_len, self->strides, keep_last);
    fft_layout(sizes, self->ndim, self->strides, sorted, dim_len, layout);
}

struct tn_tensor *tn__cpu__fft_r2c(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                                   int dim_len, int64_t normalization, bool onesided)
{
    int dims[TN_MAX_DIMS];
    if (check_args("_fft_r2c", self, false, dim, dim_len, true, normalization, true, dims) < 0)
        return NULL;
    int last = dims[dim_len - 1];
    int64_t n = self->sizes[last], sizes[TN_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * self->ndim);
    if (onesided)
        sizes[last] = n / 2 + 1;
    bool dbl = self->dtype == TN_FLOAT64;
    int64_t layout[TN_MAX_DIMS];
    result_layout(self, sizes, dims, dim_len, true, layout);
    struct tn_tensor *out = tn_empty_on(sizes, self->ndim, dbl ? TN_COMPLEX128 : TN_COMPLEX64,
                                        self->device);
    if (!out || is_meta(self) || tn_numel(out) == 0)
        return relayout(out, layout);
    struct tn_tensor *x = tn_contiguous(self);
    double scale = norm_scale(normalization, self->sizes, dims, dim_len);
    int rc = x ? run_pass(PASS_R2C, dbl, self->sizes, self->ndim, last, n, n, sizes[last],
                          tn_data(x), tn_data(out), false, dim_len == 1 ? scale : 1.0)
               : -1;
    tn_release(x);
    if (rc == 0)
        rc = c2c_passes(out, dims, dim_len - 1, false, scale);
    return finish(out, rc, layout);
}

struct tn_tensor *tn__cpu__fft_c2c(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                                   int dim_len, int64_t normalization, bool forward)
{
    int dims[TN_MAX_DIMS];
    int64_t layout[TN_MAX_DIMS];
    if (check_args("_fft_c2c", self, true, dim, dim_len, false, normalization, true, dims) < 0)
        return NULL;
    result_layout(self, self->sizes, dims, dim_len, false, layout);
    struct tn_tensor *out = fresh_copy(self);
    if (!out || is_meta(self) || tn_numel(out) == 0 || dim_len == 0)
        return relayout(out, layout);
    return finish(out, c2c_passes(out, dims, dim_len, !forward,
                                  norm_scale(normalization, self->sizes, dims, dim_len)),
                  layout);
}

struct tn_tensor *tn__cpu__fft_c2r(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                                   int dim_len, int64_t normalization, int64_t last_dim_size)
{
    int dims[TN_MAX_DIMS];
    if (check_args("_fft_c2r", self, true, dim, dim_len, true, normalization, false, dims) < 0)
        return NULL;
    int last = dims[dim_len - 1];
    int64_t n = last_dim_size, in_n = self->sizes[last], sizes[TN_MAX_DIMS];
    if (n < 0)
        return tn_set_error(TN_EINVAL, "Invalid number of data points (%lld) specified",
                            (long long)n), NULL;
    if (n > 0 && in_n < n / 2 + 1)
        return tn_set_error(TN_ESHAPE, "_fft_c2r: last_dim_size %lld needs %lld values along "
                            "dimension %d of the input, which holds %lld", (long long)n,
                            (long long)(n / 2 + 1), last, (long long)in_n), NULL;
    memcpy(sizes, self->sizes, sizeof(int64_t) * self->ndim);
    sizes[last] = n;
    bool dbl = self->dtype == TN_COMPLEX128;
    /* 2.x: an MKL c2c over the other dims, laid out as it lays out, then
     * the c2r along the last */
    int64_t mid[TN_MAX_DIMS], layout[TN_MAX_DIMS];
    const int64_t *ref = self->strides;
    if (dim_len > 1) {
        result_layout(self, self->sizes, dims, dim_len - 1, false, mid);
        ref = mid;
    }
    fft_layout(sizes, self->ndim, ref, &last, 1, layout);
    struct tn_tensor *out = tn_empty_on(sizes, self->ndim, dbl ? TN_FLOAT64 : TN_FLOAT32,
                                        self->device);
    if (!out || is_meta(self) || tn_numel(out) == 0)
        return relayout(out, layout);
    /* the other dims first (inverse c2c, on a copy), then c2r along the last */
    struct tn_tensor *x = dim_len > 1 ? fresh_copy(self) : tn_contiguous(self);
    int rc = -1;
    if (x && c2c_passes(x, dims, dim_len - 1, true, 1.0) == 0)
        rc = run_pass(PASS_C2R, dbl, self->sizes, self->ndim, last, n, in_n, n, tn_data(x),
                      tn_data(out), true, norm_scale(normalization, sizes, dims, dim_len));
    tn_release(x);
    return finish(out, rc, layout);
}

/* _conj_physical: the conjugate, laid out as self where self is dense
 * (empty_like's preserve), a copy for real dtypes. The FFTs' conjugates
 * (ifft of a real input, hfft, ihfft) go through it, as in PyTorch. */
struct tn_tensor *tn__cpu__conj_physical(tn_keyset ks, const struct tn_tensor *self)
{
    if (tn_dtype_is_storage_only(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"conj_physical\" not implemented for '%s'",
                            tn_dtype_info(self->dtype)->c10_name), NULL;
    struct tn_tensor *out = tn_empty_like(self, TN_DTYPE_UNSET);
    if (!out || is_meta(self))
        return out;
    if (tn_copy_(out, self) < 0) {
        tn_release(out);
        return NULL;
    }
    /* out is dense: its numel values lie in one block */
    int64_t n = tn_dtype_is_complex(out->dtype) ? tn_numel(out) : 0;
    if (out->dtype == TN_COMPLEX128)
        for (double *p = tn_data(out); n-- > 0; p += 2)
            p[1] = -p[1];
    else
        for (float *p = tn_data(out); n-- > 0; p += 2)
            p[1] = -p[1];
    return out;
}

/* ------------------------------------------------ backward helpers */

/* The real part of a complex tensor, as a new contiguous tensor. */
static struct tn_tensor *real_part(struct tn_tensor *c)
{
    if (!c)
        return NULL;
    struct tn_tensor re = *c; /* a real view over c's storage, borrowed */
    re.dtype = tn__dtype_real(c->dtype);
    re.offset = c->offset * 2;
    for (int d = 0; d < c->ndim; d++)
        re.strides[d] = c->strides[d] * 2;
    re.grad = NULL;
    re.grad_fn = NULL;
    re.requires_grad = false;
    struct tn_tensor *r = tn_empty_on(c->sizes, c->ndim, re.dtype, c->device);
    if (r && !is_meta(c) && tn_copy_(r, &re) < 0) {
        tn_release(r);
        r = NULL;
    }
    tn_release(c);
    return r;
}

/* Contract in ops/fft_internal.h: PyTorch's fft_r2c_backward. The
 * onesided half is zero-filled to self's full length first. */
struct tn_tensor *tn__fft_r2c_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization, bool onesided, const int64_t *sizes,
                                 int ndim)
{
    if (!onesided)
        return real_part(tn_underscore_fft_c2c(grad, dim, dim_len, normalization, false));
    int last = tn_wrap_dim(dim[dim_len - 1], grad->ndim);
    if (last < 0)
        return NULL;
    int64_t full[TN_MAX_DIMS];
    memcpy(full, grad->sizes, sizeof(int64_t) * grad->ndim);
    full[last] = sizes[last];
    struct tn_tensor *z = tn_zeros(full, grad->ndim, grad->dtype);
    struct tn_tensor *part = z ? tn_narrow(z, last, 0, grad->sizes[last]) : NULL;
    int rc = part ? tn_copy_(part, grad) : -1;
    tn_release(part);
    struct tn_tensor *r = rc < 0 ? NULL
                                 : real_part(tn_underscore_fft_c2c(z, dim, dim_len, normalization,
                                                                   false));
    tn_release(z);
    return r;
}

/* Contract in ops/fft_internal.h: PyTorch's fft_c2r_backward: the
 * onesided r2c of grad, with the bins whose mirror image lies outside the
 * half (1 .. n - half) doubled. */
struct tn_tensor *tn__fft_c2r_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization)
{
    struct tn_tensor *g = tn_underscore_fft_r2c(grad, dim, dim_len, normalization, true);
    if (!g)
        return NULL;
    int last = tn_wrap_dim(dim[dim_len - 1], grad->ndim);
    int64_t twice = grad->sizes[last] - g->sizes[last];
    if (twice > 0 && !is_meta(g)) { /* g is our kernel's fresh dense result */
        bool dbl = g->dtype == TN_COMPLEX128;
        char *base = (char *)tn_data(g);
        int64_t idx[TN_MAX_DIMS] = {0}, total = tn_numel(g);
        for (int64_t e = 0; e < total; e++) {
            if (idx[last] >= 1 && idx[last] <= twice) {
                int64_t at = 0;
                for (int d = 0; d < g->ndim; d++)
                    at += idx[d] * g->strides[d];
                if (dbl)
                    ((double *)base)[2 * at] *= 2, ((double *)base)[2 * at + 1] *= 2;
                else
                    ((float *)base)[2 * at] *= 2, ((float *)base)[2 * at + 1] *= 2;
            }
            for (int d = g->ndim - 1; d >= 0 && ++idx[d] == g->sizes[d]; d--)
                idx[d] = 0;
        }
    }
    return g;
}

/* Contract in ops/fft_internal.h: the c2c of grad the other way. */
struct tn_tensor *tn__fft_c2c_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization, bool forward)
{
    return tn_underscore_fft_c2c(grad, dim, dim_len, normalization, !forward);
}

/* ------------------------------------------------ torch.fft's functions */

enum fft_fn { F_FFT, F_IFFT, F_RFFT, F_IRFFT, F_HFFT, F_IHFFT };
static const char *const fn_name[] = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"};
static const bool fn_forward[] = {true, false, true, false, true, false};

/* ATen's norm_from_string: the fft_norm_mode for `norm`, -1 with the
 * error for an unknown one. */
static int norm_mode(const char *norm, bool forward)
{
    if (!norm || !strcmp(norm, "backward"))
        return forward ? 0 : 2;
    if (!strcmp(norm, "forward"))
        return forward ? 2 : 0;
    if (!strcmp(norm, "ortho"))
        return 1;
    return tn_set_error(TN_EINVAL, "Invalid normalization mode: \"%s\"", norm);
}

/* x cut or zero-padded at the end of each of dims[i] to shape[i]. */
static struct tn_tensor *resize_input(struct tn_tensor *x, const int64_t *dims,
                                      const int64_t *shape, int n)
{
    int64_t pad[2 * TN_MAX_DIMS] = {0};
    bool padding = false;
    for (int i = 0; i < n && x; i++) {
        int d = (int)dims[i];
        if (x->sizes[d] > shape[i]) {
            struct tn_tensor *c = tn_narrow(x, d, 0, shape[i]);
            tn_release(x);
            x = c;
        } else if (x->sizes[d] < shape[i]) {
            pad[2 * (x->ndim - 1 - d) + 1] = shape[i] - x->sizes[d];
            padding = true;
        }
    }
    if (x && padding) {
        struct tn_tensor *p = tn_constant_pad_nd(x, pad, 2 * x->ndim, tn_int(0));
        tn_release(x);
        x = p;
    }
    return x;
}

/* torch.fft.<fn>n (1-D: s and dim of one value; has_dim false: dim None):
 * PyTorch's canonicalize_fft_shape_and_dim_args, promote_tensor_fft and
 * resize_fft_input, then r2c, c2r or c2c. */
static struct tn_tensor *fft_any(enum fft_fn fn, bool nd, const struct tn_tensor *self,
                                 const int64_t *s, int s_len, const int64_t *dim, int dim_len,
                                 bool has_dim, const char *norm)
{
    const char *name = fn_name[fn];
    int64_t dims[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    int n;
    int mode = norm_mode(norm, fn_forward[fn]);
    if (mode < 0)
        return NULL;
    if (has_dim) {
        int w[TN_MAX_DIMS];
        if (dim_len > TN_MAX_DIMS)
            return tn_set_error(TN_EINVAL, "FFT dims must be unique"), NULL;
        if (fft_dims(name, self, dim, dim_len, false, w) < 0)
            return NULL;
        for (int i = 0; i < dim_len; i++)
            dims[i] = w[i];
        n = dim_len;
        if (s && s_len != dim_len)
            return tn_set_error(TN_EINVAL, "When given, dim and shape arguments must have the "
                                "same length"), NULL;
    } else if (s) {
        if (s_len > self->ndim)
            return tn_set_error(TN_EINVAL, "Got shape with %d values but input tensor only has "
                                "%d dimensions.", s_len, self->ndim), NULL;
        n = s_len;
        for (int i = 0; i < n; i++)
            dims[i] = self->ndim - n + i;
    } else {
        n = self->ndim;
        for (int i = 0; i < n; i++)
            dims[i] = i;
    }
    for (int i = 0; i < n; i++) {
        shape[i] = s && s[i] != -1 ? s[i] : self->sizes[dims[i]];
        if (shape[i] < 1 && !(s && (fn == F_IRFFT || fn == F_HFFT) && i == n - 1 && s[i] > 0))
            return tn_set_error(TN_EINVAL, "Invalid number of data points (%lld) specified",
                                (long long)shape[i]), NULL;
    }
    bool c2r = fn == F_IRFFT || fn == F_HFFT;
    int64_t last_n = 0;
    if (c2r) {
        if (n == 0)
            return tn_set_error(TN_EINVAL, "%s must transform at least one axis", name), NULL;
        last_n = s && s[n - 1] != -1 ? s[n - 1] : 2 * (self->sizes[dims[n - 1]] - 1);
        if (last_n < 1)
            return tn_set_error(TN_EINVAL, "Invalid number of data points (%lld) specified",
                                (long long)last_n), NULL;
        shape[n - 1] = last_n / 2 + 1;
    }
    /* promote_tensor_fft: integers to the default dtype; no half types on the CPU */
    enum tn_dtype dt = self->dtype;
    if (dt == TN_FLOAT16 || dt == TN_BFLOAT16 || tn_dtype_is_storage_only(dt))
        return tn_set_error(TN_EDTYPE, "Unsupported dtype %s", tn_dtype_info(dt)->c10_name), NULL;
    bool cplx = tn_dtype_is_complex(dt);
    if ((fn == F_RFFT || fn == F_IHFFT) && cplx)
        return tn_set_error(TN_EDTYPE, "%s expects a real input tensor, but got %s", name,
                            tn_dtype_info(dt)->c10_name), NULL;
    struct tn_tensor *x = cplx || tn_dtype_is_floating(dt) ? tn_retain((struct tn_tensor *)self)
                                                           : tn_to_dtype(self, tn_get_default_dtype());
    x = resize_input(x, dims, shape, n);
    if (!x)
        return NULL;
    if (c2r && !cplx) { /* a real input to a c2r becomes complex (after resizing) */
        struct tn_tensor *c = tn_to_dtype(x, tn__dtype_complex(x->dtype));
        tn_release(x);
        if (!(x = c))
            return NULL;
    }
    struct tn_tensor *r;
    if (!cplx && !c2r && (nd || n == 0) && (fn == F_FFT || fn == F_IFFT)) {
        /* fft2/fftn of a real input: PyTorch makes it complex for a c2c
         * (whose layout its result has) */
        struct tn_tensor *c = tn_to_dtype(x, tn__dtype_complex(x->dtype));
        tn_release(x);
        if (!(x = c))
            return NULL;
        cplx = true;
    }
    if (fn == F_HFFT) {
        /* c2c forward over the other dims, conjugate, c2r along the last */
        struct tn_tensor *h = n > 1 ? tn_underscore_fft_c2c(x, dims, n - 1, mode, true)
                                    : tn_retain(x);
        struct tn_tensor *c = h ? tn_underscore_conj_physical(h) : NULL;
        r = c ? tn_underscore_fft_c2r(c, dims + n - 1, 1, mode, last_n) : NULL;
        tn_release(c);
        tn_release(h);
    } else if (c2r) {
        r = tn_underscore_fft_c2r(x, dims, n, mode, last_n);
    } else if (cplx) {
        r = n ? tn_underscore_fft_c2c(x, dims, n, mode, fn_forward[fn]) : tn_retain(x);
    } else if (fn == F_IHFFT) {
        /* the conjugate of r2c along the last dim, then an inverse c2c over
         * the others */
        struct tn_tensor *h = tn_underscore_fft_r2c(x, dims + n - 1, 1, mode, true);
        struct tn_tensor *c = h ? tn_underscore_conj_physical(h) : NULL;
        r = !c ? NULL : n > 1 ? tn_underscore_fft_c2c(c, dims, n - 1, mode, false) : tn_retain(c);
        tn_release(c);
        tn_release(h);
    } else {
        r = tn_underscore_fft_r2c(x, dims, n, mode, fn == F_RFFT);
        if (r && !fn_forward[fn]) { /* ifft of a real input: the conjugate */
            struct tn_tensor *c = tn_underscore_conj_physical(r);
            tn_release(r);
            r = c;
        }
    }
    tn_release(x);
    return r;
}

#define FFT_1D(f, FN_)                                                                          \
    struct tn_tensor *tn__composite_fft_##f(tn_keyset ks, const struct tn_tensor *self,         \
                                            const int64_t *n, int64_t dim, const char *norm)    \
    {                                                                                           \
        return fft_any(FN_, false, self, n, n ? 1 : 0, &dim, 1, true, norm);                    \
    }                                                                                           \
    struct tn_tensor *tn__composite_fft_##f##2(tn_keyset ks, const struct tn_tensor *self,      \
                                               const int64_t *s, int s_len, const int64_t *dim, \
                                               int dim_len, const char *norm)                   \
    {                                                                                           \
        return fft_any(FN_, true, self, s, s_len, dim, dim_len, true, norm);                    \
    }                                                                                           \
    struct tn_tensor *tn__composite_fft_##f##n(tn_keyset ks, const struct tn_tensor *self,      \
                                               const int64_t *s, int s_len, const int64_t *dim, \
                                               int dim_len, const char *norm)                   \
    {                                                                                           \
        return fft_any(FN_, true, self, s, s_len, dim, dim_len, dim != NULL, norm);             \
    }
FFT_1D(fft, F_FFT)
FFT_1D(ifft, F_IFFT)
FFT_1D(rfft, F_RFFT)
FFT_1D(irfft, F_IRFFT)
FFT_1D(hfft, F_HFFT)
FFT_1D(ihfft, F_IHFFT)

/* fftshift/ifftshift: a roll by half of each size (rounded down, or up
 * for the inverse) along dim (None: all). */
static struct tn_tensor *shift(const struct tn_tensor *self, const int64_t *dim, int dim_len,
                               bool inverse)
{
    int64_t dims[TN_MAX_DIMS], shifts[TN_MAX_DIMS];
    int n = dim ? dim_len : self->ndim;
    if (n > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "fftshift: too many dims"), NULL;
    for (int i = 0; i < n; i++) {
        int d = dim ? tn_wrap_dim(dim[i], self->ndim) : i;
        if (d < 0)
            return NULL;
        dims[i] = d;
        shifts[i] = (self->sizes[d] + (inverse ? 1 : 0)) / 2;
    }
    return tn_roll(self, shifts, n, dims, n);
}

struct tn_tensor *tn__composite_fft_fftshift(tn_keyset ks, const struct tn_tensor *self,
                                             const int64_t *dim, int dim_len)
{
    return shift(self, dim, dim_len, false);
}

struct tn_tensor *tn__composite_fft_ifftshift(tn_keyset ks, const struct tn_tensor *self,
                                              const int64_t *dim, int dim_len)
{
    return shift(self, dim, dim_len, true);
}
