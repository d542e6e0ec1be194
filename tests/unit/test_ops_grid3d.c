/*
 * Unit tests of grid_sampler_3d and grid_sampler_3d_backward through the
 * dispatcher (lib/ops/cpu/nn_grid_sample3d.c): every case of
 * tests/fixtures/ops/grid3d.json (real PyTorch 1.13; ops_grid3d.py), and
 * the gradients of input and grid by finite differences for each mode,
 * padding and align_corners (the autograd node's formula is the backward op).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/grid3d", true, true);
}

static struct tn_tensor *grid3d_fn(struct tn_tensor *const *in, void *ctx)
{
    int mode = *(const int *)ctx;
    return tn_grid_sampler_3d(in[0], in[1], mode / 6, mode / 2 % 3, mode % 2);
}

/* float64 input [1, 2, 3, 4, 3] and a grid [1, 2, 2, 3, 3] inside
 * (-0.8, 0.8) (no voxel boundary within finite differences' reach) */
static void test_grid3d_gradcheck(void **state)
{
    for (int mode = 0; mode < 18; mode++) {
        struct tn_tensor *u = tn_rand(TN_SHAPE(1, 2, 2, 3, 3), TN_FLOAT64, NULL);
        struct tn_tensor *c = tn_add_scalar(u, tn_float(-0.5), tn_int(1));
        struct tn_tensor *gr = tn_mul_scalar(c, tn_float(1.6));
        tn_release(u);
        tn_release(c);
        gradcheck2(grid3d_fn, tn_randn(TN_SHAPE(1, 2, 3, 4, 3), TN_FLOAT64, NULL), gr, &mode);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_grid3d_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
