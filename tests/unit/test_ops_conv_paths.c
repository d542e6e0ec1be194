/*
 * Unit tests of the float32 convolution kernels of issue 27 (the small-k
 * GEMM of 1x1 convolutions, depthwise, grouped 3x3 Winograd) at their
 * edge sizes through the dispatcher: every case of
 * tests/fixtures/ops/conv_paths.json (real PyTorch, tests/fixtures/ops_conv_paths.py).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/conv_paths", true, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
