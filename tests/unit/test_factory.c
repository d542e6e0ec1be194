/*
 * test_factory: the constructors against PyTorch (the "factory" cases of
 * fixture core/factory.json, written by tests/fixtures/core_factory.py):
 * zeros, ones, full, tensor, arange, linspace, logspace, eye, empty, empty_strided and
 * the *_like constructors on views, compared with PyTorch's values, strides
 * and storage offset, or PyTorch's error message.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_cases.h"

/* Runs one constructor case and returns its result (NULL on failure). */
static struct tn_tensor *tn_construct(const char *fn, json_t *args)
{
    int64_t size[TN_MAX_DIMS], stride[TN_MAX_DIMS];
    enum tn_dtype dt = tn_fx_dtype(json_object_get(args, "dtype"));
    json_t *jsize = json_object_get(args, "size");
    int nd = jsize ? tn_test_ints(jsize, size) : 0;
    if (!strcmp(fn, "zeros")) return tn_zeros(size, nd, dt);
    if (!strcmp(fn, "ones")) return tn_ones(size, nd, dt);
    if (!strcmp(fn, "empty")) return tn_empty(size, nd, dt);
    if (!strcmp(fn, "full"))
        return tn_full(size, nd, tn_fx_scalar(json_object_get(args, "value")), dt);
    if (!strcmp(fn, "tensor"))
        return tn_scalar_tensor(tn_fx_scalar(json_object_get(args, "value")), dt);
    if (!strcmp(fn, "arange"))
        return tn_arange(tn_fx_scalar(json_object_get(args, "start")),
                         tn_fx_scalar(json_object_get(args, "end")),
                         tn_fx_scalar(json_object_get(args, "step")), dt);
    if (!strcmp(fn, "linspace"))
        return tn_linspace(tn_fx_scalar(json_object_get(args, "start")),
                           tn_fx_scalar(json_object_get(args, "end")),
                           json_integer_value(json_object_get(args, "steps")), dt);
    if (!strcmp(fn, "logspace"))
        return tn_logspace(tn_fx_scalar(json_object_get(args, "start")),
                           tn_fx_scalar(json_object_get(args, "end")),
                           json_integer_value(json_object_get(args, "steps")),
                           json_number_value(json_object_get(args, "base")), dt);
    if (!strcmp(fn, "eye")) {
        json_t *m = json_object_get(args, "m");
        return tn_eye(json_integer_value(json_object_get(args, "n")),
                      json_is_null(m) ? -1 : json_integer_value(m), dt);
    }
    if (!strcmp(fn, "empty_strided")) {
        int ns = tn_test_ints(json_object_get(args, "stride"), stride);
        assert_int_equal(ns, nd);
        return tn_empty_strided(size, nd, stride, dt);
    }
    /* the *_like constructors take a view */
    struct tn_tensor *base, *in = tn_fx_view(json_object_get(args, "input"), NULL, &base);
    struct tn_tensor *r = NULL;
    if (!strcmp(fn, "empty_like")) r = tn_empty_like(in, dt);
    else if (!strcmp(fn, "zeros_like")) r = tn_zeros_like(in, dt);
    else if (!strcmp(fn, "ones_like")) r = tn_ones_like(in, dt);
    else if (!strcmp(fn, "full_like"))
        r = tn_full_like(in, tn_fx_scalar(json_object_get(args, "value")), dt);
    else fail_msg("unknown constructor %s in fixture", fn);
    tn_release(in);
    tn_release(base);
    return r;
}

