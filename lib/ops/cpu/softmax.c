/*
 * ops/cpu/softmax.c: softmax and log_softmax along one dim on the CPU. Each
 * row (outer x inner positions, D elements apart by `inner`) takes its max,
 * the sum of exp(x - max) and then writes exp(x - max) / sum, or x - max -
 * log(sum); float16/bfloat16 compute in float (log_softmax over the last dim
 * rounds the sum and its log to the dtype first, as PyTorch's lastdim kernel
 * does), float64 in double. Rows are
 * split over the thread pool.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/cpu/kernel.h"

struct sjob {
    const char *in;
    char *out;
    int64_t D, inner;
    bool log;
    bool lastdim; /* dim is the last: PyTorch's _lastdim kernels */
};


#define TN_SOFTMAX(SFX, T, CT, LD, ST, EXP, LOG)                                               \
    static void rows_##SFX(int64_t begin, int64_t end, void *ctx)                              \
    {                                                                                          \
        const struct sjob *j = ctx;                                                            \
        const T *in = (const T *)j->in;                                                        \
        T *out = (T *)j->out;                                                                  \
        for (int64_t r = begin; r < end; r++) {                                                \
            int64_t o = r / j->inner, i = r % j->inner;                                        \
            int64_t base = o * j->D * j->inner + i, st = j->inner;                             \
            CT mx = -INFINITY;                                                                 \
            for (int64_t d = 0; d < j->D; d++) {                                               \
                CT v = LD(in[base + d * st]);                                                  \
                mx = v > mx || isnan(v) ? v : mx;                                              \
            }                                                                                  \
            CT sum = 0;                                                                        \
            if (j->log) {                                                                      \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    sum += EXP(LD(in[base + d * st]) - mx);                                    \
                CT ls = LOG(sum);                                                              \
                if (sizeof(T) < sizeof(CT) && j->lastdim) {                                    \
                    /* the reduced types' lastdim kernel keeps the sum and its */              \
                    /* log as T: each rounded, x - max - log(sum) in float */                  \
                    T t_;                                                                      \
                    ST(t_, sum);                                                               \
                    ST(t_, LOG(LD(t_)));                                                       \
                    ls = LD(t_);                                                               \
                }                                                                              \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], LD(in[base + d * st]) - mx - ls);                   \
            } else if (sizeof(T) == sizeof(CT)) {                                              \
                /* exp once: keep it in out, then scale */                                    \
                for (int64_t d = 0; d < j->D; d++) {                                           \
                    CT e = EXP(LD(in[base + d * st]) - mx);                                    \
                    ST(out[base + d * st], e);                                                 \
                    sum += e;                                                                  \
                }                                                                              \
                CT inv = (CT)1 / sum;                                                          \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], LD(out[base + d * st]) * inv);                      \
            } else {                                                                           \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    sum += EXP(LD(in[base + d * st]) - mx);                                    \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], EXP(LD(in[base + d * st]) - mx) / sum);             \
            }                                                                                  \
        }                                                                                      \
    }
TN_SOFTMAX(f32, float, float, LD_ID, ST_ID, expf, logf)
TN_SOFTMAX(f64, double, double, LD_ID, ST_ID, exp, log)
TN_SOFTMAX(f16, tn_half, float, LD_H, ST_H, expf, logf)
TN_SOFTMAX(bf16, tn_bfloat16, float, LD_BF, ST_BF, expf, logf)

#ifdef TN_HAVE_AVX2
#include "ops/cpu/vmath.h"

/* The last n % 8 elements of a row, through a padded block (pad: the value
 * of the unused lanes). */
TN_AVX2 static inline __m256 tail8(const float *x, int64_t n, float pad)
{
    float b[8] = {pad, pad, pad, pad, pad, pad, pad, pad};
    memcpy(b, x, sizeof(float) * (size_t)n);
    return _mm256_loadu_ps(b);
}

TN_AVX2 static float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* softmax or log_softmax of contiguous float32 rows of D elements (inner
 * 1): the max, then exp(x - max) with its sum in eight lanes, then a scale
 * by 1 / sum or a shift by -log(sum), as PyTorch's vectorised last-dim
 * kernel does. */
TN_AVX2 static void rows_f32_avx2(int64_t begin, int64_t end, void *ctx)
{
    const struct sjob *j = ctx;
    int64_t D = j->D, full = D & ~(int64_t)7, rest = D - full;
    for (int64_t row = begin; row < end; row++) {
        const float *x = (const float *)(const void *)j->in + row * D;
        float *y = (float *)(void *)j->out + row * D;
        __m256 m = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
        for (int64_t d = 0; d < D; d += 8) {
            __m256 v = d < full ? _mm256_loadu_ps(x + d) : tail8(x + d, rest, -INFINITY);
            m = _mm256_max_ps(m, v);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float mx = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        if (_mm256_movemask_ps(nan))
            mx = NAN;
        __m256 vm = _mm256_set1_ps(mx), sum = _mm256_setzero_ps();
        for (int64_t d = 0; d < full; d += 8) {
            __m256 e = tn__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + d), vm));
            sum = _mm256_add_ps(sum, e);
            if (!j->log)
                _mm256_storeu_ps(y + d, e);
        }
        if (rest) {
            float b[8];
            __m256 e = tn__exp8(_mm256_sub_ps(tail8(x + full, rest, -INFINITY), vm));
            /* (the padding lanes give exp(-inf) = 0, or NaN with mx NaN,
             * which the whole row is then anyway) */
            sum = _mm256_add_ps(sum, e);
            _mm256_storeu_ps(b, e);
            if (!j->log)
                memcpy(y + full, b, sizeof(float) * (size_t)rest);
        }
        float s = hsum8(sum);
        if (j->log) {
            float ls = logf(s);
            __m256 vl = _mm256_set1_ps(ls);
            for (int64_t d = 0; d < full; d += 8)
                _mm256_storeu_ps(y + d, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + d), vm), vl));
            for (int64_t d = full; d < D; d++)
                y[d] = x[d] - mx - ls;
        } else {
            float inv = 1.0f / s;
            __m256 vi = _mm256_set1_ps(inv);
            for (int64_t d = 0; d < full; d += 8)
                _mm256_storeu_ps(y + d, _mm256_mul_ps(_mm256_loadu_ps(y + d), vi));
            for (int64_t d = full; d < D; d++)
                y[d] *= inv;
        }
    }
}

