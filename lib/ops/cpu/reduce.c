/*
 * ops/cpu/reduce.c: sum, mean, amax, amin, prod, any, all, argmax and argmin
 * over dims, and the scans cumsum and cumprod, on the CPU. Each
 * output element reduces a run of input elements; the outputs are split
 * over the thread pool when there is enough work. Sums of floating types
 * accumulate in double (float16/bfloat16 too), integers in 64 bits with
 * wrap; amax/amin propagate NaN as PyTorch does.
 */
#include <config.h>

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/cpu/kernel.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ANY, R_ALL, R_ARGMAX, R_ARGMIN, R_NUM };

union acc {
    double d;
    uint64_t u;
    int64_t i;
    double _Complex c;
    bool b;
};

/* Accumulates n elements at p (byte stride s) into a. */
typedef void (*red_fn)(const char *p, int64_t n, int64_t s, union acc *a);
/* Writes the accumulated value to dst (count: elements reduced). */
typedef void (*fin_fn)(char *dst, union acc a, int64_t count, int op);


/* One extreme reduction per comparison (> for max, < for min), float and
 * integer flavours; argmax/argmin see the whole reduced run in one call and
 * the first extreme wins (for floats a NaN counts as the extreme). */
#define TN_RED_ARGEXT_FLOAT(NAME, SFX, T, LD, CMP)                                             \
    static void NAME##_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                \
    {                                                                                          \
        double m = (double)LD(*(const T *)p);                                                  \
        int64_t at = 0;                                                                        \
        for (int64_t i = 1; i < n && !isnan(m); i++) {                                         \
            double v = (double)LD(*(const T *)(p + i * s));                                    \
            if (v CMP m || isnan(v))                                                           \
                m = v, at = i;                                                                 \
        }                                                                                      \
        a->i = at;                                                                             \
    }

#define TN_RED_EXT_FLOAT(NAME, SFX, T, LD, CMP)                                                \
    static void NAME##_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                \
    {                                                                                          \
        double m = a->d;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                      \
            double v = (double)LD(*(const T *)(p + i * s));                                    \
            if (v CMP m || isnan(v))                                                           \
                m = isnan(m) ? m : v;                                                          \
        }                                                                                      \
        a->d = m;                                                                              \
    }

#define TN_RED_ARGEXT_INT(NAME, SFX, T, CMP)                                                   \
    static void NAME##_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                \
    {                                                                                          \
        T m = *(const T *)p;                                                                   \
        int64_t at = 0;                                                                        \
        for (int64_t i = 1; i < n; i++) {                                                      \
            T v = *(const T *)(p + i * s);                                                     \
            if (v CMP m)                                                                       \
                m = v, at = i;                                                                 \
        }                                                                                      \
        a->i = at;                                                                             \
    }

#define TN_RED_EXT_INT(NAME, SFX, T, CMP)                                                      \
    static void NAME##_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                \
    {                                                                                          \
        int64_t m = a->i;                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                      \
            int64_t v = *(const T *)(p + i * s);                                               \
            m = v CMP m ? v : m;                                                               \
        }                                                                                      \
        a->i = m;                                                                              \
    }

