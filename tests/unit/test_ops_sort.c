/*
 * Unit tests of the ops with two returns (max.dim, min.dim, sort, topk, and
 * their out= overloads) through the dispatcher: every case of
 * tests/fixtures/ops/sort.json (real PyTorch), each result compared, and
 * the typed tuple API called directly.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16 topk and complex sort: 1.13's words (or none) differ from 2.x's */
    run_op_cases("../ops/sort", false, true);
}

/* The generated C convention: 0 and a new reference in each out-pointer,
 * or an error and NULLs. */
static void test_typed_tuple(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_FLOAT32), *v = NULL, *i = NULL;
    struct tn_tensor *x2 = tn_reshape(x, TN_SHAPE(2, 3));
    assert_int_equal(tn_max_dim(x2, 1, false, &v, &i), 0);
    assert_int_equal(v->ndim, 1);
    assert_int_equal(((const float *)tn_data(v))[1], 5.0f);
    assert_int_equal(((const int64_t *)tn_data(i))[0], 2);
    tn_release(v);
    tn_release(i);
    assert_true(tn_topk(x2, 4, 1, true, true, &v, &i) < 0);
    assert_null(v);
    assert_null(i);
    assert_string_equal(tn_last_error(), "selected index k out of range");
    tn_release(x2);
    tn_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_typed_tuple),
    };
    return TN_RUN_TESTS(tests);
}
