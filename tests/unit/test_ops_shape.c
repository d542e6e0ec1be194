/*
 * Unit tests of gather, scatter, scatter_add, masked_fill, dot, mv, outer,
 * baddbmm, linalg_vector_norm, norm, cat, stack and einsum (Tensor[] arguments,
 * boxed) through the dispatcher: every case of tests/fixtures/ops/shape.json
 * (real PyTorch).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/shape", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
