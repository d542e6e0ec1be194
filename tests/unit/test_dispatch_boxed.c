/*
 * Unit tests of lib/dispatch/boxed.c: reading a boxed stack by an op's
 * schema, with the schema's defaults for absent arguments.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_str_defaults),
        cmocka_unit_test(test_given_str),
    };
    return TN_RUN_TESTS(tests);
}
