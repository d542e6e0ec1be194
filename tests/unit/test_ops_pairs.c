/*
 * Unit tests of the elementwise pairs and histograms the OpInfo sweep found
 * refused (session 45) through the dispatcher: every case of
 * tests/fixtures/ops/pairs.json (real PyTorch 2.x, tests/fixtures/ops_pairs.py):
 * linalg_cross (and out=), cross, polar, frexp (and out=), ldexp and
 * histogram, values compared exactly (PyTorch's rounding), with PyTorch's
 * errors; and pairs_sums.json's weighted histogram densities within the
 * sums tolerance.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    values_exact = true;
    run_op_cases("../ops/pairs", false, true);
}

/* weighted densities: divided by the weights' sum, which our reduction
 * adds in another order than PyTorch's (the last bit) */
static void test_fixture_sums(void **state)
{
    values_exact = false;
    run_op_cases("../ops/pairs_sums", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_sums),
    };
    return TN_RUN_TESTS(tests);
}
