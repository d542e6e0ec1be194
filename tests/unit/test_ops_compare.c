/*
 * Unit tests of isclose, logaddexp and logaddexp2 through the dispatcher:
 * every case of tests/fixtures/ops/compare.json (real PyTorch), and the
 * gradients of logaddexp/logaddexp2 by finite differences.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/compare", false, true);
}

static struct tn_tensor *logaddexp2_fn(struct tn_tensor *const *in, void *ctx)
{
    return ctx ? tn_logaddexp2(in[0], in[1]) : tn_logaddexp(in[0], in[1]);
}

/* Broadcast operands (3x1 with 4), equal entries included, in float64. */
static void test_logaddexp_gradcheck(void **state)
{
    for (int base2 = 0; base2 < 2; base2++)
        gradcheck2(logaddexp2_fn, tn_randn(TN_SHAPE(3, 1), TN_FLOAT64, NULL),
                   tn_randn(TN_SHAPE(4), TN_FLOAT64, NULL), base2 ? "2" : NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_logaddexp_gradcheck),
    };
    return TN_RUN_TESTS(tests);
}
