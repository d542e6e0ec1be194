/*
 * ops/pairs.c: cross products as PyTorch 2.x computes them (Cross.cpp's
 * linalg_cross meta function, its words, and CrossKernel.cpp's apply_cross).
 * Its CPU kernel, compiled with FMA contraction, computes each component
 * a1 * b2 - a2 * b1 as fma(a1, b2, -(a2 * b1)) for float32, float64 and the
 * parts of complex128's products (c10::complex's a*c - b*d and a*d + b*c),
 * plainly for complex64; float16 and bfloat16 round each product and the
 * difference (c10's Half and BFloat16 operators); integers wrap. Checked bit
 * for bit against PyTorch 2.x on 20000 random rows of each (AVX2 build).
 * Also polar, frexp and ldexp as PyTorch 2.x's CPU kernels: libm's
 * cos/sin/frexp/pow on each element in float (float32, float16, bfloat16)
 * or double, the results laid out as its TensorIterator lays them.
 */
#include <config.h>

#include <complex.h>
#include <math.h>
#include <string.h>

#include "ops/internal.h"

/* A new tensor of sizes and dtype laid out as PyTorch's TensorIterator
 * lays out the result of an elementwise op over in[0..n). */
static struct tn_tensor *iter_empty(const struct tn_tensor *const *in, int n,
                                    const int64_t *sizes, int ndim, enum tn_dtype dt)
{
    int64_t st[TN_MAX_DIMS];
    if (tn__iter_strides(in, n, sizes, ndim, st) > 0)
        return tn_empty_strided(sizes, ndim, st, dt);
    return tn_empty(sizes, ndim, dt);
}

/* t expanded to (sizes, ndim), converted to dt, contiguous. */
static struct tn_tensor *dense(const struct tn_tensor *t, const int64_t *sizes, int ndim,
                               enum tn_dtype dt)
{
    struct tn_tensor *e = tn_expand(t, sizes, ndim);
    struct tn_tensor *c = e ? tn_to_dtype(e, dt) : NULL, *r = c ? tn_contiguous(c) : NULL;
    tn_release(c);
    tn_release(e);
    return r;
}

/* linalg_cross's meta function: same number of dims, size 3 along dim (the
 * dim as given, as PyTorch prints it), the other dims broadcast; self's
 * dtype, contiguous. */
int tn__meta_linalg_cross_out(const struct tn_tensor *self, const struct tn_tensor *other,
                              int64_t dim, struct tn_meta *m)
{
    if (self->ndim != other->ndim)
        return tn_set_error(TN_EINVAL,
                            "linalg.cross: inputs must have the same number of dimensions.");
    /* self.size(dim): a 0-dim self has no dim -1 here */
    int d = self->ndim ? tn_wrap_dim(dim, self->ndim)
                       : tn_set_error(TN_EINDEX, "Dimension specified as %lld but tensor has no "
                                      "dimensions", (long long)dim);
    if (d < 0)
        return tn_last_status();
    if (self->sizes[d] != 3 || other->sizes[d] != 3)
        return tn_set_error(TN_EINVAL, "linalg.cross: inputs dimension %lld must have length 3. "
                            "Got %lld and %lld", (long long)dim, (long long)self->sizes[d],
                            (long long)other->sizes[d]);
    if (tn_broadcast_shapes(self->sizes, self->ndim, other->sizes, other->ndim, m->sizes) < 0)
        return tn_last_status();
    m->ndim = self->ndim;
    m->dtype = self->dtype;
    return TN_OK;
}

/* One component x1 * y2 - x2 * y1 per dtype class, PyTorch's rounding. */
static float cross_f32(float x1, float y2, float x2, float y1)
{
    return fmaf(x1, y2, -(x2 * y1));
}

static double cross_f64(double x1, double y2, double x2, double y1)
{
    return fma(x1, y2, -(x2 * y1));
}

static float cross_16(float x1, float y2, float x2, float y1, enum tn_dtype dt)
{
    return tn__round16(tn__round16(x1 * y2, dt) - tn__round16(x2 * y1, dt), dt);
}

