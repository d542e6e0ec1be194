/*
 * Unit tests of the second set of reductions (prod, any, all, logsumexp,
 * var, std) through the dispatcher: every case of
 * tests/fixtures/ops/reduce2.json (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16/bfloat16 prod and float16 logsumexp: 1.13 lacks them, 2.x has them */
    run_op_cases("../ops/reduce2", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
