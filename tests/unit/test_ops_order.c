/*
 * Unit tests of the scans and order statistics the OpInfo sweep found
 * refused (session 44) through the dispatcher: every case of
 * tests/fixtures/ops/order.json (real PyTorch 2.x,
 * tests/fixtures/ops_order.py): cummax, cummin, logcumsumexp, kthvalue,
 * mode and aminmax, with PyTorch's errors.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/order", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
