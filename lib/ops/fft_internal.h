/*
 * ops/fft_internal.h: the FFT engine behind _fft_r2c, _fft_c2r and
 * _fft_c2c (lib/ops/fft_plan.c; never installed).
 *
 * Why our own: the build's dependencies are fixed (C11, OpenBLAS; no FFTW,
 * whose GPL would also bind libtensor's users, and no MKL), and what the
 * three ops need is small: one complex transform of any length. A plan per length holds the factors and the twiddles:
 * lengths whose prime factors are 2, 3, 5 and primes up to 31 run an
 * iterative mixed-radix Stockham (self-sorting, no bit reversal) Cooley-
 * Tukey with radix 4, 2, 3, 5 butterflies and a plain DFT for the other
 * small primes; any other length runs Bluestein's chirp-z transform over a
 * power-of-two plan. Transforms run in double, except the complex64 c2c
 * and float32 r2c lines of Stockham plans (tn__fft_exec_f): those run in
 * float (a float c2r put fft.hfft2 int64 sample 5 off PyTorch's), as
 * PyTorch's own complex64 FFTs (MKL, pocketfft) do, with twiddles computed
 * in double and rounded once; the OpInfo sweep of the fft ops agrees with
 * PyTorch as before (fft.hfft2 int64 sample 5, once off MKL's float
 * rounding by 1.4e-5, now passes). Bluestein's chirp stays in double.
 */
#ifndef TN_OPS_FFT_INTERNAL_H
#define TN_OPS_FFT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct tn__fft_plan;

/* The plan for length n >= 1 (kept in a process-wide cache of recent
 * lengths, or made for this call when the cache is full); NULL with
 * TN_ENOMEM set when it cannot be allocated. Give it back with
 * tn__fft_plan_put. Thread-safe. */
struct tn__fft_plan *tn__fft_plan_get(int64_t n);
void tn__fft_plan_put(struct tn__fft_plan *p);

/* How many complex values of scratch space tn__fft_exec_* needs. */
int64_t tn__fft_work_len(const struct tn__fft_plan *p);

/* exp(-2 pi i k/(2n)) for k = 0..n (interleaved pairs) of the plan for n:
 * what turns its complex transform of n into a real one of 2n (the even
 * and odd samples as real and imaginary parts, then one butterfly). */
const double *tn__fft_real_twiddles(const struct tn__fft_plan *p);
/* The same rounded to float (Stockham plans only, as tn__fft_exec_f). */
const float *tn__fft_real_twiddles_f(const struct tn__fft_plan *p);

/* The forward DFT (exp(-2 pi i jk/n), unnormalized) of the n interleaved
 * complex values at data (re, im, re, im, ...), in place; work holds
 * tn__fft_work_len complex values. The inverse is conj(fwd(conj(x))),
 * which callers fold into their gather and scatter. */
void tn__fft_exec_d(const struct tn__fft_plan *p, double *data, double *work);

/* The same transform computed in float, for complex64 lines; only where
 * tn__fft_float_ok (the mixed-radix plans: Bluestein's chirp stays in
 * double). */
bool tn__fft_float_ok(const struct tn__fft_plan *p);
void tn__fft_exec_f(const struct tn__fft_plan *p, float *data, float *work);
/* The float transform from src to dst (plans with tn__fft_plan_passes(p)
 * >= 1; src may be dst from 2 passes on) through scratch a and b, n values
 * each: no gather and no copies for a contiguous line. */
void tn__fft_exec_oop_f(const struct tn__fft_plan *p, const float *src, float *dst, float *a,
                        float *b);
int tn__fft_plan_passes(const struct tn__fft_plan *p);

/* One Stockham pass of fft_exec.h (radix rad, ns done, twiddles tw, and
 * for float tv: the same laid out for the vectors, see fft_plan.c) with
 * AVX2 when the CPU has it and the pass fits its vectors (lib/ops/
 * fft_avx2.c); 0, having done nothing, otherwise. */
int tn__fft_pass_avx2(int64_t n, int rad, int64_t ns, const double *tw, const double *tv,
                      const double *x, double *y);
/* The r2c split of fft_lines.h (fft_half.h) for k = 1, 2, ... up to
 * before m - 3, in float with AVX2 and FMA: X[k] = sc (E + w^k O) from the
 * m-point spectrum z, into dst (contiguous); returns the k it stopped at
 * (1 when it did nothing). */
int64_t tn__fft_r2c_split_avx2_f(const float *z, const float *w, float *dst, int64_t m, float sc);
/* The c2r join of fft_half.h in double from a contiguous complex64 half
 * spectrum x (m + 1 values), for k = 1, 2, ... up to before m - 1, with
 * AVX2: the scalar loop's operations, so its results; returns the k it
 * stopped at (1 when it did nothing). */
int64_t tn__fft_c2r_join_avx2_f(const float *x, const double *w, double *z, int64_t m);
int tn__fft_pass_avx2_f(int64_t n, int rad, int64_t ns, const float *tw, const float *tv,
                        const float *x, float *y);

struct tn_tensor;

/* The FFTs' backward formulas as PyTorch's (fft_r2c_backward,
 * fft_c2r_backward, and c2c the other way), in lib/ops/fft.c; derivatives.yaml calls them. New references. */
struct tn_tensor *tn__fft_r2c_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization, bool onesided, const int64_t *sizes,
                                 int ndim);
struct tn_tensor *tn__fft_c2r_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization);
struct tn_tensor *tn__fft_c2c_bw(const struct tn_tensor *grad, const int64_t *dim, int dim_len,
                                 int64_t normalization, bool forward);

#endif