#define TN_RED_FLOAT(SFX, T, LD, ST)                                                           \
    static void sum_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                   \
    {                                                                                          \
        double acc = a->d;                                                                     \
        if (s == sizeof(T)) {                                                                  \
            /* 8 independent lanes, so the compiler can vectorise */                         \
            const T *x = (const T *)p;                                                         \
            double lane[8] = {0};                                                              \
            int64_t i = 0;                                                                     \
            for (; i + 8 <= n; i += 8)                                                         \
                for (int k = 0; k < 8; k++)                                                    \
                    lane[k] += (double)LD(x[i + k]);                                           \
            for (; i < n; i++)                                                                 \
                acc += (double)LD(x[i]);                                                       \
            acc += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +                               \
                   ((lane[4] + lane[5]) + (lane[6] + lane[7]));                                \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++)                                                    \
                acc += (double)LD(*(const T *)(p + i * s));                                    \
        }                                                                                      \
        a->d = acc;                                                                            \
    }                                                                                          \
    static void prod_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                  \
    {                                                                                          \
        double acc = a->d;                                                                     \
        for (int64_t i = 0; i < n; i++)                                                        \
            acc *= (double)LD(*(const T *)(p + i * s));                                        \
        a->d = acc;                                                                            \
    }                                                                                          \
    TN_RED_ARGEXT_FLOAT(argmax, SFX, T, LD, >)                                                 \
    TN_RED_ARGEXT_FLOAT(argmin, SFX, T, LD, <)                                                 \
    TN_RED_EXT_FLOAT(max, SFX, T, LD, >)                                                       \
    TN_RED_EXT_FLOAT(min, SFX, T, LD, <)                                                       \
    static void fin_##SFX(char *dst, union acc a, int64_t count, int op)                       \
    {                                                                                          \
        double v = op == R_MEAN ? a.d / (double)count : a.d;                                   \
        ST(*(T *)dst, v);                                                                      \
    }

#define ST_F(d, v) ((d) = (float)(v))
#define ST_D(d, v) ((d) = (v))
TN_RED_FLOAT(f32, float, LD_ID, ST_F)
TN_RED_FLOAT(f64, double, LD_ID, ST_D)
TN_RED_FLOAT(f16, tn_half, LD_H, ST_H)
TN_RED_FLOAT(bf16, tn_bfloat16, LD_BF, ST_BF)

#ifdef TN_HAVE_AVX2
#include <immintrin.h>

/* The sum of n contiguous float32 (sq: of their squared distances from c)
 * in blocks of 1024: each block sums in 32 float32 lanes (32 elements a
 * lane, so the block's rounding error stays near float32's own, far below
 * what PyTorch's float32 cascade sum allows itself), and the blocks add up
 * in float64 as sum_f32 does. Converting every element to float64 instead
 * costs more than reading it. Runs of tn__stream_bytes() and more (3/8 of
 * the L3: read from DRAM) go over their two halves at once, a block of
 * each in turn (each half's blocks in their own float64 total): one stream
 * of loads kept a core at 21-23 GB/s from DRAM, two at 29 (10^7 floats, 1
 * thread, issue 27). */
#define TN_LANE(v) (sq ? _mm256_sub_ps((v), vc) : (v))
#define TN_ACC(l, v) ((l) = sq ? _mm256_fmadd_ps(TN_LANE(v), TN_LANE(v), (l)) : _mm256_add_ps((l), (v)))
/* the 32 lanes l0..l3 of a block, into the float64 total tot */
#define TN_BLOCK_TOT(tot, l0, l1, l2, l3)                                                      \
    do {                                                                                       \
        __m256 t_ = _mm256_add_ps(_mm256_add_ps(l0, l1), _mm256_add_ps(l2, l3));               \
        tot = _mm256_add_pd(tot, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(t_)),    \
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(t_, 1)))); \
    } while (0)