static float complex cross_c64(float complex x1, float complex y2, float complex x2,
                               float complex y1)
{
    float re = (crealf(x1) * crealf(y2) - cimagf(x1) * cimagf(y2)) -
               (crealf(x2) * crealf(y1) - cimagf(x2) * cimagf(y1));
    float im = (crealf(x1) * cimagf(y2) + cimagf(x1) * crealf(y2)) -
               (crealf(x2) * cimagf(y1) + cimagf(x2) * crealf(y1));
    float complex r;
    ((float *)&r)[0] = re;
    ((float *)&r)[1] = im;
    return r;
}

static double complex mul_c128(double complex x, double complex y)
{
    double complex r;
    ((double *)&r)[0] = fma(creal(x), creal(y), -(cimag(x) * cimag(y)));
    ((double *)&r)[1] = fma(creal(x), cimag(y), cimag(x) * creal(y));
    return r;
}

static double complex cross_c128(double complex x1, double complex y2, double complex x2,
                                 double complex y1)
{
    double complex p = mul_c128(x1, y2), q = mul_c128(x2, y1), r;
    ((double *)&r)[0] = creal(p) - creal(q);
    ((double *)&r)[1] = cimag(p) - cimag(q);
    return r;
}

static int64_t cross_int(int64_t x1, int64_t y2, int64_t x2, int64_t y1)
{
    return (int64_t)((uint64_t)x1 * (uint64_t)y2 - (uint64_t)x2 * (uint64_t)y1);
}

/* r = a x b over contiguous [outer, 3, inner] blocks of type T. */
#define CROSS_LOOP(T, EXPR)                                                                      \
    do {                                                                                         \
        const T *a = tn_data(ac), *b = tn_data(bc);                                              \
        T *r = tn_data(rc);                                                                      \
        for (int64_t o = 0; o < outer; o++)                                                      \
            for (int64_t i = 0; i < inner; i++) {                                                \
                int64_t base = o * 3 * inner + i;                                                \
                for (int k = 0; k < 3; k++) {                                                    \
                    int64_t p = base + (k + 1) % 3 * inner, q = base + (k + 2) % 3 * inner;      \
                    r[base + k * inner] = EXPR(a[p], b[q], a[q], b[p]);                          \
                }                                                                                \
            }                                                                                    \
    } while (0)

#define CROSS_16(x1, y2, x2, y1) cross_16(x1, y2, x2, y1, dt)

/* The cross products of a and b (out's shape, contiguous) along d into
 * r (float32 for float16 and bfloat16, int64 for integers); dt: out's dtype. */
static void cross_rows(const struct tn_tensor *ac, const struct tn_tensor *bc,
                       struct tn_tensor *rc, int d, enum tn_dtype dt)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < rc->ndim; i++) {
        if (i < d)
            outer *= rc->sizes[i];
        else if (i > d)
            inner *= rc->sizes[i];
    }
    switch (rc->dtype) {
    case TN_FLOAT32:
        if (dt == TN_FLOAT32)
            CROSS_LOOP(float, cross_f32);
        else
            CROSS_LOOP(float, CROSS_16);
        break;
    case TN_FLOAT64: CROSS_LOOP(double, cross_f64); break;
    case TN_COMPLEX64: CROSS_LOOP(float complex, cross_c64); break;
    case TN_COMPLEX128: CROSS_LOOP(double complex, cross_c128); break;
    default: CROSS_LOOP(int64_t, cross_int); break;
    }
}

/* linalg_cross.out's CPU kernel: both inputs expanded to out's shape and
 * computed in their dtype's class (float16/bfloat16 in float32, rounded
 * each step; integers in int64, wrapping), then copied into out. */
