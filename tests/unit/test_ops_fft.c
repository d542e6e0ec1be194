/*
 * Unit tests of the FFTs (lib/ops/fft.c, lib/ops/fft_plan.c): every case of
 * tests/fixtures/ops/fft.json (real PyTorch: the three core transforms,
 * torch.fft's functions, their errors), then what fixtures cannot show:
 * long and awkward lengths against a plain DFT, the Meta kernels, and the
 * gradients of the transforms against finite differences.
 */
#include "ops_cases.h"

#include <tensor/ops.h>

static void test_fixture_cases(void **state)
{
    (void)state;
    layout_significant = true; /* size-1 dims' strides are free, as in PyTorch */
    /* 1.13's fixture words its kernels' dtype errors otherwise: we follow 2.x */
    run_op_cases("../ops/fft", true, true);
}

/* max |y - dft(x)| relative to max |dft(x)| for x of length n (complex
 * interleaved pairs when xs is 2, real when 1) and its transform y (float
 * pairs when single, else double), the DFT summed in long double. */
static double error_vs_dft(int64_t n, const double *x, int xs, const void *y, bool single)
{
    double err = 0, top = 0;
    for (int64_t k = 0; k < n; k += n > 64 ? n / 61 : 1) {
        long double re = 0, im = 0;
        for (int64_t j = 0; j < n; j++) {
            long double a = -2 * 3.14159265358979323846264338327950288L * (long double)(j * k % n) / n;
            long double xr = x[xs * j], xi = xs == 2 ? x[2 * j + 1] : 0;
            re += xr * cosl(a) - xi * sinl(a);
            im += xr * sinl(a) + xi * cosl(a);
        }
        double yr = single ? ((const float *)y)[2 * k] : ((const double *)y)[2 * k];
        double yi = single ? ((const float *)y)[2 * k + 1] : ((const double *)y)[2 * k + 1];
        err = fmax(err, fmax(fabs((double)re - yr), fabs((double)im - yi)));
        top = fmax(top, hypot((double)re, (double)im));
    }
    return err / top;
}

/* error_vs_dft of the r2c of a float64 x of length n. */
static double dft_error(int64_t n)
{
    struct tn_tensor *x = tn_randn(TN_SHAPE(n), TN_FLOAT64, NULL);
    struct tn_tensor *y = tn_underscore_fft_r2c(x, (int64_t[]){0}, 1, 0, false);
    assert_non_null(y);
    assert_int_equal(y->dtype, TN_COMPLEX128);
    double e = error_vs_dft(n, tn_data(x), 1, tn_data(y), false);
    tn_release(y);
    tn_release(x);
    return e;
}

/* Lengths of every plan kind (powers of two, mixed radices, a prime under
 * 32's plain DFT, Bluestein's primes and a composite with a large prime,
 * 2^16 + 1), in double. */
static void test_lengths_against_dft(void **state)
{
    (void)state;
    const int64_t ns[] = {1, 2, 29, 31 * 27, 4096, 3 * 5 * 7 * 64, 1031, 2 * 1031, 65537,
                          4 * 25 * 49 * 11, 3 * 5 * 13 * 16};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        double e = dft_error(ns[i]);
        if (e > 1e-13)
            fail_msg("length %lld: relative error %g", (long long)ns[i], e);
    }
}

/* complex64 lines run in float, with the vector passes of radix 4, 2, 3,
 * 5 and the plain DFT (fft_avx2.c) on mixed lengths, four or two values
 * a vector: their error against
 * the DFT stays float's (PyTorch's own float FFT: 1.3e-7 to 1.6e-7 of the
 * largest value at these lengths, ours alike, 1e-6 allowed). */
static void test_float_lengths(void **state)
{
    (void)state;
    /* then 2 mod 4: the passes of two values a vector */
    const int64_t ns[] = {3360, 6000, 4 * 7 * 11 * 13, 29 * 64, 31 * 80, 4 * 3125, 12, 60,
                          2 * 243 * 5, 2 * 7 * 11 * 13, 2 * 31 * 5, 30};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t n = ns[i];
        struct tn_tensor *x = tn_randn(TN_SHAPE(n), TN_COMPLEX64, NULL);
        struct tn_tensor *y = tn_fft_fft(x, NULL, -1, NULL);
        assert_non_null(y);
        assert_int_equal(y->dtype, TN_COMPLEX64);
        double *xd = malloc((size_t)n * 2 * sizeof *xd);
        assert_non_null(xd);
        const float *xf = tn_data(x);
        for (int64_t j = 0; j < 2 * n; j++)
            xd[j] = xf[j];
        double e = error_vs_dft(n, xd, 2, tn_data(y), true);
        if (e > 1e-6)
            fail_msg("complex64 length %lld: relative error %g", (long long)n, e);
        free(xd);
        tn_release(y);
        tn_release(x);
    }
}

/* A round trip: irfft(rfft(x)) is x (norm 2 on the way back), for a float32
 * batch along a middle dim, and ifft(fft(z)) is z for complex64. */
