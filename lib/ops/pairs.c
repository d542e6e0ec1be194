/*
 * ops/pairs.c: cross products as PyTorch 2.x computes them (Cross.cpp's
 * linalg_cross meta function, its words, and CrossKernel.cpp's apply_cross).
 * Its CPU kernel, compiled with FMA contraction, computes each component
 * a1 * b2 - a2 * b1 as fma(a1, b2, -(a2 * b1)) for float32, float64 and the
 * parts of complex128's products (c10::complex's a*c - b*d and a*d + b*c),
 * plainly for complex64; float16 and bfloat16 round each product and the
 * difference (c10's Half and BFloat16 operators); integers wrap. Checked bit
 * for bit against PyTorch 2.x on 20000 random rows of each (AVX2 build).
 */
#include <config.h>

#include <complex.h>
#include <math.h>

#include "ops/internal.h"

/* linalg_cross's meta function: same number of dims, size 3 along dim (the
 * dim as given, as PyTorch prints it), the other dims broadcast; self's
 * dtype, contiguous. */
int tn__meta_linalg_cross_out(const struct tn_tensor *self, const struct tn_tensor *other,
                              int64_t dim, struct tn_meta *m)
{
    if (self->ndim != other->ndim)
        return tn_set_error(TN_EINVAL,
                            "linalg.cross: inputs must have the same number of dimensions.");
    if (self->ndim == 0)
        return tn_set_error(TN_EINDEX, "Dimension specified as %lld but tensor has no dimensions",
                            (long long)dim);
    int d = tn_wrap_dim(dim, self->ndim);
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
    struct tn_tensor *ae = tn_expand(self, out->sizes, out->ndim);
    struct tn_tensor *be = ae ? tn_expand(other, out->sizes, out->ndim) : NULL;
    struct tn_tensor *ac = be ? tn_to_dtype(ae, cdt) : NULL, *acc = ac ? tn_contiguous(ac) : NULL;
    struct tn_tensor *bc = acc ? tn_to_dtype(be, cdt) : NULL, *bcc = bc ? tn_contiguous(bc) : NULL;
    struct tn_tensor *rc = bcc ? tn_empty(out->sizes, out->ndim, cdt) : NULL;
    int rc_ = TN_OK;
    if (rc) {
        cross_rows(acc, bcc, rc, d, dt);
        rc_ = tn_copy_(out, rc);
    } else
        rc_ = tn_last_status();
    tn_release(rc);
    tn_release(bcc);
    tn_release(bc);
    tn_release(acc);
    tn_release(ac);
    tn_release(be);
    tn_release(ae);
    return rc_;
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