TN_AVX2 static inline __attribute__((always_inline)) double blocked_sum(const float *x, int64_t n,
                                                                        bool sq, float c)
{
    __m256d tot = _mm256_setzero_pd();
    __m256 vc = _mm256_set1_ps(c);
    int64_t i = 0, full = n & ~(int64_t)31;
    if (full * (int64_t)sizeof(float) >= tn__stream_bytes() && full >= 2048) {
        int64_t h = full / 2 & ~(int64_t)1023;
        const float *y = x + h;
        __m256d tot2 = tot;
        for (; i < h; i += 1024) {
            __m256 l0 = _mm256_setzero_ps(), l1 = l0, l2 = l0, l3 = l0;
            __m256 k0 = l0, k1 = l0, k2 = l0, k3 = l0;
            for (int64_t j = i; j < i + 1024; j += 32) {
                TN_ACC(l0, _mm256_loadu_ps(x + j));
                TN_ACC(k0, _mm256_loadu_ps(y + j));
                TN_ACC(l1, _mm256_loadu_ps(x + j + 8));
                TN_ACC(k1, _mm256_loadu_ps(y + j + 8));
                TN_ACC(l2, _mm256_loadu_ps(x + j + 16));
                TN_ACC(k2, _mm256_loadu_ps(y + j + 16));
                TN_ACC(l3, _mm256_loadu_ps(x + j + 24));
                TN_ACC(k3, _mm256_loadu_ps(y + j + 24));
            }
            TN_BLOCK_TOT(tot, l0, l1, l2, l3);
            TN_BLOCK_TOT(tot2, k0, k1, k2, k3);
        }
        tot = _mm256_add_pd(tot, tot2);
        i = 2 * h;
    }
    while (i < full) {
        int64_t end = full - i > 1024 ? i + 1024 : full;
        __m256 l0 = _mm256_setzero_ps(), l1 = l0, l2 = l0, l3 = l0;
        for (; i < end; i += 32) {
            TN_ACC(l0, _mm256_loadu_ps(x + i));
            TN_ACC(l1, _mm256_loadu_ps(x + i + 8));
            TN_ACC(l2, _mm256_loadu_ps(x + i + 16));
            TN_ACC(l3, _mm256_loadu_ps(x + i + 24));
        }
        TN_BLOCK_TOT(tot, l0, l1, l2, l3);
    }
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(tot), _mm256_extractf128_pd(tot, 1));
    double acc = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++)
        acc += sq ? ((double)x[i] - c) * ((double)x[i] - c) : x[i];
    return acc;
}
#undef TN_BLOCK_TOT
#undef TN_ACC
#undef TN_LANE

TN_AVX2 double tn__sum_f32_avx2(const float *x, int64_t n)
{
    return blocked_sum(x, n, false, 0);
}

TN_AVX2 double tn__sqdev_f32_avx2(const float *x, int64_t n, float c)
{
    return blocked_sum(x, n, true, c);
}

/* sum_f32 for contiguous runs of 32 and more */
TN_AVX2 static void sum_f32_avx2(const char *p, int64_t n, int64_t s, union acc *a)
{
    if (s != sizeof(float) || n < 32)
        sum_f32(p, n, s, a);
    else
        a->d += tn__sum_f32_avx2((const float *)(const void *)p, n);
}
#endif

#define TN_RED_INT(SFX, T)                                                                     \
    static void sum_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                   \
    {                                                                                          \
        uint64_t acc = a->u;                                                                   \
        for (int64_t i = 0; i < n; i++)                                                        \
            acc += (uint64_t)(int64_t) * (const T *)(p + i * s);                               \
        a->u = acc;                                                                            \
    }                                                                                          \
    static void prod_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                  \
    {                                                                                          \
        uint64_t acc = a->u;                                                                   \
        for (int64_t i = 0; i < n; i++)                                                        \
            acc *= (uint64_t)(int64_t) * (const T *)(p + i * s);                               \
        a->u = acc;                                                                            \
    }                                                                                          \
    TN_RED_ARGEXT_INT(argmax, SFX, T, >)                                                       \
    TN_RED_ARGEXT_INT(argmin, SFX, T, <)                                                       \
    TN_RED_EXT_INT(max, SFX, T, >)                                                             \
    TN_RED_EXT_INT(min, SFX, T, <)                                                             \
    static void fin_##SFX(char *dst, union acc a, int64_t count, int op)                       \
    {                                                                                          \
        *(T *)dst = (T)a.u;                                                                    \
    }
TN_RED_INT(i64, int64_t)
TN_RED_INT(i32, int32_t)
TN_RED_INT(i16, int16_t)
TN_RED_INT(i8, int8_t)
TN_RED_INT(u8, uint8_t)
TN_RED_INT(b, bool)

