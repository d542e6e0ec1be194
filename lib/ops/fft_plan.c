/*
 * ops/fft_plan.c: FFT plans (factors and twiddles per length, cached) and
 * the transform itself, in double (ops/fft_internal.h says what and why).
 */
/* -O3 for this file (the build's default is -O2): its vectoriser takes the
 * butterflies' loops over k, 1.6x at 2^16 and for a batch of 256 lines of
 * 1024, same results (no FMA, no reassociation). A four-step pass for
 * large powers of two and an AVX2 clone measured slower than this. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "ops/fft_internal.h"

#include "core/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FFT_PI 3.14159265358979323846264338327950288
#define FFT_MAX_RADIX 32 /* plain-DFT radices up to 31; longer primes go to Bluestein */
#define FFT_MAX_FACTORS 64
#define FFT_CACHE 32 /* plans kept; more distinct lengths are planned per call */

struct tn__fft_plan {
    int64_t n;
    int nf;                     /* Stockham passes (0 with sub) */
    int fac[FFT_MAX_FACTORS];   /* their radices */
    int64_t tw_off[FFT_MAX_FACTORS], root_off[FFT_MAX_FACTORS]; /* into tw (complex units) */
    /* Stockham: each pass's twiddles and roots; Bluestein: chirp (n) then
     * the filter's scaled FFT (sub->n) */
    double *twd;
    float *twf;                 /* twd rounded to float (Stockham plans only): tn__fft_exec_f */
    float *rtwf;                /* rtw rounded to float (Stockham plans only) */
    /* twf for the AVX2 float passes: per pass, per four [r ns + k], the
     * four wr twice each, then the four wi twice each (fft_avx2.c) */
    float *twv;
    double *rtw;                /* exp(-2 pi i k/(2n)), k = 0..n: a real transform of 2n */
    struct tn__fft_plan *sub;   /* Bluestein's power-of-two plan, or NULL */
    bool cached;
};

#define FFT_SIMD_PASS tn__fft_pass_avx2
#define TWV(p, s) NULL
#define R double
#define SUF d
#define TW twd
#include "ops/fft_exec.h"
#undef R
#undef SUF
#undef TW
#undef TWV
#undef FFT_SIMD_PASS
#define FFT_SIMD_PASS tn__fft_pass_avx2_f
#define TWV(p, s) ((p)->twv + 4 * (p)->tw_off[s])
#define R float
#define SUF f
#define TW twf
#define FFT_OOP
#include "ops/fft_exec.h"
#undef FFT_OOP
#undef R
#undef SUF
#undef TW
#undef TWV
#undef FFT_SIMD_PASS

static void plan_free(struct tn__fft_plan *p)
{
    if (!p)
        return;
    plan_free(p->sub);
    free(p->twd);
    free(p->twf);
    free(p->rtwf);
    free(p->twv);
    free(p->rtw);
    free(p);
}

/* exp(-2 pi i num/den) into w[0..1], num reduced first so large lengths
 * keep their accuracy */
static void root(double *w, int64_t num, int64_t den)
{
    num %= den;
    double a = -2.0 * FFT_PI * (double)num / (double)den;
    w[0] = cos(a), w[1] = sin(a);
}

/* Allocates the twiddle array for `len` complex values. */
static int alloc_tw(struct tn__fft_plan *p, int64_t len)
{
    p->twd = malloc((size_t)len * 2 * sizeof(double));
    return p->twd ? 0 : -1;
}

static struct tn__fft_plan *plan_make(int64_t n);

/* Bluestein over a power of two m >= 2n - 1. */
static int plan_bluestein(struct tn__fft_plan *p)
{
    int64_t n = p->n, m = 1;
    while (m < 2 * n - 1)
        m *= 2;
    if (!(p->sub = plan_make(m)) || alloc_tw(p, n + m) < 0)
        return -1;
    double *c = p->twd, *bk = p->twd + 2 * n;
    for (int64_t k = 0; k < n; k++) /* exp(-pi i k^2/n) = root(k^2 mod 2n, 2n) */
        root(c + 2 * k, (int64_t)((unsigned __int128)k * (unsigned __int128)k % (2 * (uint64_t)n)),
             2 * n);
    memset(bk, 0, (size_t)m * 2 * sizeof(double));
    for (int64_t k = 0; k < n; k++) {
        bk[2 * k] = c[2 * k], bk[2 * k + 1] = -c[2 * k + 1];
        if (k)
            bk[2 * (m - k)] = c[2 * k], bk[2 * (m - k) + 1] = -c[2 * k + 1];
    }
    double *work = malloc((size_t)m * 2 * sizeof(double));
    if (!work)
        return -1;
    tn__fft_exec_d(p->sub, bk, work);
    free(work);
    for (int64_t k = 0; k < 2 * m; k++)
        bk[k] /= (double)m;
    return 0;
}

