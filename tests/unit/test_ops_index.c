/*
 * Unit tests of advanced indexing (index.Tensor, index_put, index_put_ and
 * their out= overloads) through the dispatcher: every case of
 * tests/fixtures/ops/index.json (real PyTorch), each result compared; and
 * the typed C API's Tensor?[] (NULL entries for None).
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* int32 indices and their error: 1.13 refuses them, 2.x (which we
     * follow) takes them; the fixture's values come from int64 copies */
    run_op_cases("../ops/index", false, true);
}

/* x[:, [2, 0]] of a 2x3 arange, with NULL standing for the None. */
static void test_typed_none_entry(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_INT64);
    struct tn_tensor *x = tn_reshape(a, TN_SHAPE(2, 3));
    int64_t iv[] = {2, 0};
    struct tn_tensor *i = tn_from_blob(iv, TN_SHAPE(2), NULL, TN_INT64, NULL, NULL);
    const struct tn_tensor *idx[] = {NULL, i};
    struct tn_tensor *r = tn_index(x, idx, 2);
    assert_non_null(r);
    assert_int_equal(r->ndim, 2);
    const int64_t *d = tn_data(r);
    assert_int_equal(d[0], 2);
    assert_int_equal(d[1], 0);
    assert_int_equal(d[2], 5);
    assert_int_equal(d[3], 3);
    tn_release(r);
    /* the index tensor is left as it was (negative indices wrap in a copy) */
    iv[1] = -1;
    assert_non_null(r = tn_index(x, idx, 2));
    assert_int_equal(iv[1], -1);
    assert_int_equal(((const int64_t *)tn_data(r))[1], 2);
    tn_release(r);
    /* a negative length, or entries missing, is a clear error */
    assert_null(tn_index(x, NULL, 1));
    assert_non_null(strstr(tn_last_error(), "list of optional tensors"));
    assert_null(tn_index(x, idx, -1));
    tn_release(i);
    tn_release(x);
    tn_release(a);
}

/* x[[1, 1]] += 1 adds twice; index_put_ writes into self and returns 0. */
static void test_index_put_in_place(void **state)
{
    struct tn_tensor *x = tn_zeros(TN_SHAPE(3), TN_FLOAT32);
    int64_t iv[] = {1, 1, -1};
    struct tn_tensor *i = tn_from_blob(iv, TN_SHAPE(3), NULL, TN_INT64, NULL, NULL);
    struct tn_tensor *one = tn_scalar_tensor(tn_float(1.0), TN_FLOAT32);
    const struct tn_tensor *idx[] = {i};
    assert_int_equal(tn_index_put_(x, idx, 1, one, true), 0);
    const float *d = tn_data(x);
    assert_true(d[0] == 0.0f && d[1] == 2.0f && d[2] == 1.0f);
    tn_release(one);
    tn_release(i);
    tn_release(x);
}

/* On the Meta device the result's shape comes out, with no data. */
static void test_meta_shape(void **state)
{
    struct tn_device meta = {TN_DEVICE_META, 0};
    struct tn_tensor *x = tn_empty_on(TN_SHAPE(4, 5, 6), TN_FLOAT32, meta);
    struct tn_tensor *i = tn_empty_on(TN_SHAPE(2, 3), TN_INT64, meta);
    const struct tn_tensor *idx[] = {i, NULL, i};
    struct tn_tensor *r = tn_index(x, idx, 3);
    assert_non_null(r);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->ndim, 3);
    assert_int_equal(r->sizes[0], 2);
    assert_int_equal(r->sizes[1], 3);
    assert_int_equal(r->sizes[2], 5);
    tn_release(r);
    /* index_put_ checks the values' shape against the indexed shape */
    struct tn_tensor *v = tn_empty_on(TN_SHAPE(3, 1), TN_FLOAT32, meta);
    assert_int_equal(tn_index_put_(x, idx, 3, v, true), 0);
    tn_release(v);
    v = tn_empty_on(TN_SHAPE(4), TN_FLOAT32, meta);
    assert_true(tn_index_put_(x, idx, 3, v, false) < 0);
    assert_string_equal(tn_last_error(), "shape mismatch: value tensor of shape [4] cannot be "
                        "broadcast to indexing result of shape [2, 3, 5]");
    tn_release(v);
    /* a mask's nonzero indices need its values, which a Meta tensor has not */
    struct tn_tensor *mask = tn_empty_on(TN_SHAPE(4), TN_BOOL, meta);
    const struct tn_tensor *midx[] = {mask};
    assert_null(tn_index(x, midx, 1));
    assert_non_null(strstr(tn_last_error(), "Meta"));
    tn_release(mask);
    tn_release(i);
    tn_release(x);
}

/* The index tensors are saved as PyTorch saves them: changing one in place
 * before backward is its version error (words of PyTorch 1.13 and 2.x). */
static void test_saved_index_version(void **state)
{
    struct tn_tensor *x = tn_zeros(TN_SHAPE(3, 4), TN_FLOAT64);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    int64_t iv[] = {2, 0};
    struct tn_tensor *i = tn_from_blob(iv, TN_SHAPE(2), NULL, TN_INT64, NULL, NULL);
    const struct tn_tensor *idx[] = {i};
    struct tn_tensor *y = tn_index(x, idx, 1), *s = tn_sum(y, TN_DTYPE_UNSET);
    assert_int_equal(tn_fill_(i, tn_int(1)), 0);
    assert_true(tn_backward(&s, 1, NULL, false, false) < 0);
    assert_string_equal(tn_last_error(), "one of the variables needed for gradient computation "
                        "has been modified by an inplace operation: [torch.LongTensor [2]] is at "
                        "version 1; expected version 0 instead. Hint: enable anomaly detection to "
                        "find the operation that failed to compute its gradient, with "
                        "torch.autograd.set_detect_anomaly(True).");
    tn_release(s);
    tn_release(y);
    tn_release(i);
    tn_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_typed_none_entry),
        cmocka_unit_test(test_index_put_in_place),
        cmocka_unit_test(test_meta_shape),
        cmocka_unit_test(test_saved_index_version),
    };
    return TN_RUN_TESTS(tests);
}
