/*
 * ops/cpu/softmax.c: softmax and log_softmax along one dim on the CPU. Each
 * row (outer x inner positions, D elements apart by `inner`) takes its max,
 * the sum of exp(x - max) and then writes exp(x - max) / sum, or x - max -
 * log(sum); float16/bfloat16 compute in float (log_softmax over the last dim
 * rounds the sum and its log to the dtype first, as PyTorch's lastdim kernel
 * does), float64 in double. Rows are
 * split over the thread pool at PyTorch's grain. float32 on AVX2 CPUs has
 * its own kernels: contiguous rows (rows_f32_avx2, rows_f32_avx512) and
 * chunks of neighbouring rows along a dim that is not the last
 * (blocks_f32_avx2).
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
    bool nt;       /* the output is streamed (rows_f32_avx2) */
    int64_t chunk; /* inner positions a task takes (blocks_f32_avx2) */
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

/* y[d] = s[d] * c (softmax) or (s[d] - m) - c (log_softmax), d < D: with
 * non-temporal stores where nt (from the first 32-byte boundary of y on;
 * the elements before and after it one at a time, element by element the
 * same operation, so the same bits), else eight at a time. */
TN_AVX2 static void emit_row(float *y, const float *s, int64_t D, float m, float c, bool log,
                             bool nt)
{
    const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(c);
    int64_t d = 0;
    if (nt && (uintptr_t)y % 4 == 0) {
        int64_t head = (int64_t)((32 - ((uintptr_t)y & 31)) & 31) / 4;
        for (; d < head && d < D; d++)
            y[d] = log ? s[d] - m - c : s[d] * c;
        for (; d + 8 <= D; d += 8) {
            __m256 v = _mm256_loadu_ps(s + d);
            _mm256_stream_ps(y + d, log ? _mm256_sub_ps(_mm256_sub_ps(v, vm), vc) : _mm256_mul_ps(v, vc));
        }
    } else {
        for (; d + 8 <= D; d += 8) {
            __m256 v = _mm256_loadu_ps(s + d);
            _mm256_storeu_ps(y + d, log ? _mm256_sub_ps(_mm256_sub_ps(v, vm), vc) : _mm256_mul_ps(v, vc));
        }
    }
    for (; d < D; d++)
        y[d] = log ? s[d] - m - c : s[d] * c;
}

/* Rows of at most this many elements keep their exp(x - max) in a buffer
 * on the stack (in L1) rather than in the output, when the output is
 * streamed. */
#define TN_SM_BUF 4096

/* softmax or log_softmax of contiguous float32 rows of D elements (inner
 * 1), as PyTorch's vectorised last-dim kernel: the max, then exp(x - max)
 * with its sum in eight lanes, then a scale by 1 / sum or a shift by
 * -log(sum). Only the max reads the row from memory: while the exp of one
 * row is computed, the next row is prefetched, so that the memory is busy
 * while the exp is. Outputs of tn__stream_bytes() and more (j->nt) are
 * written with non-temporal stores, not read in first: softmax then keeps
 * its exps in a stack buffer (rows up to TN_SM_BUF) and streams the
 * scaled ones out, as log_softmax streams x - max - log(sum); the memory
 * traffic is that of a copy (issue 27: 52-70% of memcpy's bandwidth at
 * 10^7 elements before). The same bits either way. */