/* complex sums and products accumulate in double _Complex */
#define TN_RED_CPX(SFX, T)                                                                     \
    static void sum_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                   \
    {                                                                                          \
        double _Complex acc = a->c;                                                            \
        for (int64_t i = 0; i < n; i++)                                                        \
            acc += *(const T *)(p + i * s);                                                    \
        a->c = acc;                                                                            \
    }                                                                                          \
    static void prod_##SFX(const char *p, int64_t n, int64_t s, union acc *a)                  \
    {                                                                                          \
        double _Complex acc = a->c;                                                            \
        for (int64_t i = 0; i < n; i++)                                                        \
            acc *= *(const T *)(p + i * s);                                                    \
        a->c = acc;                                                                            \
    }                                                                                          \
    static void fin_##SFX(char *dst, union acc a, int64_t count, int op)                       \
    {                                                                                          \
        *(T *)dst = (T)(op == R_MEAN ? a.c / (double)count : a.c);                             \
    }
TN_RED_CPX(c64, tn_complex64)
TN_RED_CPX(c128, tn_complex128)

#define ROW(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,     \
                [TN_BFLOAT16] = op##_bf16, [TN_INT64] = op##_i64, [TN_INT32] = op##_i32,       \
                [TN_INT16] = op##_i16, [TN_INT8] = op##_i8, [TN_UINT8] = op##_u8
#define ROW_C(op) [TN_COMPLEX64] = op##_c64, [TN_COMPLEX128] = op##_c128
static const red_fn red_table[R_NUM][TN_NUM_DTYPES] = {
    [R_SUM] = {ROW(sum), [TN_BOOL] = sum_b, ROW_C(sum)},
    [R_PROD] = {ROW(prod), [TN_BOOL] = prod_b, ROW_C(prod)},
    /* any and all run over the input converted to bool */
    [R_ARGMAX] = {ROW(argmax), [TN_BOOL] = argmax_b}, /* (the meta refuses bool first) */
    [R_ARGMIN] = {ROW(argmin), [TN_BOOL] = argmin_b},
    [R_ANY] = {[TN_BOOL] = max_b},
    [R_ALL] = {[TN_BOOL] = min_b},
    [R_MEAN] = {ROW(sum), ROW_C(sum)},
    [R_MAX] = {ROW(max), [TN_BOOL] = max_b},
    [R_MIN] = {ROW(min), [TN_BOOL] = min_b},
};
static const fin_fn fin_table[TN_NUM_DTYPES] = {ROW(fin), [TN_BOOL] = fin_b, ROW_C(fin)};

struct job {
    int op;
    red_fn red;
    fin_fn fin;
    enum tn_dtype dtype;
    const char *in;
    char *out;
    size_t es;
    int nk, nr;
    int64_t ksz[TN_MAX_DIMS], kin[TN_MAX_DIMS], kout[TN_MAX_DIMS]; /* kept: sizes, byte strides */
    int64_t rsz[TN_MAX_DIMS], rin[TN_MAX_DIMS];                    /* reduced, innermost last */
    int64_t nred;
};

static union acc acc_init(const struct job *j)
{
    union acc a;
    memset(&a, 0, sizeof a);
    if (j->op == R_PROD) {
        if (tn_dtype_is_complex(j->dtype))
            a.c = 1;
        else if (tn_dtype_is_floating(j->dtype))
            a.d = 1;
        else
            a.u = 1;
    } else if (j->op == R_ALL) {
        a.i = 1;
    } else if (j->op == R_MAX || j->op == R_MIN) {
        bool fl = tn_dtype_is_floating(j->dtype);
        if (j->op == R_MAX) {
            if (fl)
                a.d = -INFINITY;
            else
                a.i = INT64_MIN;
        } else {
            if (fl)
                a.d = INFINITY;
            else
                a.i = INT64_MAX;
        }
    }
    return a;
}

