/*
 * Unit tests of the ops returning Tensor[] (split.Tensor, split_with_sizes,
 * chunk, unbind.int, tensor_split, broadcast_tensors): every case of tests/fixtures/ops/
 * split.json (real PyTorch) through the boxed dispatcher, each piece
 * compared; the typed C form (count, array of new references,
 * tn_release_list); that the pieces are views of self; and gradients
 * through several pieces at once.
 */
#include "ops_cases.h"

#include <tensor/autograd.h>

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/split", false, false);
}

/* split hands back a count and an array of views sharing self's storage. */
static void test_typed_views(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(10), tn_int(1), TN_FLOAT32);
    struct tn_tensor **p = NULL;
    int n = tn_split(x, 4, 0, &p);
    assert_int_equal(n, 3);
    assert_non_null(p);
    const int64_t want[] = {4, 4, 2};
    for (int i = 0; i < n; i++) {
        assert_ptr_equal(p[i]->storage, x->storage);
        assert_int_equal(p[i]->sizes[0], want[i]);
        assert_int_equal(p[i]->offset, 4 * i);
    }
    /* writing through a piece writes self */
    assert_int_equal(tn_fill_(p[2], tn_float(-1)), 0);
    assert_true(((const float *)tn_data(x))[9] == -1.0f);
    tn_release_list(p, n);

    struct tn_tensor *m = tn_reshape(x, TN_SHAPE(2, 5));
    assert_int_equal(n = tn_unbind_int(m, -1, &p), 5);
    for (int i = 0; i < n; i++) {
        assert_ptr_equal(p[i]->storage, x->storage);
        assert_int_equal(p[i]->ndim, 1);
        assert_int_equal(p[i]->strides[0], 5);
    }
    tn_release_list(p, n);
    tn_release_list(NULL, 0);
    tn_release(m);
    tn_release(x);
}

/* A failure returns a negative status with PyTorch's words and leaves the
 * out-pointer NULL; an empty dim unbinds into a (non-NULL) empty list. */
static void test_typed_errors(void **state)
{
    struct tn_tensor *x = tn_zeros(TN_SHAPE(3, 0), TN_FLOAT32);
    struct tn_tensor **p = (struct tn_tensor **)x; /* overwritten */
    assert_true(tn_chunk(x, 0, 0, &p) < 0);
    assert_null(p);
    assert_string_equal(tn_last_error(), "chunk expects `chunks` to be greater than 0, got: 0");
    assert_int_equal(tn_unbind_int(x, 1, &p), 0);
    assert_non_null(p);
    tn_release_list(p, 0);
    assert_int_equal(tn_chunk(x, 4, 1, &p), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p[i]->sizes[1], 0);
    tn_release_list(p, 4);
    tn_release(x);
}

/* Gradients of pieces used together flow back into self's gradient, each
 * into its own slice (PyTorch: x.grad = cat of the pieces' grads). */
static void test_backward_through_pieces(void **state)
{
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_FLOAT64);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    struct tn_tensor **p = NULL;
    assert_int_equal(tn_split_with_sizes(x, (const int64_t[]){1, 2, 3}, 3, 0, &p), 3);
    assert_true(p[0]->requires_grad && p[2]->requires_grad);
    struct tn_tensor *g[2] = {tn_full(TN_SHAPE(1), tn_float(2), TN_FLOAT64),
                              tn_full(TN_SHAPE(3), tn_float(5), TN_FLOAT64)};
    struct tn_tensor *roots[2] = {p[0], p[2]};
    assert_int_equal(tn_backward(roots, 2, g, false, false), 0);
    assert_non_null(x->grad);
    const double *d = tn_data(x->grad);
    const double want[] = {2, 0, 0, 5, 5, 5};
    for (int i = 0; i < 6; i++)
        assert_true(d[i] == want[i]);
    tn_release(g[0]);
    tn_release(g[1]);
    tn_release_list(p, 3);
    tn_release(x);
}

/* broadcast_tensors (F.mse_loss's export): views of each input expanded to
 * the shape they broadcast to, PyTorch's error when they do not, and each
 * input's gradient summed back to its own shape (expand's backward). */
static void test_broadcast_tensors(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(3), tn_int(1), TN_FLOAT64);
    struct tn_tensor *a2 = tn_reshape(a, TN_SHAPE(3, 1));
    struct tn_tensor *b = tn_ones(TN_SHAPE(4), TN_FLOAT64);
    struct tn_tensor *c = tn_ones(TN_SHAPE(2, 1, 1), TN_FLOAT64);
    assert_int_equal(tn_requires_grad_(a2, true), 0);
    const struct tn_tensor *in[3] = {a2, b, c};
    struct tn_tensor **p = NULL;
    assert_int_equal(tn_broadcast_tensors(in, 3, &p), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p[i]->ndim, 3);
        assert_int_equal(p[i]->sizes[0], 2);
        assert_int_equal(p[i]->sizes[1], 3);
        assert_int_equal(p[i]->sizes[2], 4);
        assert_ptr_equal(p[i]->storage, in[i]->storage);
    }
    assert_int_equal(p[0]->strides[0], 0);
    assert_int_equal(p[0]->strides[2], 0);
    struct tn_tensor *g = tn_ones(TN_SHAPE(2, 3, 4), TN_FLOAT64);
    assert_int_equal(tn_backward(&p[0], 1, &g, false, false), 0);
    assert_non_null(a2->grad);
    assert_int_equal(a2->grad->ndim, 2);
    for (int i = 0; i < 3; i++)
        assert_true(((const double *)tn_data(a2->grad))[i] == 8.0);
    tn_release_list(p, 3);
    p = (struct tn_tensor **)a; /* overwritten */
    struct tn_tensor *d = tn_ones(TN_SHAPE(2), TN_FLOAT64);
    const struct tn_tensor *bad[2] = {d, b};
    assert_true(tn_broadcast_tensors(bad, 2, &p) < 0);
    assert_null(p);
    assert_string_equal(tn_last_error(), "The size of tensor a (2) must match the size of "
                                         "tensor b (4) at non-singleton dimension 0");
    tn_release(d);
    tn_release(g);
    tn_release(c);
    tn_release(b);
    tn_release(a2);
    tn_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_typed_views),
        cmocka_unit_test(test_typed_errors),
        cmocka_unit_test(test_backward_through_pieces),
        cmocka_unit_test(test_broadcast_tensors),
    };
    return TN_RUN_TESTS(tests);
}
