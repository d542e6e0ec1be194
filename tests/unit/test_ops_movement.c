/*
 * Unit tests of the data-movement ops (tril, triu, flip, roll, and the
 * in-place and out= overloads) through the dispatcher: every case of
 * tests/fixtures/ops/movement.json (real PyTorch), each result compared.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* tril/triu of fewer than 2 dims: 1.13 says "Dimension out of range",
     * we give 2.x's words */
    run_op_cases("../ops/movement", false, true);
}

/* tril_ writes into self and returns 0. */
static void test_tril_in_place(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(1), tn_int(7), tn_int(1), TN_INT32);
    struct tn_tensor *m = tn_reshape(x, TN_SHAPE(2, 3));
    assert_int_equal(tn_tril_(m, 0), 0);
    const int32_t *d = tn_data(m);
    assert_int_equal(d[1], 0);
    assert_int_equal(d[3], 4);
    assert_int_equal(d[4], 5);
    assert_int_equal(d[5], 0);
    tn_release(m);
    tn_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_tril_in_place),
    };
    return TN_RUN_TESTS(tests);
}
