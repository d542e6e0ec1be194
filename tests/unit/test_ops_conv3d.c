/*
 * Unit tests of 3-D convolution and the transposed convolutions of
 * lib/ops/cpu/conv3d.c (issue 25) through the dispatcher: every case of
 * tests/fixtures/ops/conv3d.json (real PyTorch 2.x, tests/fixtures/ops_conv3d.py):
 * conv3d, conv3d.padding, conv_transpose3d and convolution_backward of 5-D
 * tensors in five dtypes, int64 transposed convolution, an output padding
 * that reaches its stride, PyTorch's checks.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/conv3d", true, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
