/*
 * Unit tests of complex arithmetic at its edges (issue 25): every case of
 * tests/fixtures/ops/complex.json (PyTorch 2.x, ops_complex.py): division
 * by zero and reciprocal of zero with c10::complex's parts (1 / 0 is
 * inf + nanj), sgn and angle of complex, real, integer and bool tensors,
 * abs of complex; then the fixture's gradients of abs, sgn and angle
 * (PyTorch's conjugate Wirtinger convention) through tn_backward.
 */
#include "ops_cases.h"

#include <tensor/ops.h>

static void test_fixture_cases(void **state)
{
    (void)state;
    run_op_cases("../ops/complex", false, false);
}

static struct tn_tensor *apply(const char *op, const struct tn_tensor *x)
{
    if (!strcmp(op, "aten::abs"))
        return tn_abs(x);
    if (!strcmp(op, "aten::sgn"))
        return tn_sgn(x);
    assert_string_equal(op, "aten::angle");
    return tn_angle(x);
}

static void test_gradients(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../ops/complex");
    json_t *grads = json_object_get(fx, "grads"), *c;
    assert_true(json_array_size(grads) > 0);
    size_t i;
    int failed = 0;
    json_array_foreach(grads, i, c) {
        const char *op = json_string_value(json_object_get(c, "op"));
        struct tn_tensor *x = tn_test_tensor(json_object_get(c, "x"));
        struct tn_tensor *g = tn_test_tensor(json_object_get(c, "g"));
        assert_non_null(x);
        assert_non_null(g);
        assert_int_equal(tn_requires_grad_(x, true), 0);
        struct tn_tensor *y = apply(op, x);
        if (!y || tn_backward(&y, 1, &g, false, false) < 0 || !x->grad) {
            print_message("# grads %zu (%s): %s\n", i, op, tn_last_error());
            failed++;
        } else {
            char what[64];
            snprintf(what, sizeof what, "grads %zu (%s of %s)", i, op, tn_dtype_name(x->dtype));
            failed += compare(x->grad, json_object_get(c, "grad"), what, false) != 0;
        }
        tn_release(y), tn_release(g), tn_release(x);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
