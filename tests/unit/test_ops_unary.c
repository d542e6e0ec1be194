/*
 * Unit tests of the elementwise unary ops (math functions, rounding, sign,
 * logical and bitwise not, clamp, the activations) through the dispatcher:
 * every case of tests/fixtures/ops/unary.json (real PyTorch).
 */
#include "ops_cases.h"
#include "ops/internal.h"

static void test_fixture_cases(void **state)
{
    /* float16 math: 1.13 lacks the CPU kernels, 2.x has them; we follow 2.x */
    run_op_cases("../ops/unary", false, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/unary_v2.json by
 * ops_unary_v2.py): complex64 exp2, expm1 and log1p (1.13 refuses them). */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/unary_v2", true, true);
}

/* Meta tensors: shape and dtype only. */
static void test_meta(void **state)
{
    struct tn_tensor *a = tn_empty_on(TN_SHAPE(2, 7), TN_INT16, (struct tn_device){TN_DEVICE_META, -1});
    struct tn_tensor *r = tn_exp(a);
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_FLOAT32);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->sizes[1], 7);
    tn_release(r);
    tn_release(a);
}

/* Meta tensors: shape and dtype only (isnan gives bool, gelu keeps it). */
static void test_meta_activation(void **state)
{
    struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *a = tn_empty_on(TN_SHAPE(2, 7), TN_FLOAT16, meta);
    struct tn_tensor *r = tn_gelu(a, "tanh");
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_FLOAT16);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->sizes[1], 7);
    tn_release(r);
    r = tn_logical_not(a);
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_BOOL);
    tn_release(r);
    tn_release(a);
}

/* The derivatives of acosh, asinh and atanh by finite differences, at
 * points inside their domains: acosh at 1.5 + rand, atanh at rand - 0.5. */
typedef struct tn_tensor *(*unary_fn)(const struct tn_tensor *);

static struct tn_tensor *hyperbolic(struct tn_tensor *const *in, void *ctx)
{
    return (*(unary_fn *)ctx)(in[0]);
}

static void test_inverse_hyperbolic_gradcheck(void **state)
{
    unary_fn fns[3] = {tn_acosh, tn_asinh, tn_atanh};
    const double shift[3] = {1.5, -0.5, -0.5};
    for (int k = 0; k < 3; k++) {
        struct tn_tensor *r = tn_rand(TN_SHAPE(3, 4), TN_FLOAT64, NULL);
        struct tn_tensor *x = tn_add_scalar(r, tn_float(shift[k]), tn_int(1));
        tn_release(r);
        assert_int_equal(tn_requires_grad_(x, true), 0);
        int ok = tn_gradcheck(hyperbolic, &x, 1, &fns[k], 1e-6, 1e-8, 1e-6);
        if (ok != 1)
            print_message("# %d: %s\n", k, tn_last_error());
        assert_int_equal(ok, 1);
        tn_release(x);
    }
}

/* lgamma's derivative, digamma, by finite differences: at x in (0.5, 1.5)
 * (near the minimum, where digamma changes sign) and at negative
 * non-integers between the poles. */
static void test_lgamma_gradcheck(void **state)
{
    unary_fn fn = tn_lgamma;
    const double shift[2] = {0.5, -2.75};
    for (int k = 0; k < 2; k++) {
        struct tn_tensor *r = tn_rand(TN_SHAPE(3, 4), TN_FLOAT64, NULL);
        struct tn_tensor *h = tn_mul_scalar(r, tn_float(k ? 0.5 : 1.0));
        struct tn_tensor *x = tn_add_scalar(h, tn_float(shift[k]), tn_int(1));
        tn_release(r);
        tn_release(h);
        assert_int_equal(tn_requires_grad_(x, true), 0);
        int ok = tn_gradcheck(hyperbolic, &x, 1, &fn, 1e-6, 1e-8, 1e-6);
        if (ok != 1)
            print_message("# %d: %s\n", k, tn_last_error());
        assert_int_equal(ok, 1);
        tn_release(x);
    }
}

/* exp of contiguous float32 (sixteen lanes on AVX-512 CPUs, eight on
 * AVX2, each with a tail under a mask or through a padded block) at every
 * length from 0 to 70 and at 1000, out= into the front of a larger
 * tensor: within 2 ulp of expf over [-110, 95] (overflow, subnormals, 0),
 * NaN and infinities as expf, and the values past the run untouched. */
