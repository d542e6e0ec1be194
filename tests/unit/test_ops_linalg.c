/*
 * Unit tests of the matrix products through the dispatcher: every case of
 * tests/fixtures/ops/linalg.json (real PyTorch), plus a product large
 * enough to check the BLAS path against a plain loop.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* mm of float16 and the 2.x wording of mm's errors: we follow 2.x */
    run_op_cases("../ops/linalg", true, true);
}

/* A strided, non-BLAS-friendly operand (a column slice of a transpose)
 * gives the same product as its contiguous copy. */
static void test_strided_operands(void **state)
{
    struct tn_tensor *a = tn_randn(TN_SHAPE(64, 48), TN_FLOAT64, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(40, 96), TN_FLOAT64, NULL);
    struct tn_tensor *bs = tn_slice(b, 1, 0, TN_END, 2);  /* 40 x 48, stride 2 */
    struct tn_tensor *bt = tn_t(bs);                      /* 48 x 40 */
    struct tn_tensor *btc = tn_contiguous(bt);
    struct tn_tensor *r1 = tn_mm(a, bt), *r2 = tn_mm(a, btc);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_memory_equal(tn_data(r1), tn_data(r2), tn_nbytes(r1));
    /* out= into a transposed output */
    struct tn_tensor *o = tn_empty(TN_SHAPE(40, 64), TN_FLOAT64);
    struct tn_tensor *ot = tn_t(o);
    assert_int_equal(tn_mm_out(a, btc, ot), 0);
    struct tn_tensor *otc = tn_contiguous(ot);
    assert_memory_equal(tn_data(otc), tn_data(r2), tn_nbytes(r2));
    tn_release(otc);
    tn_release(ot);
    tn_release(o);
    tn_release(r1);
    tn_release(r2);
    tn_release(btc);
    tn_release(bt);
    tn_release(bs);
    tn_release(b);
    tn_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_strided_operands),
    };
    return TN_RUN_TESTS(tests);
}
