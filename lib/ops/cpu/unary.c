/*
 * ops/cpu/unary.c: elementwise unary kernels on the CPU. One loop per
 * (op, dtype) from X-macros, contiguous or strided; float16/bfloat16
 * compute in float; an integer input of a floating op is converted to the
 * output's dtype first.
 */
#include <config.h>

#include <complex.h>
#include <math.h>
#include <string.h>

#include "ops/internal.h"

#define TN_ULOOP(NAME, IT, OT, CT, LD, ST, EXPR)                                               \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx)                         \
    {                                                                                          \
        if (s[0] == sizeof(OT) && s[1] == sizeof(IT)) {                                        \
            OT *O = (OT *)p[0];                                                                \
            const IT *A = (const IT *)p[1];                                                    \
            for (int64_t i = 0; i < n; i++) {                                                  \
                CT x = LD(A[i]);                                                               \
                ST(O[i], (EXPR));                                                              \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                  \
                CT x = LD(*(const IT *)(p[1] + i * s[1]));                                     \
                ST(*(OT *)(p[0] + i * s[0]), (EXPR));                                          \
            }                                                                                  \
        }                                                                                      \
    }

#define LD_ID(v) (v)
#define ST_ID(d, v) ((d) = (v))
#define LD_H(v) tn_half_to_float(v)
#define ST_H(d, v) ((d) = tn_half_from_float(v))
#define LD_BF(v) tn_bfloat16_to_float(v)
#define ST_BF(d, v) ((d) = tn_bfloat16_from_float(v))

enum { U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_SIN, U_COS, U_TANH, U_SIGMOID, U_RELU,
       U_EXP2, U_EXPM1, U_LOG2, U_LOG10, U_LOG1P, U_RSQRT, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ERF, U_RECIPROCAL, U_NUM };

