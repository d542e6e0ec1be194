/*
 * Unit tests of the elementwise binary ops through the dispatcher: every
 * case of tests/fixtures/ops/binary.json (written by real PyTorch) is called
 * boxed by its op name; a few typed calls check the in-place and out=
 * variants, the Meta key and the key sets.
 */
#include <math.h>
#include <string.h>

#include "tn_test.h"

/* Tolerances, once for every op test: |got - want| <= atol + rtol * |want|.
 * Integer and bool results must match exactly. Floats differ from PyTorch
 * only where it fuses a multiply-add differently (alpha != 1) or its
 * complex division vectorises differently. */
static void tolerance(enum tn_dtype dt, double *rtol, double *atol)
{
    switch (dt) {
    case TN_FLOAT64: *rtol = 1e-12; *atol = 1e-12; break;
    case TN_FLOAT32: *rtol = 1e-6; *atol = 1e-6; break;
    case TN_COMPLEX64: *rtol = 1e-5; *atol = 1e-5; break;
    case TN_FLOAT16: *rtol = 1e-3; *atol = 1e-3; break;
    case TN_BFLOAT16: *rtol = 8e-3; *atol = 8e-3; break;
    default: *rtol = 0; *atol = 0; break;
    }
}

static bool close_to(double got, double want, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* 0 when t matches the fixture tensor within the dtype's tolerance. */
static int compare(const struct tn_tensor *t, json_t *want, const char *what)
{
    struct tn_tensor *w = tn_test_tensor(want);
    assert_non_null(w);
    int rc = 0;
    double rtol, atol;
    tolerance(w->dtype, &rtol, &atol);
    if (t->dtype != w->dtype || t->ndim != w->ndim ||
        memcmp(t->sizes, w->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
        char a[128], b[128];
        print_message("# %s: got %s %s, want %s %s\n", what, tn_dtype_name(t->dtype),
                      tn_shape_format(t->sizes, t->ndim, a, sizeof a), tn_dtype_name(w->dtype),
                      tn_shape_format(w->sizes, w->ndim, b, sizeof b));
        rc = -1;
    } else if (rtol == 0) {
        rc = tn_test_compare(t, want, what, 0);
    } else {
        /* complex64 compares as pairs of floats */
        bool cplx = w->dtype == TN_COMPLEX64;
        struct tn_tensor *gc = tn_contiguous(t);
        int64_t n = tn_numel(w) * (cplx ? 2 : 1);
        struct tn_tensor *gv = tn_from_blob(tn_data(gc), TN_SHAPE(n), NULL,
                                            cplx ? TN_FLOAT32 : w->dtype, NULL, NULL);
        struct tn_tensor *wv = tn_from_blob(tn_data(w), TN_SHAPE(n), NULL,
                                            cplx ? TN_FLOAT32 : w->dtype, NULL, NULL);
        struct tn_tensor *g64 = tn_to_dtype(gv, TN_FLOAT64), *w64 = tn_to_dtype(wv, TN_FLOAT64);
        const double *gd = tn_data(g64), *wd = tn_data(w64);
        for (int64_t i = 0; i < n && rc == 0; i++)
            if (!close_to(gd[i], wd[i], rtol, atol)) {
                print_message("# %s: element %lld is %.17g, PyTorch has %.17g\n", what,
                              (long long)i, gd[i], wd[i]);
                rc = -1;
            }
        tn_release(g64);
        tn_release(w64);
        tn_release(gv);
        tn_release(wv);
        tn_release(gc);
    }
    tn_release(w);
    return rc;
}

static void test_fixture_cases(void **state)
{
    json_t *fx = tn_test_fixture("../ops/binary");
    json_t *cases = json_object_get(fx, "cases");
    assert_true(json_array_size(cases) > 100);
    int failed = 0;
    size_t ci;
    json_t *c;
    json_array_foreach(cases, ci, c) {
        const char *name = json_string_value(json_object_get(c, "op"));
        const struct tn_op *op = tn_op_find(name);
        assert_non_null(op);
        struct tn_ivalue st[8];
        struct tn_tensor *owned[8] = {0};
        json_t *args = json_object_get(c, "args");
        int n = (int)json_array_size(args);
        assert_true(n <= 8);
        for (int i = 0; i < n; i++) {
            json_t *a = json_array_get(args, (size_t)i), *v;
            if ((v = json_object_get(a, "tensor"))) {
                struct tn_tensor *t = tn_test_tensor(v);
                assert_non_null(t);
                if (json_is_true(json_object_get(a, "transpose"))) {
                    struct tn_tensor *tt = tn_transpose(t, 0, 1);
                    tn_release(t);
                    t = tt;
                }
                owned[i] = t;
                st[i] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = t};
            } else if ((v = json_object_get(a, "int"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_INT, .v.i = json_integer_value(v)};
            } else if ((v = json_object_get(a, "float"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_DOUBLE, .v.f = json_real_value(v)};
            } else if ((v = json_object_get(a, "bool"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_BOOL, .v.b = json_is_true(v)};
            } else if ((v = json_object_get(a, "str"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_STR, .v.str = json_string_value(v)};
            } else {
                st[i] = (struct tn_ivalue){.tag = TN_IV_NONE};
            }
        }
        char what[64];
        snprintf(what, sizeof what, "case %zu (%s)", ci, name);
        int rc = tn_op_call(op, st, n);
        json_t *err = json_object_get(c, "error");
        if (err) {
            if (rc >= 0) {
                print_message("# %s: succeeded, PyTorch raised: %s\n", what, json_string_value(err));
                failed++;
                tn_release(st[0].v.t);
            } else if (strcmp(tn_last_error(), json_string_value(err)) != 0) {
                print_message("# %s: error '%s', PyTorch says '%s'\n", what, tn_last_error(),
                              json_string_value(err));
                failed++;
            }
        } else if (rc != 1) {
            print_message("# %s: failed: %s\n", what, tn_last_error());
            failed++;
        } else {
            if (compare(st[0].v.t, json_object_get(c, "out"), what) != 0)
                failed++;
            tn_release(st[0].v.t);
        }
        for (int i = 0; i < n; i++)
            tn_release(owned[i]);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* in-place and out= variants, checked against the functional result */
static void test_inplace_and_out(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_FLOAT32);
    struct tn_tensor *a2 = tn_view(a, TN_SHAPE(2, 3));
    struct tn_tensor *b = tn_full(TN_SHAPE(3), tn_float(0.5), TN_FLOAT32);
    struct tn_tensor *want = tn_add(a2, b, tn_int(2));
    assert_non_null(want);
    assert_int_equal(tn_add_(a2, b, tn_int(2)), 0);
    for (int i = 0; i < 6; i++)
        assert_true(((float *)tn_data(a2))[i] == ((float *)tn_data(want))[i]);
    /* the in-place result must keep self's shape and dtype */
    struct tn_tensor *row = tn_full(TN_SHAPE(3), tn_int(1), TN_INT64);
    assert_true(tn_add_(row, a2, tn_int(1)) < 0);
    assert_string_equal(tn_last_error(), "result type Float can't be cast to the desired output type Long");
    struct tn_tensor *f3 = tn_zeros(TN_SHAPE(3), TN_FLOAT32);
    assert_true(tn_add_(f3, a2, tn_int(1)) < 0);
    assert_string_equal(tn_last_error(), "output with shape [3] doesn't match the broadcast shape [2, 3]");
    /* out= of another dtype and shape: resized, computed in float32, converted */
    struct tn_tensor *out = tn_empty(TN_SHAPE(0), TN_FLOAT64);
    assert_int_equal(tn_mul_out(a2, b, out), 0);
    assert_int_equal(out->ndim, 2);
    assert_int_equal(out->sizes[1], 3);
    struct tn_tensor *m = tn_mul(a2, b);
    struct tn_tensor *m64 = tn_to_dtype(m, TN_FLOAT64);
    assert_memory_equal(tn_data(out), tn_data(m64), 6 * sizeof(double));
    tn_release(m64);
    tn_release(m);
    tn_release(out);
    tn_release(f3);
    tn_release(row);
    tn_release(want);
    tn_release(b);
    tn_release(a2);
    tn_release(a);
}

/* Meta tensors get shapes and dtypes without data; missing kernels are
 * reported; a NULL tensor is refused. */
static void test_meta_and_keys(void **state)
{
    struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *a = tn_empty_on(TN_SHAPE(4, 1), TN_INT32, meta);
    struct tn_tensor *b = tn_empty_on(TN_SHAPE(5), TN_FLOAT16, meta);
    assert_non_null(a);
    assert_int_equal(tn_tensor_keyset(a), TN_KEYSET(TN_KEY_META));
    struct tn_tensor *r = tn_div(a, b);
    assert_non_null(r);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->dtype, TN_FLOAT16);
    assert_int_equal(r->ndim, 2);
    assert_int_equal(r->sizes[0], 4);
    assert_int_equal(r->sizes[1], 5);
    struct tn_tensor *c = tn_empty_on(TN_SHAPE(3, 1), TN_INT32, meta);
    assert_null(tn_add(a, c, tn_int(1)));
    assert_string_equal(tn_last_error(), "The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 0");
    /* excluding the Meta key leaves nothing that can run them */
    tn_keyset old = tn_dispatch_set_excluded(TN_KEYSET(TN_KEY_META));
    assert_null(tn_add(a, b, tn_int(1)));
    tn_dispatch_set_excluded(old);
    assert_string_equal(tn_last_error(), "Could not run 'aten::add.Tensor': every dispatch key of its arguments is excluded");
    assert_null(tn_add(NULL, b, tn_int(1)));
    assert_string_equal(tn_last_error(), "add(): argument 'self' (position 1) must be Tensor, not None");
    assert_null(tn_op_find("aten::nonesuch.Tensor"));
    const struct tn_op *op = tn_op_find("add.out");
    assert_non_null(op);
    assert_string_equal(op->qualname, "aten::add.out");
    assert_int_equal(tn_op_arg_index(op, "alpha"), 2);
    assert_int_equal(tn_op_register((struct tn_op *)op), TN_EINVAL);
    tn_release(c);
    tn_release(r);
    tn_release(b);
    tn_release(a);
}

/* add with 1,000,000 elements runs on the thread pool and still agrees */
static void test_parallel(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(1000000), tn_int(1), TN_FLOAT32);
    struct tn_tensor *r = tn_add_scalar(a, tn_float(0.5), tn_int(2));
    assert_non_null(r);
    const float *d = tn_data(r);
    for (int64_t i = 0; i < 1000000; i += 9973)
        assert_true(d[i] == (float)i + 1.0f);
    tn_release(r);
    tn_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_inplace_and_out),
        cmocka_unit_test(test_meta_and_keys),
        cmocka_unit_test(test_parallel),
    };
    return TN_RUN_TESTS(tests);
}
