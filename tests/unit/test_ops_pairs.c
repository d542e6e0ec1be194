/*
 * Unit tests of the elementwise pairs and histograms the OpInfo sweep found
 * refused (session 45) through the dispatcher: every case of
 * tests/fixtures/ops/pairs.json (real PyTorch 2.x, tests/fixtures/ops_pairs.py):
 * linalg_cross (and out=) and cross, values compared exactly (PyTorch's
 * rounding), with PyTorch's errors.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    values_exact = true;
    run_op_cases("../ops/pairs", false, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
