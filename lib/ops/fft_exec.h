/*
 * ops/fft_exec.h: the transform of fft_plan.c, included with R (its real
 * type), SUF (its suffix: d or f), TW (the plan's twiddle field for R),
 * TWV(p, s) (pass s's twiddles laid out for FFT_SIMD_PASS, or NULL) and
 * FFT_SIMD_PASS (a vector pass that may take the pass over) defined, and
 * FFT_OOP where the out-of-place form is wanted (float only). Complex values are interleaved
 * pairs of R; products are written out (C's complex `*` calls __mulsc3 for
 * its NaN rules, which costs more than the butterflies).
 */
#define FFT_CAT2(a, b) a##_##b
#define FFT_CAT(a, b) FFT_CAT2(a, b)
#define FN(name) FFT_CAT(name, SUF)

/* One radix-`rad` butterfly over v (rad complex values), forward. roots
 * holds exp(-2 pi i k/rad) for the plain DFT of other radices. */
static inline void FN(butterfly)(int rad, R *vr, R *vi, const R *roots)
{
    switch (rad) {
    case 2: {
        R ar = vr[0], ai = vi[0];
        vr[0] = ar + vr[1], vi[0] = ai + vi[1];
        vr[1] = ar - vr[1], vi[1] = ai - vi[1];
        return;
    }
    case 4: {
        R t0r = vr[0] + vr[2], t0i = vi[0] + vi[2], t1r = vr[0] - vr[2], t1i = vi[0] - vi[2];
        R t2r = vr[1] + vr[3], t2i = vi[1] + vi[3];
        /* (a1 - a3) * -i */
        R t3r = vi[1] - vi[3], t3i = vr[3] - vr[1];
        vr[0] = t0r + t2r, vi[0] = t0i + t2i;
        vr[2] = t0r - t2r, vi[2] = t0i - t2i;
        vr[1] = t1r + t3r, vi[1] = t1i + t3i;
        vr[3] = t1r - t3r, vi[3] = t1i - t3i;
        return;
    }
    case 3: {
        const R h = (R)0.86602540378443864676; /* sin(2 pi/3) */
        R tr = vr[1] + vr[2], ti = vi[1] + vi[2];
        R mr = vr[0] - (R)0.5 * tr, mi = vi[0] - (R)0.5 * ti;
        /* (a1 - a2) * -i h */
        R dr = h * (vi[1] - vi[2]), di = -h * (vr[1] - vr[2]);
        vr[0] += tr, vi[0] += ti;
        vr[1] = mr + dr, vi[1] = mi + di;
        vr[2] = mr - dr, vi[2] = mi - di;
        return;
    }
    case 5: {
        const R c1 = (R)0.30901699437494742410, c2 = (R)-0.80901699437494742410;
        const R s1 = (R)0.95105651629515357212, s2 = (R)0.58778525229247312917;
        R b1r = vr[1] + vr[4], b1i = vi[1] + vi[4], b2r = vr[2] + vr[3], b2i = vi[2] + vi[3];
        R d1r = vr[1] - vr[4], d1i = vi[1] - vi[4], d2r = vr[2] - vr[3], d2i = vi[2] - vi[3];
        R t1r = vr[0] + c1 * b1r + c2 * b2r, t1i = vi[0] + c1 * b1i + c2 * b2i;
        R t2r = vr[0] + c2 * b1r + c1 * b2r, t2i = vi[0] + c2 * b1i + c1 * b2i;
        /* u1 = -i (s1 d1 + s2 d2), u2 = -i (s2 d1 - s1 d2) */
        R u1r = s1 * d1i + s2 * d2i, u1i = -(s1 * d1r + s2 * d2r);
        R u2r = s2 * d1i - s1 * d2i, u2i = -(s2 * d1r - s1 * d2r);
        vr[0] += b1r + b2r, vi[0] += b1i + b2i;
        vr[1] = t1r + u1r, vi[1] = t1i + u1i;
        vr[4] = t1r - u1r, vi[4] = t1i - u1i;
        vr[2] = t2r + u2r, vi[2] = t2i + u2i;
        vr[3] = t2r - u2r, vi[3] = t2i - u2i;
        return;
    }
    default: {
        R yr[FFT_MAX_RADIX], yi[FFT_MAX_RADIX];
        for (int q = 0; q < rad; q++) {
            R sr = 0, si = 0;
            for (int r = 0, e = 0; r < rad; r++, e = e + q >= rad ? e + q - rad : e + q) {
                R wr = roots[2 * e], wi = roots[2 * e + 1];
                sr += vr[r] * wr - vi[r] * wi;
                si += vr[r] * wi + vi[r] * wr;
            }
            yr[q] = sr, yi[q] = si;
        }
        for (int q = 0; q < rad; q++)
            vr[q] = yr[q], vi[q] = yi[q];
    }
    }
}

/* One Stockham pass: x holds rad^-1 n sub-transforms of length ns done;
 * y gets n/(ns rad) of length ns rad. tw holds exp(-2 pi i rk/(ns rad))
 * at [r ns + k]. Inlined per radix (FN(pass) below), so the butterfly's
 * switch and the loops over r resolve at compile time. */
