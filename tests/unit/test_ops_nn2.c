/*
 * Unit tests of convolution, pooling and dropout through the dispatcher:
 * every case of tests/fixtures/ops/nn2.json (real PyTorch), and dropout's
 * mask and output after the seed PyTorch was given.
 */
#include <math.h>

#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* the pooling padding message is worded differently in 2.x */
    run_op_cases("../ops/nn2", true, true);
}

/* native_dropout and dropout draw their mask from the default generator as
 * PyTorch does: the same seed drops the same elements. */
static void test_dropout_seeded(void **state)
{
    json_t *fx = tn_test_fixture("../ops/nn2");
    json_t *cases = json_object_get(fx, "dropout"), *c;
    size_t ci;
    assert_true(json_array_size(cases) >= 3);
    json_array_foreach(cases, ci, c) {
        struct tn_tensor *x = tn_test_tensor(json_object_get(c, "input")), *o, *m, *d, *b;
        double p = json_real_value(json_object_get(c, "p"));
        bool train = true;
        uint64_t seed = (uint64_t)json_integer_value(json_object_get(c, "seed"));
        tn_manual_seed(seed);
        assert_int_equal(tn_native_dropout(x, p, &train, &o, &m), 0);
        assert_int_equal(compare(o, json_object_get(c, "output"), "native_dropout", false), 0);
        assert_int_equal(compare(m, json_object_get(c, "mask"), "native_dropout mask", false), 0);
        tn_manual_seed(seed);
        assert_non_null(d = tn_dropout(x, p, true));
        assert_int_equal(compare(d, json_object_get(c, "dropout"), "dropout", false), 0);
        assert_non_null(b = tn_native_dropout_backward(x, m, 1 / (1 - p)));
        assert_int_equal(compare(b, json_object_get(c, "backward"), "native_dropout_backward",
                                 false), 0);
        tn_release(x);
        tn_release(o);
        tn_release(m);
        tn_release(d);
        tn_release(b);
    }
    json_decref(fx);
}

/* y (float32) is within tol * (1 + |e|) of yd (float64) everywhere; then
 * y, yd and the six inputs are released. */
static void check_close_and_release(struct tn_tensor *y, struct tn_tensor *yd, double tol,
                                    struct tn_tensor *in[6])
{
    assert_non_null(y);
    assert_non_null(yd);
    assert_int_equal(tn_numel(y), tn_numel(yd));
    const float *a = tn_data(y);
    const double *e = tn_data(yd);
    for (int64_t j = 0; j < tn_numel(y); j++)
        assert_true(fabs((double)a[j] - e[j]) <= tol * (1 + fabs(e[j])));
    for (int i = 0; i < 6; i++)
        tn_release(in[i]);
    tn_release(y);
    tn_release(yd);
}

/* The float32 depthwise kernel (direct loops, issue 27) gives the float64
 * path's values (im2col and GEMM per channel), for strides 1 to 3,
 * padding from none to more than half the kernel, dilation, 3x3 to 7x7,
 * widths that are and are not multiples of the kernel's 8-value blocks,
 * with and without a bias, batch 2. */
static void test_depthwise_matches_gemm_path(void **state)
{
    const int64_t shapes[][6] = {/* c, h, k, stride, dilation, padding */
                                 {3, 9, 3, 1, 1, 1},   {4, 11, 3, 2, 1, 1}, {5, 10, 5, 2, 1, 2},
                                 {2, 8, 3, 1, 2, 1},   {6, 7, 5, 1, 1, 2},  {3, 40, 3, 2, 1, 1},
                                 {2, 33, 7, 3, 2, 3},  {3, 31, 3, 1, 1, 0}, {2, 20, 5, 2, 1, 4},
                                 {2, 64, 3, 1, 1, 1},  {2, 17, 1, 2, 1, 0}}; 
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *p = shapes[i], c = p[0], h = p[1], k = p[2];
        struct tn_tensor *x = tn_randn(TN_SHAPE(2, c, h, h + 1), TN_FLOAT32, NULL);
        struct tn_tensor *w = tn_randn(TN_SHAPE(c, 1, k, k), TN_FLOAT32, NULL);
        struct tn_tensor *b = i % 2 ? NULL : tn_randn(TN_SHAPE(c), TN_FLOAT32, NULL);
        struct tn_tensor *xd = tn_to_dtype(x, TN_FLOAT64), *wd = tn_to_dtype(w, TN_FLOAT64);
        struct tn_tensor *bd = b ? tn_to_dtype(b, TN_FLOAT64) : NULL;
        const int64_t st[2] = {p[3], p[3]}, pad[2] = {p[5], p[5]}, dil[2] = {p[4], p[4]};
        struct tn_tensor *y = tn_conv2d(x, w, b, st, 2, pad, 2, dil, 2, c);
        struct tn_tensor *yd = tn_conv2d(xd, wd, bd, st, 2, pad, 2, dil, 2, c);
        check_close_and_release(y, yd, 1e-4, (struct tn_tensor *[]){x, w, b, xd, wd, bd});
    }
}

/* The float32 3x3 Winograd kernel (stride 1, 16+ channels, 100+ output
 * tiles of 2x2, issue 27) gives the float64 path's values (im2col and
 * GEMM): padding 0 to 2, odd and even output sizes, batch 2, with and
 * without a bias, channel counts that are not multiples of 8, and groups
 * (each group of 16+ channels its own Winograd convolution). */
static void test_winograd_matches_gemm_path(void **state)
{
    const int64_t shapes[][6] = {/* c, oc, h, w, padding, groups */
                                 {16, 16, 21, 23, 1, 1}, {24, 17, 24, 24, 0, 1},
                                 {19, 32, 22, 21, 2, 1}, {64, 64, 28, 28, 1, 1},
                                 {32, 48, 20, 22, 1, 2}, {64, 64, 28, 28, 1, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *p = shapes[i];
        struct tn_tensor *x = tn_randn(TN_SHAPE(2, p[0], p[2], p[3]), TN_FLOAT32, NULL);
        struct tn_tensor *w = tn_randn(TN_SHAPE(p[1], p[0] / p[5], 3, 3), TN_FLOAT32, NULL);
        struct tn_tensor *b = i % 2 ? NULL : tn_randn(TN_SHAPE(p[1]), TN_FLOAT32, NULL);
        struct tn_tensor *xd = tn_to_dtype(x, TN_FLOAT64), *wd = tn_to_dtype(w, TN_FLOAT64);
        struct tn_tensor *bd = b ? tn_to_dtype(b, TN_FLOAT64) : NULL;
        const int64_t one[2] = {1, 1}, pad[2] = {p[4], p[4]};
        struct tn_tensor *y = tn_conv2d(x, w, b, one, 2, pad, 2, one, 2, p[5]);
        struct tn_tensor *yd = tn_conv2d(xd, wd, bd, one, 2, pad, 2, one, 2, p[5]);
        check_close_and_release(y, yd, 2e-5, (struct tn_tensor *[]){x, w, b, xd, wd, bd});
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_dropout_seeded),
        cmocka_unit_test(test_depthwise_matches_gemm_path),
        cmocka_unit_test(test_winograd_matches_gemm_path),
        cmocka_unit_test(test_max_pool2d_values),
    };
    return TN_RUN_TESTS(tests);
}
