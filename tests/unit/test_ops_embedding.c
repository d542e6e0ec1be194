/*
 * Unit tests of the embedding family (lib/ops/nn.c, lib/ops/cpu/shape.c)
 * through the dispatcher: index_select, embedding and
 * embedding_dense_backward, every case of tests/fixtures/ops/embedding.json
 * (real PyTorch 1.13; ops_embedding.py).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/embedding", true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
    };
    return TN_RUN_TESTS(tests);
}
