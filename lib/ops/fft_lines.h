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

/* An even-length real transform (r2c, or c2r of length n) as a complex
 * one of m = n/2 (ps->plan is m's): the even samples as real parts, the
 * odd ones as imaginary parts, and a butterfly with exp(-2 pi i k/n)
 * splitting or joining the two halves' spectra:
 *   r2c: X[k] = E[k] + w^k O[k], E = (Z[k] + conj Z[m-k])/2,
 *        O = (Z[k] - conj Z[m-k])/2i;
 *   c2r: Z[k] = (X[k] + conj X[m-k]) + i w^-k (X[k] - conj X[m-k]), then
 *        z = the unnormalized inverse of Z, x[2j] + i x[2j+1] = z[j]
 *        (the imaginary parts of X[0] and X[m] ignored, as pocketfft). */
static void FN(real_half)(const struct fft_pass *ps, const R *src, R *dst, double *buf,
                          double *work)
{
    int64_t n = ps->n, m = n / 2, inner = ps->inner;
    const double *w = tn__fft_real_twiddles(ps->plan);
    double sc = ps->scale;
    if (ps->kind == PASS_R2C) {
        for (int64_t j = 0; j < m; j++)
            buf[2 * j] = src[2 * j * inner], buf[2 * j + 1] = src[(2 * j + 1) * inner];
        tn__fft_exec_d(ps->plan, buf, work);
        for (int64_t k = 0; k <= m; k++) {
            int64_t a = k % m, b = (m - k) % m;
            double zr = buf[2 * a], zi = buf[2 * a + 1], cr = buf[2 * b], ci = -buf[2 * b + 1];
            double er = (zr + cr) / 2, ei = (zi + ci) / 2;
            double or_ = (zi - ci) / 2, oi = -(zr - cr) / 2;
            double xr = er + w[2 * k] * or_ - w[2 * k + 1] * oi;
            double xi = ei + w[2 * k] * oi + w[2 * k + 1] * or_;
            dst[2 * k * inner] = (R)(xr * sc), dst[2 * k * inner + 1] = (R)(xi * sc);
            if (ps->out_n == n && k > 0 && k < m) /* the full spectrum: the mirror half */
                dst[2 * (n - k) * inner] = (R)(xr * sc), dst[2 * (n - k) * inner + 1] = (R)(-xi * sc);
        }
        return;
    }
    int64_t have = ps->in_n < m + 1 ? ps->in_n : m + 1;
    double x0r = src[0], xmr = m < have ? src[2 * m * inner] : 0;
    for (int64_t k = 0; k < m; k++) {
        double ar = k ? src[2 * k * inner] : x0r, ai = k && k < have ? src[2 * k * inner + 1] : 0;
        if (k >= have)
            ar = 0;
        int64_t r = m - k;
        double br = r == m ? xmr : r < have ? src[2 * r * inner] : 0;
        double bi = r == m || r >= have ? 0 : -src[2 * r * inner + 1];
        double sr = ar + br, si = ai + bi, dr = ar - br, di = ai - bi;
        /* t = conj(w^k) d; Z = s + i t, stored conjugated for the inverse */
        double tr = w[2 * k] * dr + w[2 * k + 1] * di, ti = w[2 * k] * di - w[2 * k + 1] * dr;
        buf[2 * k] = sr - ti, buf[2 * k + 1] = -(si + tr);
    }
    tn__fft_exec_d(ps->plan, buf, work);
    for (int64_t j = 0; j < m; j++) {
        dst[2 * j * inner] = (R)(buf[2 * j] * sc);
        dst[(2 * j + 1) * inner] = (R)(-buf[2 * j + 1] * sc);
    }
}

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
            FN(real_half)(ps, src, dst, buf, work);
            continue;
        }
#ifdef FFTL_FLOAT
        if (ps->kind == PASS_C2C && tn__fft_float_ok(ps->plan)) {
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
