/*
 * Unit tests of the ternary ops (where) through the dispatcher: every case
 * of tests/fixtures/ops/ternary.json (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/ternary", false, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
