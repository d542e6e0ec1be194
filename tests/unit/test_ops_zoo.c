/*
 * Unit tests of the core ATen ops the model zoo needed (issue 23) through
 * the dispatcher: every case of tests/fixtures/ops/zoo.json (real PyTorch
 * 2.x, tests/fixtures/ops_zoo.py): hardswish, hardsigmoid,
 * pow.Tensor_Scalar, min.other, clamp_min, where.ScalarOther.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/zoo", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
