/*
 * test_print: tn_format against repr() of real PyTorch (fixtures
 * core/print.json from PyTorch 2.x, which tensorkit follows, and
 * core/print_torch1.json from Debian's 1.13, written by
 * tests/fixtures/core_print.py).
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PyTorch's defaults as the fixture recorded them. */
static struct tn_printoptions tn_defaults(json_t *fx)
{
    json_t *d = json_object_get(fx, "defaults");
    assert_non_null(d);
    assert_true(json_is_null(json_object_get(d, "sci_mode")));
    return (struct tn_printoptions){
        .precision = (int)json_integer_value(json_object_get(d, "precision")),
        .threshold = (int64_t)json_number_value(json_object_get(d, "threshold")),
        .edgeitems = (int)json_integer_value(json_object_get(d, "edgeitems")),
        .linewidth = (int)json_integer_value(json_object_get(d, "linewidth")),
        .sci_mode = -1,
    };
}

/* Applies a case's set_printoptions keywords over the defaults. */
static void tn_apply_options(json_t *opts, struct tn_printoptions defaults)
{
    tn_set_printoptions(&defaults);
    if (!opts)
        return;
    struct tn_printoptions o = {-1, -1, -1, -1, -1};
    json_t *v;
    if ((v = json_object_get(opts, "precision")))
        o.precision = (int)json_integer_value(v);
    if ((v = json_object_get(opts, "threshold")))
        o.threshold = (int64_t)json_number_value(v);
    if ((v = json_object_get(opts, "edgeitems")))
        o.edgeitems = (int)json_integer_value(v);
    if ((v = json_object_get(opts, "linewidth")))
        o.linewidth = (int)json_integer_value(v);
    if ((v = json_object_get(opts, "sci_mode")) && !json_is_null(v))
        o.sci_mode = json_is_true(v);
    tn_set_printoptions(&o);
}

/* A stand-in autograd node: only the header the printer reads. */
struct tn_fake_node {
    struct tn_node_header h;
    char name[64];
};

static void tn_fake_destroy(struct tn_node *n) { free(n); }

static void tn_free_buf(void *data, size_t nbytes, void *ctx)
{
    (void)nbytes;
    (void)ctx;
    free(data);
}

/* A meta tensor: the geometry over a storage that claims the meta device
 * (its bytes, zeros, are never read). */
static struct tn_tensor *tn_meta_tensor(json_t *input)
{
    int64_t shape[TN_MAX_DIMS];
    int nd = tn_test_ints(json_object_get(input, "shape"), shape);
    enum tn_dtype dt = tn_test_dtype(json_string_value(json_object_get(input, "dtype")));
    int64_t numel = 1;
    for (int i = 0; i < nd; i++)
        numel *= shape[i];
    size_t nbytes = (size_t)numel * tn_dtype_size(dt);
    void *buf = calloc(1, nbytes + 1);
    assert_non_null(buf);
    struct tn_storage *s = tn_storage_from_external(
        buf, nbytes, (struct tn_device){TN_DEVICE_META, -1}, tn_free_buf, NULL);
    assert_non_null(s);
    struct tn_tensor *t = tn_tensor_from_storage(s, 0, shape, nd, NULL, dt);
    tn_storage_release(s);
    assert_non_null(t);
    return t;
}

/* Applies one recorded view op (["transpose", 0, 1], ["slice", dim, start,
 * end, step], ["select", dim, index], ["expand", [sizes]], ["permute",
 * [dims]]) with the public view functions. */
static struct tn_tensor *tn_apply_op(const struct tn_tensor *t, json_t *op)
{
    const char *name = json_string_value(json_array_get(op, 0));
    int64_t a[5] = {0}, list[TN_MAX_DIMS];
    for (size_t k = 1; k < json_array_size(op) && k < 5; k++)
        a[k] = json_integer_value(json_array_get(op, k));
    struct tn_tensor *v = NULL;
    if (!strcmp(name, "transpose"))
        v = tn_transpose(t, a[1], a[2]);
    else if (!strcmp(name, "slice"))
        v = tn_slice(t, a[1], a[2], a[3], json_integer_value(json_array_get(op, 4)));
    else if (!strcmp(name, "select"))
        v = tn_select(t, a[1], a[2]);
    else if (!strcmp(name, "expand"))
        v = tn_expand(t, list, tn_test_ints(json_array_get(op, 1), list));
    else if (!strcmp(name, "permute"))
        v = tn_permute(t, list, tn_test_ints(json_array_get(op, 1), list));
    else
        fail_msg("fixture names unknown view op %s", name);
    if (!v)
        fail_msg("%s: %s", name, tn_last_error());
    return v;
}

