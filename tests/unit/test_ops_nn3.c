/*
 * Unit tests of constant_pad_nd, group_norm, upsample_nearest2d/bilinear2d,
 * conv_transpose2d and their backward ops (lib/ops/pad.c, nn.c, conv.c;
 * lib/ops/cpu/nn_norm.c, nn_upsample.c, nn_conv.c) through the dispatcher:
 * every case of tests/fixtures/ops/nn3.json (real PyTorch 1.13). The l1
 * and smooth l1 losses are test_ops_loss's.
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
