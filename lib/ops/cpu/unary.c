/*
 * ops/cpu/unary.c: elementwise unary kernels on the CPU. One loop per
 * (op, dtype) from X-macros, contiguous or strided; float16/bfloat16
 * compute in float; an integer input of a floating op is converted to the
 * output's dtype first.
 */
#include <config.h>

#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/cpu/kernel.h"

#define TN_ULOOP(NAME, IT, OT, CT, LD, ST, EXPR)                                               \
    TN_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, void *ctx)                         \
    {                                                                                          \
        const double *P = ctx; /* the op's scalar arguments, if any */                         \
        (void)P;                                                                               \
        if (s[0] == sizeof(OT) && s[1] == sizeof(IT)) {                                        \
            OT *O = (OT *)p[0];                                                                \
            const IT *A = (const IT *)p[1];                                                    \
            TN_IVDEP for (int64_t i = 0; i < n; i++) {                                                  \
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


enum { U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_SIN, U_COS, U_TANH, U_SIGMOID, U_RELU,
       U_EXP2, U_EXPM1, U_LOG2, U_LOG10, U_LOG1P, U_RSQRT, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ERF, U_RECIPROCAL,
       U_SIGN, U_FLOOR, U_CEIL, U_ROUND, U_TRUNC, U_FRAC, U_ERFINV, U_BITWISE_NOT, U_LOGICAL_NOT,
       U_SILU, U_MISH, U_GELU, U_GELU_TANH, U_LEAKY_RELU, U_HARDTANH, U_ELU, U_SOFTPLUS, U_ISNAN,
       U_ISINF, U_LOGIT, U_LOGIT_EPS, U_NAN_TO_NUM, U_CLAMP, U_ACOSH, U_ASINH, U_ATANH,
       U_LGAMMA, U_DIGAMMA, U_POLYGAMMA, U_SGN, U_ANGLE,
       U_NUM };

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
    TN_ULOOP(acosh_##SFX, IT, IT, CT, LD, ST, F(acosh)(x))                                     \
    TN_ULOOP(asinh_##SFX, IT, IT, CT, LD, ST, F(asinh)(x))                                     \
    TN_ULOOP(atanh_##SFX, IT, IT, CT, LD, ST, F(atanh)(x))                                     \
    TN_ULOOP(sinh_##SFX, IT, IT, CT, LD, ST, F(sinh)(x))                                       \
    TN_ULOOP(cosh_##SFX, IT, IT, CT, LD, ST, F(cosh)(x))                                       \
    TN_ULOOP(erf_##SFX, IT, IT, CT, LD, ST, F(erf)(x))                                         \
    TN_ULOOP(reciprocal_##SFX, IT, IT, CT, LD, ST, (CT)1 / x)                                  \
    TN_ULOOP(relu_##SFX, IT, IT, CT, LD, ST, x > 0 ? x : (isnan(x) ? x : (CT)0))

#define FN_F(fn) fn##f
#define FN_D(fn) fn
TN_FLOAT_ULOOPS(f32, float, float, LD_ID, ST_ID, FN_F)

#ifdef __SSE2__
#include <emmintrin.h>

/* relu_f32 over contiguous runs, four at a time and without branches:
 * max(x, 0) (+0 for -0), x itself where x is NaN. The scalar loop's
 * NaN test is a branch that random signs mispredict half the time. */
static void relu_f32_sse2(char **p, const int64_t *s, int64_t n, void *ctx)
{
    if (s[0] != sizeof(float) || s[1] != sizeof(float)) {
        relu_f32(p, s, n, ctx);
        return;
    }
    float *o = (float *)(void *)p[0];
    const float *a = (const float *)(const void *)p[1];
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 x = _mm_loadu_ps(a + i), nan = _mm_cmpunord_ps(x, x);
        __m128 m = _mm_max_ps(x, _mm_setzero_ps());
        _mm_storeu_ps(o + i, _mm_or_ps(_mm_and_ps(nan, x), _mm_andnot_ps(nan, m)));
    }
    char *q[2] = {(char *)(o + i), (char *)(a + i)};
    relu_f32(q, s, n - i, ctx);
}
#define RELU_F32 relu_f32_sse2
#else
#define RELU_F32 relu_f32
#endif
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

/* complex of T, its real type R, C's functions F(cexp) (cexpf or cexp);
 * exp2, expm1, log2, log10, log1p and rsqrt in double: expm1 and log1p by
 * their real and imaginary parts, so that a small z keeps its digits
 * (cexp(z) - 1 would lose them). */
static inline double _Complex expm1_z(double _Complex z)
{
    double x = creal(z), y = cimag(z), s = sin(y / 2);
    return tn__complex128(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}

static inline double _Complex log1p_z(double _Complex z)
{
    double x = creal(z), y = cimag(z);
    if (fabs(x) >= 0.5 || fabs(y) >= 0.5)
        return clog(1 + z);
    return tn__complex128(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));
}
/* sgn: z / |z| (each part divided by |z|, as PyTorch's vectorised sgn), 0
 * at 0 */
#define TN_SGN(SFX, T, R, ABS)                                                                 \
    static inline T sgn_z_##SFX(T z)                                                           \
    {                                                                                          \
        R r = ABS(z);                                                                          \
        return r == 0 ? (T)0 : CPX_##SFX(__real__ z / r, __imag__ z / r);                      \
    }
TN_SGN(c64, tn_complex64, float, cabsf)
TN_SGN(c128, tn_complex128, double, cabs)

/* op_SFX(x) = C's c<op> of the part type (F(cexp): cexpf or cexp) */
#define TN_CPX_FN(op, SFX, T, F) TN_ULOOP(op##_##SFX, T, T, T, LD_ID, ST_ID, F(c##op)(x))
#define TN_CPX_ULOOPS(SFX, T, R, F)                                                            \
    TN_CPX_FN(exp, SFX, T, F) TN_CPX_FN(log, SFX, T, F) TN_CPX_FN(sqrt, SFX, T, F)             \
    TN_CPX_FN(sin, SFX, T, F) TN_CPX_FN(cos, SFX, T, F) TN_CPX_FN(tan, SFX, T, F)              \
    TN_CPX_FN(asin, SFX, T, F) TN_CPX_FN(acos, SFX, T, F) TN_CPX_FN(atan, SFX, T, F)           \
    TN_CPX_FN(sinh, SFX, T, F) TN_CPX_FN(cosh, SFX, T, F) TN_CPX_FN(tanh, SFX, T, F)           \
    TN_CPX_FN(asinh, SFX, T, F) TN_CPX_FN(acosh, SFX, T, F) TN_CPX_FN(atanh, SFX, T, F)        \
    TN_ULOOP(neg_##SFX, T, T, T, LD_ID, ST_ID, -x)                                             \
    TN_ULOOP(abs_##SFX, T, R, T, LD_ID, ST_ID, F(cabs)(x))                                     \
    TN_ULOOP(sgn_##SFX, T, T, T, LD_ID, ST_ID, sgn_z_##SFX(x))                                 \
    TN_ULOOP(angle_##SFX, T, R, T, LD_ID, ST_ID, F(carg)(x))                                   \
    TN_ULOOP(sigmoid_##SFX, T, T, T, LD_ID, ST_ID, (R)1 / ((R)1 + F(cexp)(-x)))                \
    TN_ULOOP(reciprocal_##SFX, T, T, T, LD_ID, ST_ID, cdiv_##SFX(1, x))                        \
    TN_ULOOP(exp2_##SFX, T, T, T, LD_ID, ST_ID, (T)cexp((double _Complex)x * M_LN2))           \
    TN_ULOOP(expm1_##SFX, T, T, T, LD_ID, ST_ID, (T)expm1_z(x))                                \
    TN_ULOOP(log2_##SFX, T, T, T, LD_ID, ST_ID, (T)(clog((double _Complex)x) / M_LN2))         \
    TN_ULOOP(log10_##SFX, T, T, T, LD_ID, ST_ID, (T)(clog((double _Complex)x) / M_LN10))       \
    TN_ULOOP(log1p_##SFX, T, T, T, LD_ID, ST_ID, (T)log1p_z(x))                                \
    TN_ULOOP(rsqrt_##SFX, T, T, T, LD_ID, ST_ID, (T)(1 / csqrt((double _Complex)x)))           \
    TN_ULOOP(silu_##SFX, T, T, T, LD_ID, ST_ID, x / ((R)1 + F(cexp)(-x)))                      \
    TN_ULOOP(isnan_##SFX, T, bool, T, LD_ID, ST_ID, isnan(__real__ x) || isnan(__imag__ x))    \
    TN_ULOOP(isinf_##SFX, T, bool, T, LD_ID, ST_ID, isinf(__real__ x) || isinf(__imag__ x))    \
    TN_ULOOP(nan_to_num_##SFX, T, T, T, LD_ID, ST_ID,                                          \
             CPX_##SFX((R)nan_to_num_d(__real__ x, P), (R)nan_to_num_d(__imag__ x, P)))         \
    TN_ULOOP(logical_not_##SFX, T, bool, T, LD_ID, ST_ID, x == 0)

/* erfinv has no C library function: a polynomial first guess (after Giles,
 * "Approximating the erfinv function") refined by two Newton steps on erf
 * in double. */
static double erfinv_d(double x)
{
    if (isnan(x) || x < -1 || x > 1)
        return NAN;
    if (x == 1 || x == -1)
        return x * INFINITY;
    double w = -log((1 - x) * (1 + x)), p;
    if (w < 5) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    double y = p * x;
    for (int i = 0; i < 2; i++) {
        double d = 2 / sqrt(M_PI) * exp(-y * y);
        if (d == 0)
            break;
        y -= (erf(y) - x) / d;
    }
    return y;
}

/* digamma (psi) as PyTorch's calc_digamma: +-inf at +-0, NaN at the
 * negative integers, the reflection formula below 0 (on x's fraction, for
 * tan's accuracy), then x pushed up to 10 and the asymptotic series. */
static double digamma_d(double x)
{
    static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                               7.57575757575757575758E-3, -4.16666666666666666667E-3,
                               3.96825396825396825397E-3, -8.33333333333333333333E-3,
                               8.33333333333333333333E-2};
    if (x == 0)
        return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == trunc(x))
            return NAN;
        double q, r = modf(x, &q);
        return digamma_d(1 - x) - M_PI / tan(M_PI * r);
    }
    double result = 0;
    for (; x < 10; x += 1)
        result -= 1 / x;
    if (x == 10)
        return result + 2.25175258906672110764;
    double y = 0;
    if (x < 1.0e17) {
        double z = 1 / (x * x), p = A[0];
        for (int i = 1; i < 7; i++)
            p = p * z + A[i];
        y = z * p;
    }
    return result + log(x) - 0.5 / x - y;
}

/* Hurwitz's zeta(x, q) as PyTorch's zeta (Cephes): the sum of (q + k)^-x
 * up to k = 9 (or sooner, converged), then the Euler-Maclaurin tail with
 * Bernoulli's coefficients; accumulated in double. */
static double zeta_d(double x, double q)
{
    static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                               -1.8924375803183791606e9, 7.47242496e10,
                               -2.950130727918164224e12, 1.1646782814350067249e14,
                               -4.5979787224074726105e15, 1.8152105401943546773e17,
                               -7.1661652561756670113e18};
    const double MACHEP = 1.11022302462515654042E-16;
    if (x == 1)
        return INFINITY;
    if (x < 1)
        return NAN;
    if (q <= 0) {
        if (q == floor(q))
            return INFINITY;
        if (x != floor(x))
            return NAN;
    }
    double s = pow(q, -x), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i += 1;
        a += 1;
        b = pow(a, -x);
        s += b;
        if (-MACHEP * s < b && b < MACHEP * s)
            return s;
    }
    double w = a, k = 0, t;
    s += b * w / (x - 1);
    s -= 0.5 * b;
    a = 1;
    for (int j = 0; j < 12; j++) {
        a *= x + k;
        b /= w;
        t = a * b / A[j];
        s = s + t;
        t = fabs(t / s);
        if (t < MACHEP)
            return s;
        k += 1;
        a *= x + k;
        b /= w;
        k += 1;
    }
    return s;
}

/* polygamma(n, x) as PyTorch's kernels: digamma for n 0, calc_trigamma
 * for 1 (in the loop's type, its series' tail in double), else
 * (-1)^(n+1) n! zeta(n + 1, x). */
#define TN_POLYGAMMA(FN, CT, LGAMMA, EXP, SIN)                                                 \
    static CT FN(CT x, int n)                                                                  \
    {                                                                                          \
        if (n == 0)                                                                            \
            return (CT)digamma_d((double)x);                                                   \
        if (n == 1) {                                                                          \
            const CT pi = (CT)M_PI;                                                            \
            CT sign = 1, result = 0;                                                           \
            if (x < 0.5f) {                                                                    \
                sign = -1;                                                                     \
                const CT sin_pi_x = SIN(pi * x);                                               \
                result -= (pi * pi) / (sin_pi_x * sin_pi_x);                                   \
                x = 1 - x;                                                                     \
            }                                                                                  \
            for (int i = 0; i < 6; ++i) {                                                      \
                result += 1 / (x * x);                                                         \
                x += 1;                                                                        \
            }                                                                                  \
            const CT ixx = 1 / (x * x);                                                        \
            result += (CT)((1 + 1 / (2 * x) +                                                  \
                            ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x);          \
            return sign * result;                                                              \
        }                                                                                      \
        return ((n % 2) ? (CT)1 : (CT)-1) * EXP(LGAMMA((CT)n + (CT)1)) *                       \
               (CT)zeta_d((double)(CT)(n + 1), (double)x);                                     \
    }
TN_POLYGAMMA(polygamma_kf, float, lgammaf, expf, sinf)
TN_POLYGAMMA(polygamma_k, double, lgamma, exp, sin)

/* clamp in PyTorch's order, min(max(x, lo), hi), with NaN from x or from
 * a bound propagating; P: lo, hi, has lo, has hi. */
static inline double clamp_d(double x, const double *P)
{
    if (P[2] != 0 && !isnan(x))
        x = isnan(P[0]) || x < P[0] ? P[0] : x;
    if (P[3] != 0 && !isnan(x))
        x = isnan(P[1]) || x > P[1] ? P[1] : x;
    return x;
}

static inline int64_t clamp_i(int64_t x, const double *P)
{
    if (P[2] != 0 && x < (int64_t)P[0])
        x = (int64_t)P[0];
    if (P[3] != 0 && x > (int64_t)P[1])
        x = (int64_t)P[1];
    return x;
}

/* logit of bfloat16 and float16 rounds after each step, as PyTorch's
 * Vectorized<BFloat16> arithmetic does (eps too is taken as the dtype):
 * RND_SFX is that rounding, the identity for float and double. */
#define RND_f32(v) (v)
#define RND_f64(v) (v)
#define RND_bf16(v) tn_bfloat16_to_float(tn_bfloat16_from_float(v))
#define RND_f16(v) tn_half_to_float(tn_half_from_float(v))
#define TN_LOGIT_CLAMP(SFX, CT)                                                                \
    static inline CT logit_clamp_##SFX(CT x, double eps)                                       \
    {                                                                                          \
        CT lo = RND_##SFX((CT)eps), hi = RND_##SFX((CT)1 - lo);                                \
        return x < lo ? lo : (x > hi ? hi : x);                                                \
    }
TN_LOGIT_CLAMP(f32, float)
TN_LOGIT_CLAMP(f64, double)
TN_LOGIT_CLAMP(bf16, float)
TN_LOGIT_CLAMP(f16, float)

/* Second set: rounding, sign, activations. P holds the scalar arguments
 * (leaky_relu: slope; hardtanh: min, max; elu: alpha, scale, input_scale;
 * softplus: beta, threshold). */
#define TN_FLOAT_ULOOPS2(SFX, IT, CT, LD, ST, F)                                               \
    TN_ULOOP(sign_##SFX, IT, IT, CT, LD, ST, (CT)((x > 0) - (x < 0)))                         \
    TN_ULOOP(floor_##SFX, IT, IT, CT, LD, ST, F(floor)(x))                                     \
    TN_ULOOP(ceil_##SFX, IT, IT, CT, LD, ST, F(ceil)(x))                                       \
    TN_ULOOP(round_##SFX, IT, IT, CT, LD, ST, F(nearbyint)(x))                                 \
    TN_ULOOP(trunc_##SFX, IT, IT, CT, LD, ST, F(trunc)(x))                                     \
    TN_ULOOP(frac_##SFX, IT, IT, CT, LD, ST, x - F(trunc)(x))                                  \
    TN_ULOOP(erfinv_##SFX, IT, IT, CT, LD, ST, (CT)erfinv_d((double)x))                      \
    TN_ULOOP(lgamma_##SFX, IT, IT, CT, LD, ST, F(lgamma)(x))                                   \
    TN_ULOOP(digamma_##SFX, IT, IT, CT, LD, ST, (CT)digamma_d((double)x))                    \
    TN_ULOOP(polygamma_##SFX, IT, IT, CT, LD, ST, F(polygamma_k)(x, (int)P[0]))               \
    TN_ULOOP(silu_##SFX, IT, IT, CT, LD, ST, x / ((CT)1 + F(exp)(-x)))                         \
    TN_ULOOP(mish_##SFX, IT, IT, CT, LD, ST, x * F(tanh)(F(log1p)(F(exp)(x))))                 \
    TN_ULOOP(gelu_##SFX, IT, IT, CT, LD, ST, (CT)0.5 * x * ((CT)1 + F(erf)(x * (CT)M_SQRT1_2))) \
    TN_ULOOP(gelu_tanh_##SFX, IT, IT, CT, LD, ST,                                              \
             (CT)0.5 * x *                                                                     \
                 ((CT)1 + F(tanh)((CT)(M_2_SQRTPI * M_SQRT1_2) * (x + (CT)0.044715 * x * x * x)))) \
    TN_ULOOP(leaky_relu_##SFX, IT, IT, CT, LD, ST, x > 0 ? x : x * (CT)P[0])                   \
    TN_ULOOP(hardtanh_##SFX, IT, IT, CT, LD, ST,                                               \
             isnan(x) ? x : (x < (CT)P[0] ? (CT)P[0] : (x > (CT)P[1] ? (CT)P[1] : x)))        \
    TN_ULOOP(elu_##SFX, IT, IT, CT, LD, ST,                                                    \
             x <= 0 ? F(expm1)(x * (CT)P[2]) * (CT)(P[0] * P[1]) : x * (CT)P[1])              \
    TN_ULOOP(softplus_##SFX, IT, IT, CT, LD, ST,                                               \
             x * (CT)P[0] > (CT)P[1] ? x : F(log1p)(F(exp)(x * (CT)P[0])) / (CT)P[0])         \
    TN_ULOOP(logit_##SFX, IT, IT, CT, LD, ST, F(log)(RND_##SFX(x / RND_##SFX((CT)1 - x))))     \
    TN_ULOOP(logit_eps_##SFX, IT, IT, CT, LD, ST,                                              \
             F(log)(RND_##SFX(logit_clamp_##SFX(x, P[0]) /                                     \
                              RND_##SFX((CT)1 - logit_clamp_##SFX(x, P[0])))))                 \
    TN_ULOOP(nan_to_num_##SFX, IT, IT, CT, LD, ST,                                             \
             isnan(x) ? (CT)P[0] : (isinf(x) ? (x > 0 ? (CT)P[1] : (CT)P[2]) : x))            \
    TN_ULOOP(clamp_##SFX, IT, IT, CT, LD, ST, clamp_d((double)x, P))                           \
    TN_ULOOP(angle_##SFX, IT, IT, CT, LD, ST, isnan(x) ? x : x < 0 ? (CT)M_PI : (CT)0)         \
    TN_ULOOP(isnan_##SFX, IT, bool, CT, LD, ST_ID, isnan(x))                                   \
    TN_ULOOP(isinf_##SFX, IT, bool, CT, LD, ST_ID, isinf(x))                                   \
    TN_ULOOP(logical_not_##SFX, IT, bool, CT, LD, ST_ID, x == 0)
TN_FLOAT_ULOOPS2(f32, float, float, LD_ID, ST_ID, FN_F)
TN_FLOAT_ULOOPS2(f64, double, double, LD_ID, ST_ID, FN_D)
#ifdef TN_HAVE_AVX2
#include "ops/cpu/vmath.h"

TN_AVX2 static inline __m256 sigmoid8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, tn__exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

TN_AVX2 static inline __m256 silu8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(x, _mm256_add_ps(one, tn__exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* NAME##_f32_run: FN8 over a contiguous run, eight at a time, the n % 8
 * left through a zero-padded block (NAME##_f32_part); outputs of
 * tn__stream_bytes() and more with non-temporal stores from the first
 * 32-byte boundary on (the head through the block: the same bits), not
 * read in before being written, as binary.c's and exp_f32_run16's: there
 * sixteen a step by FN8X2 (FN8 on two vectors in place), the input
 * prefetched 2 KiB ahead (issue 27: exp of 10^7 floats, streamed, went
 * from 72% of a streaming copy's bandwidth to 83%; the hardware prefetcher
 * alone ran too close ahead while the exps took the core) */
#define TN_X2(FN8)                                                                             \
    TN_AVX2 static inline void FN8##_x2(__m256 *v)                                             \
    {                                                                                          \
        v[0] = FN8(v[0]);                                                                      \
        v[1] = FN8(v[1]);                                                                      \
    }
#define TN_VEC8_RUN(NAME, FN8, FN8X2)                                                          \
    TN_AVX2 static void NAME##_f32_part(float *o, const float *a, int64_t n)                   \
    {                                                                                          \
        float b[8] = {0};                                                                      \
        memcpy(b, a, sizeof(float) * (size_t)n);                                               \
        _mm256_storeu_ps(b, FN8(_mm256_loadu_ps(b)));                                          \
        memcpy(o, b, sizeof(float) * (size_t)n);                                               \
    }                                                                                          \
    TN_AVX2 static void NAME##_f32_run(float *o, const float *a, int64_t n)                    \
    {                                                                                          \
        int64_t i = 0;                                                                         \
        if (n * (int64_t)sizeof(float) >= tn__stream_bytes() && (uintptr_t)o % 4 == 0 &&      \
            n >= 8) {                                                                          \
            i = (int64_t)((32 - ((uintptr_t)o & 31)) & 31) / 4;                                \
            if (i)                                                                             \
                NAME##_f32_part(o, a, i);                                                      \
            for (; i + 16 <= n; i += 16) {                                                     \
                _mm_prefetch((const char *)(a + i) + 2048, _MM_HINT_T0);                       \
                __m256 v[2] = {_mm256_loadu_ps(a + i), _mm256_loadu_ps(a + i + 8)};            \
                FN8X2(v);                                                                      \
                _mm256_stream_ps(o + i, v[0]);                                                 \
                _mm256_stream_ps(o + i + 8, v[1]);                                             \
            }                                                                                  \
            for (; i + 8 <= n; i += 8)                                                         \
                _mm256_stream_ps(o + i, FN8(_mm256_loadu_ps(a + i)));                          \
            _mm_sfence();                                                                      \
        }                                                                                      \
        for (; i + 8 <= n; i += 8)                                                             \
            _mm256_storeu_ps(o + i, FN8(_mm256_loadu_ps(a + i)));                              \
        if (i < n)                                                                             \
            NAME##_f32_part(o + i, a + i, n - i);                                              \
    }
TN_X2(tn__gelu8)
TN_X2(sigmoid8)
TN_X2(silu8)
TN_VEC8_RUN(gelu, tn__gelu8, tn__gelu8_x2)
TN_VEC8_RUN(exp, tn__exp8, tn__exp8x2)
TN_VEC8_RUN(sigmoid, sigmoid8, sigmoid8_x2)
TN_VEC8_RUN(silu, silu8, silu8_x2)
#define TN_VEC8_CALL(NAME)                                                                     \
    if (s[0] == sizeof(float) && s[1] == sizeof(float) && tn__have_avx2()) {                   \
        NAME##_f32_run((float *)(void *)p[0], (const float *)(const void *)p[1], n);           \
        return;                                                                                \
    }
#else
#define TN_VEC8_CALL(NAME)
#endif

/* NAME##_f32_vec: contiguous runs eight at a time where the CPU has AVX2
 * (libm's erff and expf one element at a time were nine tenths of gelu,
 * exp, sigmoid and silu), else the scalar loop. */
#define TN_VEC8(NAME)                                                                          \
    static void NAME##_f32_vec(char **p, const int64_t *s, int64_t n, void *ctx)               \
    {                                                                                          \
        TN_VEC8_CALL(NAME)                                                                     \
        NAME##_f32(p, s, n, ctx);                                                              \
    }
TN_VEC8(gelu)
#ifdef TN_HAVE_AVX2
/* exp of a contiguous run sixteen at a time, the tail under a mask */
TN_AVX512 static void exp_f32_run16(float *o, const float *a, int64_t n)
{
    int64_t i = 0;
    if (n * (int64_t)sizeof(float) >= tn__stream_bytes()) {
        /* as binary.c's large outputs: not read in before being written */
        int64_t head = (int64_t)((64 - ((uintptr_t)o & 63)) & 63) / 4;
        if ((uintptr_t)o % 4 == 0 && head < n) {
            if (head) {
                __mmask16 m = (__mmask16)((1u << head) - 1);
                _mm512_mask_storeu_ps(o, m, tn__exp16(_mm512_maskz_loadu_ps(m, a)));
            }
            for (i = head; i + 16 <= n; i += 16)
                _mm512_stream_ps(o + i, tn__exp16(_mm512_loadu_ps(a + i)));
            _mm_sfence();
        }
    }
    for (; i + 32 <= n; i += 32) {
        __m512 e0 = tn__exp16(_mm512_loadu_ps(a + i)), e1 = tn__exp16(_mm512_loadu_ps(a + i + 16));
        _mm512_storeu_ps(o + i, e0);
        _mm512_storeu_ps(o + i + 16, e1);
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, tn__exp16(_mm512_loadu_ps(a + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(o + i, m, tn__exp16(_mm512_maskz_loadu_ps(m, a + i)));
    }
}
#endif
static void exp_f32_vec(char **p, const int64_t *s, int64_t n, void *ctx)
{
#ifdef TN_HAVE_AVX2
    if (s[0] == sizeof(float) && s[1] == sizeof(float) && tn__have_avx512()) {
        exp_f32_run16((float *)(void *)p[0], (const float *)(const void *)p[1], n);
        return;
    }
#endif
    TN_VEC8_CALL(exp)
    exp_f32(p, s, n, ctx);
}
TN_VEC8(sigmoid)
TN_VEC8(silu)

TN_FLOAT_ULOOPS2(f16, tn_half, float, LD_H, ST_H, FN_F)
TN_FLOAT_ULOOPS2(bf16, tn_bfloat16, float, LD_BF, ST_BF, FN_F)

/* integers: rounding is the identity, NaN and infinity never occur */
#define TN_INT_ULOOPS2(SFX, T)                                                                 \
    TN_ULOOP(sign_##SFX, T, T, T, LD_ID, ST_ID, (T)((x > 0) - (x < 0)))                       \
    TN_ULOOP(ident_##SFX, T, T, T, LD_ID, ST_ID, x)                                            \
    TN_ULOOP(bitwise_not_##SFX, T, T, T, LD_ID, ST_ID, (T)~x)                                  \
    TN_ULOOP(hardtanh_##SFX, T, T, T, LD_ID, ST_ID, /* bounds as int64: uint8 and -1 */       \
             (int64_t)x < (int64_t)P[0] ? (T)P[0] : ((int64_t)x > (int64_t)P[1] ? (T)P[1] : x)) \
    TN_ULOOP(clamp_##SFX, T, T, T, LD_ID, ST_ID, (T)clamp_i(x, P))                              \
    TN_ULOOP(isnan_##SFX, T, bool, T, LD_ID, ST_ID, x != x)                                     \
    TN_ULOOP(logical_not_##SFX, T, bool, T, LD_ID, ST_ID, x == 0)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wbool-operation"
TN_INT_ULOOPS2(i64, int64_t)
TN_INT_ULOOPS2(i32, int32_t)
TN_INT_ULOOPS2(i16, int16_t)
TN_INT_ULOOPS2(i8, int8_t)
TN_INT_ULOOPS2(u8, uint8_t)
TN_ULOOP(sign_b, bool, bool, bool, LD_ID, ST_ID, x)
TN_ULOOP(isnan_b, bool, bool, bool, LD_ID, ST_ID, x != x)
TN_ULOOP(bitwise_not_b, bool, bool, bool, LD_ID, ST_ID, !x)
TN_ULOOP(logical_not_b, bool, bool, bool, LD_ID, ST_ID, !x)
#pragma GCC diagnostic pop
static inline double nan_to_num_d(double x, const double *P)
{
    return isnan(x) ? P[0] : (isinf(x) ? (x > 0 ? P[1] : P[2]) : x);
}
TN_CPX_ULOOPS(c64, tn_complex64, float, FN_F)
TN_CPX_ULOOPS(c128, tn_complex128, double, FN_D)

#define ROW_C(op) [TN_COMPLEX64] = op##_c64, [TN_COMPLEX128] = op##_c128
#define ROW_F(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,  \
                  [TN_BFLOAT16] = op##_bf16, ROW_C(op)
/* ROW_F with the AVX2 float32 kernel */
#define ROW_FV(op) [TN_FLOAT32] = op##_f32_vec, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16, \
                   [TN_BFLOAT16] = op##_bf16, ROW_C(op)
#define ROW_R(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,  \
                  [TN_BFLOAT16] = op##_bf16
#define ROW_I(op) [TN_INT64] = op##_i64, [TN_INT32] = op##_i32, [TN_INT16] = op##_i16,         \
                  [TN_INT8] = op##_i8, [TN_UINT8] = op##_u8
static const tn_iter_fn uloops[U_NUM][TN_NUM_DTYPES] = {
    [U_NEG] = {ROW_F(neg), ROW_I(neg)},
    [U_ABS] = {ROW_F(abs), ROW_I(abs)},
    [U_EXP] = {ROW_FV(exp)},
    [U_LOG] = {ROW_F(log)},
    [U_SQRT] = {ROW_F(sqrt)},
    [U_SIN] = {ROW_F(sin)},
    [U_COS] = {ROW_F(cos)},
    [U_TANH] = {ROW_F(tanh)},
    [U_SIGMOID] = {ROW_FV(sigmoid)},
    [U_EXP2] = {ROW_F(exp2)},
    [U_EXPM1] = {ROW_F(expm1)},
    [U_LOG2] = {ROW_F(log2)},
    [U_LOG10] = {ROW_F(log10)},
    [U_LOG1P] = {ROW_F(log1p)},
    [U_RSQRT] = {ROW_F(rsqrt)},
    [U_TAN] = {ROW_F(tan)},
    [U_ASIN] = {ROW_F(asin)},
    [U_ACOS] = {ROW_F(acos)},
    [U_ATAN] = {ROW_F(atan)},
    [U_ACOSH] = {ROW_F(acosh)},
    [U_ASINH] = {ROW_F(asinh)},
    [U_ATANH] = {ROW_F(atanh)},
    [U_SINH] = {ROW_F(sinh)},
    [U_COSH] = {ROW_F(cosh)},
    [U_ERF] = {ROW_R(erf)},
    [U_RECIPROCAL] = {ROW_F(reciprocal)},
    [U_SIGN] = {ROW_R(sign), ROW_I(sign), [TN_BOOL] = sign_b},
    [U_SGN] = {ROW_R(sign), ROW_I(sign), [TN_BOOL] = sign_b, ROW_C(sgn)},
    [U_ANGLE] = {ROW_F(angle)},
    [U_FLOOR] = {ROW_R(floor), ROW_I(ident)},
    [U_CEIL] = {ROW_R(ceil), ROW_I(ident)},
    [U_ROUND] = {ROW_R(round), ROW_I(ident)},
    [U_TRUNC] = {ROW_R(trunc), ROW_I(ident)},
    [U_FRAC] = {ROW_R(frac)},
    [U_ERFINV] = {ROW_R(erfinv)},
    [U_LGAMMA] = {ROW_R(lgamma)},
    [U_DIGAMMA] = {ROW_R(digamma)},
    [U_POLYGAMMA] = {ROW_R(polygamma)},
    [U_BITWISE_NOT] = {ROW_I(bitwise_not), [TN_BOOL] = bitwise_not_b},
    [U_LOGICAL_NOT] = {ROW_R(logical_not), ROW_I(logical_not), [TN_BOOL] = logical_not_b,
                       ROW_C(logical_not)},
    [U_SILU] = {ROW_FV(silu)},
    [U_MISH] = {ROW_R(mish)},
    [U_GELU] = {[TN_FLOAT32] = gelu_f32_vec, [TN_FLOAT64] = gelu_f64, [TN_FLOAT16] = gelu_f16,
                [TN_BFLOAT16] = gelu_bf16},
    [U_GELU_TANH] = {ROW_R(gelu_tanh)},
    [U_LEAKY_RELU] = {ROW_R(leaky_relu)},
    [U_HARDTANH] = {ROW_R(hardtanh), ROW_I(hardtanh)},
    [U_ELU] = {ROW_R(elu)},
    [U_SOFTPLUS] = {ROW_R(softplus)},
    [U_ISNAN] = {ROW_F(isnan), ROW_I(isnan), [TN_BOOL] = isnan_b},
    [U_ISINF] = {ROW_F(isinf), ROW_I(isnan), [TN_BOOL] = isnan_b},
    [U_LOGIT] = {ROW_R(logit)},
    [U_LOGIT_EPS] = {ROW_R(logit_eps)},
    [U_CLAMP] = {ROW_R(clamp), ROW_I(clamp)},
    [U_NAN_TO_NUM] = {ROW_F(nan_to_num), ROW_I(ident), [TN_BOOL] = sign_b},
    [U_RELU] = {[TN_FLOAT32] = RELU_F32, [TN_FLOAT64] = relu_f64, [TN_FLOAT16] = relu_f16,
                [TN_BFLOAT16] = relu_bf16, ROW_I(relu)},
};
static const char *const unames[U_NUM] = {"neg_cpu", "abs_cpu", "exp_vml_cpu", "log_vml_cpu",
                                          "sqrt_vml_cpu", "sin_vml_cpu", "cos_vml_cpu",
                                          "tanh_vml_cpu", "sigmoid_cpu", "clamp_min_cpu",
                                          "exp2_cpu", "expm1_cpu", "log2_cpu", "log10_cpu", "log1p_cpu", "rsqrt_cpu", "tan_cpu", "asin_cpu", "acos_cpu", "atan_cpu", "sinh_cpu", "cosh_cpu", "erf_vml_cpu", "reciprocal_cpu",
                                          "sign_cpu", "floor_vml_cpu", "ceil_vml_cpu", "round_vml_cpu", "trunc_vml_cpu", "frac_cpu", "erfinv_vml_cpu", "bitwise_not_cpu", "logical_not_cpu", "silu_cpu", "mish_cpu", "GeluKernelImpl", "GeluKernelImpl", "leaky_relu_cpu", "clamp_scalar_cpu", "elu_cpu", "softplus_cpu", "isnan", "isinf", "logit_cpu", "logit_cpu", "nan_to_num", "clamp_scalar_cpu",
                                          "acosh_cpu", "asinh_cpu", "atanh_cpu", "lgamma_vml_cpu",
                                          "digamma", "polygamma", "sgn_cpu", "angle_cpu"};

/* out = op(self); self converted to the loop's input dtype first (out's,
 * except for abs and angle of complex). */
static int unary_p(int op, const struct tn_tensor *self, struct tn_tensor *out, const double *P);

static int unary(int op, const struct tn_tensor *self, struct tn_tensor *out)
{
    return unary_p(op, self, out, NULL);
}

/* The predicates (bool result) loop over self's own dtype; into an out of
 * another dtype (logical_not_ of a float tensor) they go through a bool
 * temporary. */
static int unary_pred(int op, const struct tn_tensor *self, struct tn_tensor *out)
{
    tn_iter_fn fn = uloops[op][self->dtype];
    if (!fn)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", unames[op],
                            tn_dtype_info(self->dtype)->c10_name);
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *o = out->dtype == TN_BOOL ? out : tn_empty_like(out, TN_BOOL);
    if (!o)
        return tn_last_status();
    struct tn_iter it;
    char *base[2] = {tn_data(o), tn_data(self)};
    const int64_t *strides[2] = {o->strides, self->strides};
    size_t el[2] = {1, tn_dtype_size(self->dtype)};
    tn__iter_init(&it, 2, o->sizes, o->ndim, base, strides, el);
    tn__iter_run(&it, fn, NULL, TN_PARALLEL_GRAIN);
    int rc = TN_OK;
    if (o != out) {
        rc = tn_copy_(out, o);
        tn_release(o);
    }
    return rc;
}

static int unary_p(int op, const struct tn_tensor *self, struct tn_tensor *out, const double *P)
{
    enum tn_dtype in = (op == U_ABS || op == U_ANGLE) && tn_dtype_is_complex(self->dtype)
                           ? self->dtype : out->dtype;
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
    tn__iter_run(&it, fn, (void *)P, TN_PARALLEL_GRAIN);
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
TN_UNARY_KERNEL(acosh, U_ACOSH)
TN_UNARY_KERNEL(asinh, U_ASINH)
TN_UNARY_KERNEL(atanh, U_ATANH)
TN_UNARY_KERNEL(lgamma, U_LGAMMA)
TN_UNARY_KERNEL(digamma, U_DIGAMMA)
TN_UNARY_KERNEL(sinh, U_SINH)
TN_UNARY_KERNEL(cosh, U_COSH)
TN_UNARY_KERNEL(erf, U_ERF)
TN_UNARY_KERNEL(reciprocal, U_RECIPROCAL)

static int relu_check(const struct tn_tensor *self)
{
    if (self->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "Boolean inputs not supported for relu");
    if (tn_dtype_is_complex(self->dtype))
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

TN_UNARY_KERNEL(sign, U_SIGN)
TN_UNARY_KERNEL(sgn, U_SGN)
TN_UNARY_KERNEL(angle, U_ANGLE)
TN_UNARY_KERNEL(floor, U_FLOOR)
TN_UNARY_KERNEL(ceil, U_CEIL)
TN_UNARY_KERNEL(round, U_ROUND)
TN_UNARY_KERNEL(trunc, U_TRUNC)
TN_UNARY_KERNEL(frac, U_FRAC)
TN_UNARY_KERNEL(erfinv, U_ERFINV)
TN_UNARY_KERNEL(bitwise_not, U_BITWISE_NOT)
TN_UNARY_KERNEL(silu, U_SILU)
TN_UNARY_KERNEL(mish, U_MISH)

int tn__cpu_logical_not_out(tn_keyset ks, const struct tn_tensor *self, struct tn_tensor *out)
{
    return unary_pred(U_LOGICAL_NOT, self, out);
}

static struct tn_tensor *predicate(int op, const struct tn_tensor *self)
{
    struct tn_tensor *out = tn_empty_like(self, TN_BOOL);
    if (out && unary_pred(op, self, out) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

struct tn_tensor *tn__cpu_isnan(tn_keyset ks, const struct tn_tensor *self)
{
    return predicate(U_ISNAN, self);
}

struct tn_tensor *tn__cpu_isinf(tn_keyset ks, const struct tn_tensor *self)
{
    return predicate(U_ISINF, self);
}

int tn__cpu_gelu_out(tn_keyset ks, const struct tn_tensor *self, const char *approximate,
                     struct tn_tensor *out)
{
    return unary(strcmp(approximate, "tanh") == 0 ? U_GELU_TANH : U_GELU, self, out);
}

int tn__cpu_leaky_relu_out(tn_keyset ks, const struct tn_tensor *self,
                           struct tn_scalar negative_slope, struct tn_tensor *out)
{
    double P[1] = {tn_scalar_to_double(negative_slope)};
    return unary_p(U_LEAKY_RELU, self, out, P);
}

int tn__cpu_hardtanh_out(tn_keyset ks, const struct tn_tensor *self, struct tn_scalar min_val,
                         struct tn_scalar max_val, struct tn_tensor *out)
{
    double P[2] = {tn_scalar_to_double(min_val), tn_scalar_to_double(max_val)};
    return unary_p(U_HARDTANH, self, out, P);
}

int tn__cpu_elu_out(tn_keyset ks, const struct tn_tensor *self, struct tn_scalar alpha,
                    struct tn_scalar scale, struct tn_scalar input_scale, struct tn_tensor *out)
{
    double P[3] = {tn_scalar_to_double(alpha), tn_scalar_to_double(scale),
                   tn_scalar_to_double(input_scale)};
    return unary_p(U_ELU, self, out, P);
}

int tn__cpu_softplus_out(tn_keyset ks, const struct tn_tensor *self, struct tn_scalar beta,
                         struct tn_scalar threshold, struct tn_tensor *out)
{
    double P[2] = {tn_scalar_to_double(beta), tn_scalar_to_double(threshold)};
    return unary_p(U_SOFTPLUS, self, out, P);
}

int tn__cpu_logit_out(tn_keyset ks, const struct tn_tensor *self, const double *eps,
                      struct tn_tensor *out)
{
    /* PyTorch clamps to [eps, 1 - eps] only for a non-negative eps */
    if (eps && *eps >= 0)
        return unary_p(U_LOGIT_EPS, self, out, eps);
    return unary(U_LOGIT, self, out);
}

int tn__cpu_polygamma_out(tn_keyset ks, int64_t n, const struct tn_tensor *self,
                          struct tn_tensor *out)
{
    double P[1] = {(double)n};
    return unary_p(U_POLYGAMMA, self, out, P);
}

int tn__cpu_nan_to_num_out(tn_keyset ks, const struct tn_tensor *self, const double *nan,
                           const double *posinf, const double *neginf, struct tn_tensor *out)
{
    /* defaults: 0 and the dtype's largest and lowest finite values */
    double big;
    switch (out->dtype) {
    case TN_FLOAT64: case TN_COMPLEX128: big = DBL_MAX; break;
    case TN_FLOAT16: big = 65504.0; break;
    case TN_BFLOAT16: big = 3.3895313892515355e38; break;
    default: big = FLT_MAX; break;
    }
    double P[3] = {nan ? *nan : 0.0, posinf ? *posinf : big, neginf ? *neginf : -big};
    return unary_p(U_NAN_TO_NUM, self, out, P);
}

int tn__cpu_clamp_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_scalar *min,
                      const struct tn_scalar *max, struct tn_tensor *out)
{
    double P[4] = {min ? tn_scalar_to_double(*min) : 0, max ? tn_scalar_to_double(*max) : 0,
                   min != NULL, max != NULL};
    return unary_p(U_CLAMP, self, out, P);
}

/* hardswish and hardsigmoid on contiguous float32 in one pass; the
 * composite's four ops (add, hardtanh, mul, div), each a pass and a new
 * tensor, made hardswish 32% of mobilenet_v3_small's time in the
 * interpreter (issue 27). The same operations in the same order. */
TN_KERNEL_CLONES void tn__cpu_hard_f32(const float *x, float *y, int64_t n, bool swish)
{
    if (swish) {
        TN_IVDEP
        for (int64_t i = 0; i < n; i++) {
            float h = x[i] + 3.0f;
            h = h < 0.0f ? 0.0f : h > 6.0f ? 6.0f : h;
            y[i] = x[i] * h / 6.0f;
        }
        return;
    }
    TN_IVDEP
    for (int64_t i = 0; i < n; i++) {
        float h = x[i] + 3.0f;
        h = h < 0.0f ? 0.0f : h > 6.0f ? 6.0f : h;
        y[i] = h / 6.0f;
    }
}
