/*
 * Unit tests of the SVD (lib/ops/cpu/svd.c, lib/ops/svd.c): what the
 * OpInfo sweep (tests/opinfo, real PyTorch) does not run everywhere:
 * A = U diag(S) Vh with orthonormal U and Vh and S descending for tall,
 * wide, square and batched matrices of both dtypes, the shapes of
 * full_matrices and of the Meta kernel, the errors, and the gradients of
 * the sign-free results (U Vh, S, the nuclear norm) against finite
 * differences.
 */
#include <math.h>
#include <string.h>

#include "tn_test.h"

#include <tensor/autograd.h>

#include <tensor/ops.h>

/* max |a - b| */
static double maxdiff(const struct tn_tensor *a, const struct tn_tensor *b)
{
    struct tn_tensor *d = tn_sub(a, b, tn_int(1)), *ad = d ? tn_abs(d) : NULL;
    struct tn_tensor *m = ad ? tn_max(ad) : NULL, *m64 = m ? tn_to_dtype(m, TN_FLOAT64) : NULL;
    assert_non_null(m64);
    double r = tn_item_double(m64);
    tn_release(m64);
    tn_release(m);
    tn_release(ad);
    tn_release(d);
    return r;
}

static void check_one(const int64_t *sizes, int ndim, enum tn_dtype dt, bool full)
{
    double tol = dt == TN_FLOAT64 ? 1e-12 : 1e-5;
    struct tn_tensor *a0 = tn_randn(sizes, ndim, TN_FLOAT64, NULL), *a = tn_to_dtype(a0, dt);
    struct tn_tensor *u, *s, *vh;
    assert_int_equal(tn_linalg_svd(a, full, NULL, &u, &s, &vh), 0);
    int64_t m = sizes[ndim - 2], n = sizes[ndim - 1], k = m < n ? m : n;
    assert_int_equal(u->sizes[ndim - 1], full ? m : k);
    assert_int_equal(vh->sizes[ndim - 2], full ? n : k);
    assert_int_equal(s->sizes[ndim - 2], k);
    /* U[..., :k] diag(S) Vh[..., :k, :] = A */
    struct tn_tensor *uk = tn_narrow(u, -1, 0, k), *vk = tn_narrow(vh, -2, 0, k);
    struct tn_tensor *sc = tn_unsqueeze(s, -1), *svh = tn_mul(sc, vk), *rec = tn_matmul(uk, svh);
    assert_true(maxdiff(rec, a) < tol * 10);
    /* U^T U = I and Vh Vh^T = I (full ones too) */
    struct tn_tensor *ut = tn_transpose(u, -2, -1), *uu = tn_matmul(ut, u);
    struct tn_tensor *vt = tn_transpose(vh, -2, -1), *vv = tn_matmul(vh, vt);
    struct tn_tensor *iu = tn_eye(uu->sizes[ndim - 1], uu->sizes[ndim - 1], dt);
    struct tn_tensor *iv = tn_eye(vv->sizes[ndim - 1], vv->sizes[ndim - 1], dt);
    assert_true(maxdiff(uu, iu) < tol * 10);
    assert_true(maxdiff(vv, iv) < tol * 10);
    /* descending and non-negative */
    struct tn_tensor *s64 = tn_to_dtype(s, TN_FLOAT64), *sct = tn_contiguous(s64);
    const double *sd = tn_data(sct);
    for (int64_t i = 0; i < tn_numel(sct); i++) {
        assert_true(sd[i] >= 0);
        if (i % k)
            assert_true(sd[i] <= sd[i - 1]);
    }
    struct tn_tensor *all[] = {a0, a, u, s, vh, uk, vk, sc, svh, rec, ut, uu, vt, vv, iu, iv,
                               s64, sct};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

static void test_decomposition(void **state)
{
    (void)state;
    for (int full = 0; full < 2; full++)
        for (int d = 0; d < 2; d++) {
            enum tn_dtype dt = d ? TN_FLOAT64 : TN_FLOAT32;
            check_one(TN_SHAPE(5, 3), dt, full);
            check_one(TN_SHAPE(3, 5), dt, full);
            check_one(TN_SHAPE(2, 4, 4), dt, full);
            check_one(TN_SHAPE(2, 1, 6, 2), dt, full);
        }
}

static void test_meta_and_errors(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_empty_on(TN_SHAPE(7, 4, 6), TN_FLOAT32,
                                      (struct tn_device){TN_DEVICE_META, -1});
    struct tn_tensor *u, *s, *vh;
    assert_int_equal(tn_underscore_linalg_svd(x, true, true, NULL, &u, &s, &vh), 0);
    assert_int_equal(u->device.type, TN_DEVICE_META);
    assert_int_equal(u->sizes[2], 4);
    assert_int_equal(s->sizes[1], 4);
    assert_int_equal(vh->sizes[1], 6);
    tn_release(u);
    tn_release(s);
    tn_release(vh);
    tn_release(x);
    struct tn_tensor *v = tn_zeros(TN_SHAPE(3), TN_FLOAT32);
    assert_int_not_equal(tn_linalg_svd(v, true, NULL, &u, &s, &vh), 0);
    assert_non_null(strstr(tn_last_error(), "at least 2 dimensions"));
    struct tn_tensor *i = tn_zeros(TN_SHAPE(3, 3), TN_INT64);
    assert_null(tn_linalg_svdvals(i, NULL));
    tn_release(i);
    tn_release(v);
    /* an empty matrix: its largest singular value (ord 2) is 0 */
    struct tn_tensor *e = tn_zeros(TN_SHAPE(0, 5), TN_FLOAT32);
    struct tn_tensor *n2 = tn_linalg_matrix_norm(e, tn_int(2), (int64_t[]){-2, -1}, 2, false,
                                                 TN_DTYPE_UNSET);
    assert_non_null(n2);
    assert_true(tn_item_double(n2) == 0);
    tn_release(n2);
    tn_release(e);
}

/* sum(w1 * (U Vh)) + sum(w2 * S) + nuclear norm: sign-free in U and Vh */
static struct tn_tensor *loss(const struct tn_tensor *a, const struct tn_tensor *w1,
                              const struct tn_tensor *w2)
{
    struct tn_tensor *u, *s, *vh;
    if (tn_linalg_svd(a, false, NULL, &u, &s, &vh) < 0)
        return NULL;
    struct tn_tensor *uv = tn_matmul(u, vh), *p = tn_mul(uv, w1), *q = tn_mul(s, w2);
    struct tn_tensor *nuc = tn_linalg_matrix_norm_str_ord(a, "nuc", (int64_t[]){-2, -1}, 2,
                                                          false, TN_DTYPE_UNSET);
    struct tn_tensor *sp = tn_sum(p, TN_DTYPE_UNSET), *sq = tn_sum(q, TN_DTYPE_UNSET);
    struct tn_tensor *t = tn_add(sp, sq, tn_int(1)), *sn = tn_sum(nuc, TN_DTYPE_UNSET);
    struct tn_tensor *r = tn_add(t, sn, tn_int(1));
    struct tn_tensor *all[] = {u, s, vh, uv, p, q, nuc, sp, sq, t, sn};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
    return r;
}

static void check_gradients(int64_t m, int64_t n)
{
    int64_t k = m < n ? m : n;
    struct tn_tensor *x = tn_randn(TN_SHAPE(2, m, n), TN_FLOAT64, NULL);
    struct tn_tensor *w1 = tn_randn(TN_SHAPE(2, m, n), TN_FLOAT64, NULL);
    struct tn_tensor *w2 = tn_randn(TN_SHAPE(2, k), TN_FLOAT64, NULL);
    struct tn_tensor *xr = tn_clone(x);
    tn_requires_grad_(xr, true);
    struct tn_tensor *l = loss(xr, w1, w2);
    assert_non_null(l);
    assert_int_equal(tn_backward(&l, 1, NULL, false, false), 0);
    const double *gd = tn_data(xr->grad);
    double *xd = tn_data(x);
    for (int64_t i = 0; i < tn_numel(x); i++) {
        double keep = xd[i], v[2];
        for (int s = 0; s < 2; s++) {
            xd[i] = keep + (s ? 1e-6 : -1e-6);
            struct tn_tensor *l2 = loss(x, w1, w2);
            v[s] = tn_item_double(l2);
            tn_release(l2);
        }
        xd[i] = keep;
        double fd = (v[1] - v[0]) / 2e-6;
        if (fabs(fd - gd[i]) > 1e-5 * (1 + fabs(fd)))
            fail_msg("%lldx%lld element %lld: gradient %.12g, finite differences %.12g",
                     (long long)m, (long long)n, (long long)i, gd[i], fd);
    }
    tn_release(l);
    tn_release(xr);
    tn_release(w2);
    tn_release(w1);
    tn_release(x);
}

static void test_gradients(void **state)
{
    (void)state;
    check_gradients(4, 3);
    check_gradients(3, 4);
    check_gradients(3, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decomposition),
        cmocka_unit_test(test_meta_and_errors),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