static void reduce_range(int64_t begin, int64_t end, void *ctx)
{
    const struct job *j = ctx;
    for (int64_t o = begin; o < end; o++) {
        /* the kept-dim index of output o, row-major */
        int64_t rem = o, ioff = 0, ooff = 0;
        for (int k = j->nk - 1; k >= 0; k--) {
            int64_t idx = rem % j->ksz[k];
            rem /= j->ksz[k];
            ioff += idx * j->kin[k];
            ooff += idx * j->kout[k];
        }
        union acc a = acc_init(j);
        if (j->nr == 0) {
            j->red(j->in + ioff, 1, (int64_t)j->es, &a);
        } else {
            /* odometer over the outer reduced dims, a run over the last */
            int64_t ctr[TN_MAX_DIMS] = {0};
            int last = j->nr - 1;
            for (;;) {
                int64_t off = ioff;
                for (int r = 0; r < last; r++)
                    off += ctr[r] * j->rin[r];
                j->red(j->in + off, j->rsz[last], j->rin[last], &a);
                int r = last - 1;
                while (r >= 0 && ++ctr[r] == j->rsz[r])
                    ctr[r--] = 0;
                if (r < 0)
                    break;
            }
        }
        if (j->op == R_MAX || j->op == R_MIN) {
            /* back to the accumulator layout fin expects */
            if (!tn_dtype_is_floating(j->dtype))
                a.u = (uint64_t)a.i;
        }
        j->fin(j->out + ooff, a, j->nred, j->op);
    }
}

static int reduce(int op, const char *name, const struct tn_tensor *self, const int64_t *dim,
                  int dim_len, bool keepdim, struct tn_tensor *out)
{
    /* any and all compute in bool whatever their output (bool, or uint8
     * for a uint8 input) */
    enum tn_dtype dt = op == R_ANY || op == R_ALL ? TN_BOOL : out->dtype;
    if (op == R_ARGMAX || op == R_ARGMIN)
        dt = self->dtype; /* (into int64 indices) */
    red_fn red = red_table[op][dt];
    if (!red)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", name,
                            tn_dtype_info(dt)->c10_name);
    bool mask[TN_MAX_DIMS];
    int rc = tn__reduce_mask(name, self, dim, dim_len, mask);
    if (rc < 0)
        return rc;
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *in = tn_to_dtype(self, dt);
    if (!in)
        return tn_last_status();
#ifdef TN_HAVE_AVX2
    if (red == sum_f32 && tn__have_avx2())
        red = sum_f32_avx2;
#endif
    struct job j = {.op = op, .red = red, .fin = fin_table[out->dtype], .dtype = dt, .in = tn_data(in),
                    .out = tn_data(out), .es = tn_dtype_size(dt), .nred = 1};
    int od = 0;
    for (int i = 0; i < in->ndim; i++) {
        if (mask[i]) {
            j.rsz[j.nr] = in->sizes[i];
            j.rin[j.nr++] = in->strides[i] * (int64_t)j.es;
            j.nred *= in->sizes[i];
            if (keepdim)
                od++;
        } else {
            j.ksz[j.nk] = in->sizes[i];
            j.kin[j.nk] = in->strides[i] * (int64_t)j.es;
            j.kout[j.nk++] = out->strides[od++] * (int64_t)tn_dtype_size(out->dtype);
        }
    }
    /* the reduced dim with the smallest stride runs innermost */
    for (int a = 0; a + 1 < j.nr; a++)
        for (int b = a + 1; b < j.nr; b++)
            if (llabs(j.rin[b]) > llabs(j.rin[a])) {
                int64_t t = j.rin[a], u = j.rsz[a];
                j.rin[a] = j.rin[b], j.rsz[a] = j.rsz[b];
                j.rin[b] = t, j.rsz[b] = u;
            }
    /* a reduced dim that steps over the one inside it exactly once joins
     * it, so that a contiguous block is one run (a sum of 10^5 float32 as
     * 97 rows of 1030 spent 40% of its time between runs, issue 27) */
    int nr = 0;
    for (int a = 0; a < j.nr; a++) {
        if (nr > 0 && j.rin[nr - 1] == j.rin[a] * j.rsz[a]) {
            j.rsz[nr - 1] *= j.rsz[a];
            j.rin[nr - 1] = j.rin[a];
        } else {
            j.rsz[nr] = j.rsz[a];
            j.rin[nr++] = j.rin[a];
        }
    }
    j.nr = nr;
    int64_t nout = tn_numel(out);
    if (j.nred == 0) {
        /* an empty sum is 0 and an empty mean NaN, with no input to read */
        union acc a = acc_init(&j);
        for (int64_t o = 0; o < nout; o++) {
            int64_t rem = o, ooff = 0;
            for (int k = j.nk - 1; k >= 0; k--) {
                ooff += (rem % j.ksz[k]) * j.kout[k];
                rem /= j.ksz[k];
            }
            j.fin(j.out + ooff, a, 0, op);
        }
    } else {
        int64_t grain = TN_PARALLEL_GRAIN / j.nred;
        tn_parallel_for(nout, grain > 0 ? grain : 1, reduce_range, &j);
    }
    tn_release(in);
    return TN_OK;
}