TN_AVX2 static void rows_f32_avx2(int64_t begin, int64_t end, void *ctx)
{
    const struct sjob *j = ctx;
    int64_t D = j->D, full = D & ~(int64_t)7, rest = D - full;
    const bool buffered = j->nt && !j->log && D <= TN_SM_BUF, store = !j->log;
    float buf[TN_SM_BUF];
    for (int64_t row = begin; row < end; row++) {
        const float *x = (const float *)(const void *)j->in + row * D;
        float *y = (float *)(void *)j->out + row * D;
        float *e_out = buffered ? buf : y;
        /* the next row, prefetched during this one's exps (none after the last) */
        const char *next = (const char *)(x + D), *nend = row + 1 < end ? (const char *)(x + 2 * D) : next;
        /* the max of the non-NaN elements (max_ps(v, m) keeps m where v is
         * NaN) in two chains: a NaN then makes its exp, the sum and so
         * every output of the row NaN, as PyTorch's NaN max does */
        __m256 m = _mm256_set1_ps(-INFINITY), m1 = m;
        int64_t d = 0;
        for (; d + 16 <= full; d += 16) {
            m = _mm256_max_ps(_mm256_loadu_ps(x + d), m);
            m1 = _mm256_max_ps(_mm256_loadu_ps(x + d + 8), m1);
        }
        for (; d < D; d += 8)
            m = _mm256_max_ps(d < full ? _mm256_loadu_ps(x + d) : tail8(x + d, rest, -INFINITY), m);
        m = _mm256_max_ps(m, m1);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float mx = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        __m256 vm = _mm256_set1_ps(mx), sum = _mm256_setzero_ps();
        /* exps and their sum, the next row prefetched a line per 16 floats:
         * sixteen at a time, one range check for both (tn__exp8_edge gives
         * the in-range lanes tn__exp8_near's bits), the sum in the same
         * order as eight at a time */
        for (d = 0; d + 16 <= full; d += 16) {
            if (next < nend) {
                _mm_prefetch(next, _MM_HINT_T0);
                next += 64;
            }
            __m256 a0 = _mm256_sub_ps(_mm256_loadu_ps(x + d), vm);
            __m256 a1 = _mm256_sub_ps(_mm256_loadu_ps(x + d + 8), vm);
            const __m256 lo = _mm256_set1_ps(-86.0f);
            __m256 far = _mm256_or_ps(_mm256_cmp_ps(a0, lo, _CMP_NGE_UQ),
                                      _mm256_cmp_ps(a1, lo, _CMP_NGE_UQ));
            __m256 e0, e1;
            if (__builtin_expect(_mm256_testz_ps(far, far), 1)) {
                e0 = tn__exp8_near(a0);
                e1 = tn__exp8_near(a1);
            } else {
                e0 = tn__exp8_edge(a0);
                e1 = tn__exp8_edge(a1);
            }
            sum = _mm256_add_ps(_mm256_add_ps(sum, e0), e1);
            if (store) {
                _mm256_storeu_ps(e_out + d, e0);
                _mm256_storeu_ps(e_out + d + 8, e1);
            }
        }
        for (; d < full; d += 8) {
            __m256 e = tn__exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + d), vm));
            sum = _mm256_add_ps(sum, e);
            if (store)
                _mm256_storeu_ps(e_out + d, e);
        }
        for (; next < nend; next += 64)
            _mm_prefetch(next, _MM_HINT_T0);
        if (rest) {
            float b[8];
            __m256 e = tn__exp8_neg(_mm256_sub_ps(tail8(x + full, rest, -INFINITY), vm));
            /* (the padding lanes give exp(-inf) = 0, or NaN with mx NaN,
             * which the whole row is then anyway) */
            sum = _mm256_add_ps(sum, e);
            _mm256_storeu_ps(b, e);
            if (store)
                memcpy(e_out + full, b, sizeof(float) * (size_t)rest);
        }
        float s = hsum8(sum);
        if (j->log)
            emit_row(y, x, D, mx, logf(s), true, j->nt);
        else
            emit_row(y, e_out, D, 0, 1.0f / s, false, buffered);
    }
    if (j->nt)
        _mm_sfence();
}

/* Loads and stores of eight floats of a run of n (n > 0): all eight while
 * n >= 8, else the first n under mask. */
TN_AVX2 static inline __m256 ld8(const float *p, int64_t n, __m256i mask)
{
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

TN_AVX2 static inline void st8(float *p, int64_t n, __m256i mask, __m256 v)
{
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, mask, v);
}

/* Prefetches the n floats from p, a row a few rows ahead of the one a
 * pass of blocks_f32_avx2 is at: rows of a chunk are far apart (often a
 * power of two, so that they share cache sets), and the hardware
 * prefetcher does not follow them. */
static inline void prefetch_run(const float *p, int64_t n)
{
    for (int64_t c = 0; c < n; c += 16)
        _mm_prefetch((const char *)(p + c), _MM_HINT_T0);
}

/* The most inner positions one task of blocks_f32_avx2 takes (its max and
 * sum lanes on the stack) */
#define TN_SM_CHUNK 1024
#define TN_SM_AHEAD 8 /* rows */

/* softmax or log_softmax along a dim that is not the last (inner > 1) of
 * float32: a task takes a chunk of j->chunk neighbouring inner positions
 * of one outer index, each in a lane, and goes over its D rows (contiguous
 * runs of the chunk, one row of it D * ... apart) three times: the max
 * (NaN if any element is), exp(x - max) into the output with the sum
 * taken in order, then the scale by 1 / sum or x - max - log(sum), per
 * lane as rows_f32 with tn__exp8 for expf as the last-dim kernel. The
 * chunk is sized for its D rows to stay in L2 between the passes (a chunk
 * of eight positions, one vector, walked 4 KiB apart rows that never
 * stayed in cache: 0.8 GB/s at 10^7 elements). */
