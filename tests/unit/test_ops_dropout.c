/*
 * Unit tests of the dropout family (lib/ops/cpu/nn_dropout.c) through the
 * dispatcher: every case of tests/fixtures/ops/dropout.json (real PyTorch
 * 1.13; ops_dropout.py), and dropout's mask and output after the seed
 * PyTorch was given.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/dropout", true, true);
}

/* native_dropout and dropout draw their mask from the default generator as
 * PyTorch does: the same seed drops the same elements. */
static void test_dropout_seeded(void **state)
{
    json_t *fx = tn_test_fixture("../ops/dropout");
    json_t *cases = json_object_get(fx, "dropout"), *c;
    size_t ci;
    assert_true(json_array_size(cases) >= 3);
    json_array_foreach(cases, ci, c) {
        struct tn_tensor *x = tn_test_tensor(json_object_get(c, "input")), *o, *m, *d, *b;
        double p = json_real_value(json_object_get(c, "p"));
        bool train = true;
        uint64_t seed = (uint64_t)json_integer_value(json_object_get(c, "seed"));
        tn_manual_seed(seed);
        assert_int_equal(tn_native_dropout(x, p, &train, &o, &m), 0);
        assert_int_equal(compare(o, json_object_get(c, "output"), "native_dropout", false), 0);
        assert_int_equal(compare(m, json_object_get(c, "mask"), "native_dropout mask", false), 0);
        tn_manual_seed(seed);
        assert_non_null(d = tn_dropout(x, p, true));
        assert_int_equal(compare(d, json_object_get(c, "dropout"), "dropout", false), 0);
        assert_non_null(b = tn_native_dropout_backward(x, m, 1 / (1 - p)));
        assert_int_equal(compare(b, json_object_get(c, "backward"), "native_dropout_backward",
                                 false), 0);
        tn_release(x);
        tn_release(o);
        tn_release(m);
        tn_release(d);
        tn_release(b);
    }
    json_decref(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_dropout_seeded),
    };
    return TN_RUN_TESTS(tests);
}