#define TN_FLOAT_ULOOPS(SFX, IT, CT, LD, ST, F)                                                \
    TN_ULOOP(neg_##SFX, IT, IT, CT, LD, ST, -x)                                                \
    TN_ULOOP(abs_##SFX, IT, IT, CT, LD, ST, F(fabs)(x))                                        \
    TN_ULOOP(exp_##SFX, IT, IT, CT, LD, ST, F(exp)(x))                                         \
    TN_ULOOP(log_##SFX, IT, IT, CT, LD, ST, F(log)(x))                                         \
    TN_ULOOP(sqrt_##SFX, IT, IT, CT, LD, ST, F(sqrt)(x))                                       \
    TN_ULOOP(sin_##SFX, IT, IT, CT, LD, ST, F(sin)(x))                                         \
    TN_ULOOP(cos_##SFX, IT, IT, CT, LD, ST, F(cos)(x))                                         \
    TN_ULOOP(tanh_##SFX, IT, IT, CT, LD, ST, F(tanh)(x))                                       \
    TN_ULOOP(sigmoid_##SFX, IT, IT, CT, LD, ST, (CT)1 / ((CT)1 + F(exp)(-x)))                  \
    TN_ULOOP(exp2_##SFX, IT, IT, CT, LD, ST, F(exp2)(x))                                       \
    TN_ULOOP(expm1_##SFX, IT, IT, CT, LD, ST, F(expm1)(x))                                     \
    TN_ULOOP(log2_##SFX, IT, IT, CT, LD, ST, F(log2)(x))                                       \
    TN_ULOOP(log10_##SFX, IT, IT, CT, LD, ST, F(log10)(x))                                     \
    TN_ULOOP(log1p_##SFX, IT, IT, CT, LD, ST, F(log1p)(x))                                     \
    TN_ULOOP(rsqrt_##SFX, IT, IT, CT, LD, ST, (CT)1 / F(sqrt)(x))                              \
    TN_ULOOP(tan_##SFX, IT, IT, CT, LD, ST, F(tan)(x))                                         \
    TN_ULOOP(asin_##SFX, IT, IT, CT, LD, ST, F(asin)(x))                                       \
    TN_ULOOP(acos_##SFX, IT, IT, CT, LD, ST, F(acos)(x))                                       \
    TN_ULOOP(atan_##SFX, IT, IT, CT, LD, ST, F(atan)(x))                                       \
    TN_ULOOP(sinh_##SFX, IT, IT, CT, LD, ST, F(sinh)(x))                                       \
    TN_ULOOP(cosh_##SFX, IT, IT, CT, LD, ST, F(cosh)(x))                                       \
    TN_ULOOP(erf_##SFX, IT, IT, CT, LD, ST, F(erf)(x))                                         \
    TN_ULOOP(reciprocal_##SFX, IT, IT, CT, LD, ST, (CT)1 / x)                                  \
    TN_ULOOP(relu_##SFX, IT, IT, CT, LD, ST, x > 0 ? x : (isnan(x) ? x : (CT)0))

#define FN_F(fn) fn##f
#define FN_D(fn) fn
TN_FLOAT_ULOOPS(f32, float, float, LD_ID, ST_ID, FN_F)
TN_FLOAT_ULOOPS(f64, double, double, LD_ID, ST_ID, FN_D)
TN_FLOAT_ULOOPS(f16, tn_half, float, LD_H, ST_H, FN_F)
TN_FLOAT_ULOOPS(bf16, tn_bfloat16, float, LD_BF, ST_BF, FN_F)

/* integers: neg and abs wrap (computed unsigned), relu clamps at 0 */
#define TN_INT_ULOOPS(SFX, T)                                                                  \
    TN_ULOOP(neg_##SFX, T, T, T, LD_ID, ST_ID, (T)(0 - (uint64_t)x))                           \
    TN_ULOOP(abs_##SFX, T, T, T, LD_ID, ST_ID, x < 0 ? (T)(0 - (uint64_t)x) : x)               \
    TN_ULOOP(relu_##SFX, T, T, T, LD_ID, ST_ID, x > 0 ? x : (T)0)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
TN_INT_ULOOPS(i64, int64_t)
TN_INT_ULOOPS(i32, int32_t)
TN_INT_ULOOPS(i16, int16_t)
TN_INT_ULOOPS(i8, int8_t)
TN_INT_ULOOPS(u8, uint8_t)
#pragma GCC diagnostic pop

TN_ULOOP(neg_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, -x)
TN_ULOOP(abs_c64, tn_complex64, float, tn_complex64, LD_ID, ST_ID, cabsf(x))
TN_ULOOP(exp_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, cexpf(x))
TN_ULOOP(log_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, clogf(x))
TN_ULOOP(sqrt_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, csqrtf(x))
TN_ULOOP(sin_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, csinf(x))
TN_ULOOP(cos_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, ccosf(x))
TN_ULOOP(tanh_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, ctanhf(x))
TN_ULOOP(sigmoid_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID,
         1.0f / (1.0f + cexpf(-x)))

TN_ULOOP(tan_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, ctanf(x))
TN_ULOOP(asin_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, casinf(x))
TN_ULOOP(acos_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, cacosf(x))
TN_ULOOP(atan_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, catanf(x))
TN_ULOOP(sinh_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, csinhf(x))
TN_ULOOP(cosh_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, ccoshf(x))
TN_ULOOP(reciprocal_c64, tn_complex64, tn_complex64, tn_complex64, LD_ID, ST_ID, 1.0f / x)

#define ROW_F(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,  \
                  [TN_BFLOAT16] = op##_bf16, [TN_COMPLEX64] = op##_c64
#define ROW_R(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,  \
                  [TN_BFLOAT16] = op##_bf16
#define ROW_I(op) [TN_INT64] = op##_i64, [TN_INT32] = op##_i32, [TN_INT16] = op##_i16,         \
                  [TN_INT8] = op##_i8, [TN_UINT8] = op##_u8
static const tn_iter_fn uloops[U_NUM][TN_NUM_DTYPES] = {
    [U_NEG] = {ROW_F(neg), ROW_I(neg)},
    [U_ABS] = {ROW_F(abs), ROW_I(abs)},
    [U_EXP] = {ROW_F(exp)},
    [U_LOG] = {ROW_F(log)},
    [U_SQRT] = {ROW_F(sqrt)},
    [U_SIN] = {ROW_F(sin)},
    [U_COS] = {ROW_F(cos)},
    [U_TANH] = {ROW_F(tanh)},
    [U_SIGMOID] = {ROW_F(sigmoid)},
    [U_EXP2] = {ROW_R(exp2)},
    [U_EXPM1] = {ROW_R(expm1)},
    [U_LOG2] = {ROW_R(log2)},
    [U_LOG10] = {ROW_R(log10)},
    [U_LOG1P] = {ROW_R(log1p)},
    [U_RSQRT] = {ROW_R(rsqrt)},
    [U_TAN] = {ROW_F(tan)},
    [U_ASIN] = {ROW_F(asin)},
    [U_ACOS] = {ROW_F(acos)},
    [U_ATAN] = {ROW_F(atan)},
    [U_SINH] = {ROW_F(sinh)},
    [U_COSH] = {ROW_F(cosh)},
    [U_ERF] = {ROW_R(erf)},
    [U_RECIPROCAL] = {ROW_F(reciprocal)},
    [U_RELU] = {[TN_FLOAT32] = relu_f32, [TN_FLOAT64] = relu_f64, [TN_FLOAT16] = relu_f16,
                [TN_BFLOAT16] = relu_bf16, ROW_I(relu)},
};
static const char *const unames[U_NUM] = {"neg_cpu", "abs_cpu", "exp_vml_cpu", "log_vml_cpu",
                                          "sqrt_vml_cpu", "sin_vml_cpu", "cos_vml_cpu",
                                          "tanh_vml_cpu", "sigmoid_cpu", "clamp_min_cpu",
                                          "exp2_cpu", "expm1_cpu", "log2_cpu", "log10_cpu", "log1p_cpu", "rsqrt_cpu", "tan_cpu", "asin_cpu", "acos_cpu", "atan_cpu", "sinh_cpu", "cosh_cpu", "erf_cpu", "reciprocal_cpu"};

/* out = op(self); self converted to the loop's input dtype first (out's,
 * except for abs of complex). */
static int unary(int op, const struct tn_tensor *self, struct tn_tensor *out)
{
    enum tn_dtype in = op == U_ABS && self->dtype == TN_COMPLEX64 ? TN_COMPLEX64 : out->dtype;
    tn_iter_fn fn = uloops[op][in];
    if (!fn)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", unames[op],
                            tn_dtype_info(in)->c10_name);
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *c = tn_to_dtype(self, in);
    if (!c)
        return tn_last_status();
    struct tn_iter it;
    char *base[2] = {tn_data(out), tn_data(c)};
    const int64_t *strides[2] = {out->strides, c->strides};
    size_t el[2] = {tn_dtype_size(out->dtype), tn_dtype_size(in)};
    tn__iter_init(&it, 2, out->sizes, out->ndim, base, strides, el);
    tn__iter_run(&it, fn, NULL, TN_PARALLEL_GRAIN);
    tn_release(c);
    return TN_OK;
}

#define TN_UNARY_KERNEL(name, OP)                                                              \
    int tn__cpu_##name##_out(tn_keyset ks, const struct tn_tensor *self, struct tn_tensor *out) \
    {                                                                                          \
        return unary(OP, self, out);                                                           \
    }
TN_UNARY_KERNEL(neg, U_NEG)
TN_UNARY_KERNEL(abs, U_ABS)
TN_UNARY_KERNEL(exp, U_EXP)
TN_UNARY_KERNEL(log, U_LOG)
TN_UNARY_KERNEL(sqrt, U_SQRT)
TN_UNARY_KERNEL(sin, U_SIN)
TN_UNARY_KERNEL(cos, U_COS)
TN_UNARY_KERNEL(tanh, U_TANH)
TN_UNARY_KERNEL(sigmoid, U_SIGMOID)
TN_UNARY_KERNEL(exp2, U_EXP2)
TN_UNARY_KERNEL(expm1, U_EXPM1)
TN_UNARY_KERNEL(log2, U_LOG2)
TN_UNARY_KERNEL(log10, U_LOG10)
TN_UNARY_KERNEL(log1p, U_LOG1P)
TN_UNARY_KERNEL(rsqrt, U_RSQRT)
TN_UNARY_KERNEL(tan, U_TAN)
TN_UNARY_KERNEL(asin, U_ASIN)
TN_UNARY_KERNEL(acos, U_ACOS)
TN_UNARY_KERNEL(atan, U_ATAN)
TN_UNARY_KERNEL(sinh, U_SINH)
TN_UNARY_KERNEL(cosh, U_COSH)
TN_UNARY_KERNEL(erf, U_ERF)
TN_UNARY_KERNEL(reciprocal, U_RECIPROCAL)

static int relu_check(const struct tn_tensor *self)
{
    if (self->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Boolean inputs not supported for relu");
    if (self->dtype == TN_COMPLEX64)
        return tn_set_error(TN_EDTYPE, "clamp is not supported for complex types");
    return TN_OK;
}

struct tn_tensor *tn__cpu_relu(tn_keyset ks, const struct tn_tensor *self)
{
    if (relu_check(self) < 0)
        return NULL;
    struct tn_tensor *out = tn_empty_like(self, TN_DTYPE_UNSET);
    if (out && unary(U_RELU, self, out) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

int tn__cpu_relu_(tn_keyset ks, struct tn_tensor *self)
{
    int rc = relu_check(self);
    if (rc == 0) {
        self->storage->version++;
        rc = unary(U_RELU, self, self);
    }
    return rc;
}
