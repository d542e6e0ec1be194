/*
 * Unit tests of the reductions (sum, mean, amax, amin, prod, any, all,
 * argmax, argmin, cumsum, cumprod, logsumexp, var, std) through the
 * dispatcher: every case of tests/fixtures/ops/reduce.json (real PyTorch).
 */
#include <math.h>

#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16/bfloat16 prod and float16 logsumexp: 1.13 lacks them, 2.x has them */
    run_op_cases("../ops/reduce", true, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/reduce_v2.json by
 * ops_reduce_v2.py): complex64 logsumexp and any.dims (1.13 lacks them). */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/reduce_v2", true, true);
}

/* Reduced dims that are one contiguous block run as one: the sum of a
 * 97 x 1030 float32 matrix is the sum of its flat view, bit for bit; dims
 * that are not adjacent in memory (0 and 2 of a 3-D tensor, a transposed
 * pair) still reduce every element once (against a float64 sum). */
static void test_merged_runs(void **state)
{
    struct tn_tensor *m = tn_randn(TN_SHAPE(97, 1030), TN_FLOAT32, NULL);
    struct tn_tensor *flat = tn_reshape(m, TN_SHAPE(97 * 1030));
    struct tn_tensor *s2 = tn_sum(m, TN_DTYPE_UNSET), *s1 = tn_sum(flat, TN_DTYPE_UNSET);
    assert_memory_equal(tn_data(s2), tn_data(s1), 4);
    struct tn_tensor *x = tn_randn(TN_SHAPE(6, 5, 70), TN_FLOAT32, NULL);
    const int64_t d02[2] = {0, 2}, d01[2] = {0, 1};
    struct tn_tensor *r = tn_sum_dim_intlist(x, d02, 2, false, TN_DTYPE_UNSET);
    struct tn_tensor *xt = tn_transpose(x, 0, 1);
    struct tn_tensor *rt = tn_sum_dim_intlist(xt, d01, 2, false, TN_DTYPE_UNSET);
    const float *xv = tn_data(x);
    for (int j = 0; j < 5; j++) {
        double w = 0;
        for (int i = 0; i < 6; i++)
            for (int k = 0; k < 70; k++)
                w += xv[(i * 5 + j) * 70 + k];
        assert_true(fabs(((float *)tn_data(r))[j] - w) < 1e-4);
    }
    for (int k = 0; k < 70; k++) {
        double w = 0;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 5; j++)
                w += xv[(i * 5 + j) * 70 + k];
        assert_true(fabs(((float *)tn_data(rt))[k] - w) < 1e-4);
    }
    tn_release(rt);
    tn_release(xt);
    tn_release(r);
    tn_release(x);
    tn_release(s1);
    tn_release(s2);
    tn_release(flat);
    tn_release(m);
}

/* A contiguous run long enough for the float32 sum to go over its two
 * halves at once (from TN_STREAM_BYTES, lib/ops/cpu/reduce.c; 64 here),
 * with a tail that is no multiple of a block or of 32: every element once
 * (against a float64 sum; a block missed or taken twice is off by tens),
 * and the same for var's squared distances. */
static void two_half_runs(void)
{
    const int64_t n = 600037;
    struct tn_tensor *x = tn_randn(TN_SHAPE(n), TN_FLOAT32, NULL);
    struct tn_tensor *s = tn_sum(x, TN_DTYPE_UNSET);
    struct tn_tensor *v = tn_var(x, true);
    const float *xv = tn_data(x);
    double w = 0, q = 0;
    for (int64_t i = 0; i < n; i++)
        w += xv[i];
    for (int64_t i = 0; i < n; i++)
        q += (xv[i] - w / (double)n) * (xv[i] - w / (double)n);
    assert_true(fabs(*(float *)tn_data(s) - w) < 1e-2);
    assert_true(fabs(*(float *)tn_data(v) - q / (double)(n - 1)) < 1e-5);
    tn_release(v);
    tn_release(s);
    tn_release(x);
}

static void test_two_half_runs(void **state)
{
    run_streamed(two_half_runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_merged_runs),
        cmocka_unit_test(test_two_half_runs),
    };
    return TN_RUN_TESTS(tests);
}
