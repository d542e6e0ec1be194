/*
 * test_views: every view function against PyTorch (fixture core/views.json
 * written by tests/fixtures/core_views.py): each case's chain of ops is
 * applied with tn_* calls and the result compared with PyTorch's values,
 * strides and storage offset, its sharing of the input's storage, or
 * PyTorch's error message.
 */
#include "tn_test.h"

#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t tn_arg(json_t *op, size_t i)
{
    json_t *v = json_array_get(op, i);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

/* Applies one fixture op ["name", args...] to t; NULL on failure. */
static struct tn_tensor *tn_apply(const struct tn_tensor *t, json_t *op)
{
    const char *name = json_string_value(json_array_get(op, 0));
    int64_t a[TN_MAX_DIMS], b[TN_MAX_DIMS];
    int na, nb;
    assert_non_null(name);
    if (!strcmp(name, "view") || !strcmp(name, "reshape") || !strcmp(name, "permute") ||
        !strcmp(name, "expand") || !strcmp(name, "broadcast_to") ||
        !strcmp(name, "squeeze_dims")) {
        na = tn_test_ints(json_array_get(op, 1), a);
        if (!strcmp(name, "view")) return tn_view(t, a, na);
        if (!strcmp(name, "reshape")) return tn_reshape(t, a, na);
        if (!strcmp(name, "permute")) return tn_permute(t, a, na);
        if (!strcmp(name, "expand")) return tn_expand(t, a, na);
        if (!strcmp(name, "broadcast_to")) return tn_broadcast_to(t, a, na);
        return tn_squeeze_dims(t, a, na);
    }
    if (!strcmp(name, "transpose")) return tn_transpose(t, tn_arg(op, 1), tn_arg(op, 2));
    if (!strcmp(name, "t")) return tn_t(t);
    if (!strcmp(name, "narrow"))
        return tn_narrow(t, tn_arg(op, 1), tn_arg(op, 2), tn_arg(op, 3));
    if (!strcmp(name, "slice")) {
        json_t *end = json_array_get(op, 3);
        return tn_slice(t, tn_arg(op, 1), tn_arg(op, 2),
                        json_is_null(end) ? TN_END : json_integer_value(end), tn_arg(op, 4));
    }
    if (!strcmp(name, "select")) return tn_select(t, tn_arg(op, 1), tn_arg(op, 2));
    if (!strcmp(name, "squeeze")) return tn_squeeze(t);
    if (!strcmp(name, "unsqueeze")) return tn_unsqueeze(t, tn_arg(op, 1));
    if (!strcmp(name, "flatten")) return tn_flatten(t, tn_arg(op, 1), tn_arg(op, 2));
    if (!strcmp(name, "unflatten")) {
        na = tn_test_ints(json_array_get(op, 2), a);
        return tn_unflatten(t, tn_arg(op, 1), a, na);
    }
    if (!strcmp(name, "as_strided")) {
        na = tn_test_ints(json_array_get(op, 1), a);
        nb = tn_test_ints(json_array_get(op, 2), b);
        assert_int_equal(na, nb);
        json_t *off = json_array_get(op, 3);
        return tn_as_strided(t, a, na, b, json_is_null(off) ? t->offset : json_integer_value(off));
    }
    if (!strcmp(name, "diagonal"))
        return tn_diagonal(t, tn_arg(op, 1), tn_arg(op, 2), tn_arg(op, 3));
    if (!strcmp(name, "unfold")) return tn_unfold(t, tn_arg(op, 1), tn_arg(op, 2), tn_arg(op, 3));
    if (!strcmp(name, "contiguous")) return tn_contiguous(t);
    fail_msg("unknown op %s in fixture", name);
    return NULL;
}

/* True when tn_last_error()'s first line is `want`. */
static bool tn_error_is(const char *want)
{
    const char *got = tn_last_error();
    size_t n = strcspn(got, "\n");
    return strlen(want) == n && !strncmp(got, want, n);
}

/* Runs one case; returns 0 when it agrees with PyTorch (or with the
 * behaviour the fixture says tensorkit follows instead). */
static int tn_run_case(json_t *c, int torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *want_err = json_string_value(json_object_get(c, "error"));
    const char *err_type = json_string_value(json_object_get(c, "error_type"));
    json_t *follow = json_object_get(c, "follow");
    bool lenient = torch1 && follow && !strcmp(json_string_value(follow), "2.x");
    bool refuse = json_object_get(c, "refuse") != NULL;
    struct tn_tensor *in = tn_test_tensor(json_object_get(c, "input"));
    struct tn_tensor *cur = tn_retain(in);
    size_t i;
    json_t *op;
    tn_clear_error();
    json_array_foreach(json_object_get(c, "ops"), i, op) {
        struct tn_tensor *next = tn_apply(cur, op);
        tn_release(cur);
        cur = next;
        if (!cur)
            break;
    }
    int rc = 0;
    int n = (int)strcspn(tn_last_error(), "\n");
    if (lenient) {
        /* follows 2.x: the 2.x fixture checks it, 1.13 may differ */
    } else if (refuse) {
        /* PyTorch builds a tensor with a negative size; we must fail. */
        if (cur) {
            print_message("# %s: succeeded where tensorkit refuses (%s)\n", name,
                          json_string_value(json_object_get(c, "refuse")));
            rc = -1;
        }
    } else if (want_err) {
        if (cur) {
            print_message("# %s: succeeded, PyTorch fails with \"%s\"\n", name, want_err);
            rc = -1;
        } else if (!tn_error_is(want_err)) {
            print_message("# %s: error \"%.*s\", PyTorch \"%s\"\n", name, n, tn_last_error(),
                          want_err);
            rc = -1;
        } else if (err_type && !strcmp(err_type, "IndexError") &&
                   tn_last_status() != TN_EINDEX) {
            print_message("# %s: PyTorch raises IndexError, our status is %d\n", name,
                          (int)tn_last_status());
            rc = -1;
        }
    } else if (!cur) {
        print_message("# %s: failed with \"%.*s\", PyTorch succeeds\n", name, n,
                      tn_last_error());
        rc = -1;
    } else {
        rc = tn_test_compare(cur, json_object_get(c, "result"), name, 1);
        bool shares = cur->storage == in->storage;
        bool is_view = json_is_true(json_object_get(c, "is_view"));
        if (rc == 0 && shares != is_view) {
            print_message("# %s: %s the input's storage, PyTorch's result %s\n", name,
                          shares ? "shares" : "does not share", is_view ? "does" : "does not");
            rc = -1;
        }
        /* a view records the root of its chain, as PyTorch's _base */
        if (rc == 0 && shares && cur != in && cur->base != in) {
            print_message("# %s: a view that does not record its base\n", name);
            rc = -1;
        }
    }
    tn_release(cur);
    tn_release(in);
    return rc;
}

/* Runs the cases of one fixture file. */
static void tn_run_fixture(const char *file)
{
    tn_test_fixture_cases(file, "cases", "view", tn_run_case);
}

/* The internal helpers on their own, where the fixture cannot reach. */
static void test_infer_size(void **state)
{
    (void)state;
    int64_t out[4];
    assert_int_equal(tn__infer_size(TN_SHAPE(3, -1), 12, out), TN_OK);
    assert_int_equal(out[1], 4);
    assert_int_equal(tn__infer_size(TN_SHAPE(-1, -1), 12, out), TN_ESHAPE);
    assert_string_equal(tn_last_error(), "only one dimension can be inferred");
    assert_int_equal(tn__infer_size(TN_SHAPE(3, 5), 12, out), TN_ESHAPE);
    assert_string_equal(tn_last_error(), "shape '[3, 5]' is invalid for input of size 12");
}

static void test_too_many_dims(void **state)
{
    (void)state;
    int64_t ones[TN_MAX_DIMS + 1];
    for (int i = 0; i <= TN_MAX_DIMS; i++)
        ones[i] = 1;
    struct tn_tensor *t = tn_zeros(ones, TN_MAX_DIMS, TN_FLOAT32);
    assert_non_null(t);
    assert_null(tn_unsqueeze(t, 0));
    assert_null(tn_view(t, ones, TN_MAX_DIMS + 1));
    assert_null(tn_unfold(t, 0, 1, 1));
    struct tn_tensor *v = tn_view(t, ones, TN_MAX_DIMS);
    assert_non_null(v);
    assert_ptr_equal(v->base, t);
    tn_release(v);
    tn_release(t);
}

/* views.json comes from PyTorch 1.13, views_torch2.json from 2.x. */
static void test_views_fixture(void **state)
{
    (void)state;
    tn_run_fixture("views");
}

static void test_views_fixture_torch2(void **state)
{
    (void)state;
    tn_run_fixture("views_torch2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_fixture),
        cmocka_unit_test(test_views_fixture_torch2),
        cmocka_unit_test(test_infer_size),
        cmocka_unit_test(test_too_many_dims),
    };
    return TN_RUN_TESTS(tests);
}
