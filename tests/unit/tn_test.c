/*
 * tests/unit/tn_test.c: the fixture reader and comparisons behind tn_test.h.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tn_test_run(const char *name, const struct CMUnitTest *tests, size_t n)
{
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}

json_t *tn_test_fixture(const char *name)
{
    const char *dir = getenv("TN_FIXTURES");
    char path[4096];
    if (dir && *dir)
        snprintf(path, sizeof path, "%s/%s.json", dir, name);
    else
        snprintf(path, sizeof path, "%s/tests/fixtures/core/%s.json", TN_SRCDIR, name);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j)
        fail_msg("cannot read fixture %s: %s (line %d)", path, err.text, err.line);
    return j;
}

enum tn_dtype tn_test_dtype(const char *name)
{
    enum tn_dtype d = tn_dtype_from_name(name);
    if (d == TN_DTYPE_UNSET)
        fail_msg("fixture names unknown dtype %s", name);
    return d;
}

int tn_test_ints(json_t *arr, int64_t *out)
{
    size_t i;
    json_t *v;
    assert_true(json_is_array(arr));
    assert_true(json_array_size(arr) <= TN_MAX_DIMS);
    json_array_foreach(arr, i, v) out[i] = json_integer_value(v);
    return (int)json_array_size(arr);
}

static int tn_hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

struct tn_tensor *tn_test_tensor(json_t *obj)
{
    int64_t shape[TN_MAX_DIMS];
    int nd = tn_test_ints(json_object_get(obj, "shape"), shape);
    enum tn_dtype dt = tn_test_dtype(json_string_value(json_object_get(obj, "dtype")));
    struct tn_tensor *t = tn_empty(shape, nd, dt);
    assert_non_null(t);
    const char *hex = json_string_value(json_object_get(obj, "hex"));
    size_t n = strlen(hex) / 2;
    assert_int_equal(n, tn_nbytes(t));
    unsigned char *p = tn_data(t);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(tn_hexval(hex[2 * i]) << 4 | tn_hexval(hex[2 * i + 1]));
    return t;
}

char *tn_test_hex(const struct tn_tensor *t)
{
    struct tn_tensor *c = tn_contiguous(t);
    assert_non_null(c);
    size_t n = tn_nbytes(c);
    char *s = malloc(2 * n + 1);
    const unsigned char *p = tn_data(c);
    for (size_t i = 0; i < n; i++)
        sprintf(s + 2 * i, "%02x", p[i]);
    s[2 * n] = '\0';
    tn_release(c);
    return s;
}

int tn_test_compare(const struct tn_tensor *t, json_t *expected, const char *what,
                    int check_layout)
{
    int64_t shape[TN_MAX_DIMS], stride[TN_MAX_DIMS];
    char a[256], b[256];
    const char *dt = json_string_value(json_object_get(expected, "dtype"));
    if (strcmp(dt, tn_dtype_name(t->dtype)) != 0) {
        print_message("# %s: dtype %s, PyTorch has %s\n", what, tn_dtype_name(t->dtype), dt);
        return -1;
    }
    int nd = tn_test_ints(json_object_get(expected, "shape"), shape);
    if (nd != t->ndim || memcmp(shape, t->sizes, sizeof shape[0] * (size_t)nd) != 0) {
        print_message("# %s: shape %s, PyTorch has %s\n", what,
                      tn_shape_format(t->sizes, t->ndim, a, sizeof a),
                      tn_shape_format(shape, nd, b, sizeof b));
        return -1;
    }
    if (check_layout) {
        tn_test_ints(json_object_get(expected, "stride"), stride);
        int64_t off = json_integer_value(json_object_get(expected, "offset"));
        if (memcmp(stride, t->strides, sizeof stride[0] * (size_t)nd) != 0 || off != t->offset) {
            print_message("# %s: strides %s offset %lld, PyTorch has %s offset %lld\n", what,
                          tn_shape_format(t->strides, t->ndim, a, sizeof a), (long long)t->offset,
                          tn_shape_format(stride, nd, b, sizeof b), (long long)off);
            return -1;
        }
    }
    char *hex = tn_test_hex(t);
    const char *want = json_string_value(json_object_get(expected, "hex"));
    int rc = strcmp(hex, want) == 0 ? 0 : -1;
    if (rc) {
        size_t i = 0;
        while (hex[i] && hex[i] == want[i])
            i++;
        print_message("# %s: values differ from byte %zu: ours %.32s, PyTorch %.32s\n", what,
                      i / 2, hex + (i & ~(size_t)1), want + (i & ~(size_t)1));
    }
    free(hex);
    return rc;
}

void tn_test_fixture_cases(const char *file, const char *key, const char *what,
                           tn_test_case_fn run_case)
{
    json_t *fx = tn_test_fixture(file);
    const char *ver = json_string_value(json_object_get(fx, "torch"));
    int torch1 = ver && ver[0] == '1' && ver[1] == '.';
    size_t i;
    json_t *c;
    int bad = 0, n = 0;
    json_array_foreach(json_object_get(fx, key), i, c) {
        n++;
        if (run_case(c, torch1))
            bad++;
    }
    print_message("# %d %s cases from PyTorch %s, %d differ\n", n, what, ver, bad);
    json_decref(fx);
    assert_true(n > 100);
    assert_int_equal(bad, 0);
}

unsigned char *tn_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}
