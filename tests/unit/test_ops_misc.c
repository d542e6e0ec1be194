/*
 * Unit tests of the ops of lib/ops/conv.c and lib/ops/fill.c through the
 * dispatcher: every case of tests/fixtures/ops/misc.json (real PyTorch
 * 1.13): conv1d, conv_transpose1d, conv1d/conv2d with padding="same" or
 * "valid", fill/fill_/zero/zero_, _to_copy and to.dtype, the .vec
 * overloads of upsample_nearest2d and upsample_bilinear2d. Then what the
 * fixtures cannot show: to.dtype hands back self itself, fill_ writes in
 * place, and the in-place ops' autograd.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/misc", true, true);
}

/* The cases whose reference is PyTorch 2.x alone (tests/fixtures/ops/misc_v2.json by
 * ops_misc_v2.py): copy strides and words (1.13 gives contiguous strides, expand's words). */
static void test_fixture_cases_v2(void **state)
{
    run_op_cases("../ops/misc_v2", true, true);
}

/* A boxed call of op `name` on stack[0..n); the one result. */
static struct tn_tensor *call1(const char *name, struct tn_ivalue *st, int n)
{
    const struct tn_op *op = tn_op_find(name);
    assert_non_null(op);
    int rc = tn_op_call(op, st, n);
    if (rc < 0)
        return NULL;
    assert_int_equal(rc, 1);
    return st[0].v.t;
}

/* The sum of t's values. */
static double sum_of(const struct tn_tensor *t)
{
    struct tn_tensor *s = tn_sum(t, TN_DTYPE_UNSET);
    assert_non_null(s);
    double v = tn_item_double(s);
    tn_release(s);
    return v;
}

#define TV(x_) ((struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = (x_)})
#define DT(d_) ((struct tn_ivalue){.tag = TN_IV_DTYPE, .v.dtype = (d_)})
#define BV(b_) ((struct tn_ivalue){.tag = TN_IV_BOOL, .v.b = (b_)})
#define NV ((struct tn_ivalue){.tag = TN_IV_NONE})

/* to.dtype, to.device and to.dtype_layout hand back self itself (the same
 * object, as PyTorch's `x.to(x.dtype) is x`) unless the dtype or device
 * changes or copy=True; in-place ops return self. */
static void test_aliasing(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_FLOAT32), *r;
    struct tn_ivalue st[5] = {TV(x), DT(TN_FLOAT32)};
    assert_ptr_equal(r = call1("aten::to.dtype", st, 2), x);
    tn_release(r);
    st[0] = TV(x), st[1] = DT(TN_FLOAT32), st[2] = BV(false), st[3] = BV(true);
    assert_non_null(r = call1("aten::to.dtype", st, 4));
    assert_ptr_not_equal(r, x);
    assert_ptr_not_equal(r->storage, x->storage);
    tn_release(r);
    st[0] = TV(x), st[1] = (struct tn_ivalue){.tag = TN_IV_STR, .v.str = "cpu"};
    st[2] = DT(TN_FLOAT32);
    assert_ptr_equal(r = call1("aten::to.device", st, 3), x);
    tn_release(r);
    st[0] = TV(x), st[1] = NV;
    assert_ptr_equal(r = call1("aten::to.dtype_layout", st, 2), x);
    tn_release(r);
    st[0] = TV(x), st[1] = DT(TN_FLOAT64);
    assert_non_null(r = call1("aten::to.dtype", st, 2));
    assert_int_equal(r->dtype, TN_FLOAT64);
    assert_true(tn_item_double(r) == 0.0);
    tn_release(r);
    st[0] = TV(x), st[1] = (struct tn_ivalue){.tag = TN_IV_SCALAR, .v.s = tn_float(2.5)};
    assert_ptr_equal(r = call1("aten::fill_.Scalar", st, 2), x);
    tn_release(r);
    struct tn_tensor *xv = tn_view(x, TN_SHAPE(2, 3)), *t = tn_t(xv);
    st[0] = TV(t);
    assert_ptr_equal(r = call1("aten::zero_", st, 1), t);
    tn_release(r);
    assert_true(sum_of(x) == 0.0); /* through the view */
    tn_release(t);
    tn_release(xv);
    tn_release(x);
}

/* The in-place ops' autograd, as PyTorch (1.13 and 2.15 alike): a leaf
 * that requires grad refuses them; on a non-leaf the node is FillBackward2
 * (fill_.Scalar), FillBackward3 (fill_.Tensor), ZeroBackward0; the
 * overwritten input gets zeros, fill_'s value tensor the sum of the
 * gradient; _to_copy (ToCopyBackward0) casts the gradient back. */
