/*
 * Unit tests of the norm family (lib/ops/nn.c, lib/ops/cpu/nn_norm.c):
 * layer, batch and group norm and their backward ops through the
 * dispatcher, every case of tests/fixtures/ops/norm.json (real PyTorch;
 * ops_norm.py), and batch norm's update of the running statistics.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* _native_batch_norm_legit_no_training is 2.x's */
    run_op_cases("../ops/norm", true, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/norm_v2.json by
 * ops_norm_v2.py): native_layer_norm rows of equal elements (2.x gives exactly 0). */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/norm_v2", true, true);
}

/* native_batch_norm in training updates running_mean and running_var in
 * place: (1 - momentum) * old + momentum * the batch's mean (unbiased
 * variance), as PyTorch left them. */
static void test_running_stats(void **state)
{
    json_t *fx = tn_test_fixture("../ops/norm");
    json_t *cases = json_object_get(fx, "running"), *c;
    size_t ci;
    assert_true(json_array_size(cases) >= 2);
    json_array_foreach(cases, ci, c) {
        json_t *args = json_object_get(c, "args");
        struct tn_tensor *x = tn_test_tensor(json_object_get(json_array_get(args, 0), "tensor"));
        struct tn_tensor *rm = tn_test_tensor(json_object_get(json_array_get(args, 1), "tensor"));
        struct tn_tensor *rv = tn_test_tensor(json_object_get(json_array_get(args, 2), "tensor"));
        struct tn_tensor *out, *sm, *si;
        assert_int_equal(tn_native_batch_norm(x, NULL, NULL, rm, rv, true,
                                              json_real_value(json_object_get(c, "momentum")),
                                              1e-5, &out, &sm, &si), 0);
        json_t *want = json_object_get(c, "running");
        assert_int_equal(compare(rm, json_array_get(want, 0), "running_mean", true), 0);
        assert_int_equal(compare(rv, json_array_get(want, 1), "running_var", true), 0);
        tn_release(out);
        tn_release(sm);
        tn_release(si);
        tn_release(x);
        tn_release(rm);
        tn_release(rv);
    }
    json_decref(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_running_stats),
    };
    return TN_RUN_TESTS(tests);
}