int tn__cpu_sum_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                    bool keepdim, enum tn_dtype dtype, struct tn_tensor *out)
{
    return reduce(R_SUM, "sum_cpu", self, dim, dim_len, keepdim, out);
}

int tn__cpu_mean_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                     bool keepdim, enum tn_dtype dtype, struct tn_tensor *out)
{
    return reduce(R_MEAN, "mean_cpu", self, dim, dim_len, keepdim, out);
}

int tn__cpu_amax_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                     bool keepdim, struct tn_tensor *out)
{
    return reduce(R_MAX, "max_values_cpu", self, dim, dim_len, keepdim, out);
}

int tn__cpu_amin_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                     bool keepdim, struct tn_tensor *out)
{
    return reduce(R_MIN, "min_values_cpu", self, dim, dim_len, keepdim, out);
}

int tn__cpu_prod_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                     enum tn_dtype dtype, struct tn_tensor *out)
{
    return reduce(R_PROD, "prod_cpu", self, &dim, 1, keepdim, out);
}

int tn__cpu_any_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                    struct tn_tensor *out)
{
    return reduce(R_ANY, "any", self, &dim, 1, keepdim, out);
}

int tn__cpu_all_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool keepdim,
                    struct tn_tensor *out)
{
    return reduce(R_ALL, "all", self, &dim, 1, keepdim, out);
}

/* The full reductions: a 0-dim result over every dim. */
static struct tn_tensor *reduce_all(int op, const char *name, const struct tn_tensor *self,
                                    enum tn_dtype dtype)
{
    struct tn_tensor *out = tn_empty_on(NULL, 0, dtype, self->device);
    if (out && reduce(op, name, self, NULL, 0, false, out) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

struct tn_tensor *tn__cpu_prod(tn_keyset ks, const struct tn_tensor *self, enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = tn_dtype_is_integral(self->dtype, true) ? TN_INT64 : self->dtype;
    return reduce_all(R_PROD, "prod_cpu", self, dtype);
}

struct tn_tensor *tn__cpu_any(tn_keyset ks, const struct tn_tensor *self)
{
    return reduce_all(R_ANY, "any", self, self->dtype == TN_UINT8 ? TN_UINT8 : TN_BOOL);
}

struct tn_tensor *tn__cpu_all(tn_keyset ks, const struct tn_tensor *self)
{
    return reduce_all(R_ALL, "all", self, self->dtype == TN_UINT8 ? TN_UINT8 : TN_BOOL);
}

/* argmax/argmin over one dim, or over the flattened input when dim is NULL. */
static int arg_reduce(int op, const char *name, const struct tn_tensor *self, const int64_t *dim,
                      bool keepdim, struct tn_tensor *out)
{
    if (dim)
        return reduce(op, name, self, dim, 1, keepdim, out);
    int64_t n = tn_numel(self), d0 = 0;
    struct tn_tensor *flat = tn_reshape(self, &n, 1);
    if (!flat)
        return tn_last_status();
    int rc = reduce(op, name, flat, &d0, 1, false, out);
    tn_release(flat);
    return rc;
}

int tn__cpu_argmax_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                       bool keepdim, struct tn_tensor *out)
{
    return arg_reduce(R_ARGMAX, "argmax_cpu", self, dim, keepdim, out);
}

int tn__cpu_argmin_out(tn_keyset ks, const struct tn_tensor *self, const int64_t *dim,
                       bool keepdim, struct tn_tensor *out)
{
    return arg_reduce(R_ARGMIN, "argmin_cpu", self, dim, keepdim, out);
}

/* --- cumsum, cumprod ------------------------------------------------------
 * One run along dim per position of the other dims; floating types
 * accumulate in double, integers in 64 bits with wrap, complex in double
 * complex, as PyTorch's CPU scans do. */

typedef void (*scan_fn)(const char *in, int64_t is, char *out, int64_t os, int64_t n, bool prod);

#define TN_SCAN(SFX, T, AT, LD, ST)                                                            \
    static void scan_##SFX(const char *in, int64_t is, char *out, int64_t os, int64_t n,       \
                           bool prod)                                                          \
    {                                                                                          \
        AT acc = prod ? 1 : 0;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                      \
            AT v = (AT)LD(*(const T *)(in + i * is));                                          \
            acc = prod ? acc * v : acc + v;                                                    \
            ST(*(T *)(out + i * os), acc);                                                     \
        }                                                                                      \
    }