static void test_autograd(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(1), tn_int(7), tn_int(1), TN_FLOAT32), *v = tn_full(NULL, 0, tn_float(3), TN_FLOAT32);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    assert_int_equal(tn_requires_grad_(v, true), 0);
    assert_true(tn_fill_scalar_(x, tn_int(1)) < 0);
    assert_string_equal(tn_last_error(),
                        "a leaf Variable that requires grad is being used in an in-place operation.");
    assert_true(tn_zero_(x) < 0);
    assert_string_equal(tn_last_error(),
                        "a leaf Variable that requires grad is being used in an in-place operation.");
    struct tn_tensor *g = tn_full(TN_SHAPE(6), tn_float(0.5), TN_FLOAT32);
    static const char *const names[] = {"FillBackward2", "FillBackward3", "ZeroBackward0",
                                        "FillBackward2"};
    for (int k = 0; k < 4; k++) {
        struct tn_tensor *y = tn_mul_scalar(x, tn_int(2));
        struct tn_ivalue st[2] = {TV(y), TV(v)};
        int rc = k == 0 ? tn_fill_scalar_(y, tn_float(4))
                 : k == 1 ? (call1("aten::fill_.Tensor", st, 2) ? 0 : -1)
                 : k == 2 ? tn_zero_(y) : tn_fill_(y, tn_int(4)); /* lib/core's, the same node */
        if (k == 1)
            tn_release(st[0].v.t);
        assert_int_equal(rc, 0);
        assert_string_equal(tn_grad_fn_name(y), names[k]);
        assert_int_equal(tn_backward(&y, 1, &g, false, false), 0);
        assert_true(sum_of(x->grad) == 0.0);
        tn_release(y);
    }
    assert_true(tn_item_double(v->grad) == 3.0); /* fill_.Tensor: 6 times 0.5 */
    struct tn_tensor *y = tn_to_dtype(x, TN_FLOAT16); /* lib/core's: the same node */
    assert_string_equal(tn_grad_fn_name(y), "ToCopyBackward0");
    tn_release(y);
    y = tn_underscore_to_copy(x, TN_FLOAT64, NULL, NULL, NULL, false, NULL);
    assert_string_equal(tn_grad_fn_name(y), "ToCopyBackward0");
    struct tn_tensor *g64 = tn_full(TN_SHAPE(6), tn_float(0.25), TN_FLOAT64);
    tn_zero_grad(x);
    assert_int_equal(tn_backward(&y, 1, &g64, false, false), 0);
    assert_int_equal(x->grad->dtype, TN_FLOAT32);
    assert_true(sum_of(x->grad) == 1.5);
    tn_release(y);
    tn_release(g64);
    tn_release(g);
    tn_release(v);
    tn_release(x);
}

/* On the meta device (tcompile check's shape pass) fill, zero and the
 * conversions give results of the right shape and dtype, as PyTorch's meta
 * kernels, instead of failing for want of data. */
static void test_meta(void **state)
{
    const struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *x = tn_empty_on(TN_SHAPE(2, 3), TN_FLOAT32, meta), *r[3];
    assert_non_null(r[0] = tn_fill_scalar(x, tn_float(1.5)));
    assert_non_null(r[1] = tn_zero(x));
    assert_non_null(r[2] = tn_to_device(x, &meta, TN_FLOAT64, false, false, NULL));
    for (int k = 0; k < 3; k++) {
        assert_int_equal(r[k]->device.type, TN_DEVICE_META);
        assert_int_equal(r[k]->ndim, 2);
        assert_int_equal(r[k]->dtype, k == 2 ? TN_FLOAT64 : TN_FLOAT32);
        tn_release(r[k]);
    }
    assert_int_equal(tn_zero_(x), 0);
    assert_int_equal(tn_fill_scalar_(x, tn_int(2)), 0);
    tn_release(x);
}

/* _to_copy with memory_format channels_last / channels_last_3d: PyTorch's
 * strides (x.to(memory_format=...).stride() in torch 2.x and 1.13), and
 * to.dtype_layout hands back a tensor already in that format itself. */
static void check_cl(const int64_t *sizes, int ndim, int64_t mf, const int64_t *want)
{
    struct tn_tensor *x = tn_zeros(sizes, ndim, TN_FLOAT32);
    assert_non_null(x);
    struct tn_tensor *r = tn_underscore_to_copy(x, TN_DTYPE_UNSET, NULL, NULL, NULL, false, &mf);
    assert_non_null(r);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(r->strides[d], want[d]);
    struct tn_tensor *a = tn_to_dtype_layout(r, TN_DTYPE_UNSET, NULL, NULL, NULL, false, false, &mf);
    assert_ptr_equal(a, r);
    tn_release(a);
    a = tn_to_dtype_layout(x, TN_DTYPE_UNSET, NULL, NULL, NULL, false, false, &mf);
    assert_ptr_not_equal(a, x);
    tn_release(a);
    tn_release(r);
    tn_release(x);
}

static void test_channels_last(void **state)
{
    check_cl((int64_t[]){2, 3, 4, 5}, 4, 2, (int64_t[]){60, 1, 15, 3});
    check_cl((int64_t[]){2, 3, 1, 3}, 4, 2, (int64_t[]){9, 1, 9, 3});
    check_cl((int64_t[]){2, 3, 2, 4, 3}, 5, 3, (int64_t[]){72, 1, 36, 9, 3});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_fixture_cases_v2),
        cmocka_unit_test(test_aliasing),
        cmocka_unit_test(test_autograd),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_channels_last),
    };
    return TN_RUN_TESTS(tests);
}
