/*
 * Unit tests of the loss family (lib/ops/nn_loss.c, lib/ops/cpu/nn_loss.c)
 * through the dispatcher: nll_loss (forward, backward, nd), cross_entropy,
 * mse_loss, binary_cross_entropy_with_logits, l1_loss, smooth_l1_loss,
 * binary_cross_entropy and their backward ops, every case of
 * tests/fixtures/ops/loss.json (real PyTorch 1.13; ops_loss.py).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* nll_loss's target dtype error is 2.x's; 1.13 refuses half types in
     * binary_cross_entropy, which 2.x (and we) have */
    run_op_cases("../ops/loss", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
