/*
 * Unit tests of the pool family (lib/ops/cpu/nn_pool.c) through the
 * dispatcher: max_pool2d_with_indices and its backward, max_pool2d,
 * avg_pool2d and its backward, adaptive_avg_pool2d and its backward,
 * adaptive_max_pool2d and its backward, every case of
 * tests/fixtures/ops/pool.json (real PyTorch 1.13; ops_pool.py); a
 * channels-last input of adaptive_max_pool2d (which the fixture format
 * cannot carry) against its contiguous copy; and max_pool2d's values-only
 * kernel against max_pool2d_with_indices.
 */
#include <math.h>
#include <string.h>

#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/pool", true, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/pool_v2.json by
 * ops_pool_v2.py): channels_last_3d max_pool3d_with_indices (1.13 gives contiguous results),
 * the pools' argument checks, max_unpool2d/3d and max_pool1d(_with_indices) with theirs. */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/pool_v2", true, true);
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

/* max_pool2d with no graph to record takes the values-only float32 kernel
 * (separable, issue 27); it gives max_pool2d_with_indices' values at
 * strides 1 to 3, padding, ceil_mode, odd sizes, a 3-D input and a NaN. */
static void test_max_pool2d_values(void **state)
{
    const int64_t cases[][7] = {/* h, w, k, stride, padding, ceil, 3-D */
                                {112, 112, 3, 2, 1, 0, 0}, {9, 13, 3, 2, 1, 1, 0},
                                {10, 11, 2, 2, 0, 0, 0},   {8, 9, 3, 1, 1, 0, 1},
                                {17, 19, 5, 3, 2, 1, 0},   {7, 7, 4, 2, 2, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t *p = cases[i];
        struct tn_tensor *x = p[6] ? tn_randn(TN_SHAPE(3, p[0], p[1]), TN_FLOAT32, NULL)
                                   : tn_randn(TN_SHAPE(2, 3, p[0], p[1]), TN_FLOAT32, NULL);
        ((float *)tn_data(x))[5] = NAN;
        const int64_t k[2] = {p[2], p[2]}, st[2] = {p[3], p[3]}, pad[2] = {p[4], p[4]};
        const int64_t one[2] = {1, 1};
        struct tn_tensor *y = tn_max_pool2d(x, k, 2, st, 2, pad, 2, one, 2, p[5]), *e, *ix;
        assert_non_null(y);
        assert_int_equal(tn_max_pool2d_with_indices(x, k, 2, st, 2, pad, 2, one, 2, p[5], &e,
                                                    &ix), 0);
        assert_int_equal(tn_numel(y), tn_numel(e));
        assert_int_equal(y->ndim, e->ndim);
        const float *a = tn_data(y), *b = tn_data(e);
        int64_t nans = 0;
        for (int64_t j = 0; j < tn_numel(y); j++) {
            assert_true(a[j] == b[j] || (isnan(a[j]) && isnan(b[j])));
            nans += isnan(a[j]);
        }
        assert_true(nans >= 1); /* the NaN at row 0, column 5 reached its windows */
        tn_release(x);
        tn_release(y);
        tn_release(e);
        tn_release(ix);
    }
}

/* max_unpool2d/3d (their derivatives.yaml rule, grad gathered by the
 * indices) and max_pool1d (through max_pool2d_with_indices) pass gradcheck
 * in float64: the full Jacobian, where a sum's gradient of ones would not
 * tell a wrong index from a right one. */
struct grad_ctx {
    int which; /* 2, 3: max_unpool2d/3d; 1: max_pool1d */
    struct tn_tensor *ix;
};

static struct tn_tensor *pool_grad_fn(struct tn_tensor *const *in, void *ctx)
{
    const struct grad_ctx *c = ctx;
    static const int64_t two3[3] = {2, 2, 2}, zero3[3] = {0, 0, 0}, size3[3] = {4, 6, 5};
    static const int64_t size2[2] = {6, 7}, k[1] = {3}, st[1] = {2}, pad[1] = {1}, dl[1] = {1};
    if (c->which == 2)
        return tn_max_unpool2d(in[0], c->ix, size2, 2);
    if (c->which == 3)
        return tn_max_unpool3d(in[0], c->ix, size3, 3, two3, 3, zero3, 3);
    return tn_max_pool1d(in[0], k, 1, st, 1, pad, 1, dl, 1, true);
}

static void test_unpool_pool1d_gradcheck(void **state)
{
    static const int64_t two[3] = {2, 2, 2}, zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    struct tn_tensor *x2 = tn_randn(TN_SHAPE(2, 3, 6, 7), TN_FLOAT64, NULL);
    struct tn_tensor *x3 = tn_randn(TN_SHAPE(1, 2, 4, 6, 5), TN_FLOAT64, NULL);
    struct tn_tensor *v[3] = {NULL}, *ix[3] = {NULL};
    assert_int_equal(tn_max_pool2d_with_indices(x2, two, 2, NULL, 0, zero, 2, one, 2, false,
                                                &v[2], &ix[2]), 0);
    assert_int_equal(tn_max_pool3d_with_indices(x3, two, 3, NULL, 0, zero, 3, one, 3, false,
                                                &v[0], &ix[0]), 0);
    v[1] = tn_randn(TN_SHAPE(2, 3, 9), TN_FLOAT64, NULL);
    for (int which = 1; which <= 3; which++) {
        struct grad_ctx c = {which, ix[which % 3]};
        struct tn_tensor *in = tn_randn(v[which % 3]->sizes, v[which % 3]->ndim, TN_FLOAT64, NULL);
        assert_int_equal(tn_requires_grad_(in, true), 0);
        int r = tn_gradcheck(pool_grad_fn, &in, 1, &c, 1e-6, 1e-8, 1e-6);
        if (r != 1)
            print_message("# %d: %s\n", which, tn_last_error());
        assert_int_equal(r, 1);
        tn_release(in);
    }
    for (int i = 0; i < 3; i++) {
        tn_release(v[i]);
        tn_release(ix[i]);
    }
    tn_release(x2);
    tn_release(x3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_adaptive_max_pool2d_channels_last),
        cmocka_unit_test(test_max_pool2d_values),
        cmocka_unit_test(test_unpool_pool1d_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
