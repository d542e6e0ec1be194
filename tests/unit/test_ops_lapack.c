/*
 * Unit tests of the triangular solves, the LU family and the ops over them
 * (lib/ops/cpu/lu.c, lib/ops/lu.c, lib/ops/solve.c, lib/ops/pinv.c): every
 * case of tests/fixtures/ops/lapack.json (real PyTorch 2.x: values, pivots,
 * info codes and errors), then the Meta kernels' shapes and the gradients
 * of each op (PyTorch's derivatives of the kernels, autograd through the
 * composites) against finite differences.
 */
#include "ops_cases.h"

#include <tensor/ops.h>

static void test_fixture_cases(void **state)
{
    (void)state;
    run_op_cases("../ops/lapack", true, false);
}

static const struct tn_device meta = {TN_DEVICE_META, -1};

static void test_meta_shapes(void **state)
{
    (void)state;
    struct tn_tensor *a = tn_empty_on(TN_SHAPE(2, 1, 3, 3), TN_FLOAT32, meta);
    struct tn_tensor *b = tn_empty_on(TN_SHAPE(4, 3, 5), TN_FLOAT32, meta);
    struct tn_tensor *x = tn_linalg_solve_triangular(a, b, true, true, false);
    assert_non_null(x);
    assert_int_equal(x->ndim, 4);
    assert_int_equal(x->sizes[1], 4);
    assert_int_equal(x->sizes[3], 5);
    struct tn_tensor *w = tn_empty_on(TN_SHAPE(2, 5, 3), TN_FLOAT64, meta), *lu, *pv, *in;
    if (tn_linalg_lu_factor_ex(w, true, false, &lu, &pv, &in) != 0)
        fail_msg("%s", tn_last_error());
    assert_int_equal(pv->dtype, TN_INT32);
    assert_int_equal(pv->sizes[1], 3);
    assert_int_equal(in->ndim, 1);
    struct tn_tensor *p, *l, *u;
    if (tn_lu_unpack(lu, pv, true, true, &p, &l, &u) != 0)
        fail_msg("%s", tn_last_error());
    assert_int_equal(p->sizes[2], 5);
    assert_int_equal(l->sizes[2], 3);
    assert_int_equal(u->sizes[1], 3);
    struct tn_tensor *sq = tn_empty_on(TN_SHAPE(2, 3, 3), TN_FLOAT64, meta);
    struct tn_tensor *inv = tn_linalg_inv(sq), *det = tn_linalg_det(sq);
    assert_non_null(inv);
    assert_non_null(det);
    assert_int_equal(inv->ndim, 3);
    assert_int_equal(det->ndim, 1);
    struct tn_tensor *all[] = {a, b, x, w, lu, pv, in, p, l, u, sq, inv, det};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* What gradcheck differentiates: op `which` of the inputs, weighted by w
 * where it has several results. */
struct grad_case {
    int which;
    struct tn_tensor *w1, *w2, *pivots;
    bool one; /* one input: tn_gradcheck is handed an array of one */
};

/* sum(a * w1) + sum(b * w2) */
static struct tn_tensor *weigh(struct tn_tensor *a, struct tn_tensor *b, const struct grad_case *c)
{
    struct tn_tensor *p = tn_mul(a, c->w1), *q = tn_mul(b, c->w2);
    struct tn_tensor *sp = tn_sum(p, TN_DTYPE_UNSET), *sq = tn_sum(q, TN_DTYPE_UNSET);
    struct tn_tensor *r = tn_add(sp, sq, tn_int(1));
    struct tn_tensor *all[] = {a, b, p, q, sp, sq};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
    return r;
}

static struct tn_tensor *grad_fn(struct tn_tensor *const *in, void *ctx)
{
    const struct grad_case *c = ctx;
    struct tn_tensor *a = in[0], *b = c->one ? NULL : in[1], *r = NULL, *x, *y, *z;
    switch (c->which) {
    case 0: return tn_linalg_solve_triangular(a, b, true, true, false);
    case 1: return tn_linalg_solve_triangular(a, b, false, false, true);
    case 2:
        if (tn_triangular_solve(b, a, false, true, false, &x, &y) < 0)
            return NULL;
        return weigh(x, y, c);
    case 3: case 4: case 5:
        if (tn_linalg_lu_factor_ex(a, true, false, &x, &y, &z) < 0)
            return NULL;
        tn_release(y);
        tn_release(z);
        return x;
    case 6: case 7: case 8: case 9: /* a is a packed LU, its pivots fixed */
        return tn_linalg_lu_solve(a, c->pivots, b, c->which < 8, c->which % 2);
    case 10:
        if (tn_linalg_lu(a, true, &x, &y, &z) < 0)
            return NULL;
        tn_release(x);
        return weigh(y, z, c);
    case 11: return tn_linalg_solve(a, b, true);
    case 12: return tn_linalg_solve(a, b, false);
    case 13: return tn_linalg_inv(a);
    case 14: return tn_linalg_det(a);
    case 15:
        if (tn_linalg_slogdet(a, &x, &y) < 0)
            return NULL;
        tn_release(x);
        return y;
    case 16: return tn_linalg_pinv(a, 1e-15, false);
    case 17: return tn_dist(a, b, tn_float(3.5));
    case 18: return tn_linalg_vecdot(a, b, -1);
    case 19: /* a rank-2 product, whose rank perturbations keep: repeated singular values */
        x = tn_transpose(b, 0, 1);
        y = x ? tn_matmul(a, x) : NULL;
        r = y ? tn_linalg_pinv(y, 1e-15, false) : NULL;
        tn_release(x);
        tn_release(y);
        return r;
    case 20: case 21: /* the factor of the SPD a a^T + 4 I (PyTorch's hermitian wrapper) */
        x = tn_transpose(a, -2, -1);
        y = x ? tn_matmul(a, x) : NULL;
        z = y ? tn_add_scalar(y, tn_int(0), tn_int(1)) : NULL;
        tn_release(x);
        tn_release(y);
        if (z) {
            struct tn_tensor *d = tn_diagonal(z, 0, -2, -1);
            struct tn_tensor *e = d ? tn_add_scalar(d, tn_int(4), tn_int(1)) : NULL;
            if (!e || tn_copy_(d, e) < 0) {
                tn_release(z);
                z = NULL;
            }
            tn_release(d);
            tn_release(e);
        }
        r = z ? tn_linalg_cholesky(z, c->which == 21) : NULL;
        tn_release(z);
        return r;
    case 22: case 23: /* through the triangle the solve reads (PyTorch's triangular wrapper) */
        x = c->which == 23 ? tn_triu(b, 0) : tn_tril(b, 0);
        r = x ? tn_cholesky_solve(a, x, c->which == 23) : NULL;
        tn_release(x);
        return r;
    case 24: case 25:
        x = c->which == 25 ? tn_triu(a, 0) : tn_tril(a, 0);
        r = x ? tn_cholesky_inverse(x, c->which == 25) : NULL;
        tn_release(x);
        return r;
    default: return r;
    }
}

/* a random float64 matrix (batch) with 6 added to its diagonal */
static struct tn_tensor *well(const int64_t *sizes, int ndim)
{
    struct tn_tensor *a = tn_randn(sizes, ndim, TN_FLOAT64, NULL);
    struct tn_tensor *d = tn_diagonal(a, 0, -2, -1);
    struct tn_tensor *e = tn_add_scalar(d, tn_int(6), tn_int(1));
    assert_int_equal(tn_copy_(d, e), 0);
    tn_release(d);
    tn_release(e);
    return a;
}

static void check(int which, struct tn_tensor *a, struct tn_tensor *b)
{
    struct grad_case c = {which, NULL, NULL, NULL, b == NULL};
    struct tn_tensor *lu = NULL, *in = NULL;
    if (which >= 6 && which <= 9) { /* pivots of a random matrix's LU */
        struct tn_tensor *r = tn_randn(a->sizes, a->ndim, TN_FLOAT64, NULL);
        assert_int_equal(tn_linalg_lu_factor_ex(r, true, false, &lu, &c.pivots, &in), 0);
        tn_release(r);
    }
    if (which == 2 || which == 10) {
        struct tn_tensor *x, *y, *z;
        if (which == 2)
            assert_int_equal(tn_triangular_solve(b, a, false, true, false, &x, &y), 0);
        else
            assert_int_equal(tn_linalg_lu(a, true, &z, &x, &y), 0);
        c.w1 = tn_randn(x->sizes, x->ndim, TN_FLOAT64, NULL);
        c.w2 = tn_randn(y->sizes, y->ndim, TN_FLOAT64, NULL);
        tn_release(x);
        tn_release(y);
        if (which == 10)
            tn_release(z);
    }
    if (b)
        gradcheck2(grad_fn, a, b, &c);
    else {
        assert_int_equal(tn_requires_grad_(a, true), 0);
        int r = tn_gradcheck(grad_fn, &a, 1, &c, 1e-6, 1e-8, 1e-6);
        if (r != 1)
            print_message("# case %d: %s\n", which, tn_last_error());
        assert_int_equal(r, 1);
        tn_release(a);
    }
    tn_release(c.w1);
    tn_release(c.w2);
    tn_release(c.pivots);
    tn_release(lu);
    tn_release(in);
}

static void test_gradients(void **state)
{
    (void)state;
    check(0, well(TN_SHAPE(2, 4, 4)), tn_randn(TN_SHAPE(4, 2), TN_FLOAT64, NULL));
    check(1, well(TN_SHAPE(3, 3)), tn_randn(TN_SHAPE(2, 2, 3), TN_FLOAT64, NULL));
    check(2, well(TN_SHAPE(3, 3)), tn_randn(TN_SHAPE(3, 2), TN_FLOAT64, NULL));
    check(3, well(TN_SHAPE(2, 4, 4)), NULL);
    check(4, well(TN_SHAPE(3, 5)), NULL);
    check(5, well(TN_SHAPE(5, 3)), NULL);
    for (int w = 6; w <= 9; w++)
        check(w, well(TN_SHAPE(4, 4)), w < 8 ? tn_randn(TN_SHAPE(4, 2), TN_FLOAT64, NULL)
                                             : tn_randn(TN_SHAPE(2, 4), TN_FLOAT64, NULL));
    check(10, well(TN_SHAPE(3, 4)), NULL);
    check(11, well(TN_SHAPE(2, 3, 3)), tn_randn(TN_SHAPE(2, 3), TN_FLOAT64, NULL));
    check(12, well(TN_SHAPE(3, 3)), tn_randn(TN_SHAPE(2, 3), TN_FLOAT64, NULL));
    check(13, well(TN_SHAPE(3, 3)), NULL);
    check(14, well(TN_SHAPE(2, 3, 3)), NULL);
    check(15, tn_randn(TN_SHAPE(3, 3), TN_FLOAT64, NULL), NULL);
    check(16, tn_randn(TN_SHAPE(4, 3), TN_FLOAT64, NULL), NULL);
    check(17, tn_randn(TN_SHAPE(3, 4), TN_FLOAT64, NULL), tn_randn(TN_SHAPE(4), TN_FLOAT64, NULL));
    check(18, tn_randn(TN_SHAPE(2, 4), TN_FLOAT64, NULL), tn_randn(TN_SHAPE(4), TN_FLOAT64, NULL));
    check(20, tn_randn(TN_SHAPE(2, 3, 3), TN_FLOAT64, NULL), NULL);
    check(21, tn_randn(TN_SHAPE(4, 4), TN_FLOAT64, NULL), NULL);
    /* a well-conditioned factor of either triangle */
    check(22, tn_randn(TN_SHAPE(2, 3, 2), TN_FLOAT64, NULL), well(TN_SHAPE(3, 3)));
    check(23, tn_randn(TN_SHAPE(3, 2), TN_FLOAT64, NULL), well(TN_SHAPE(2, 3, 3)));
    check(24, well(TN_SHAPE(3, 3)), NULL);
    check(25, well(TN_SHAPE(2, 3, 3)), NULL);
    check(19, tn_randn(TN_SHAPE(5, 2), TN_FLOAT64, NULL), tn_randn(TN_SHAPE(3, 2), TN_FLOAT64, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_meta_shapes),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
