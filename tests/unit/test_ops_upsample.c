/*
 * Unit tests of the upsample family (lib/ops/nn.c, lib/ops/cpu/nn_upsample.c)
 * through the dispatcher: upsample_nearest2d, upsample_bilinear2d and their
 * backward ops, every case of tests/fixtures/ops/upsample.json (real
 * PyTorch 1.13; ops_upsample.py).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/upsample", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
