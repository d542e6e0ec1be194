/*
 * Unit tests of 3-D convolution and the transposed convolutions of
 * lib/ops/cpu/conv3d.c (issue 25) through the dispatcher: every case of
 * tests/fixtures/ops/conv3d.json (real PyTorch 2.x, tests/fixtures/ops_conv3d.py):
 * conv3d, conv3d.padding, conv_transpose3d and convolution_backward of 5-D
 * tensors in five dtypes, int64 transposed convolution, an output padding
 * that reaches its stride, PyTorch's checks; and convolution's Meta
 * kernels (lib/ops/conv.c).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/conv3d", true, false);
}

/* bfloat16 transposed convolution in PyTorch's slow kernel's roundings
 * (tests/fixtures/ops_conv_bf16_slow.py, made on a CPU without AVX-512):
 * only where PyTorch takes it, a CPU whose mkldnn does not run bfloat16. */
static void test_bf16_slow_cases(void **state)
{
    (void)state;
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        skip(); /* PyTorch takes mkldnn here */
    run_op_cases("../ops/conv_bf16_slow", true, false);
}

/* On the Meta device (tcompile check's shape pass) convolution and
 * convolution_backward give the CPU kernels' sizes and dtype, 1-D to 3-D,
 * regular and transposed; a wrong channel count fails in PyTorch's words. */
static struct tn_tensor *conv_on(bool meta, const int64_t *xs, const int64_t *ws, int nd,
                                 bool tr, int64_t groups)
{
    const struct tn_device dev = {meta ? TN_DEVICE_META : TN_DEVICE_CPU, meta ? -1 : 0};
    struct tn_tensor *x = tn_zeros(xs, nd, TN_FLOAT32), *w = tn_zeros(ws, nd, TN_FLOAT32);
    struct tn_tensor *xm = meta ? tn_empty_on(xs, nd, TN_FLOAT32, dev) : tn_retain(x);
    struct tn_tensor *wm = meta ? tn_empty_on(ws, nd, TN_FLOAT32, dev) : tn_retain(w);
    const int64_t st[3] = {2, 1, 2}, pd[3] = {1, 0, 1}, dl[3] = {1, 2, 1}, op[3] = {1, 0, 1};
    struct tn_tensor *y = tn_convolution(xm, wm, NULL, st, nd - 2, pd, nd - 2, dl, nd - 2, tr,
                                         op, nd - 2, groups);
    tn_release(x);
    tn_release(w);
    tn_release(xm);
    tn_release(wm);
    return y;
}

static void test_meta(void **state)
{
    const int64_t xs[][5] = {{2, 4, 9}, {2, 4, 7, 9}, {1, 4, 5, 7, 6}};
    const int64_t ws[][5] = {{6, 2, 3}, {6, 2, 3, 2}, {6, 2, 3, 2, 2}};
    const int64_t wt[][5] = {{4, 3, 3}, {4, 3, 3, 2}, {4, 3, 3, 2, 2}};
    for (int i = 0; i < 3; i++)
        for (int tr = 0; tr < 2; tr++) {
            struct tn_tensor *m = conv_on(true, xs[i], tr ? wt[i] : ws[i], i + 3, tr, 2);
            struct tn_tensor *c = conv_on(false, xs[i], tr ? wt[i] : ws[i], i + 3, tr, 2);
            assert_non_null(m);
            assert_non_null(c);
            assert_int_equal(m->device.type, TN_DEVICE_META);
            assert_int_equal(m->ndim, c->ndim);
            for (int d = 0; d < c->ndim; d++)
                assert_int_equal(m->sizes[d], c->sizes[d]);
            assert_int_equal(m->dtype, TN_FLOAT32);
            /* the backward's sizes: the input's, the weight's, the bias's */
            struct tn_tensor *g[3];
            const struct tn_device dev = {TN_DEVICE_META, -1};
            struct tn_tensor *x = tn_empty_on(xs[i], i + 3, TN_FLOAT32, dev);
            struct tn_tensor *w = tn_empty_on(tr ? wt[i] : ws[i], i + 3, TN_FLOAT32, dev);
            const int64_t st[3] = {2, 1, 2}, pd[3] = {1, 0, 1}, dl[3] = {1, 2, 1};
            const int64_t op[3] = {1, 0, 1};
            const bool mask[3] = {true, true, true};
            assert_int_equal(tn_convolution_backward(m, x, w, NULL, 0, st, i + 1, pd, i + 1, dl,
                                                     i + 1, tr, op, i + 1, 2, mask, 3, &g[0],
                                                     &g[1], &g[2]),
                             0);
            assert_int_equal(g[0]->sizes[2], xs[i][2]);
            assert_int_equal(g[1]->sizes[0], (tr ? wt[i] : ws[i])[0]);
            assert_int_equal(g[2]->sizes[0], c->sizes[1]);
            for (int k = 0; k < 3; k++)
                tn_release(g[k]);
            tn_release(x);
            tn_release(w);
            tn_release(m);
            tn_release(c);
        }
    struct tn_tensor *bad = conv_on(true, xs[2], wt[2], 5, false, 1);
    assert_null(bad);
    assert_string_equal(tn_last_error(), "Given groups=1, weight of size [4, 3, 3, 2, 2], "
                                         "expected input[1, 4, 5, 7, 6] to have 3 channels, but "
                                         "got 4 channels instead");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_bf16_slow_cases),
        cmocka_unit_test(test_meta),
    };
    return TN_RUN_TESTS(tests);
}
