/*
 * Unit tests of the cases whose reference is PyTorch 2.x alone
 * through the dispatcher: every case of tests/fixtures/ops/v2.json (real
 * PyTorch 2.x): half-precision convolution (1.13 rounds each partial sum;
 * 2.x and we round once) and complex exp2, expm1, log1p and logsumexp (1.13
 * has none).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/v2", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
