/*
 * Unit tests of the conv family (lib/ops/conv.c, lib/ops/cpu/nn_conv.c) through
 * the dispatcher: transposed convolution (convolution, its backward,
 * conv_transpose2d), every case of tests/fixtures/ops/conv.json (real
 * PyTorch 1.13; ops_conv.py). The forward convolutions are still
 * test_ops_nn2's and test_ops_v2's.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/conv", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
