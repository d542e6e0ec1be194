/*
 * Unit tests of the reductions (sum, mean, amax, amin, prod, any, all,
 * argmax, argmin, cumsum, cumprod, logsumexp, var, std) through the
 * dispatcher: every case of tests/fixtures/ops/reduce.json (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16/bfloat16 prod and float16 logsumexp: 1.13 lacks them, 2.x has them */
    run_op_cases("../ops/reduce", true, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/reduce_v2.json by
 * ops_reduce_v2.py): complex64 logsumexp and any.dims (1.13 lacks them). */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/reduce_v2", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
    };
    return TN_RUN_TESTS(tests);
}
