/*
 * Unit tests of the ternary ops (where, addcmul, addcdiv, lerp) through
 * the dispatcher: every case of tests/fixtures/ops/ternary.json (real
 * PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16 addcmul/addcdiv/lerp: 1.13 lacks them, 2.x has them */
    run_op_cases("../ops/ternary", false, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
