/*
 * Unit tests of softmax and log_softmax through the dispatcher: every case
 * of tests/fixtures/ops/softmax.json (real PyTorch), and the bits of the
 * float32 kernels (last dim, streamed or not, and a middle dim).
 */
#include <math.h>

#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* float16 softmax on the CPU: 1.13 lacks it, 2.x has it; we follow 2.x */
    run_op_cases("../ops/softmax", true, true);
}

/* The float32 last-dim rows give the bits of the eight-lane algorithm
 * (lib/ops/cpu/softmax.c; the AVX-512 rows must not change them): max,
 * e = exp(x - max) as the exp kernel gives it, e summed in eight float
 * lanes (element d into lane d % 8, in order) and the lanes added as
 * hsum8 does, then e * (1 / sum) or (x - max) - log(sum). Rows of every
 * length 1-70 and longer, with underflowing, infinite and NaN entries. */
static float lanes_sum(const float *e, int64_t n)
{
    float l[8] = {0};
    for (int64_t d = 0; d < n; d++)
        l[d % 8] += e[d];
    float s0 = l[0] + l[4], s1 = l[1] + l[5], s2 = l[2] + l[6], s3 = l[3] + l[7];
    return (s0 + s2) + (s1 + s3);
}

static void lastdim_f32_bits(void)
{
    static const int64_t longer[] = {100, 1000, 1031, 5000};
    for (int li = 1; li <= 70 + 4; li++) {
        int64_t D = li <= 70 ? li : longer[li - 71], R = 5;
        struct tn_tensor *x = tn_empty(TN_SHAPE(R, D), TN_FLOAT32);
        float *a = tn_data(x);
        for (int64_t r = 0; r < R; r++)
            for (int64_t d = 0; d < D; d++) {
                float v = (float)((d * 29 + r * 7 + D) % 61) * 0.37f - 9.0f;
                if (r == 1)
                    v *= 12.0f; /* far below the max: exp underflows */
                if (r == 2 && d % 5 == 1)
                    v = -INFINITY;
                if (r == 3 && d == D / 2)
                    v = INFINITY;
                if (r == 4 && d == D - 1)
                    v = NAN;
                a[r * D + d] = v;
            }
        struct tn_tensor *sm = tn_underscore_softmax(x, 1, false);
        struct tn_tensor *lsm = tn_underscore_log_softmax(x, 1, false);
        assert_non_null(sm);
        assert_non_null(lsm);
        struct tn_tensor *sh = tn_empty(TN_SHAPE(D), TN_FLOAT32), *e = tn_empty(TN_SHAPE(D), TN_FLOAT32);
        for (int64_t r = 0; r < R; r++) {
            const float *xr = a + r * D;
            float mx = -INFINITY;
            bool nan = false;
            for (int64_t d = 0; d < D; d++) {
                mx = xr[d] > mx ? xr[d] : mx;
                nan |= isnan(xr[d]);
            }
            if (nan)
                mx = NAN;
            for (int64_t d = 0; d < D; d++)
                ((float *)tn_data(sh))[d] = xr[d] - mx;
            assert_int_equal(tn_exp_out(sh, e), TN_OK);
            const float *ev = tn_data(e), *sv = tn_data(sh);
            float s = lanes_sum(ev, D), inv = 1.0f / s, ls = logf(s);
            for (int64_t d = 0; d < D; d++) {
                float w = ev[d] * inv, lw = sv[d] - ls;
                float g = ((float *)tn_data(sm))[r * D + d], lg = ((float *)tn_data(lsm))[r * D + d];
                if (isnan(w))
                    assert_true(isnan(g));
                else
                    assert_memory_equal(&g, &w, 4);
                if (isnan(lw))
                    assert_true(isnan(lg));
                else
                    assert_memory_equal(&lg, &lw, 4);
            }
        }
        tn_release(e);
        tn_release(sh);
        tn_release(lsm);
        tn_release(sm);
        tn_release(x);
    }
}

static void test_lastdim_f32_bits(void **state)
{
    lastdim_f32_bits();
}

/* the same with the outputs streamed (non-temporal stores from 64 bytes
 * on; rows of 4096 elements and fewer through the stack buffer, the row
 * of 5000 through the output) */
static void test_lastdim_f32_bits_streamed(void **state)
{
    run_streamed(lastdim_f32_bits);
}

/* softmax over the middle dim of O x D x I float32: per (o, i) as the
 * last-dim rows, but the sum of the exps taken in order (one lane each).
 * Sizes around the chunks of eight lanes and of the 64-1024 positions a
 * task takes, with infinite and NaN entries in some positions. */
static void test_middim_f32_bits(void **state)
{
    static const int64_t Ds[] = {1, 3, 50, 700}, Is[] = {2, 7, 8, 9, 70, 1030};
    for (int di = 0; di < 4; di++)
        for (int ii = 0; ii < 6; ii++) {
            int64_t O = 2, D = Ds[di], I = Is[ii];
            struct tn_tensor *x = tn_empty(TN_SHAPE(O, D, I), TN_FLOAT32);
            float *a = tn_data(x);
            for (int64_t k = 0; k < O * D * I; k++) {
                int64_t i = k % I;
                float v = (float)((k * 29 + D) % 61) * 0.37f - 9.0f;
                if (i % 11 == 3 && k % 7 == 0)
                    v = -INFINITY;
                if (i % 13 == 5 && k % 17 == 0)
                    v = INFINITY;
                if (i % 17 == 6 && k % 19 == 0)
                    v = NAN;
                a[k] = v;
            }
            struct tn_tensor *sm = tn_underscore_softmax(x, 1, false);
            struct tn_tensor *lsm = tn_underscore_log_softmax(x, 1, false);
            assert_non_null(sm);
            assert_non_null(lsm);
            struct tn_tensor *sh = tn_empty(TN_SHAPE(D), TN_FLOAT32), *e = tn_empty(TN_SHAPE(D), TN_FLOAT32);
            float *shv = tn_data(sh);
            const float *ev = tn_data(e), *g = tn_data(sm), *lg = tn_data(lsm);
            for (int64_t o = 0; o < O; o++)
                for (int64_t i = 0; i < I; i++) {
                    const float *xr = a + o * D * I + i;
                    float mx = -INFINITY;
                    bool nan = false;
                    for (int64_t d = 0; d < D; d++) {
                        mx = xr[d * I] > mx ? xr[d * I] : mx;
                        nan |= isnan(xr[d * I]);
                    }
                    if (nan)
                        mx = NAN;
                    for (int64_t d = 0; d < D; d++)
                        shv[d] = xr[d * I] - mx;
                    assert_int_equal(tn_exp_out(sh, e), TN_OK);
                    float s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += ev[d];
                    float inv = 1.0f / s, ls = logf(s);
                    for (int64_t d = 0; d < D; d++) {
                        int64_t k = o * D * I + d * I + i;
                        float w = ev[d] * inv, lw = shv[d] - ls;
                        if (isnan(w))
                            assert_true(isnan(g[k]));
                        else
                            assert_memory_equal(&g[k], &w, 4);
                        if (isnan(lw))
                            assert_true(isnan(lg[k]));
                        else
                            assert_memory_equal(&lg[k], &lw, 4);
                    }
                }
            tn_release(e);
            tn_release(sh);
            tn_release(lsm);
            tn_release(sm);
            tn_release(x);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_lastdim_f32_bits),
        cmocka_unit_test(test_lastdim_f32_bits_streamed),
        cmocka_unit_test(test_middim_f32_bits),
    };
    return TN_RUN_TESTS(tests);
}
