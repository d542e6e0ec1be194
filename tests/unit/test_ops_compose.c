/*
 * Unit tests of the products and compositions the OpInfo sweep found
 * refused (session 45) through the dispatcher: every case of
 * tests/fixtures/ops/compose.json (real PyTorch 2.x,
 * tests/fixtures/ops_compose.py): tensordot, block_diag, cartesian_prod
 * and combinations, with PyTorch's errors.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/compose", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
