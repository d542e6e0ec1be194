/*
 * Unit tests of more ops the OpInfo sweep found refused (session 44)
 * through the dispatcher: every case of tests/fixtures/ops/misc2.json
 * (real PyTorch 2.x, tests/fixtures/ops_misc2.py): take_along_dim and isin
 * (its three overloads, both of PyTorch's paths), bincount and kron, with
 * PyTorch's errors.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/misc2", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
