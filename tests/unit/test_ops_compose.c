/*
 * Unit tests of the products and compositions the OpInfo sweep found
 * refused (session 45) through the dispatcher: every case of
 * tests/fixtures/ops/compose.json (real PyTorch 2.x,
 * tests/fixtures/ops_compose.py): tensordot, block_diag, cartesian_prod,
 * combinations, trapezoid, cumulative_trapezoid, cov, corrcoef, vander and
 * linalg_vander, with PyTorch's errors; and its "indices" list through the
 * factories tn_tril_indices and tn_triu_indices (no dispatcher op).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/compose", true, true);
}

static void test_triangle_indices(void **state)
{
    json_t *fx = tn_test_fixture("../ops/compose");
    json_t *list = json_object_get(fx, "indices"), *e;
    assert_true(json_array_size(list) > 0);
    size_t i;
    int failed = 0;
    json_array_foreach(list, i, e) {
        int64_t row = json_integer_value(json_object_get(e, "row"));
        int64_t col = json_integer_value(json_object_get(e, "col"));
        int64_t off = json_integer_value(json_object_get(e, "offset"));
        json_t *d = json_object_get(e, "dtype"), *err = json_object_get(e, "error");
        enum tn_dtype dt = json_is_string(d) ? tn_test_dtype(json_string_value(d)) : TN_DTYPE_UNSET;
        bool lower = !strcmp(json_string_value(json_object_get(e, "op")), "tril");
        struct tn_tensor *t = lower ? tn_tril_indices(row, col, off, dt)
                                    : tn_triu_indices(row, col, off, dt);
        char what[96];
        snprintf(what, sizeof what, "%s_indices(%lld, %lld, %lld)", lower ? "tril" : "triu",
                 (long long)row, (long long)col, (long long)off);
        if (err) {
            if (t || strcmp(tn_last_error(), json_string_value(err)) != 0) {
                print_message("# %s: '%s', PyTorch says '%s'\n", what, t ? "(no error)"
                              : tn_last_error(), json_string_value(err));
                failed++;
            }
        } else if (!t) {
            print_message("# %s: %s\n", what, tn_last_error());
            failed++;
        } else
            failed += compare(t, json_object_get(e, "out"), what, false) != 0;
        tn_release(t);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_triangle_indices),
    };
    return TN_RUN_TESTS(tests);
}
