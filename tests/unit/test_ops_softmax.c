/*
 * Unit tests of softmax and log_softmax through the dispatcher: every case
 * of tests/fixtures/ops/softmax.json (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16 softmax on the CPU: 1.13 lacks it, 2.x has it; we follow 2.x */
    run_op_cases("../ops/softmax", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
