/*
 * test_copy: copy_, clone, contiguous and to(dtype) against PyTorch (the
 * "copy" cases of fixture core/factory.json, written by
 * tests/fixtures/core_factory.py): broadcasting, dtype conversion, views of
 * one storage overlapping, preserve_format strides, and PyTorch's errors.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_cases.h"

static int tn_run_copy(json_t *c, bool torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    struct tn_tensor *dbase, *sbase;
    struct tn_tensor *dst = tn_fx_view(json_object_get(c, "dst"), NULL, &dbase);
    struct tn_tensor *src = tn_fx_view(json_object_get(c, "src"), dbase, &sbase);
    tn_clear_error();
    int rc = tn_copy_(dst, src);
    rc = tn_fx_outcome(c, rc == TN_OK ? dst : NULL, torch1);
    if (rc > 0) {
        rc = tn_test_compare(dst, json_object_get(c, "dst_after"), name, 1);
        if (rc == 0) {
            char what[300];
            snprintf(what, sizeof what, "%s (whole destination storage)", name);
            rc = tn_test_compare(dbase, json_object_get(c, "base_after"), what, 1);
        }
        if (rc && tn_fx_lenient(c, torch1))
            rc = 0;
    }
    tn_release(src);
    tn_release(sbase);
    tn_release(dst);
    tn_release(dbase);
    return rc;
}

static int tn_run_case(json_t *c, int torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *fn = json_string_value(json_object_get(c, "fn"));
    if (!strcmp(fn, "copy_"))
        return tn_run_copy(c, torch1);
    struct tn_tensor *base, *in = tn_fx_view(json_object_get(c, "input"), NULL, &base);
    struct tn_tensor *r = NULL;
    tn_clear_error();
    if (!strcmp(fn, "clone")) r = tn_clone(in);
    else if (!strcmp(fn, "contiguous")) r = tn_contiguous(in);
    else if (!strcmp(fn, "to")) r = tn_to_dtype(in, tn_fx_dtype(json_object_get(c, "dtype")));
    else fail_msg("unknown copy function %s in fixture", fn);
    int rc = tn_fx_outcome(c, r, torch1);
    if (rc > 0) {
        rc = tn_test_compare(r, json_object_get(c, "result"), name, 1);
        json_t *same = json_object_get(c, "same");
        if (rc == 0 && same && json_is_true(same) != (r == in)) {
            print_message("# %s: contiguous() %s its input, PyTorch's %s\n", name,
                          r == in ? "returns" : "does not return",
                          json_is_true(same) ? "does" : "does not");
            rc = -1;
        }
        if (rc == 0 && r != in && r->storage == in->storage) {
            print_message("# %s: the copy shares its input's storage\n", name);
            rc = -1;
        }
    }
    tn_release(r);
    tn_release(in);
    tn_release(base);
    return rc;
}

/* Runs the cases of one fixture file. */
static void tn_run_fixture(const char *file)
{
    tn_test_fixture_cases(file, "copy", "copy", tn_run_case);
}

/* factory.json comes from PyTorch 1.13, factory_torch2.json from 2.x. */
static void test_copy_fixture(void **state)
{
    (void)state;
    tn_run_fixture("factory");
}

static void test_copy_fixture_torch2(void **state)
{
    (void)state;
    tn_run_fixture("factory_torch2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_fixture),
        cmocka_unit_test(test_copy_fixture_torch2),
    };
    return TN_RUN_TESTS(tests);
}