static void exp_f32_runs(int64_t off)
{
    for (int64_t n = 0; n <= 1000; n = n == 70 ? 1000 : n + 1) {
        struct tn_tensor *x = tn_empty(TN_SHAPE(n), TN_FLOAT32);
        struct tn_tensor *big = tn_full(TN_SHAPE(n + 20 + off), tn_float(7.0), TN_FLOAT32);
        struct tn_tensor *o = tn_narrow(big, 0, off, n);
        assert_non_null(o);
        float *a = tn_data(x);
        for (int64_t i = 0; i < n; i++)
            a[i] = -110.0f + 205.0f * (float)((i * 37 + n) % 101) / 100.0f;
        if (n > 3) {
            a[n - 1] = NAN;
            a[n - 2] = INFINITY;
            a[n - 3] = -INFINITY;
        }
        assert_int_equal(tn_exp_out(x, o), TN_OK);
        const float *y = (const float *)tn_data(big) + off;
        for (int64_t i = 0; i < off; i++)
            assert_true(y[i - off] == 7.0f);
        for (int64_t i = 0; i < n; i++) {
            float e = expf(a[i]);
            if (isnan(e) || isinf(e) || e == 0.0f)
                assert_true(isnan(e) ? isnan(y[i]) : y[i] == e);
            else
                assert_true(fabsf(y[i] - e) <= 2 * (nextafterf(e, INFINITY) - e));
        }
        for (int64_t i = n; i < n + 20; i++)
            assert_true(y[i] == 7.0f);
        tn_release(o);
        tn_release(big);
        tn_release(x);
    }
}

static void test_exp_f32_runs(void **state)
{
    exp_f32_runs(0);
}

/* the same with non-temporal stores from 64 bytes (the default starts at
 * 3/8 of the L3, megabytes), the output aligned and 1 to 15 floats off */
static void test_exp_f32_runs_streamed(void **state)
{
    setenv("TN_STREAM_BYTES", "64", 1);
    tn__stream_configure();
    for (int64_t off = 0; off < 16; off += off < 3 ? 1 : 6)
        exp_f32_runs(off);
    unsetenv("TN_STREAM_BYTES");
    tn__stream_configure();
}

/* The distance of v from e^x (exact in double) in units in the last place
 * of the float nearest e^x (2^-149 for results in the subnormals); 0 where
 * both are the same infinity, 0 or NaN. */
static double exp_ulps(float x, float v)
{
    double e = exp((double)x);
    float f = (float)e;
    if (isnan(e) || isinf(f) || f == 0.0f)
        return (isnan(e) ? isnan(v) : v == f) ? 0 : INFINITY;
    return fabs((double)v - e) / (double)(nextafterf(f, INFINITY) - f);
}

/* exp of float32 (the vector kernel: eight lanes on AVX2, sixteen on
 * AVX-512) against libm's exp in double over a dense sweep of all 2^32
 * floats, every 29th bit pattern (148 million: positive and negative,
 * subnormal inputs and results, overflow, infinities and NaNs), plus every
 * float of [-1, 1] 13 apart and the edges of the integer-add path (|x|
 * near 86): within 2 ulp everywhere (Sleef's expf, PyTorch's, is within
 * 1), infinities, 0 and NaN exact. */
static void test_exp_f32_ulps(void **state)
{
    const int64_t n = 1 << 22;
    struct tn_tensor *x = tn_empty(TN_SHAPE(n), TN_FLOAT32), *y = tn_empty(TN_SHAPE(n), TN_FLOAT32);
    float *a = tn_data(x), *b = tn_data(y);
    double worst = 0;
    float at = 0;
    for (int pass = 0; pass < 3; pass++) {
        uint64_t step = pass == 0 ? 29 : pass == 1 ? 13 : 1;
        uint64_t from = pass < 2 ? 0 : 0x42ac0000u - 4096; /* 86.0f - 4096 ulp */
        uint64_t to = pass == 0 ? (uint64_t)1 << 32 : pass == 1 ? 2 * (uint64_t)0x3f800000u : from + 8192;
        for (uint64_t k = from; k < to;) {
            int64_t m = 0;
            for (; m < n && k < to; m++, k += step) {
                /* pass 1 walks 0 .. 2 * bits(1.0): 0 to 1, then the upper
                 * half as the negatives -0 to -1; pass 2 the floats near
                 * 86, and near -86 at odd m */
                uint32_t u = pass == 1 && k >= 0x3f800000u ? (uint32_t)(k - 0x3f800000u) | 0x80000000u
                                                           : (uint32_t)k | (pass == 2 && m % 2 ? 0x80000000u : 0);
                memcpy(&a[m], &u, sizeof u);
            }
            struct tn_tensor *xs = tn_narrow(x, 0, 0, m), *ys = tn_narrow(y, 0, 0, m);
            assert_int_equal(tn_exp_out(xs, ys), TN_OK);
            for (int64_t i = 0; i < m; i++) {
                double d = exp_ulps(a[i], b[i]);
                if (d > worst) {
                    worst = d;
                    at = a[i];
                }
            }
            tn_release(xs);
            tn_release(ys);
        }
    }
    print_message("# exp float32: at most %.3f ulp (at %a)\n", worst, (double)at);
    assert_true(worst <= 2.0);
    tn_release(x);
    tn_release(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_exp_f32_runs),
        cmocka_unit_test(test_exp_f32_runs_streamed),
        cmocka_unit_test(test_exp_f32_ulps),
        cmocka_unit_test(test_lgamma_gradcheck),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_meta_activation),
        cmocka_unit_test(test_inverse_hyperbolic_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
