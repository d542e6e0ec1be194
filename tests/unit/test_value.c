/*
 * test_value: core's nested values (tensor/value.h) without io: the dotted
 * paths tn_value_walk gives every kind of key (str, int, bool, float,
 * None, a tuple's type name), past the walk's first 64 bytes of path,
 * empty containers and a bare scalar as leaves, a callback's stop, and
 * tn_value_walk_tensors visiting tensors alone.  The paths are the ones
 * `tckpt ls` and `tckpt diff` print.
 */
#include "tn_test.h"

#include <tensor/value.h>

#include <stdlib.h>
#include <string.h>

struct seen {
    char text[1024];
    int n, stop_at;
};

/* Appends "path=kind;" for each leaf; returns 7 at leaf stop_at (1-based). */
static int leaf(const char *path, const struct tn_value *v, void *ctx)
{
    struct seen *s = ctx;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof s->text - len, "%s=%s;", path, tn_value_kind_name(v->kind));
    return ++s->n == s->stop_at ? 7 : 0;
}

static int tensor_leaf(const char *path, struct tn_tensor *t, void *ctx)
{
    struct seen *s = ctx;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof s->text - len, "%s:%lld;", path, (long long)t->sizes[0]);
    s->n++;
    return 0;
}

/* {"a": tensor[3], 1: [{}, [], 2.5], False: None, 2.5: "s", None: 7,
 *  (1, 2): 3, "k" * 100: {"x": 1}} */
static struct tn_value *tree(void)
{
    struct tn_value *d = tn_value_dict();
    assert_non_null(d);
    int64_t n = 3;
    struct tn_tensor *t = tn_zeros(&n, 1, TN_FLOAT32);
    assert_non_null(t);
    assert_int_equal(tn_value_set(d, tn_value_str("a"), tn_value_tensor(t)), 0);
    tn_release(t);
    struct tn_value *l = tn_value_list();
    assert_int_equal(tn_value_append(l, tn_value_dict()), 0);
    assert_int_equal(tn_value_append(l, tn_value_list()), 0);
    assert_int_equal(tn_value_append(l, tn_value_float(2.5)), 0);
    assert_int_equal(tn_value_set(d, tn_value_int(1), l), 0);
    assert_int_equal(tn_value_set(d, tn_value_bool(false), tn_value_none()), 0);
    assert_int_equal(tn_value_set(d, tn_value_float(2.5), tn_value_str("s")), 0);
    assert_int_equal(tn_value_set(d, tn_value_none(), tn_value_int(7)), 0);
    struct tn_value *k = tn_value_tuple();
    assert_int_equal(tn_value_append(k, tn_value_int(1)), 0);
    assert_int_equal(tn_value_append(k, tn_value_int(2)), 0);
    assert_int_equal(tn_value_set(d, k, tn_value_int(3)), 0);
    char longkey[101];
    memset(longkey, 'k', 100);
    longkey[100] = 0;
    struct tn_value *inner = tn_value_dict();
    assert_int_equal(tn_value_set(inner, tn_value_str("x"), tn_value_int(1)), 0);
    assert_int_equal(tn_value_set(d, tn_value_str(longkey), inner), 0);
    return d;
}

static void test_walk_paths(void **state)
{
    (void)state;
    struct tn_value *d = tree();
    struct seen s = {.stop_at = -1};
    assert_int_equal(tn_value_walk(d, leaf, &s), 0);
    char want[1024];
    snprintf(want, sizeof want,
             "a=Tensor;1.0=dict;1.1=list;1.2=float;False=NoneType;2.5=str;None=int;"
             "<tuple>=int;%.100s.x=int;",
             "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk");
    assert_string_equal(s.text, want);
    assert_int_equal(s.n, 9);

    /* a non-zero result stops the walk and is returned */
    struct seen stop = {.stop_at = 3};
    assert_int_equal(tn_value_walk(d, leaf, &stop), 7);
    assert_string_equal(stop.text, "a=Tensor;1.0=dict;1.1=list;");

    /* tensors alone, with their paths */
    struct seen ts = {.stop_at = -1};
    assert_int_equal(tn_value_walk_tensors(d, tensor_leaf, &ts), 0);
    assert_string_equal(ts.text, "a:3;");
    tn_value_release(d);
}

/* A bare scalar is one leaf at the empty path; an empty dict is one leaf. */
static void test_walk_top(void **state)
{
    (void)state;
    struct tn_value *v = tn_value_int(5);
    struct seen s = {.stop_at = -1};
    assert_int_equal(tn_value_walk(v, leaf, &s), 0);
    assert_string_equal(s.text, "=int;");
    tn_value_release(v);
    v = tn_value_odict();
    struct seen e = {.stop_at = -1};
    assert_int_equal(tn_value_walk(v, leaf, &e), 0);
    assert_string_equal(e.text, "=OrderedDict;");
    tn_value_release(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_paths),
        cmocka_unit_test(test_walk_top),
    };
    return TN_RUN_TESTS(tests);
}
