/*
 * Unit tests of the elementwise unary ops through the dispatcher: every
 * case of tests/fixtures/ops/unary.json (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16 math: 1.13 lacks the CPU kernels, 2.x has them; we follow 2.x */
    run_op_cases("../ops/unary", false, true);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_meta),
    };
    return TN_RUN_TESTS(tests);
}
