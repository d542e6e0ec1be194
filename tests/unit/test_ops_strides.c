/*
 * Unit tests of the strides of results: elementwise ops (lib/ops/layout.c,
 * the layout PyTorch's TensorIterator gives them) and channels_last through
 * conv, pooling, batch norm and cat and their backwards: every case of
 * tests/fixtures/ops/strides.json (real PyTorch 1.13; 2.x agrees on each, and adds
 * _native_batch_norm_legit_no_training),
 * values and strides, the strides compared as PyTorch's
 * check_significant_strides does (dimensions of size 1 ignored). Then the
 * same layout under the Meta device, where no kernel runs.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    layout_significant = true;
    run_op_cases("../ops/strides", true, true);
}

/* A channels_last input plus a (C, 1, 1) bias: channels_last, on the CPU
 * and on Meta alike; a contiguous first input with a channels_last second
 * stays contiguous (the first input decides). */
static void test_meta_layout(void **state)
{
    const int64_t pz[4] = {2, 4, 5, 3}, perm[4] = {0, 3, 1, 2}, sz[4] = {2, 3, 4, 5};
    const int64_t cl[4] = {60, 1, 15, 3}, bs[3] = {3, 1, 1};
    const struct tn_device devs[2] = {{TN_DEVICE_CPU, 0}, {TN_DEVICE_META, 0}};
    for (int dev = 0; dev < 2; dev++) {
        struct tn_tensor *p = tn_empty_on(pz, 4, TN_FLOAT32, devs[dev]);
        struct tn_tensor *b = tn_empty_on(bs, 3, TN_FLOAT32, devs[dev]);
        struct tn_tensor *c = tn_empty_on(sz, 4, TN_FLOAT32, devs[dev]);
        assert_non_null(p);
        if (dev == 0) {
            assert_int_equal(tn_fill_(p, tn_float(0.5)), TN_OK);
            assert_int_equal(tn_fill_(b, tn_float(1.0)), TN_OK);
            assert_int_equal(tn_fill_(c, tn_float(2.0)), TN_OK);
        }
        struct tn_tensor *x = tn_permute(p, perm, 4);
        assert_memory_equal(x->strides, cl, sizeof cl);
        struct tn_tensor *r = tn_add(x, b, tn_int(1)), *r2 = tn_mul(c, x), *r3 = tn_exp(x);
        assert_non_null(r);
        assert_non_null(r2);
        assert_non_null(r3);
        assert_int_equal(r->device.type, devs[dev].type);
        assert_memory_equal(r->strides, cl, sizeof cl);
        assert_true(tn_is_contiguous(r2));
        assert_memory_equal(r3->strides, cl, sizeof cl);
        tn_release(r), tn_release(r2), tn_release(r3);
        tn_release(x), tn_release(p), tn_release(b), tn_release(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_meta_layout),
    };
    return TN_RUN_TESTS(tests);
}
