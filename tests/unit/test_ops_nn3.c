/*
 * Unit tests of the nn ops of lib/ops/nn2.c and lib/ops/cpu/nn_more.c
 * through the dispatcher: every case of tests/fixtures/ops/nn3.json (real
 * PyTorch 1.13): l1_loss, smooth_l1_loss and its backward.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/nn3", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
