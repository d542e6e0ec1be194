/*
 * Unit tests of view_as_real, view_as_complex, real and imag
 * (lib/ops/complex_view.c):
 * every case of tests/fixtures/ops/complex_view.json (PyTorch 2.x: values,
 * strides, errors), then what fixtures cannot show: the results share
 * self's storage, the Meta kernels, and the gradients through both.
 */
#include "ops_cases.h"

#include <tensor/ops.h>

static void test_fixture_cases(void **state)
{
    (void)state;
    layout_significant = true;
    run_op_cases("../ops/complex_view", true, true);
}

/* a write through view_as_real lands in the complex tensor, and
 * view_as_complex of it is a view of that same storage again */
static void test_shared_storage(void **state)
{
    (void)state;
    struct tn_tensor *z = tn_zeros(TN_SHAPE(3), TN_COMPLEX128);
    struct tn_tensor *r = tn_view_as_real(z);
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_FLOAT64);
    assert_ptr_equal(r->storage, z->storage);
    ((double *)tn_data(r))[3] = 7; /* z[1].imag */
    assert_true(((double *)tn_data(z))[3] == 7);
    struct tn_tensor *c = tn_view_as_complex(r);
    assert_non_null(c);
    assert_int_equal(c->dtype, TN_COMPLEX128);
    assert_ptr_equal(c->storage, z->storage);
    assert_ptr_equal(c->base, z);
    /* an offset doubles and halves (the fixture's inputs start at 0) */
    struct tn_tensor *z1 = tn_narrow(z, 0, 1, 2), *r1 = tn_view_as_real(z1);
    assert_int_equal(r1->offset, 2);
    struct tn_tensor *f = tn_narrow(r1, 1, 1, 1);
    assert_null(tn_view_as_complex(f));
    assert_string_equal(tn_last_error(), "Tensor must have a last dimension of size 2");
    struct tn_tensor *o = tn_as_strided(r1, TN_SHAPE(1, 2), (int64_t[]){2, 1}, 3);
    assert_null(tn_view_as_complex(o));
    assert_string_equal(tn_last_error(), "Tensor must have a storage_offset divisible by 2");
    tn_release(o), tn_release(f), tn_release(r1), tn_release(z1);
    tn_release(c);
    tn_release(r);
    tn_release(z);
}

static void test_meta(void **state)
{
    (void)state;
    struct tn_tensor *z = tn_empty_on(TN_SHAPE(4, 5), TN_COMPLEX64, (struct tn_device){TN_DEVICE_META, -1});
    struct tn_tensor *r = tn_view_as_real(z);
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_FLOAT32);
    assert_int_equal(r->ndim, 3);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->strides[0], 10);
    struct tn_tensor *c = tn_view_as_complex(r);
    assert_non_null(c);
    assert_int_equal(c->strides[0], 5);
    tn_release(c);
    tn_release(r);
    tn_release(z);
}

/* sum(view_as_real(z) * w) has gradient w[..., 0] + 1j * w[..., 1] as
 * PyTorch's; view_as_complex's gradient is view_as_real of its grad */
static void test_gradients(void **state)
{
    (void)state;
    struct tn_tensor *z = tn_randn(TN_SHAPE(2, 3), TN_COMPLEX128, NULL);
    struct tn_tensor *w = tn_randn(TN_SHAPE(2, 3, 2), TN_FLOAT64, NULL);
    assert_int_equal(tn_requires_grad_(z, true), 0);
    struct tn_tensor *r = tn_view_as_real(z), *p = tn_mul(r, w), *s = tn_sum(p, TN_DTYPE_UNSET);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    assert_non_null(z->grad);
    assert_int_equal(z->grad->dtype, TN_COMPLEX128);
    struct tn_tensor *gc = tn_contiguous(z->grad);
    const double *g = tn_data(gc), *wd = tn_data(w);
    for (int i = 0; i < 12; i++)
        assert_true(g[i] == wd[i]);
    tn_release(gc);

    /* back again: sum(view_as_real(view_as_complex(x)) * v) gives x v */
    struct tn_tensor *x = tn_randn(TN_SHAPE(3, 2), TN_FLOAT64, NULL);
    struct tn_tensor *v = tn_randn(TN_SHAPE(3, 2), TN_FLOAT64, NULL);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    struct tn_tensor *c = tn_view_as_complex(x), *cr = tn_view_as_real(c), *q = tn_mul(cr, v),
                     *t = tn_sum(q, TN_DTYPE_UNSET);
    if (tn_backward(&t, 1, NULL, false, false) < 0)
        fail_msg("%s", tn_last_error());
    assert_non_null(x->grad);
    assert_int_equal(x->grad->dtype, TN_FLOAT64);
    gc = tn_contiguous(x->grad);
    g = tn_data(gc);
    for (int i = 0; i < 6; i++)
        assert_true(g[i] == ((const double *)tn_data(v))[i]);
    tn_release(gc);
    tn_release(t), tn_release(q), tn_release(cr), tn_release(c), tn_release(v), tn_release(x);
    tn_release(s), tn_release(p), tn_release(r), tn_release(w), tn_release(z);
}

/* real(z) and imag(z) are views of z; sum(real(z) * a + imag(z) * b) has
 * gradient a + 1j * b (PyTorch's, through select and view_as_real); real of
 * a real tensor is that tensor */
static void test_parts(void **state)
{
    (void)state;
    struct tn_tensor *z = tn_randn(TN_SHAPE(4), TN_COMPLEX64, NULL);
    struct tn_tensor *a = tn_randn(TN_SHAPE(4), TN_FLOAT32, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(4), TN_FLOAT32, NULL);
    assert_int_equal(tn_requires_grad_(z, true), 0);
    struct tn_tensor *re = tn_real(z), *im = tn_imag(z);
    assert_ptr_equal(re->storage, z->storage);
    assert_int_equal(im->offset, 1);
    struct tn_tensor *p = tn_mul(re, a), *q = tn_mul(im, b), *s = tn_add(p, q, tn_int(1)),
                     *t = tn_sum(s, TN_DTYPE_UNSET);
    if (tn_backward(&t, 1, NULL, false, false) < 0)
        fail_msg("%s", tn_last_error());
    assert_int_equal(z->grad->dtype, TN_COMPLEX64);
    const float *g = tn_data(z->grad), *ad = tn_data(a), *bd = tn_data(b);
    for (int i = 0; i < 4; i++)
        assert_true(g[2 * i] == ad[i] && g[2 * i + 1] == bd[i]);
    struct tn_tensor *ra = tn_real(a);
    assert_ptr_equal(ra, a);
    tn_release(ra), tn_release(t), tn_release(s), tn_release(q), tn_release(p);
    tn_release(im), tn_release(re), tn_release(b), tn_release(a), tn_release(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_shared_storage),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
