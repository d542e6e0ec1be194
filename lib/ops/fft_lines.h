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