static void test_round_trips(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_randn(TN_SHAPE(3, 50, 4), TN_FLOAT32, NULL);
    struct tn_tensor *f = tn_underscore_fft_r2c(x, (int64_t[]){1}, 1, 0, true);
    struct tn_tensor *b = tn_underscore_fft_c2r(f, (int64_t[]){1}, 1, 2, 50);
    assert_non_null(b);
    struct tn_tensor *bc = tn_contiguous(b), *xc = tn_contiguous(x);
    const float *p = tn_data(bc), *q = tn_data(xc);
    for (int64_t i = 0; i < tn_numel(x); i++)
        assert_true(fabsf(p[i] - q[i]) <= 1e-5f * (1 + fabsf(q[i])));
    struct tn_tensor *z = tn_underscore_fft_c2c(f, (int64_t[]){0, 2}, 2, 1, true);
    struct tn_tensor *zz = tn_underscore_fft_c2c(z, (int64_t[]){2, 0}, 2, 1, false);
    struct tn_tensor *fc = tn_contiguous(f), *zc = tn_contiguous(zz);
    const float *u = tn_data(fc), *v = tn_data(zc);
    for (int64_t i = 0; i < 2 * tn_numel(f); i++)
        assert_true(fabsf(u[i] - v[i]) <= 1e-4f * (1 + fabsf(u[i])));
    tn_release(zc);
    tn_release(fc);
    tn_release(zz);
    tn_release(z);
    tn_release(xc);
    tn_release(bc);
    tn_release(b);
    tn_release(f);
    tn_release(x);
}

/* Meta tensors get the shapes, dtypes and strides, nothing computed. */
static void test_meta(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_empty_on(TN_SHAPE(4, 6, 5), TN_FLOAT64, (struct tn_device){TN_DEVICE_META, -1});
    assert_non_null(x);
    struct tn_tensor *r = tn_underscore_fft_r2c(x, (int64_t[]){0}, 1, 0, true);
    assert_non_null(r);
    assert_int_equal(r->dtype, TN_COMPLEX128);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->sizes[0], 3);
    /* PyTorch 2.x: the batch dims outermost, the transformed one innermost */
    assert_int_equal(r->strides[0], 1);
    assert_int_equal(r->strides[1], 15);
    assert_int_equal(r->strides[2], 3);
    struct tn_tensor *c = tn_underscore_fft_c2r(r, (int64_t[]){0, 2}, 2, 2, 8);
    assert_non_null(c);
    assert_int_equal(c->dtype, TN_FLOAT64);
    assert_int_equal(c->sizes[2], 8);
    tn_release(c);
    tn_release(r);
    tn_release(x);
}

/* Gradients by finite differences (float64; the complex results reach a
 * real loss through rfft -> irfft, c2c in between): d sum(w * y)/dx, for a
 * last size n odd (plain) or even (the half-length real path). */
static void check_gradients(int64_t n)
{
    struct tn_tensor *x = tn_randn(TN_SHAPE(2, n), TN_FLOAT64, NULL);
    struct tn_tensor *w = tn_randn(TN_SHAPE(2, n), TN_FLOAT64, NULL);
    struct tn_tensor *xr = tn_clone(x);
    tn_requires_grad_(xr, true);
    /* y = irfft(c2c(rfft(x)) along dim 0), odd last size */
    struct tn_tensor *f = tn_underscore_fft_r2c(xr, (int64_t[]){1}, 1, 1, true);
    struct tn_tensor *g = tn_underscore_fft_c2c(f, (int64_t[]){0}, 1, 0, true);
    struct tn_tensor *y = tn_underscore_fft_c2r(g, (int64_t[]){1}, 1, 2, n);
    assert_non_null(y);
    struct tn_tensor *wy = tn_mul(w, y), *loss = tn_sum(wy, TN_DTYPE_UNSET);
    assert_int_equal(tn_backward(&loss, 1, NULL, false, false), 0);
    const double *gd = tn_data(xr->grad);
    double *xd = tn_data(x);
    for (int64_t i = 0; i < 2 * n; i++) {
        double keep = xd[i], l[2];
        for (int s = 0; s < 2; s++) {
            xd[i] = keep + (s ? 1e-6 : -1e-6);
            struct tn_tensor *f2 = tn_underscore_fft_r2c(x, (int64_t[]){1}, 1, 1, true);
            struct tn_tensor *g2 = tn_underscore_fft_c2c(f2, (int64_t[]){0}, 1, 0, true);
            struct tn_tensor *y2 = tn_underscore_fft_c2r(g2, (int64_t[]){1}, 1, 2, n);
            struct tn_tensor *m2 = tn_mul(w, y2), *s2 = tn_sum(m2, TN_DTYPE_UNSET);
            l[s] = *(double *)tn_data(s2);
            tn_release(s2);
            tn_release(m2);
            tn_release(y2);
            tn_release(g2);
            tn_release(f2);
        }
        xd[i] = keep;
        double fd = (l[1] - l[0]) / 2e-6;
        if (fabs(fd - gd[i]) > 1e-6 * (1 + fabs(fd)))
            fail_msg("element %lld: gradient %.12g, finite differences %.12g", (long long)i,
                     gd[i], fd);
    }
    tn_release(loss);
    tn_release(wy);
    tn_release(y);
    tn_release(g);
    tn_release(f);
    tn_release(xr);
    tn_release(w);
    tn_release(x);
}

static void test_gradients(void **state)
{
    (void)state;
    check_gradients(9);
    check_gradients(8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_lengths_against_dft),
        cmocka_unit_test(test_float_lengths),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