static int tn_run_case(json_t *c, int torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    json_t *args = json_object_get(c, "args");
    enum tn_dtype dflt = tn_fx_dtype(json_object_get(args, "default_dtype"));
    if (dflt != TN_DTYPE_UNSET)
        assert_int_equal(tn_set_default_dtype(dflt), TN_OK);
    tn_clear_error();
    struct tn_tensor *r = tn_construct(json_string_value(json_object_get(c, "fn")), args);
    if (dflt != TN_DTYPE_UNSET)
        tn_set_default_dtype(TN_FLOAT32);
    int rc = tn_fx_outcome(c, r, torch1);
    if (rc <= 0) {
        tn_release(r);
        return rc;
    }
    rc = 0;
    if (json_is_true(json_object_get(c, "layout_only"))) {
        /* values are whatever the memory held: compare the geometry only */
        json_t *want = json_object_get(c, "result");
        int64_t shape[TN_MAX_DIMS], stride[TN_MAX_DIMS];
        int nd = tn_test_ints(json_object_get(want, "shape"), shape);
        tn_test_ints(json_object_get(want, "stride"), stride);
        size_t nbytes = (size_t)json_integer_value(json_object_get(c, "nbytes"));
        if (nd != r->ndim || memcmp(shape, r->sizes, sizeof shape[0] * (size_t)nd) ||
            memcmp(stride, r->strides, sizeof stride[0] * (size_t)nd) || r->offset != 0 ||
            strcmp(tn_dtype_name(r->dtype),
                   json_string_value(json_object_get(want, "dtype")))) {
            print_message("# %s: geometry differs from PyTorch's\n", name);
            rc = -1;
        } else if (r->storage->nbytes != nbytes) {
            print_message("# %s: storage of %zu bytes, PyTorch's has %zu\n", name,
                          r->storage->nbytes, nbytes);
            rc = -1;
        }
    } else {
        rc = tn_test_compare(r, json_object_get(c, "result"), name, 1);
        if (rc && tn_fx_lenient(c, torch1))
            rc = 0;
    }
    tn_release(r);
    return rc;
}

/* Runs the cases of one fixture file. */
static void tn_run_fixture(const char *file)
{
    tn_test_fixture_cases(file, "factory", "constructor", tn_run_case);
}

/* factory.json comes from PyTorch 1.13, factory_torch2.json from 2.x. */
static void test_factory_fixture(void **state)
{
    (void)state;
    tn_run_fixture("factory");
}

static void test_factory_fixture_torch2(void **state)
{
    (void)state;
    tn_run_fixture("factory_torch2");
}

/* The *_like constructors on a Meta tensor (a transposed view, so the kept
 * strides are not the contiguous ones) give a Meta tensor of empty_like's
 * sizes and strides and write nothing: zeros_like wrote into the storage
 * a Meta tensor does not have and crashed; full_like refused with fill_'s
 * error. PyTorch's meta kernels return the shape alone. */
static void test_factory_like_meta(void **state)
{
    (void)state;
    const struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *base = tn_empty_on(TN_SHAPE(3, 4, 5), TN_FLOAT32, meta);
    assert_non_null(base);
    struct tn_tensor *in = tn_transpose(base, 0, 2);
    assert_non_null(in);
    struct tn_tensor *want = tn_empty_like(in, TN_FLOAT64);
    assert_non_null(want);
    struct tn_tensor *got[3] = {tn_zeros_like(in, TN_FLOAT64), tn_ones_like(in, TN_FLOAT64),
                                tn_full_like(in, tn_float(2.5), TN_FLOAT64)};
    for (int i = 0; i < 3; i++) {
        assert_non_null(got[i]);
        assert_int_equal(got[i]->device.type, TN_DEVICE_META);
        assert_int_equal(got[i]->dtype, TN_FLOAT64);
        assert_int_equal(got[i]->ndim, want->ndim);
        for (int d = 0; d < want->ndim; d++) {
            assert_int_equal(got[i]->sizes[d], want->sizes[d]);
            assert_int_equal(got[i]->strides[d], want->strides[d]);
        }
        tn_release(got[i]);
    }
    tn_release(want);
    tn_release(in);
    tn_release(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_factory_fixture),
        cmocka_unit_test(test_factory_fixture_torch2),
        cmocka_unit_test(test_factory_like_meta),
    };
    return TN_RUN_TESTS(tests);
}
