/*
 * Unit tests of the elementwise pairs and histograms the OpInfo sweep found
 * refused (session 45) through the dispatcher: every case of
 * tests/fixtures/ops/pairs.json (real PyTorch 2.x, tests/fixtures/ops_pairs.py):
 * linalg_cross (and out=), cross, polar, frexp (and out=), ldexp and
 * histogram, values compared exactly (PyTorch's rounding), with PyTorch's
 * errors; and pairs_sums.json's weighted histogram densities within the
 * sums tolerance; aminmax's gradient node.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    values_exact = true;
    run_op_cases("../ops/pairs", false, true);
}

/* weighted densities: divided by the weights' sum, which our reduction
 * adds in another order than PyTorch's (the last bit) */
static void test_fixture_sums(void **state)
{
    values_exact = false;
    run_op_cases("../ops/pairs_sums", true, true);
}

/* aminmax's two results share one node, named as PyTorch 2.x names it */
static void test_aminmax_one_node(void **state)
{
    json_t *fx = tn_test_fixture("../ops/pairs"), *names = json_object_get(fx, "aminmax_grad_fn");
    double v[6] = {1, 3, 3, 0, 0, 2};
    int64_t sizes[2] = {2, 3}, dim = 1;
    struct tn_tensor *x = tn_from_data(v, sizes, 2, TN_FLOAT64), *mn = NULL, *mx = NULL;
    assert_non_null(x);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    assert_int_equal(tn_aminmax(x, &dim, false, &mn, &mx), TN_OK);
    assert_string_equal(tn_grad_fn_name(mn), json_string_value(json_array_get(names, 0)));
    assert_string_equal(tn_grad_fn_name(mx), json_string_value(json_array_get(names, 1)));
    assert_ptr_equal(mn->grad_fn, mx->grad_fn);
    tn_release(mn);
    tn_release(mx);
    tn_release(x);
    json_decref(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_sums),
        cmocka_unit_test(test_aminmax_one_node),
    };
    return TN_RUN_TESTS(tests);
}
