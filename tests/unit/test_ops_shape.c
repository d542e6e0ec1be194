/*
 * Unit tests of gather, scatter, scatter_add, masked_fill, dot, mv, outer,
 * baddbmm, linalg_vector_norm, norm, cat, stack and einsum (Tensor[] arguments,
 * boxed) through the dispatcher: every case of tests/fixtures/ops/shape.json
 * (real PyTorch).
 */
#include "ops_cases.h"

#include <tensor/autograd.h>

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/shape", true, true);
}

static struct tn_tensor *einsum_batched(struct tn_tensor *const *in, void *ctx)
{
    return tn_einsum((const char *)ctx, (const struct tn_tensor *const *)in, 2, NULL, 0);
}

/* Gradients through an ellipsis that broadcasts (a batch of 2x3 matrices
 * times one batch dim of size 1), by finite differences. */
static void test_einsum_ellipsis_gradcheck(void **state)
{
    gradcheck2(einsum_batched, tn_randn(TN_SHAPE(2, 3, 2, 3), TN_FLOAT64, NULL),
               tn_randn(TN_SHAPE(1, 3, 4), TN_FLOAT64, NULL), "...ij,...jk->...ik");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_einsum_ellipsis_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
