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

/* the same with non-temporal stores from 64 bytes (the default starts in
 * the hundreds of MiB), the output aligned and 1 to 15 floats off */
static void test_exp_f32_runs_streamed(void **state)
{
    setenv("TN_STREAM_BYTES", "64", 1);
    tn__stream_configure();
    for (int64_t off = 0; off < 16; off += off < 3 ? 1 : 6)
        exp_f32_runs(off);
    unsetenv("TN_STREAM_BYTES");
    tn__stream_configure();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_exp_f32_runs),
        cmocka_unit_test(test_exp_f32_runs_streamed),
        cmocka_unit_test(test_lgamma_gradcheck),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_meta_activation),
        cmocka_unit_test(test_inverse_hyperbolic_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