/* Builds the tensor a case prints: its values, or a view over its base,
 * with the autograd state and flags it records. */
static struct tn_tensor *tn_case_tensor(json_t *c)
{
    json_t *input = json_object_get(c, "input");
    json_t *base_j = json_object_get(c, "base");
    struct tn_tensor *t;
    if (json_object_get(c, "device")) {
        assert_string_equal(json_string_value(json_object_get(c, "device")), "meta");
        t = tn_meta_tensor(input);
    } else if (base_j) {
        t = tn_test_tensor(base_j);
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(c, "ops"), i, op) {
            struct tn_tensor *v = tn_apply_op(t, op);
            tn_release(t);
            t = v;
        }
        /* the ops must rebuild PyTorch's geometry, or the case tests nothing */
        assert_int_equal(tn_test_compare(t, input, "view", 1), 0);
    } else {
        t = tn_test_tensor(input);
    }
    t->requires_grad = json_is_true(json_object_get(c, "requires_grad"));
    json_t *gf = json_object_get(c, "grad_fn");
    if (json_is_string(gf)) {
        struct tn_fake_node *n = calloc(1, sizeof *n);
        assert_non_null(n);
        snprintf(n->name, sizeof n->name, "%s", json_string_value(gf));
        n->h = (struct tn_node_header){1, tn_fake_destroy, n->name};
        t->grad_fn = (struct tn_node *)n;
    }
    if (json_is_true(json_object_get(c, "parameter")))
        t->flags |= TN_TENSOR_PARAMETER;
    return t;
}

/* Prints s as TAP comment lines. */
static void print_diag(const char *label, const char *s)
{
    print_message("# %s:\n", label);
    while (*s) {
        size_t n = strcspn(s, "\n");
        print_message("#   %.*s\n", (int)n, s);
        s += n + (s[n] == '\n');
    }
}

/* Prints case c and compares with `want`; returns 0 when equal. */
static int tn_check_case(json_t *c, const char *want, struct tn_printoptions defaults,
                         const char *version)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    json_t *dd = json_object_get(c, "default_dtype");
    struct tn_tensor *t = tn_case_tensor(c);
    if (dd)
        assert_int_equal(tn_set_default_dtype(tn_test_dtype(json_string_value(dd))), 0);
    tn_apply_options(json_object_get(c, "options"), defaults);
    char *got = tn_format(t);
    tn_set_printoptions(&defaults);
    tn_set_default_dtype(TN_FLOAT32);
    tn_release(t);
    assert_non_null(got);
    int rc = strcmp(got, want) == 0 ? 0 : -1;
    if (rc) {
        print_message("# %s differs from PyTorch %s\n", name, version);
        print_diag("ours", got);
        print_diag("PyTorch's", want);
    }
    free(got);
    return rc;
}

static void test_options(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("print");
    struct tn_printoptions d = tn_defaults(fx), o = tn_get_printoptions();
    /* the library starts with PyTorch's defaults */
    assert_int_equal(o.precision, d.precision);
    assert_int_equal(o.threshold, d.threshold);
    assert_int_equal(o.edgeitems, d.edgeitems);
    assert_int_equal(o.linewidth, d.linewidth);
    assert_int_equal(o.sci_mode, -1);
    /* negative values leave an option alone; sci_mode is always set */
    tn_set_printoptions(&(struct tn_printoptions){2, -1, -1, -1, 1});
    tn_set_printoptions(&(struct tn_printoptions){-1, 7, -1, -1, 0});
    o = tn_get_printoptions();
    assert_int_equal(o.precision, 2);
    assert_int_equal(o.threshold, 7);
    assert_int_equal(o.edgeitems, d.edgeitems);
    assert_int_equal(o.sci_mode, 0);
    tn_set_printoptions(&(struct tn_printoptions){-1, -1, -1, -1, -1});
    assert_int_equal(tn_get_printoptions().sci_mode, -1);
    /* NULL restores the defaults */
    tn_set_printoptions(&(struct tn_printoptions){1, 2, 3, 4, 1});
    tn_set_printoptions(NULL);
    o = tn_get_printoptions();
    assert_int_equal(o.precision, d.precision);
    assert_int_equal(o.threshold, d.threshold);
    assert_int_equal(o.edgeitems, d.edgeitems);
    assert_int_equal(o.linewidth, d.linewidth);
    assert_int_equal(o.sci_mode, -1);
    json_decref(fx);
}