int tn__cpu_linalg_cross_out(tn_keyset ks, const struct tn_tensor *self,
                             const struct tn_tensor *other, int64_t dim, struct tn_tensor *out)
{
    (void)ks;
    enum tn_dtype dt = out->dtype;
    if (dt == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "\"cross\" not implemented for 'Bool'");
    const struct tn_tensor *wrong = self->dtype != dt ? self : other->dtype != dt ? other : NULL;
    if (wrong)
        return tn_set_error(TN_EDTYPE, "expected scalar type %s but found %s",
                            tn_dtype_info(dt)->c10_name, tn_dtype_info(wrong->dtype)->c10_name);
    if (tn_numel(out) == 0)
        return TN_OK;
    int d = tn_wrap_dim(dim, out->ndim);
    enum tn_dtype cdt = dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? TN_FLOAT32
                        : tn_dtype_is_floating(dt) || tn_dtype_is_complex(dt) ? dt
                                                                               : TN_INT64;
    struct tn_tensor *ac = dense(self, out->sizes, out->ndim, cdt);
    struct tn_tensor *bc = ac ? dense(other, out->sizes, out->ndim, cdt) : NULL;
    struct tn_tensor *rc = bc ? tn_empty(out->sizes, out->ndim, cdt) : NULL;
    int st = TN_OK;
    if (rc) {
        cross_rows(ac, bc, rc, d, dt);
        st = tn_copy_(out, rc);
    } else
        st = tn_last_status();
    tn_release(rc);
    tn_release(bc);
    tn_release(ac);
    return st;
}

/* cross: linalg_cross along dim, or where dim is None along the first dim
 * of size 3 (PyTorch's _default_cross_dim; its deprecation warning is not
 * given). */
struct tn_tensor *tn__composite_cross(tn_keyset ks, const struct tn_tensor *self,
                                      const struct tn_tensor *other, const int64_t *dim)
{
    (void)ks;
    int64_t d = -1;
    if (dim)
        d = *dim;
    else {
        for (int i = 0; i < self->ndim && d < 0; i++)
            if (self->sizes[i] == 3)
                d = i;
        if (d < 0)
            return tn_set_error(TN_EINVAL, "no dimension of size 3 in input"), NULL;
    }
    return tn_linalg_cross(self, other, d);
}

/* o[i] = f(x[i], y[i]) over n contiguous elements; dbl: float64 or
 * complex128 inputs. */
typedef void (*pair_fn)(const void *x, const void *y, void *o, int64_t n, bool dbl);

/* fn over a and b broadcast and converted to in_dt (contiguous), into a
 * temporary of tmp_dt copied to a result of out_dt laid out as PyTorch's
 * TensorIterator lays it out. */
static struct tn_tensor *pair_map(const struct tn_tensor *a, const struct tn_tensor *b,
                                  enum tn_dtype in_dt, enum tn_dtype tmp_dt, enum tn_dtype out_dt,
                                  pair_fn fn)
{
    int64_t sizes[TN_MAX_DIMS];
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (tn_broadcast_shapes(a->sizes, a->ndim, b->sizes, b->ndim, sizes) < 0)
        return NULL;
    const struct tn_tensor *in[2] = {a, b};
    struct tn_tensor *r = iter_empty(in, 2, sizes, nd, out_dt);
    struct tn_tensor *x = r ? dense(a, sizes, nd, in_dt) : NULL;
    struct tn_tensor *y = x ? dense(b, sizes, nd, in_dt) : NULL;
    struct tn_tensor *z = y ? tn_empty(sizes, nd, tmp_dt) : NULL;
    if (z)
        fn(tn_data(x), tn_data(y), tn_data(z), tn_numel(z),
           in_dt == TN_FLOAT64 || in_dt == TN_COMPLEX128);
    if (!z || tn_copy_(r, z) < 0) {
        tn_release(r);
        r = NULL;
    }
    tn_release(z);
    tn_release(y);
    tn_release(x);
    return r;
}

/* abs * cos(angle), abs * sin(angle): interleaved complex parts */
static void polar_loop(const void *x, const void *y, void *o, int64_t n, bool dbl)
{
    if (dbl) {
        const double *m = x, *t = y;
        double *c = o;
        for (int64_t i = 0; i < n; i++)
            c[2 * i] = m[i] * cos(t[i]), c[2 * i + 1] = m[i] * sin(t[i]);
    } else {
        const float *m = x, *t = y;
        float *c = o;
        for (int64_t i = 0; i < n; i++)
            c[2 * i] = m[i] * cosf(t[i]), c[2 * i + 1] = m[i] * sinf(t[i]);
    }
}

/* x * pow(2, y) */
static void ldexp_loop(const void *x, const void *y, void *o, int64_t n, bool dbl)
{
    if (dbl) {
        const double *m = x, *t = y;
        double *r = o;
        for (int64_t i = 0; i < n; i++)
            r[i] = m[i] * pow(2.0, t[i]);
    } else {
        const float *m = x, *t = y;
        float *r = o;
        for (int64_t i = 0; i < n; i++)
            r[i] = m[i] * powf(2.0f, t[i]);
    }
}

