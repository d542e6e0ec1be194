/*
 * Unit tests of the elementwise binary ops through the dispatcher: every
 * case of tests/fixtures/ops/binary.json (written by real PyTorch) is called
 * boxed by its op name; a few typed calls check the in-place and out=
 * variants, the Meta key and the key sets.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/binary", false, false);
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
