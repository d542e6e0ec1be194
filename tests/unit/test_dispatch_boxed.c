/*
 * Unit tests of lib/dispatch/boxed.c: reading a boxed stack by an op's
 * schema, with the schema's defaults for absent arguments; and of
 * lib/dispatch/out.c's out= helper on its failure path.
 */
#include "tn_test.h"

/* An op of two str arguments whose defaults differ, as
 * conv2d.padding(..., str padding="valid") beside another str. */
static const struct tn_arg_schema two_str_args[] = {
    {"mode", "str", TN_IV_STR, false, false, true, "'mean'"},
    {"approximate", "str", TN_IV_STR, false, false, true, "\"tanh\""},
};
static const struct tn_op two_str = {
    .ns = "test", .name = "two_str", .overload = "", .qualname = "test::two_str",
    .schema = "two_str(*, str mode='mean', str approximate=\"tanh\") -> ()",
    .args = two_str_args, .nargs = 2,
};

/* Both defaults survive the unboxing of the other: each is its own string
 * (a shared buffer gave "tanh" twice). */
static void test_two_str_defaults(void **state)
{
    struct tn_dispatch_arg a[2];
    assert_int_equal(tn_dispatch_unbox(&two_str, NULL, 0, a), 0);
    assert_string_equal(a[0].v.p, "mean");
    assert_string_equal(a[1].v.p, "tanh");
    /* and a later call does not overwrite an earlier call's */
    struct tn_dispatch_arg b[2];
    struct tn_ivalue st[1] = {{.tag = TN_IV_NONE}};
    assert_int_equal(tn_dispatch_unbox(&two_str, st, 1, b), 0);
    assert_string_equal(a[0].v.p, "mean");
    assert_string_equal(b[1].v.p, "tanh");
    assert_ptr_equal(a[0].v.p, b[0].v.p); /* one copy per default */
}

/* A given str is the stack's own. */
static void test_given_str(void **state)
{
    struct tn_ivalue st[2] = {{.tag = TN_IV_STR, .v.str = "sum"}, {.tag = TN_IV_NONE}};
    const char *s;
    assert_int_equal(tn_ivalue_str(&two_str, st, 2, 0, &s), 0);
    assert_ptr_equal(s, st[0].v.str);
    assert_int_equal(tn_ivalue_str(&two_str, st, 2, 1, &s), 0);
    assert_string_equal(s, "tanh");
}

/* An out= tensor of another dtype whose temporary cannot be allocated
 * (2^62 float32 elements overflow size_t): prepare_out fails with an
 * error and leaves *target at out, never NULL, so finishing is safe. An
 * expanded (stride 0) float64 out has the result's shape without the
 * memory. Through the generated entry, neg.out fails the same way. */
static void test_prepare_out_alloc_failure(void **state)
{
    struct tn_tensor *one = tn_scalar_tensor(tn_float(1.0), TN_FLOAT64);
    assert_non_null(one);
    const int64_t huge[1] = {INT64_C(1) << 62};
    struct tn_tensor *out = tn_expand(one, huge, 1);
    assert_non_null(out);
    struct tn_meta m = {.ndim = 1, .sizes = {huge[0]}, .dtype = TN_FLOAT32};
    struct tn_tensor *target = NULL;
    tn_clear_error();
    int rc = tn_dispatch_prepare_out(&m, out, false, &target);
    assert_true(rc < 0);
    assert_int_equal(rc, tn_last_status());
    assert_ptr_equal(target, out);
    assert_int_equal(tn_dispatch_finish_out(rc, out, target), rc);

    struct tn_tensor *f = tn_scalar_tensor(tn_float(2.0), TN_FLOAT32);
    struct tn_tensor *in = tn_expand(f, huge, 1);
    assert_non_null(in);
    tn_clear_error();
    assert_true(tn_neg_out(in, out) < 0);
    assert_true(tn_last_status() < 0);
    tn_release(in);
    tn_release(f);
    tn_release(out);
    tn_release(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_str_defaults),
        cmocka_unit_test(test_given_str),
        cmocka_unit_test(test_prepare_out_alloc_failure),
    };
    return TN_RUN_TESTS(tests);
}
