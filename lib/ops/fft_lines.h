/*
 * ops/fft_lines.h: the line loops of fft.c for one precision, included
 * once per precision with R (float or double) and SUF (f or d) defined.
 * A pass transforms every line along one dimension of a contiguous
 * tensor (struct fft_pass says which), lines split over the thread pool,
 * each chunk with its own line buffer and scratch.
 */
#define FFTL_CAT2(a, b) a##_##b
#define FFTL_CAT(a, b) FFTL_CAT2(a, b)
#define FN(name) FFTL_CAT(name, SUF)

#define C double
#define HN(name) FN(name)
#define EXEC tn__fft_exec_d
#define RTW tn__fft_real_twiddles
#ifdef FFTL_FLOAT
#define FH_JOIN tn__fft_c2r_join_avx2_f
#endif
#include "ops/fft_half.h"
#undef FH_JOIN
#undef C
#undef HN
#undef EXEC
#undef RTW
#ifdef FFTL_FLOAT
#define C float
#define HN(name) FFTL_CAT(name, ff)
#define EXEC tn__fft_exec_f
#define RTW tn__fft_real_twiddles_f
#define FH_DIRECT
#include "ops/fft_half.h"
#undef C
#undef HN
#undef EXEC
#undef RTW
#undef FH_DIRECT
#endif

#ifdef FFTL_FLOAT
/* A complex line computed in float (tn__fft_exec_f), as PyTorch's
 * complex64 FFTs are: gather (conjugated for an inverse), transform,
 * scale, scatter. */
static void FN(c2c_float)(const struct fft_pass *ps, const R *src, R *dst, float *buf, float *work)
{
    int64_t n = ps->n, inner = ps->inner;
    if (inner == 1 && !ps->inverse && ps->scale == 1 && ps->in_n == n && ps->out_n == n &&
        tn__fft_plan_passes(ps->plan) >= 2) { /* straight from src to dst */
        tn__fft_exec_oop_f(ps->plan, src, dst, buf, work);
        return;
    }
    float sign = ps->inverse ? -1.0f : 1.0f, sc = (float)ps->scale, sci = sign * sc;
    for (int64_t j = 0; j < n; j++)
        buf[2 * j] = src[2 * j * inner], buf[2 * j + 1] = sign * src[2 * j * inner + 1];
    tn__fft_exec_f(ps->plan, buf, work);
    if (ps->scale == 1) {
        for (int64_t j = 0; j < ps->out_n; j++)
            dst[2 * j * inner] = buf[2 * j], dst[2 * j * inner + 1] = sign * buf[2 * j + 1];
        return;
    }
    for (int64_t j = 0; j < ps->out_n; j++)
        dst[2 * j * inner] = buf[2 * j] * sc, dst[2 * j * inner + 1] = buf[2 * j + 1] * sci;
}
#endif

static void FN(pass_range)(int64_t begin, int64_t end, void *ctx)
{
    struct fft_pass *ps = ctx;
    int64_t n = ps->n, in_n = ps->in_n, out_n = ps->out_n, inner = ps->inner;
    double *buf = malloc((size_t)(n + tn__fft_work_len(ps->plan)) * 2 * sizeof(double));
    if (!buf) {
        atomic_store(&ps->failed, true);
        return;
    }
    double *work = buf + 2 * n;
    const R *in = ps->in;
    R *out = ps->out;
    for (int64_t l = begin; l < end; l++) {
        int64_t outer = l / inner, pos = l % inner;
        const R *src = in + (ps->in_complex ? 2 : 1) * (outer * in_n * inner + pos);
        R *dst = out + (ps->out_complex ? 2 : 1) * (outer * out_n * inner + pos);
        /* gather (conjugated for an inverse: inv(x) = conj(fwd(conj(x)))) */
        double sign = ps->inverse ? -1 : 1;
        if (ps->half) {
#ifdef FFTL_FLOAT
            if (ps->flt) {
                real_half_ff(ps, src, dst, (float *)buf, (float *)buf + 2 * n);
                continue;
            }
#endif
            FN(real_half)(ps, src, dst, buf, work);
            continue;
        }
#ifdef FFTL_FLOAT
        if (ps->flt) { /* c2c (fft.c's pass_float) */
            FN(c2c_float)(ps, src, dst, (float *)buf, (float *)buf + 2 * n);
            continue;
        }
#endif
        if (ps->kind == PASS_R2C) {
            for (int64_t j = 0; j < n; j++)
                buf[2 * j] = src[j * inner], buf[2 * j + 1] = 0;
        } else if (ps->kind == PASS_C2C) {
            for (int64_t j = 0; j < n; j++)
                buf[2 * j] = src[2 * j * inner], buf[2 * j + 1] = sign * src[2 * j * inner + 1];
        } else { /* C2R: the half spectrum, extended by Hermitian symmetry, conjugated */
            int64_t half = n / 2 + 1, have = in_n < half ? in_n : half;
            for (int64_t j = 0; j < have; j++)
                buf[2 * j] = src[2 * j * inner], buf[2 * j + 1] = -src[2 * j * inner + 1];
            for (int64_t j = have; j < half; j++)
                buf[2 * j] = 0, buf[2 * j + 1] = 0;
            for (int64_t j = half; j < n; j++)
                buf[2 * j] = buf[2 * (n - j)], buf[2 * j + 1] = -buf[2 * (n - j) + 1];
        }
        tn__fft_exec_d(ps->plan, buf, work);
        if (ps->kind == PASS_C2R) {
            for (int64_t j = 0; j < n; j++)
                dst[j * inner] = (R)(buf[2 * j] * ps->scale);
        } else {
            double sc = ps->scale, sci = sign * sc;
            for (int64_t j = 0; j < out_n; j++)
                dst[2 * j * inner] = (R)(buf[2 * j] * sc), dst[2 * j * inner + 1] = (R)(buf[2 * j + 1] * sci);
        }
    }
    free(buf);
}

#undef FN
#undef FFTL_CAT
#undef FFTL_CAT2