/* rows_f32_avx2 sixteen lanes at a time on AVX-512 CPUs, with the same
 * bits: tn__exp16 gives tn__exp8's, and the sum still takes each eight
 * elements in order into eight lanes (the low half of a sixteen, then its
 * high half), so the lanes round as before; max, scale and shift are per
 * element. The tail goes under a mask, its unused lanes -inf (exp 0) as
 * tail8 pads them, and its high half is added only when it holds some of
 * the row. Issue 27: the eight-lane exp ran at 0.4-0.7x PyTorch's
 * AVX-512 one. */
TN_AVX512 static void rows_f32_avx512(int64_t begin, int64_t end, void *ctx)
{
    const struct sjob *j = ctx;
    int64_t D = j->D, full = D & ~(int64_t)15, rest = D - full;
    __mmask16 tm = (__mmask16)((1u << rest) - 1);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t row = begin; row < end; row++) {
        const float *x = (const float *)(const void *)j->in + row * D;
        float *y = (float *)(void *)j->out + row * D;
        __m512 m = ninf;
        __mmask16 nan = 0;
        for (int64_t d = 0; d < full; d += 16) {
            __m512 v = _mm512_loadu_ps(x + d);
            m = _mm512_max_ps(m, v);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        if (rest) {
            __m512 v = _mm512_mask_loadu_ps(ninf, tm, x + full);
            m = _mm512_max_ps(m, v);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        float mx = nan ? NAN : _mm512_reduce_max_ps(m);
        __m512 vm = _mm512_set1_ps(mx);
        __m256 sum = _mm256_setzero_ps();
        for (int64_t d = 0; d < full; d += 16) {
            __m512 e = tn__exp16(_mm512_sub_ps(_mm512_loadu_ps(x + d), vm));
            sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
            sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
            if (!j->log)
                _mm512_storeu_ps(y + d, e);
        }
        if (rest) {
            __m512 e = tn__exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tm, x + full), vm));
            sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
            if (rest > 8)
                sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
            if (!j->log)
                _mm512_mask_storeu_ps(y + full, tm, e);
        }
        float s = hsum8(sum);
        if (j->log) {
            __m512 vl = _mm512_set1_ps(logf(s));
            for (int64_t d = 0; d < full; d += 16)
                _mm512_storeu_ps(y + d, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + d), vm), vl));
            if (rest)
                _mm512_mask_storeu_ps(y + full, tm,
                                      _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, x + full), vm), vl));
        } else {
            __m512 vi = _mm512_set1_ps(1.0f / s);
            for (int64_t d = 0; d < full; d += 16)
                _mm512_storeu_ps(y + d, _mm512_mul_ps(_mm512_loadu_ps(y + d), vi));
            if (rest)
                _mm512_mask_storeu_ps(y + full, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, y + full), vi));
        }
    }
}
#endif

static int softmax(const struct tn_tensor *self, int64_t dim, bool log, struct tn_tensor *out)
{
    tn_range_fn fn = NULL;
    switch (self->dtype) {
    case TN_FLOAT32: fn = rows_f32; break;
    case TN_FLOAT64: fn = rows_f64; break;
    case TN_FLOAT16: fn = rows_f16; break;
    case TN_BFLOAT16: fn = rows_bf16; break;
    default: break;
    }
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    if (!fn)
        return tn_set_error(TN_EDTYPE, "\"%s%s\" not implemented for '%s'", log ? "log_softmax" : "softmax",
                            d == self->ndim - 1 ? "_lastdim_kernel_impl" : "_kernel_impl",
                            tn_dtype_info(self->dtype)->c10_name);
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *in = tn_contiguous(self);
    struct tn_tensor *target = tn_is_contiguous(out) ? tn_retain(out) : tn_empty_like(in, TN_DTYPE_UNSET);
    if (!in || !target) {
        tn_release(in);
        tn_release(target);
        return tn_last_status();
    }
    struct sjob j = {tn_data(in), tn_data(target), 1, 1, log, d == self->ndim - 1};
    int64_t outer = 1;
    for (int i = 0; i < self->ndim; i++) {
        if (i < d)
            outer *= self->sizes[i];
        else if (i == d)
            j.D = self->sizes[i];
        else
            j.inner *= self->sizes[i];
    }
    int64_t rows = outer * j.inner;
#ifdef TN_HAVE_AVX2
    if (fn == rows_f32 && j.inner == 1 && tn__have_avx2())
        fn = tn__have_avx512() ? rows_f32_avx512 : rows_f32_avx2;
#endif
    int64_t grain = TN_PARALLEL_GRAIN / (j.D > 0 ? j.D : 1);
    tn_parallel_for(rows, grain > 0 ? grain : 1, fn, &j);
    int rc = target == out ? TN_OK : tn_copy_(out, target);
    tn_release(in);
    tn_release(target);
    return rc;
}

int tn__cpu_softmax_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool half_to_float,
                        struct tn_tensor *out)
{
    return softmax(self, dim, false, out);
}

int tn__cpu_log_softmax_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                            bool half_to_float, struct tn_tensor *out)
{
    return softmax(self, dim, true, out);
}
