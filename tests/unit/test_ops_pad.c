/*
 * Unit tests of pad's modes: reflection_pad1d/2d/3d, replication_pad1d/2d/3d,
 * their backward ops, _pad_circular, constant_pad_nd and pad, through the
 * dispatcher: every case of tests/fixtures/ops/pad.json (real PyTorch;
 * ops_pad.py), each result compared.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* 1.13 refuses the integer and half dtypes 2.x pads, and words several
     * errors otherwise: we follow 2.x (ops_torch2.bats checks it strictly) */
    run_op_cases("../ops/pad", false, true);
}

/* The reflect mode of pad is reflection_pad2d's values: each border
 * element mirrored about the edge, the edge itself not repeated. */
static void test_reflect_values(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(3), tn_int(1), TN_FLOAT32);
    struct tn_tensor *x2 = tn_reshape(x, TN_SHAPE(1, 3));
    struct tn_tensor *r = tn_pad(x2, (const int64_t[]){2, 2}, 2, "reflect", NULL);
    assert_non_null(r);
    const float want[] = {2, 1, 0, 1, 2, 1, 0};
    assert_int_equal(r->sizes[1], 7);
    for (int i = 0; i < 7; i++)
        assert_true(((const float *)tn_data(r))[i] == want[i]);
    tn_release(r);
    tn_release(x2);
    tn_release(x);
}

/* Pads that overflow the output size (a graph may ask for them) are an
 * error, not a wrapped size. */
static void test_huge_pads(void **state)
{
    struct tn_tensor *x = tn_zeros(TN_SHAPE(2, 3), TN_FLOAT32);
    assert_null(tn_replication_pad1d(x, (const int64_t[]){INT64_MAX, 1}, 2));
    assert_null(tn_underscore_pad_circular(x, (const int64_t[]){INT64_MIN + 1, INT64_MIN + 1}, 2));
    tn_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_reflect_values),
        cmocka_unit_test(test_huge_pads),
    };
    return TN_RUN_TESTS(tests);
}