/* x * cpow(2, y) over complex elements (dbl: complex128) */
static void ldexp_complex_loop(const void *x, const void *y, void *o, int64_t n, bool dbl)
{
    if (dbl) {
        const double complex *m = x, *t = y;
        double complex *r = o;
        for (int64_t i = 0; i < n; i++)
            r[i] = m[i] * cpow(2.0, t[i]);
    } else {
        const float complex *m = x, *t = y;
        float complex *r = o;
        for (int64_t i = 0; i < n; i++)
            r[i] = m[i] * cpowf(2.0f, t[i]);
    }
}

/* polar: abs * cos(angle) + i abs * sin(angle) (PyTorch's polar_kernel,
 * libm's cos and sin of the element's type), both inputs float32 or both
 * float64, broadcast; complex32 (from float16) is not a dtype here. */
struct tn_tensor *tn__cpu_polar(tn_keyset ks, const struct tn_tensor *abs,
                                const struct tn_tensor *angle)
{
    (void)ks;
    enum tn_dtype a = abs->dtype, b = angle->dtype;
    bool fa = a == TN_FLOAT32 || a == TN_FLOAT64 || a == TN_FLOAT16;
    bool fb = b == TN_FLOAT32 || b == TN_FLOAT64 || b == TN_FLOAT16;
    if (!fa || !fb)
        return tn_set_error(TN_EDTYPE, "Expected both inputs to be Half, Float or Double tensors "
                            "but got %s and %s", tn_dtype_info(a)->c10_name,
                            tn_dtype_info(b)->c10_name), NULL;
    if (a != b)
        return tn_set_error(TN_EDTYPE, "Expected object of scalar type %s but got scalar type %s "
                            "for second argument", tn_dtype_info(a)->c10_name,
                            tn_dtype_info(b)->c10_name), NULL;
    if (a == TN_FLOAT16)
        return tn_set_error(TN_EDTYPE, "polar: float16 inputs give complex32 (ComplexHalf), "
                            "which tensorkit does not have"), NULL;
    enum tn_dtype cdt = a == TN_FLOAT32 ? TN_COMPLEX64 : TN_COMPLEX128;
    return pair_map(abs, angle, a, cdt, cdt, polar_loop);
}

/* mantissa and exponent of every element of x (float32 or float64; float16
 * and bfloat16 in float32: std::frexp through float) into the contiguous m
 * (self's dtype) and e. */
static void frexp_rows(const struct tn_tensor *x, struct tn_tensor *m, struct tn_tensor *e)
{
    int64_t n = tn_numel(x);
    int32_t *ex = tn_data(e);
    if (x->dtype == TN_FLOAT64) {
        const double *v = tn_data(x);
        double *mv = tn_data(m);
        for (int64_t i = 0; i < n; i++) {
            int k = 0;
            mv[i] = frexp(v[i], &k);
            ex[i] = k;
        }
    } else {
        const float *v = tn_data(x);
        char *mv = tn_data(m);
        for (int64_t i = 0; i < n; i++) {
            int k = 0;
            float f = frexpf(v[i], &k);
            ex[i] = k;
            /* c10's scalar conversion, as PyTorch's frexp: a NaN 0x7fc0
             * (copy_'s vector one, as PyTorch's .to(), gives 0xffff) */
            if (m->dtype == TN_FLOAT32)
                ((float *)mv)[i] = f;
            else if (m->dtype == TN_BFLOAT16)
                ((tn_bfloat16 *)mv)[i] = tn_bfloat16_from_float(f);
            else
                ((tn_half *)mv)[i] = tn_half_from_float(f);
        }
    }
}

/* frexp into mantissa (self's dtype) and exponent (int32), both of self's
 * shape; PyTorch's floating-point check. */