static struct tn__fft_plan *plan_make(int64_t n)
{
    struct tn__fft_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n;
    /* the real transforms of length 2n run as complex ones of n (fft.c) */
    if (!(p->rtw = malloc((size_t)(n + 1) * 2 * sizeof(double))))
        goto fail;
    for (int64_t k = 0; k <= n; k++)
        root(p->rtw + 2 * k, k, 2 * n);
    int64_t rest = n;
    while (rest % 4 == 0 && p->nf < FFT_MAX_FACTORS)
        p->fac[p->nf++] = 4, rest /= 4;
    for (int f = 2; f < FFT_MAX_RADIX && rest > 1; f++)
        while (rest % f == 0 && p->nf < FFT_MAX_FACTORS)
            p->fac[p->nf++] = f, rest /= f;
    if (rest > 1) {
        p->nf = 0;
        if (plan_bluestein(p) < 0)
            goto fail;
        return p;
    }
    /* twiddles per pass: ns rad values (r-major: [r ns + k], so a vector
     * of k reads them contiguously), then rad roots */
    int64_t len = 0, ns = 1;
    for (int s = 0; s < p->nf; s++) {
        p->tw_off[s] = len;
        len += ns * p->fac[s];
        p->root_off[s] = len;
        len += p->fac[s];
        ns *= p->fac[s];
    }
    if (alloc_tw(p, len) < 0)
        goto fail;
    ns = 1;
    for (int s = 0; s < p->nf; s++) {
        int rad = p->fac[s];
        double *w = p->twd + 2 * p->tw_off[s], *rt = p->twd + 2 * p->root_off[s];
        for (int64_t k = 0; k < ns; k++)
            for (int r = 0; r < rad; r++)
                root(w + 2 * (r * ns + k), k * r, ns * rad);
        for (int r = 0; r < rad; r++)
            root(rt + 2 * r, r, rad);
        ns *= rad;
    }
    if (!(p->twf = malloc((size_t)len * 2 * sizeof(float))))
        goto fail;
    for (int64_t i = 0; i < 2 * len; i++)
        p->twf[i] = (float)p->twd[i];
    if (!(p->twv = malloc((size_t)len * 4 * sizeof(float))))
        goto fail;
    ns = 1;
    for (int s = 0; s < p->nf; s++) {
        const float *w = p->twf + 2 * p->tw_off[s];
        float *v = p->twv + 4 * p->tw_off[s];
        for (int64_t i = 0; i < ns * p->fac[s]; i++) {
            float *g = v + 16 * (i / 4) + 2 * (i % 4);
            g[0] = g[1] = w[2 * i], g[8] = g[9] = w[2 * i + 1];
        }
        ns *= p->fac[s];
    }
    if (!(p->rtwf = malloc((size_t)(n + 1) * 2 * sizeof(float))))
        goto fail;
    for (int64_t i = 0; i < 2 * (n + 1); i++)
        p->rtwf[i] = (float)p->rtw[i];
    return p;
fail:
    plan_free(p);
    return NULL;
}

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tn__fft_plan *cache[FFT_CACHE];

/* Contract in ops/fft_internal.h. Cached plans live as long as the
 * process (callers may hold one while another thread looks up). */
struct tn__fft_plan *tn__fft_plan_get(int64_t n)
{
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < FFT_CACHE && cache[i]; i++)
        if (cache[i]->n == n) {
            struct tn__fft_plan *p = cache[i];
            pthread_mutex_unlock(&cache_mu);
            return p;
        }
    pthread_mutex_unlock(&cache_mu);
    struct tn__fft_plan *p = plan_make(n);
    if (!p) {
        tn_set_error(TN_ENOMEM, "out of memory planning an FFT of length %lld", (long long)n);
        return NULL;
    }
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < FFT_CACHE; i++) {
        if (cache[i] && cache[i]->n == n) { /* another thread planned it meanwhile */
            pthread_mutex_unlock(&cache_mu);
            plan_free(p);
            return cache[i];
        }
        if (!cache[i]) {
            cache[i] = p;
            p->cached = true;
            break;
        }
    }
    pthread_mutex_unlock(&cache_mu);
    return p;
}

void tn__fft_plan_put(struct tn__fft_plan *p)
{
    if (p && !p->cached)
        plan_free(p);
}

int64_t tn__fft_work_len(const struct tn__fft_plan *p) { return p->sub ? 2 * p->sub->n : p->n; }

const double *tn__fft_real_twiddles(const struct tn__fft_plan *p) { return p->rtw; }

bool tn__fft_float_ok(const struct tn__fft_plan *p) { return p->twf != NULL; }

int tn__fft_plan_passes(const struct tn__fft_plan *p) { return p->nf; }

const float *tn__fft_real_twiddles_f(const struct tn__fft_plan *p) { return p->rtwf; }
