/*
 * Unit tests of l1_loss, smooth_l1_loss, constant_pad_nd, group_norm,
 * upsample_nearest2d/bilinear2d, conv_transpose2d and their backward ops
 * (lib/ops/nn_loss.c, pad.c, nn.c, conv.c; lib/ops/cpu/nn_loss.c, nn_norm.c,
 * nn_upsample.c, nn_conv.c) through the dispatcher: every case of
 * tests/fixtures/ops/nn3.json (real PyTorch 1.13).
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