static int frexp_into(const struct tn_tensor *self, struct tn_tensor *mantissa,
                      struct tn_tensor *exponent)
{
    enum tn_dtype cdt = self->dtype == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
    struct tn_tensor *x = dense(self, self->sizes, self->ndim, cdt);
    struct tn_tensor *m = x ? tn_empty(self->sizes, self->ndim, self->dtype) : NULL;
    struct tn_tensor *e = m ? tn_empty(self->sizes, self->ndim, TN_INT32) : NULL;
    int st = e ? TN_OK : tn_last_status();
    if (e) {
        frexp_rows(x, m, e);
        st = tn_copy_(mantissa, m);
        if (st >= 0)
            st = tn_copy_(exponent, e);
    }
    tn_release(e);
    tn_release(m);
    tn_release(x);
    return st;
}

static int frexp_check(const struct tn_tensor *self)
{
    if (!tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "torch.frexp() only supports floating-point dtypes");
    return TN_OK;
}

int tn__cpu_frexp(tn_keyset ks, const struct tn_tensor *self, struct tn_tensor **mantissa,
                  struct tn_tensor **exponent)
{
    (void)ks;
    if (frexp_check(self) < 0)
        return tn_last_status();
    const struct tn_tensor *in[1] = {self};
    *mantissa = iter_empty(in, 1, self->sizes, self->ndim, self->dtype);
    *exponent = *mantissa ? iter_empty(in, 1, self->sizes, self->ndim, TN_INT32) : NULL;
    int st = *exponent ? frexp_into(self, *mantissa, *exponent) : tn_last_status();
    if (st >= 0)
        return TN_OK;
    tn_release(*mantissa);
    tn_release(*exponent);
    *mantissa = *exponent = NULL;
    return st;
}

/* frexp.Tensor_out: PyTorch's dtype checks (mantissa of self's dtype,
 * exponent int32, in its C++ type names), then both resized to self's
 * shape. */
int tn__cpu_frexp_out(tn_keyset ks, const struct tn_tensor *self, struct tn_tensor *mantissa,
                      struct tn_tensor *exponent)
{
    (void)ks;
    if (frexp_check(self) < 0)
        return tn_last_status();
    if (mantissa->dtype != self->dtype)
        return tn_set_error(TN_EDTYPE, "torch.frexp() expects mantissa to have dtype %s but got %s",
                            tn__dtype_meta_name(self->dtype),
                            tn__dtype_meta_name(mantissa->dtype));
    if (exponent->dtype != TN_INT32)
        return tn_set_error(TN_EDTYPE, "torch.frexp() expects exponent to have int dtype but got %s",
                            tn__dtype_meta_name(exponent->dtype));
    struct tn_meta m = {.ndim = self->ndim, .dtype = self->dtype};
    memcpy(m.sizes, self->sizes, sizeof m.sizes[0] * (size_t)self->ndim);
    struct tn_meta ms[2] = {m, m};
    ms[1].dtype = TN_INT32;
    struct tn_tensor *outs[2] = {mantissa, exponent}, *target[2];
    int k = 0;
    int st = tn_dispatch_prepare_outs(TN_OK, ms, 2, outs, false, target, &k);
    if (st >= 0)
        st = frexp_into(self, target[0], target[1]);
    return tn_dispatch_finish_outs(st, outs, target, k);
}

/* ldexp: self * 2^other in result_type(self, other) (the default float32
 * for integers and bool), computed in float (double for float64) as
 * PyTorch's ldexp kernel: pow(2, other) times self, rounded once to the
 * result's dtype; a bool exponent of a floating self is refused as its;
 * complex: self * cpow(2, other) in the complex dtype (close to PyTorch's,
 * not checked bit for bit). */
struct tn_tensor *tn__cpu_ldexp(tn_keyset ks, const struct tn_tensor *self,
                                const struct tn_tensor *other)
{
    (void)ks;
    const struct tn_tensor *in[2] = {self, other};
    enum tn_dtype dt = tn_result_type(in, 2, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    if (!tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt))
        dt = TN_FLOAT32;
    if (other->dtype == TN_BOOL && tn_dtype_is_floating(self->dtype))
        return tn_set_error(TN_EDTYPE, "\"ldexp_cpu_exp\" not implemented for 'Bool'"), NULL;
    if (tn_dtype_is_complex(dt)) /* self * cpow(2, other) in the complex dtype */
        return pair_map(self, other, dt, dt, dt, ldexp_complex_loop);
    enum tn_dtype cdt = dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
    return pair_map(self, other, cdt, cdt, dt, ldexp_loop);
}
