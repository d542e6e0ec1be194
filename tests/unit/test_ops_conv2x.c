/*
 * Unit tests of convolution in bfloat16 and float16 (lib/ops/cpu/nn_conv.c)
 * through the dispatcher: every case of tests/fixtures/ops/conv2x.json (real
 * PyTorch 2.x: 1.13 rounds each partial sum, 2.x and we round once):
 * convolution, conv2d and convolution_backward.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/conv2x", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