static inline __attribute__((always_inline)) void FN(pass_rad)(int64_t n, const int rad, int64_t ns,
                                                               const R *tw, const R *roots,
                                                               const R *x, R *y)
{
    int64_t q = n / rad, nb = q / ns;
    R vr[FFT_MAX_RADIX], vi[FFT_MAX_RADIX];
    for (int64_t b = 0; b < nb; b++) {
        const R *xb = x + 2 * b * ns;
        R *yb = y + 2 * b * ns * rad;
        for (int64_t k = 0; k < ns; k++) {
            vr[0] = xb[2 * k], vi[0] = xb[2 * k + 1];
            for (int r = 1; r < rad; r++) {
                R ar = xb[2 * (k + r * q)], ai = xb[2 * (k + r * q) + 1];
                R wr = tw[2 * (r * ns + k)], wi = tw[2 * (r * ns + k) + 1];
                vr[r] = ar * wr - ai * wi;
                vi[r] = ar * wi + ai * wr;
            }
            FN(butterfly)(rad, vr, vi, roots);
            for (int r = 0; r < rad; r++) {
                yb[2 * (k + r * ns)] = vr[r];
                yb[2 * (k + r * ns) + 1] = vi[r];
            }
        }
    }
}

static void FN(pass)(int64_t n, int rad, int64_t ns, const R *tw, const R *tv, const R *roots,
                     const R *x, R *y)
{
#ifdef FFT_SIMD_PASS
    if (FFT_SIMD_PASS(n, rad, ns, tw, tv, x, y))
        return;
#endif
    switch (rad) {
    case 2: FN(pass_rad)(n, 2, ns, tw, roots, x, y); return;
    case 3: FN(pass_rad)(n, 3, ns, tw, roots, x, y); return;
    case 4: FN(pass_rad)(n, 4, ns, tw, roots, x, y); return;
    case 5: FN(pass_rad)(n, 5, ns, tw, roots, x, y); return;
    default: FN(pass_rad)(n, rad, ns, tw, roots, x, y); return;
    }
}

/* The mixed-radix transform of data (work: n values). */
static void FN(stockham)(const struct tn__fft_plan *p, R *data, R *work)
{
    R *x = data, *y = work;
    int64_t ns = 1;
    for (int s = 0; s < p->nf; s++) {
        int rad = p->fac[s];
        FN(pass)(p->n, rad, ns, p->TW + 2 * p->tw_off[s], TWV(p, s), p->TW + 2 * p->root_off[s], x,
                 y);
        R *t = x;
        x = y, y = t;
        ns *= rad;
    }
    if (x != data)
        memcpy(data, x, (size_t)p->n * 2 * sizeof(R));
}

#ifdef FFT_OOP
/* The mixed-radix transform from src to dst through the scratch a and b
 * (n values each), no copies: src may be dst when there are 2+ passes. */
void FN(tn__fft_exec_oop)(const struct tn__fft_plan *p, const R *src, R *dst, R *a, R *b)
{
    const R *x = src;
    int64_t ns = 1;
    for (int s = 0; s < p->nf; s++) {
        int rad = p->fac[s];
        R *y = s == p->nf - 1 ? dst : s % 2 ? b : a;
        FN(pass)(p->n, rad, ns, p->TW + 2 * p->tw_off[s], TWV(p, s), p->TW + 2 * p->root_off[s], x,
                 y);
        x = y;
        ns *= rad;
    }
}
#endif

void FN(tn__fft_exec)(const struct tn__fft_plan *p, R *data, R *work)
{
    if (!p->sub) {
        FN(stockham)(p, data, work);
        return;
    }
    /* Bluestein: X_k = c_k sum_j (x_j c_j) conj(c_{k-j}), c_k = exp(-pi i k^2/n):
     * a convolution of length m >= 2n - 1, done as FFT, product with the
     * chirp's FFT (bk, scaled by 1/m), and inverse FFT as conj(fwd(conj)). */
    int64_t n = p->n, m = p->sub->n;
    const R *c = p->TW, *bk = p->TW + 2 * n;
    R *a = work, *w2 = work + 2 * m;
    for (int64_t k = 0; k < n; k++) {
        R xr = data[2 * k], xi = data[2 * k + 1];
        a[2 * k] = xr * c[2 * k] - xi * c[2 * k + 1];
        a[2 * k + 1] = xr * c[2 * k + 1] + xi * c[2 * k];
    }
    memset(a + 2 * n, 0, (size_t)(m - n) * 2 * sizeof(R));
    FN(stockham)(p->sub, a, w2);
    for (int64_t k = 0; k < m; k++) { /* conj(A bk) */
        R ar = a[2 * k], ai = a[2 * k + 1];
        a[2 * k] = ar * bk[2 * k] - ai * bk[2 * k + 1];
        a[2 * k + 1] = -(ar * bk[2 * k + 1] + ai * bk[2 * k]);
    }
    FN(stockham)(p->sub, a, w2);
    for (int64_t k = 0; k < n; k++) { /* c_k conj(a_k) */
        R ar = a[2 * k], ai = -a[2 * k + 1];
        data[2 * k] = ar * c[2 * k] - ai * c[2 * k + 1];
        data[2 * k + 1] = ar * c[2 * k + 1] + ai * c[2 * k];
    }
}

#undef FN
#undef FFT_CAT
#undef FFT_CAT2
