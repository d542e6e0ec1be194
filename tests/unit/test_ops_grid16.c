/*
 * Unit tests of the float16 and bfloat16 forward of grid_sampler_2d and
 * grid_sampler_3d (lib/ops/cpu/nn_grid_sample16.c): every case of
 * tests/fixtures/ops/grid16.json (real PyTorch 2.x; ops_grid16_v2.py),
 * compared exactly, as PyTorch rounds every step into the dtype and so
 * do we.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    values_exact = true;
    run_op_cases("../ops/grid16", false, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