/* Every case against PyTorch 2.x, the version tensorkit follows. */
static void test_torch2(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("print");
    const char *version = json_string_value(json_object_get(fx, "torch"));
    assert_true(version && version[0] >= '2' && version[1] == '.');
    struct tn_printoptions d = tn_defaults(fx);
    size_t i, checked = 0;
    json_t *c;
    int bad = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        json_t *want = json_object_get(c, "repr");
        assert_true(json_is_string(want));
        bad += tn_check_case(c, json_string_value(want), d, version) != 0;
        checked++;
    }
    assert_true(checked > 100);
    json_decref(fx);
    assert_int_equal(bad, 0);
}

/* 1.13 prints differently only with sci_mode set and with edgeitems 0
 * (see lib/core/print.c); every other case must match it too. */
static bool tn_torch1_differs(json_t *c)
{
    json_t *o = json_object_get(c, "options");
    json_t *sci = json_object_get(o, "sci_mode");
    json_t *e = json_object_get(o, "edgeitems");
    return (sci && !json_is_null(sci)) || (e && json_integer_value(e) == 0);
}

static void test_torch1(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("print");
    json_t *fx1 = tn_test_fixture("print_torch1");
    const char *version = json_string_value(json_object_get(fx1, "torch"));
    assert_true(version && version[0] == '1' && version[1] == '.');
    struct tn_printoptions d = tn_defaults(fx);
    json_t *cases = json_object_get(fx, "cases"), *cases1 = json_object_get(fx1, "cases");
    assert_int_equal(json_array_size(cases), json_array_size(cases1));
    size_t i, checked = 0;
    json_t *c;
    int bad = 0;
    json_array_foreach(cases, i, c) {
        json_t *c1 = json_array_get(cases1, i);
        assert_string_equal(json_string_value(json_object_get(c, "name")),
                            json_string_value(json_object_get(c1, "name")));
        /* both generators must have drawn the same values */
        const char *hex = json_string_value(json_object_get(json_object_get(c, "input"), "hex"));
        const char *head = json_string_value(json_object_get(c1, "hex_head"));
        assert_int_equal(strlen(hex), json_integer_value(json_object_get(c1, "hex_len")));
        assert_true(head && strncmp(hex, head, strlen(head)) == 0);
        json_t *want = json_object_get(c1, "repr");
        if (tn_torch1_differs(c) || !json_is_string(want))
            continue;
        bad += tn_check_case(c, json_string_value(want), d, version) != 0;
        checked++;
    }
    assert_true(checked > 100);
    json_decref(fx);
    json_decref(fx1);
    assert_int_equal(bad, 0);
}

static void test_print_file(void **state)
{
    (void)state;
    struct tn_tensor *t = tn_arange(tn_int(0), tn_int(4), tn_int(1), TN_DTYPE_UNSET);
    assert_non_null(t);
    char *s = tn_format(t);
    assert_non_null(s);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(tn_print(f, t), 0);
    char buf[256] = {0};
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_int_equal(n, strlen(s) + 1);
    assert_memory_equal(buf, s, strlen(s));
    assert_int_equal(buf[n - 1], '\n');
    /* a stream that cannot be written to */
    f = fopen("/dev/null", "r");
    assert_non_null(f);
    assert_int_equal(tn_print(f, t), TN_EIO);
    assert_non_null(strstr(tn_last_error(), "cannot print a tensor"));
    fclose(f);
    free(s);
    tn_release(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_torch2),
        cmocka_unit_test(test_torch1),
        cmocka_unit_test(test_print_file),
    };
    return TN_RUN_TESTS(tests);
}