TN_AVX2 static void blocks_f32_avx2(int64_t begin, int64_t end, void *ctx)
{
    const struct sjob *j = ctx;
    int64_t D = j->D, inner = j->inner, C = j->chunk, nblk = (inner + C - 1) / C;
    const float *in = (const float *)(const void *)j->in;
    float *out = (float *)(void *)j->out;
    __m256 mx[TN_SM_CHUNK / 8], sm[TN_SM_CHUNK / 8];
    for (int64_t b = begin; b < end; b++) {
        int64_t o = b / nblk, i0 = b % nblk * C, n = inner - i0 < C ? inner - i0 : C;
        int64_t nv = (n + 7) / 8;
        const float *x = in + o * D * inner + i0;
        float *y = out + o * D * inner + i0;
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n % 8)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 nan[TN_SM_CHUNK / 8];
        for (int64_t v = 0; v < nv; v++) {
            mx[v] = _mm256_set1_ps(-INFINITY);
            nan[v] = sm[v] = _mm256_setzero_ps();
        }
        for (int64_t d = 0; d < D; d++) {
            if (d + TN_SM_AHEAD < D)
                prefetch_run(x + (d + TN_SM_AHEAD) * inner, n);
            for (int64_t v = 0; v < nv; v++) {
                __m256 t = ld8(x + d * inner + v * 8, n - v * 8, mask);
                mx[v] = _mm256_max_ps(mx[v], t);
                nan[v] = _mm256_or_ps(nan[v], _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
            }
        }
        for (int64_t v = 0; v < nv; v++)
            mx[v] = _mm256_blendv_ps(mx[v], _mm256_set1_ps(NAN), nan[v]);
        for (int64_t d = 0; d < D; d++) {
            if (d + TN_SM_AHEAD < D)
                prefetch_run(x + (d + TN_SM_AHEAD) * inner, n);
            for (int64_t v = 0; v < nv; v++) {
                int64_t k = d * inner + v * 8;
                __m256 e = tn__exp8_neg(_mm256_sub_ps(ld8(x + k, n - v * 8, mask), mx[v]));
                sm[v] = _mm256_add_ps(sm[v], e);
                if (!j->log)
                    st8(y + k, n - v * 8, mask, e);
            }
        }
        for (int64_t v = 0; v < nv; v++) {
            if (j->log) {
                float l[8];
                _mm256_storeu_ps(l, sm[v]);
                for (int k = 0; k < 8; k++)
                    l[k] = logf(l[k]);
                sm[v] = _mm256_loadu_ps(l);
            } else {
                sm[v] = _mm256_div_ps(_mm256_set1_ps(1.0f), sm[v]);
            }
        }
        for (int64_t d = 0; d < D; d++) {
            if (d + TN_SM_AHEAD < D)
                prefetch_run((j->log ? x : y) + (d + TN_SM_AHEAD) * inner, n);
            for (int64_t v = 0; v < nv; v++) {
                int64_t k = d * inner + v * 8, r = n - v * 8;
                st8(y + k, r, mask,
                    j->log ? _mm256_sub_ps(_mm256_sub_ps(ld8(x + k, r, mask), mx[v]), sm[v])
                           : _mm256_mul_ps(ld8(y + k, r, mask), sm[v]));
            }
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
    struct sjob j = {tn_data(in), tn_data(target), 1, 1, log, d == self->ndim - 1, false, 1};
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
    /* PyTorch's grain: about GRAIN_SIZE operations a task, 16 an element */
    int64_t grain = TN_PARALLEL_GRAIN / 16 / (j.D > 0 ? j.D : 1);
#ifdef TN_HAVE_AVX2
    if (fn == rows_f32 && tn__have_avx2()) {
        j.nt = (int64_t)sizeof(float) * rows * j.D >= tn__stream_bytes();
        if (j.inner > 1) {
            /* chunks of C inner positions whose D rows take at most 128
             * KiB, between 64 (runs of four cache lines) and TN_SM_CHUNK */
            int64_t C = ((int64_t)32768 / (j.D > 0 ? j.D : 1)) & ~(int64_t)7;
            C = C < 64 ? 64 : C > TN_SM_CHUNK ? TN_SM_CHUNK : C;
            j.chunk = C < j.inner ? C : j.inner;
            fn = blocks_f32_avx2;
            rows = outer * ((j.inner + j.chunk - 1) / j.chunk);
            grain /= j.chunk;
        } else {
            /* streamed outputs take the eight-lane kernel on AVX-512 CPUs
             * too: memory, not the exp, is then the limit (same bits) */
            fn = tn__have_avx512() && !j.nt ? rows_f32_avx512 : rows_f32_avx2;
        }
    }
#endif
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
