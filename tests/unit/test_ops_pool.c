/*
 * Unit tests of the pool family (test_ops_nn4 before; max_pool2d,
 * avg_pool2d and adaptive_avg_pool2d are still test_ops_nn2's):
 * adaptive_max_pool2d and its backward through the
 * dispatcher: every case of tests/fixtures/ops/pool.json (real PyTorch
 * 1.13), and a channels-last input of the pool (which the fixture format
 * cannot carry) against its contiguous copy. binary_cross_entropy is
 * test_ops_loss's.
 */
#include <string.h>

#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/pool", true, true);
}

/* The pool of a channels-last view (strides of an (N, H, W, C) tensor)
 * equals that of the same values laid out contiguously, and so does the
 * backward's gradient, in float32 (own loop) and float64. */
static void test_adaptive_max_pool2d_channels_last(void **state)
{
    enum tn_dtype dts[] = {TN_FLOAT32, TN_FLOAT64};
    for (int d = 0; d < 2; d++) {
        int64_t nhwc[4] = {2, 7, 6, 5}, os[2] = {3, 4};
        struct tn_tensor *base = tn_randn(nhwc, 4, dts[d], NULL);
        struct tn_tensor *cl = tn_permute(base, (const int64_t[]){0, 3, 1, 2}, 4);
        struct tn_tensor *x = tn_contiguous(cl), *y1, *i1, *y2, *i2;
        assert_non_null(cl);
        assert_false(tn_is_contiguous(cl));
        assert_int_equal(tn_adaptive_max_pool2d(cl, os, 2, &y1, &i1), 0);
        assert_int_equal(tn_adaptive_max_pool2d(x, os, 2, &y2, &i2), 0);
        struct tn_tensor *yc = tn_contiguous(y1), *ic = tn_contiguous(i1);
        size_t esz = tn_dtype_size(dts[d]);
        assert_int_equal(tn_numel(yc), 2 * 5 * 3 * 4);
        assert_memory_equal(tn_data(yc), tn_data(y2), (size_t)tn_numel(yc) * esz);
        assert_memory_equal(tn_data(ic), tn_data(i2), (size_t)tn_numel(ic) * 8);
        struct tn_tensor *g1 = tn_adaptive_max_pool2d_backward(y1, cl, i1);
        struct tn_tensor *g2 = tn_adaptive_max_pool2d_backward(y2, x, i2);
        struct tn_tensor *gc = tn_contiguous(g1);
        assert_non_null(gc);
        assert_non_null(g2);
        assert_memory_equal(tn_data(gc), tn_data(g2), (size_t)tn_numel(gc) * esz);
        struct tn_tensor *all[] = {base, cl, x, y1, i1, y2, i2, yc, ic, g1, g2, gc};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            tn_release(all[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_adaptive_max_pool2d_channels_last),
    };
    return TN_RUN_TESTS(tests);
}
