/*
 * ops/fft_half.h: the even-length real transforms of fft_lines.h, included
 * with R (the tensor's real type), C (the type computed in: double, or
 * float for float32 tensors on Stockham plans), HN(name) (the function's
 * name), EXEC (tn__fft_exec_d or _f) and RTW (the plan's real twiddles in
 * C) defined; FH_DIRECT (float in float) also lets a contiguous r2c line
 * transform straight from the tensor, no gather, and FH_JOIN (float in
 * double) names the vector form of c2r's join.
 */
/* An even-length real transform (r2c, or c2r of length n) as a complex
 * one of m = n/2 (ps->plan is m's): the even samples as real parts, the
 * odd ones as imaginary parts, and a butterfly with exp(-2 pi i k/n)
 * splitting or joining the two halves' spectra:
 *   r2c: X[k] = E[k] + w^k O[k], E = (Z[k] + conj Z[m-k])/2,
 *        O = (Z[k] - conj Z[m-k])/2i;
 *   c2r: Z[k] = (X[k] + conj X[m-k]) + i w^-k (X[k] - conj X[m-k]), then
 *        z = the unnormalized inverse of Z, x[2j] + i x[2j+1] = z[j]
 *        (the imaginary parts of X[0] and X[m] ignored, as pocketfft). */
static void HN(real_half)(const struct fft_pass *ps, const R *src, R *dst, C *buf, C *work)
{
    int64_t n = ps->n, m = n / 2, inner = ps->inner;
    const C *w = RTW(ps->plan);
    C sc = (C)ps->scale;
    if (ps->kind == PASS_R2C) {
#ifdef FH_DIRECT
        if (inner == 1 && tn__fft_plan_passes(ps->plan) >= 1) /* src is m complex values */
            tn__fft_exec_oop_f(ps->plan, src, buf, work, work + 2 * m);
        else
#endif
        {
            for (int64_t j = 0; j < m; j++)
                buf[2 * j] = src[2 * j * inner], buf[2 * j + 1] = src[(2 * j + 1) * inner];
            EXEC(ps->plan, buf, work);
        }
        int64_t k1 = 1; /* the k after 0: past those done with vectors */
#ifdef FH_DIRECT
        if (inner == 1 && ps->out_n != n)
            k1 = tn__fft_r2c_split_avx2_f(buf, w, dst, m, sc);
#endif
        for (int64_t k = 0; k <= m; k = k ? k + 1 : k1) {
            int64_t a = k == m ? 0 : k, b = k ? m - k : 0; /* k % m, (m - k) % m */
            C zr = buf[2 * a], zi = buf[2 * a + 1], cr = buf[2 * b], ci = -buf[2 * b + 1];
            C er = (zr + cr) / 2, ei = (zi + ci) / 2;
            C or_ = (zi - ci) / 2, oi = -(zr - cr) / 2;
            C xr = er + w[2 * k] * or_ - w[2 * k + 1] * oi;
            C xi = ei + w[2 * k] * oi + w[2 * k + 1] * or_;
            dst[2 * k * inner] = (R)(xr * sc), dst[2 * k * inner + 1] = (R)(xi * sc);
            if (ps->out_n == n && k > 0 && k < m) /* the full spectrum: the mirror half */
                dst[2 * (n - k) * inner] = (R)(xr * sc), dst[2 * (n - k) * inner + 1] = (R)(-xi * sc);
        }
        return;
    }
    int64_t have = ps->in_n < m + 1 ? ps->in_n : m + 1;
    C x0r = src[0], xmr = m < have ? src[2 * m * inner] : 0;
    int64_t k1 = 1; /* the k after 0: past those done with vectors */
#ifdef FH_JOIN
    if (inner == 1 && have == m + 1)
        k1 = FH_JOIN(src, w, buf, m);
#endif
    for (int64_t k = 0; k < m; k = k ? k + 1 : k1) {
        C ar = k ? src[2 * k * inner] : x0r, ai = k && k < have ? src[2 * k * inner + 1] : 0;
        if (k >= have)
            ar = 0;
        int64_t r = m - k;
        C br = r == m ? xmr : r < have ? src[2 * r * inner] : 0;
        C bi = r == m || r >= have ? 0 : -src[2 * r * inner + 1];
        C sr = ar + br, si = ai + bi, dr = ar - br, di = ai - bi;
        /* t = conj(w^k) d; Z = s + i t, stored conjugated for the inverse */
        C tr = w[2 * k] * dr + w[2 * k + 1] * di, ti = w[2 * k] * di - w[2 * k + 1] * dr;
        buf[2 * k] = sr - ti, buf[2 * k + 1] = -(si + tr);
    }
    EXEC(ps->plan, buf, work);
    for (int64_t j = 0; j < m; j++) {
        dst[2 * j * inner] = (R)(buf[2 * j] * sc);
        dst[(2 * j + 1) * inner] = (R)(-buf[2 * j + 1] * sc);
    }
}

