/*
 * Unit tests of the ops op_db's sweep found missing (issue 25) through the
 * dispatcher: every case of tests/fixtures/ops/opdb.json (real PyTorch
 * 2.x, tests/fixtures/ops_opdb.py): pairwise_distance, renorm, divide's
 * four overloads, diff, nansum, histc. Then the gradients of the
 * differentiable ones by finite differences.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/opdb", true, true);
}

/* one input through tn_gradcheck (float64, made to require grad) */
static void gradcheck1(tn_gradcheck_fn fn, struct tn_tensor *a, void *ctx)
{
    assert_int_equal(tn_requires_grad_(a, true), 0);
    int r = tn_gradcheck(fn, &a, 1, ctx, 1e-6, 1e-8, 1e-6);
    if (r != 1)
        print_message("# %s\n", tn_last_error());
    assert_int_equal(r, 1);
    tn_release(a);
}

static struct tn_tensor *pairwise_fn(struct tn_tensor *const *in, void *ctx)
{
    return tn_pairwise_distance(in[0], in[1], *(const double *)ctx, 1e-6, false);
}

/* maxnorm 2 bounds some of the 4 slices of randn(4, 3, 2) along dim 0 and
 * not the others, so both branches of the factor are taken */
static struct tn_tensor *renorm_fn(struct tn_tensor *const *in, void *ctx)
{
    return tn_renorm(in[0], tn_float(*(const double *)ctx), 0, tn_float(2.0));
}

static struct tn_tensor *nansum_fn(struct tn_tensor *const *in, void *ctx)
{
    int64_t dim = 1;
    return tn_nansum(in[0], &dim, 1, false, TN_DTYPE_UNSET);
}

static struct tn_tensor *diff_fn(struct tn_tensor *const *in, void *ctx)
{
    return tn_diff(in[0], 2, 0, in[1], NULL);
}

static void test_gradients(void **state)
{
    static const double ps[] = {1.0, 2.0, 3.0};
    for (int i = 0; i < 3; i++) {
        gradcheck2(pairwise_fn, tn_randn(TN_SHAPE(3, 4), TN_FLOAT64, NULL),
                   tn_randn(TN_SHAPE(4), TN_FLOAT64, NULL), (void *)&ps[i]);
        gradcheck1(renorm_fn, tn_randn(TN_SHAPE(4, 3, 2), TN_FLOAT64, NULL), (void *)&ps[i]);
    }
    gradcheck1(nansum_fn, tn_randn(TN_SHAPE(3, 4), TN_FLOAT64, NULL), NULL);
    gradcheck2(diff_fn, tn_randn(TN_SHAPE(4, 3), TN_FLOAT64, NULL),
               tn_randn(TN_SHAPE(2, 3), TN_FLOAT64, NULL), NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_gradients),
    };
    return TN_RUN_TESTS(tests);
}
