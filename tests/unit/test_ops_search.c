/*
 * Unit tests of the searching and order-statistics ops the OpInfo sweep
 * found refused (session 44) through the dispatcher: every case of
 * tests/fixtures/ops/search.json (real PyTorch 2.x,
 * tests/fixtures/ops_search.py): searchsorted and bucketize (.Tensor and
 * .Scalar), quantile and nanquantile, median and nanmedian (whole and
 * .dim), meshgrid, _unique2, unique_dim and unique_consecutive, with
 * PyTorch's errors.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/search", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