#define ST_I(d, v) ((d) = (__typeof__(d))(v))
TN_SCAN(f32, float, double, LD_ID, ST_F)
TN_SCAN(f64, double, double, LD_ID, ST_D)
TN_SCAN(f16, tn_half, double, LD_H, ST_H)
TN_SCAN(bf16, tn_bfloat16, double, LD_BF, ST_BF)
TN_SCAN(i64, int64_t, uint64_t, (int64_t), ST_I)
TN_SCAN(i32, int32_t, uint64_t, (int64_t), ST_I)
TN_SCAN(i16, int16_t, uint64_t, (int64_t), ST_I)
TN_SCAN(i8, int8_t, uint64_t, (int64_t), ST_I)
TN_SCAN(u8, uint8_t, uint64_t, (int64_t), ST_I)
TN_SCAN(b, bool, uint64_t, (int64_t), ST_I)
TN_SCAN(c64, tn_complex64, double _Complex, LD_ID, ST_I)
TN_SCAN(c128, tn_complex128, double _Complex, LD_ID, ST_I)
static const scan_fn scan_table[TN_NUM_DTYPES] = {ROW(scan), [TN_BOOL] = scan_b, ROW_C(scan)};

static int scan(bool prod, const struct tn_tensor *self, int64_t dim_, struct tn_tensor *out)
{
    int dim = tn_wrap_dim(dim_, self->ndim);
    if (dim < 0)
        return tn_last_status();
    enum tn_dtype dt = out->dtype;
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *in = tn_to_dtype(self, dt);
    if (!in)
        return tn_last_status();
    int64_t es = (int64_t)tn_dtype_size(dt);
    int64_t n = in->ndim ? in->sizes[dim] : 1;
    int64_t is = in->ndim ? in->strides[dim] * es : es, os = out->ndim ? out->strides[dim] * es : es;
    /* odometer over the other dims */
    int64_t sz[TN_MAX_DIMS], si[TN_MAX_DIMS], so[TN_MAX_DIMS], ctr[TN_MAX_DIMS] = {0};
    int k = 0;
    for (int i = 0; i < in->ndim; i++)
        if (i != dim) {
            sz[k] = in->sizes[i];
            si[k] = in->strides[i] * es;
            so[k++] = out->strides[i] * es;
        }
    const char *ib = tn_data(in);
    char *ob = tn_data(out);
    for (;;) {
        int64_t io = 0, oo = 0;
        for (int i = 0; i < k; i++)
            io += ctr[i] * si[i], oo += ctr[i] * so[i];
        scan_table[dt](ib + io, is, ob + oo, os, n, prod);
        int r = k - 1;
        while (r >= 0 && ++ctr[r] == sz[r])
            ctr[r--] = 0;
        if (r < 0)
            break;
    }
    tn_release(in);
    return TN_OK;
}

int tn__cpu_cumsum_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                       enum tn_dtype dtype, struct tn_tensor *out)
{
    return scan(false, self, dim, out);
}

int tn__cpu_cumprod_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                        enum tn_dtype dtype, struct tn_tensor *out)
{
    return scan(true, self, dim, out);
}
