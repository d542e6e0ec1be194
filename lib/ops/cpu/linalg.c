/*
 * ops/cpu/linalg.c: matrix products on the CPU. float32, float64, complex64
 * and complex128 go to OpenBLAS (cblas_?gemm) straight from the tensors' memory
 * when their strides allow, so mm costs what sgemm costs; the other dtypes
 * use a loop that accumulates float16/bfloat16 in float32 (as PyTorch's
 * opmath) and integers with two's-complement wrap.
 */
#include <config.h>

#include <cblas.h>
#include <complex.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/cpu/kernel.h"

/* How BLAS sees a rows x cols matrix with element strides (s0, s1). */
struct mat {
    const char *p;
    enum CBLAS_TRANSPOSE trans;
    int64_t ld;
    bool ok;
};

static struct mat describe(const char *p, int64_t rows, int64_t cols, int64_t s0, int64_t s1)
{
    struct mat m = {p, CblasNoTrans, 0, false};
    int64_t c1 = cols > 1 ? cols : 1, r1 = rows > 1 ? rows : 1;
    if ((cols <= 1 || s1 == 1) && (rows <= 1 || s0 >= c1)) {
        m.ld = rows <= 1 ? c1 : s0;
        m.ok = true;
    } else if ((rows <= 1 || s0 == 1) && (cols <= 1 || s1 >= r1)) {
        m.trans = CblasTrans;
        m.ld = cols <= 1 ? r1 : s1;
        m.ok = true;
    }
    /* BLAS takes int sizes */
    if (m.ld > INT32_MAX || rows > INT32_MAX || cols > INT32_MAX)
        m.ok = false;
    return m;
}

/* The loop for dtypes BLAS lacks: c = beta*c + alpha*(a @ b), c row-major
 * with leading dim ldc; a, b by element strides. */
#define TN_GEMM_LOOP(SFX, T, ACC, LD, ST)                                                      \
    static void gemm_loop_##SFX(int64_t M, int64_t N, int64_t K, const char *a, int64_t as0,   \
                                int64_t as1, const char *b, int64_t bs0, int64_t bs1, char *c, \
                                int64_t ldc, ACC alpha, ACC beta, bool use_c)                  \
    {                                                                                          \
        const T *A = (const T *)a, *B = (const T *)b;                                          \
        T *C = (T *)c;                                                                         \
        for (int64_t i = 0; i < M; i++)                                                        \
            for (int64_t j = 0; j < N; j++) {                                                  \
                ACC acc = 0;                                                                   \
                for (int64_t k = 0; k < K; k++)                                                \
                    acc += (ACC)LD(A[i * as0 + k * as1]) * (ACC)LD(B[k * bs0 + j * bs1]);      \
                ACC prev = use_c ? (ACC)LD(C[i * ldc + j]) : 0;                                \
                ST(C[i * ldc + j], (use_c ? beta * prev : 0) + alpha * acc);                   \
            }                                                                                  \
    }
#define ST_I64(d, v) ((d) = (int64_t)(v))
#define ST_I32(d, v) ((d) = (int32_t)(v))
#define ST_I16(d, v) ((d) = (int16_t)(v))
#define ST_I8(d, v) ((d) = (int8_t)(v))
#define ST_U8(d, v) ((d) = (uint8_t)(v))

TN_GEMM_LOOP(f16, tn_half, float, LD_H, ST_H)
TN_GEMM_LOOP(bf16, tn_bfloat16, float, LD_BF, ST_BF)
/* integer products wrap: accumulate unsigned, store truncated */
TN_GEMM_LOOP(i64, int64_t, uint64_t, LD_ID, ST_I64)
TN_GEMM_LOOP(i32, int32_t, uint64_t, LD_ID, ST_I32)
TN_GEMM_LOOP(i16, int16_t, uint64_t, LD_ID, ST_I16)
TN_GEMM_LOOP(i8, int8_t, uint64_t, LD_ID, ST_I8)
TN_GEMM_LOOP(u8, uint8_t, uint64_t, LD_ID, ST_U8)

static int no_kernel(enum tn_dtype dt)
{
    return tn_set_error(TN_EDTYPE, "\"addmm_impl_cpu_\" not implemented for '%s'",
                        tn_dtype_info(dt)->c10_name);
}

/* A product with one row (M == 1) or one column (N == 1) as cblas_?gemv:
 * sgemm with M == 1 packed all of b before a pass that reads it once (a
 * classifier head's 1 x 1024 @ 1024 x 1000 ran in 1.7x PyTorch's time,
 * issue 27). The vector's stride is its own (as1 of a's row, bs0 of b's
 * column); c's row is contiguous, its column at stride ldc. c is zeroed
 * first when it is not read (BLAS's beta == 0 may scale it: NaN * 0). K >= 1,
 * as gemv with no columns returns before touching y. false when a stride
 * BLAS refuses (0 or above INT32_MAX) sends it back to gemm. */
static bool gemv(enum tn_dtype dt, int64_t M, int64_t N, int64_t K, const struct mat *ma,
                 int64_t as1, const struct mat *mb, int64_t bs0, char *c, int64_t ldc, double al,
                 double be, bool use_c)
{
    const struct mat *m = M == 1 ? mb : ma; /* the matrix; the other operand is the vector */
    const char *x = M == 1 ? ma->p : mb->p;
    int64_t incx = K == 1 ? 1 : M == 1 ? as1 : bs0, incy = M == 1 ? 1 : ldc, ny = M == 1 ? N : M;
    if (incx < 1 || incx > INT32_MAX || incy < 1 || incy > INT32_MAX)
        return false;
    /* y = op(m) x: b is K x N (y = b^T x), a is M x K (y = a x); stored as
     * rows x cols row-major, or transposed */
    int64_t rows = M == 1 ? K : M, cols = M == 1 ? N : K;
    bool t = (m->trans == CblasTrans) != (M == 1);
    if (m->trans == CblasTrans) {
        int64_t r = rows;
        rows = cols, cols = r;
    }
    size_t es = tn_dtype_size(dt);
    if (!use_c)
        for (int64_t i = 0; i < ny; i++)
            memset(c + i * incy * (int64_t)es, 0, es);
    if (dt == TN_FLOAT32)
        cblas_sgemv(CblasRowMajor, t ? CblasTrans : CblasNoTrans, (int)rows, (int)cols, (float)al,
                    (const float *)m->p, (int)m->ld, (const float *)x, (int)incx, (float)be,
                    (float *)c, (int)incy);
    else
        cblas_dgemv(CblasRowMajor, t ? CblasTrans : CblasNoTrans, (int)rows, (int)cols, al,
                    (const double *)m->p, (int)m->ld, (const double *)x, (int)incx, be,
                    (double *)c, (int)incy);
    return true;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TN_SMALL_SGEMM 1
/* Small float32 products (every dim up to TN_SMALL_GEMM_MAX, a row-major,
 * b row-major or transposed, the latter packed 32 columns at a time) on
 * AVX-512 without packing a: blocks of R rows x 32 columns of c
 * in 2R zmm accumulators, each k one row of b (two loads, the last block's
 * columns under a mask) and R broadcasts of a; b's 32-column panel (32 KiB
 * at K = 256) stays in L1 while the row blocks pass over it. Each element is
 * one FMA chain over k in order, as OpenBLAS's kernel sums it (the same
 * bits on 128^3 and 256^3 here). OpenBLAS packs both operands first: at
 * 128^3 it ran at 1.3x MKL's (PyTorch's) time, 25 against 19 us (issue
 * 27); this kernel, 19 us. */
#define TN_SMALL_GEMM_MAX 256
/* Below 2^21 multiply-adds (128^3) OpenBLAS's own unpacked small-matrix
 * kernel is as fast or faster (100^3: 11.4 against 15.0 us; 112^3 equal). */
#define TN_SMALL_GEMM_MIN ((int64_t)1 << 21)
/* acc[r] += a[r][k] * b[k] over k for R rows, b's row k from LD0 and LD1 */
#define TN_SG_KLOOP(R, LD0, LD1)                                                               \
    for (int64_t k = 0; k < K; k++) {                                                          \
        __m512 b0 = LD0, b1 = LD1;                                                             \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                    \
        {                                                                                      \
            __m512 x = _mm512_set1_ps(a[r * lda + k]);                                         \
            acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);                                     \
            acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);                                     \
        }                                                                                      \
    }
#define TN_SG_BLOCK(R)                                                                         \
    __attribute__((target("avx512f"))) static void sg_rows##R(                                \
        int64_t N, int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb,       \
        float *c, int64_t ldc, bool add)                                                       \
    {                                                                                          \
        for (int64_t j = 0; j < N; j += 32) {                                                  \
            int64_t w = N - j < 32 ? N - j : 32;                                               \
            __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);                      \
            __mmask16 m1 = w <= 16 ? 0 : w >= 32 ? 0xFFFF : (__mmask16)((1u << (w - 16)) - 1); \
            __m512 acc[R][2];                                                                  \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] =        \
                _mm512_setzero_ps();                                                           \
            if (w == 32)                                                                       \
                TN_SG_KLOOP(R, _mm512_loadu_ps(b + k * ldb + j),                               \
                            _mm512_loadu_ps(b + k * ldb + j + 16))                             \
            else                                                                               \
                TN_SG_KLOOP(R, _mm512_maskz_loadu_ps(m0, b + k * ldb + j),                     \
                            _mm512_maskz_loadu_ps(m1, b + k * ldb + j + 16))                   \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                \
            {                                                                                  \
                float *o = c + r * ldc + j;                                                    \
                if (add) {                                                                     \
                    acc[r][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, o), acc[r][0]);        \
                    acc[r][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, o + 16), acc[r][1]);   \
                }                                                                              \
                _mm512_mask_storeu_ps(o, m0, acc[r][0]);                                       \
                _mm512_mask_storeu_ps(o + 16, m1, acc[r][1]);                                  \
            }                                                                                  \
        }                                                                                      \
    }
TN_SG_BLOCK(8)
TN_SG_BLOCK(4)
TN_SG_BLOCK(2)
TN_SG_BLOCK(1)

/* b's columns [j, j + w) of a transposed b (column j at b + j * ldb, its k
 * contiguous) as a K x 32 panel p (value (k, jj) at p[k * 32 + jj]): 16 x 16
 * blocks through tn__t16, the last k and columns one by one. */
static void sg_pack_t(float *p, const float *b, int64_t ldb, int64_t j, int64_t w, int64_t K)
{
    for (int64_t jb = 0; jb < w; jb += 16) {
        int64_t k = 0;
        if (w - jb >= 16)
            for (; k + 16 <= K; k += 16)
                tn__t16((char *)(p + k * 32 + jb), 32 * sizeof(float),
                        (const char *)(b + (j + jb) * ldb + k), ldb * (int64_t)sizeof(float),
                        false);
        for (int64_t jj = jb; jj < w && jj < jb + 16; jj++)
            for (int64_t kk = k; kk < K; kk++)
                p[kk * 32 + jj] = b[(j + jj) * ldb + kk];
    }
}

/* c (M x N) = a @ b, or c + a @ b when add (c read once, after the sum, as
 * OpenBLAS adds beta * c == c to alpha * a@b == a@b); a row-major, b
 * row-major or, when bt, transposed (linear's weight), packed 32 columns
 * at a time. */
static void small_sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                        const float *b, int64_t ldb, bool bt, float *c, int64_t ldc, bool add)
{
    _Alignas(64) float panel[TN_SMALL_GEMM_MAX * 32];
    for (int64_t j = 0; j < N; j += 32) {
        int64_t w = N - j < 32 ? N - j : 32, pld = ldb;
        const float *p = b + j;
        if (bt) {
            sg_pack_t(panel, b, ldb, j, w, K);
            p = panel, pld = 32;
        }
        int64_t i = 0;
        for (; i + 8 <= M; i += 8)
            sg_rows8(w, K, a + i * lda, lda, p, pld, c + i * ldc + j, ldc, add);
        for (; i + 4 <= M; i += 4)
            sg_rows4(w, K, a + i * lda, lda, p, pld, c + i * ldc + j, ldc, add);
        for (; i + 2 <= M; i += 2)
            sg_rows2(w, K, a + i * lda, lda, p, pld, c + i * ldc + j, ldc, add);
        for (; i < M; i++)
            sg_rows1(w, K, a + i * lda, lda, p, pld, c + i * ldc + j, ldc, add);
    }
}
#endif

/* One product: c (M x N, row-major, leading dim ldc) = beta*c + alpha*a@b,
 * with a (M x K) and b (K x N) given by data pointer and element strides.
 * beta is ignored (c's old values are not read) when use_c is false, as
 * PyTorch ignores self when beta is 0. pool: the product may split over
 * the thread pool (false in a worker's task: tn__sgemm). */
static int gemm(bool pool, enum tn_dtype dt, int64_t M, int64_t N, int64_t K, const char *a,
                int64_t as0, int64_t as1, const char *b, int64_t bs0, int64_t bs1, char *c,
                int64_t ldc, struct tn_scalar alpha, struct tn_scalar beta, bool use_c)
{
    if (M == 0 || N == 0)
        return TN_OK;
    struct mat ma = describe(a, M, K, as0, as1), mb = describe(b, K, N, bs0, bs1);
    bool blas = ma.ok && mb.ok && ldc <= INT32_MAX && K <= INT32_MAX;
    double al = tn_scalar_to_double(alpha), be = use_c ? tn_scalar_to_double(beta) : 0.0;
    if (blas && (dt == TN_FLOAT32 || dt == TN_FLOAT64) && (M == 1 || N == 1) && K >= 1 &&
        gemv(dt, M, N, K, &ma, as1, &mb, bs0, c, ldc, al, be, use_c))
        return TN_OK;
    switch (dt) {
    case TN_FLOAT32:
    case TN_FLOAT64:
    case TN_COMPLEX64:
    case TN_COMPLEX128:
        if (!blas)
            return tn_set_error(TN_EINVAL, "gemm: unsupported strides"); /* callers copy first */
#ifdef TN_SMALL_SGEMM
        if (dt == TN_FLOAT32 && al == 1.0 && (!use_c || be == 1.0) && K >= 1 &&
            ma.trans == CblasNoTrans && M <= TN_SMALL_GEMM_MAX &&
            N <= TN_SMALL_GEMM_MAX && K <= TN_SMALL_GEMM_MAX &&
            M * N * K >= TN_SMALL_GEMM_MIN &&
            __builtin_cpu_supports("avx512f")) {
            small_sgemm(M, N, K, (const float *)ma.p, ma.ld, (const float *)mb.p, mb.ld,
                        mb.trans == CblasTrans, (float *)c, ldc, use_c);
            return TN_OK;
        }
#endif
        if (dt == TN_FLOAT32 && al == 1.0 && (!use_c || be == 1.0)) {
            tn__sgemm(M, N, K, (const float *)ma.p, ma.ld, ma.trans == CblasTrans,
                      (const float *)mb.p, mb.ld, mb.trans == CblasTrans, (float *)c, ldc,
                      use_c, NULL, pool);
        } else if (dt == TN_FLOAT32) {
            cblas_sgemm(CblasRowMajor, ma.trans, mb.trans, (int)M, (int)N, (int)K, (float)al,
                        (const float *)ma.p, (int)ma.ld, (const float *)mb.p, (int)mb.ld,
                        (float)be, (float *)c, (int)ldc);
        } else if (dt == TN_FLOAT64) {
            cblas_dgemm(CblasRowMajor, ma.trans, mb.trans, (int)M, (int)N, (int)K, al,
                        (const double *)ma.p, (int)ma.ld, (const double *)mb.p, (int)mb.ld, be,
                        (double *)c, (int)ldc);
        } else {
            double _Complex za = tn__scalar_complex128(alpha);
            double _Complex zb = use_c ? tn__scalar_complex128(beta) : 0;
            if (dt == TN_COMPLEX128) {
                cblas_zgemm(CblasRowMajor, ma.trans, mb.trans, (int)M, (int)N, (int)K, &za, ma.p,
                            (int)ma.ld, mb.p, (int)mb.ld, &zb, c, (int)ldc);
            } else {
                float _Complex ca = (float _Complex)za, cb = (float _Complex)zb;
                cblas_cgemm(CblasRowMajor, ma.trans, mb.trans, (int)M, (int)N, (int)K, &ca, ma.p,
                            (int)ma.ld, mb.p, (int)mb.ld, &cb, c, (int)ldc);
            }
        }
        return TN_OK;
    case TN_FLOAT16:
        gemm_loop_f16(M, N, K, a, as0, as1, b, bs0, bs1, c, ldc, (float)al, (float)be, use_c);
        return TN_OK;
    case TN_BFLOAT16:
        gemm_loop_bf16(M, N, K, a, as0, as1, b, bs0, bs1, c, ldc, (float)al, (float)be, use_c);
        return TN_OK;
#define TN_INT_CASE(E, SFX)                                                                    \
    case E:                                                                                    \
        gemm_loop_##SFX(M, N, K, a, as0, as1, b, bs0, bs1, c, ldc,                             \
                        (uint64_t)tn_scalar_to_int64(alpha),                                   \
                        (uint64_t)(use_c ? tn_scalar_to_int64(beta) : 0), use_c);              \
        return TN_OK;
    TN_INT_CASE(TN_INT64, i64)
    TN_INT_CASE(TN_INT32, i32)
    TN_INT_CASE(TN_INT16, i16)
    TN_INT_CASE(TN_INT8, i8)
    TN_INT_CASE(TN_UINT8, u8)
    default:
        return no_kernel(dt);
    }
}

void tn__sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda, bool ta,
               const float *b, int64_t ldb, bool tb, float *c, int64_t ldc, bool add,
               float *scratch, bool pool)
{
    if (!ta && tb && tn__sgemm_skinny(M, N, K, a, lda, b, ldb, c, ldc, add, pool))
        return;
    if (tn__sgemm_small(M, N, K, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, tb, c, ldc, add, scratch,
                        pool))
        return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb, add ? 1.0f : 0.0f, c,
                (int)ldc);
}

/* An operand BLAS can read: t itself when its strides fit, else a
 * contiguous copy. (Batched: the last two dims decide.) */
static struct tn_tensor *blas_operand(const struct tn_tensor *t)
{
    int nd = t->ndim;
    struct mat m = describe(tn_data(t), t->sizes[nd - 2], t->sizes[nd - 1], t->strides[nd - 2],
                            t->strides[nd - 1]);
    if (m.ok)
        return tn_retain((struct tn_tensor *)t);
    return tn_contiguous(t);
}

static bool out_rowmajor(const struct tn_tensor *out)
{
    int nd = out->ndim;
    int64_t rows = out->sizes[nd - 2], cols = out->sizes[nd - 1];
    if (!(cols <= 1 || out->strides[nd - 1] == 1) || !(rows <= 1 || out->strides[nd - 2] >= cols))
        return false;
    return nd == 2 || out->sizes[0] <= 1 || out->strides[0] >= rows * cols;
}

/* Threads: OpenBLAS has a pool of its own whose idle workers spin for a
 * while after each call; beside ours, on a machine with as many cores as
 * threads, they took the cores the elementwise kernels between the
 * products wanted (on 2 cores gelu and softmax ran at one-thread speed).
 * So the products here run OpenBLAS single-threaded inside our pool: the
 * matrices of a batch split over the tasks, or one large product's rows
 * (or columns) in blocks of 16. Afterwards OpenBLAS gets back
 * tn_get_num_threads() threads for its other callers (the convolutions). */
#define TN_GEMM_BLOCK 16
#define TN_GEMM_TASK_MIN ((int64_t)1 << 18) /* multiply-adds worth a task */
/* Multiply-adds worth a block of one product split over the pool: waking a
 * worker and each block's own packing cost more than they gain below it
 * (issue 27: 128x128x128, 2^21, ran in 32 us split over 2 threads, 25 us
 * on one, 29 us in OpenBLAS's own 2 threads; 256^3 split gains 1.7x). */
#define TN_GEMM_SPLIT_MIN ((int64_t)1 << 21)
/* The same for a product of one row or one column (gemv): it reads its
 * matrix once, so the split pays from far fewer multiply-adds, each
 * worker streaming its own part of the matrix (issue 27: a 1 x 1024 @
 * (1000 x 1024)^T linear at 2 threads ran at one thread's speed, 0.28x
 * PyTorch's). */
#define TN_GEMV_SPLIT_MIN ((int64_t)1 << 18)

struct gemm_job {
    enum tn_dtype dt;
    int64_t M, N, K, rb, cb, nr, nc; /* row/column block sizes and counts */
    int64_t tasks;                   /* batch * nr * nc */
    const char *a, *b;
    char *c;
    int64_t as0, as1, bs0, bs1, ldc, sa, sb, sc; /* element strides; batch strides in bytes */
    size_t es;
    struct tn_scalar alpha, beta;
    bool use_c;
    int rc;
};

static void gemm_tasks(int64_t begin, int64_t end, void *ctx)
{
    struct gemm_job *j = ctx;
    int64_t es = (int64_t)j->es;
    /* the whole range at once runs here, outside the pool (tn_parallel_for
     * inline): a product may split over the pool; a chunk of it is a
     * worker's task, which runs its products whole */
    bool pool = begin == 0 && end == j->tasks;
    for (int64_t t = begin; t < end; t++) {
        int64_t bi = t / (j->nr * j->nc), blk = t % (j->nr * j->nc);
        int64_t r0 = blk / j->nc * j->rb, c0 = blk % j->nc * j->cb;
        int64_t m = j->M - r0 < j->rb ? j->M - r0 : j->rb, n = j->N - c0 < j->cb ? j->N - c0 : j->cb;
        int rc = gemm(pool, j->dt, m, n, j->K, j->a + bi * j->sa + r0 * j->as0 * es, j->as0,
                      j->as1, j->b + bi * j->sb + c0 * j->bs1 * es, j->bs0, j->bs1,
                      j->c + bi * j->sc + (r0 * j->ldc + c0) * es, j->ldc, j->alpha, j->beta,
                      j->use_c);
        if (rc < 0)
            __atomic_store_n(&j->rc, rc, __ATOMIC_RELAXED);
    }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The batch's products on the pool (each task a matrix, or a block of
 * one when the batch is smaller than the thread count). */
static int gemm_batch(struct gemm_job *j, int64_t batch)
{
    int64_t nt = tn_get_num_threads(), work = j->M * j->N * (j->K > 0 ? j->K : 1);
    j->rb = j->M, j->cb = j->N, j->nr = j->nc = 1;
    bool vec = (j->M == 1 || j->N == 1) && (j->dt == TN_FLOAT32 || j->dt == TN_FLOAT64);
    int64_t parts = ceil_div(nt, batch),
            worth = work / (vec ? TN_GEMV_SPLIT_MIN : TN_GEMM_SPLIT_MIN);
    if (parts > worth)
        parts = worth;
    /* a product too small for parts here (parts 1) still splits: the small
     * kernel takes its 16-column panels over the pool (tn__sgemm); the
     * larger ones keep these blocks, faster here at 64 x 256 x 256 and
     * 256^3 than the panel split */
    if (batch < nt && parts > 1) {
        if (j->M >= j->N)
            j->rb = ceil_div(ceil_div(j->M, parts), TN_GEMM_BLOCK) * TN_GEMM_BLOCK;
        else
            j->cb = ceil_div(ceil_div(j->N, parts), TN_GEMM_BLOCK) * TN_GEMM_BLOCK;
        j->nr = ceil_div(j->M, j->rb), j->nc = ceil_div(j->N, j->cb);
    }
    switch (j->dt) { /* the error on this thread, not a worker's */
    case TN_FLOAT32: case TN_FLOAT64: case TN_COMPLEX64: case TN_COMPLEX128: case TN_FLOAT16:
    case TN_BFLOAT16:
    case TN_INT64: case TN_INT32: case TN_INT16: case TN_INT8: case TN_UINT8:
        break;
    default:
        return no_kernel(j->dt);
    }
    int64_t per = work / (j->nr * j->nc);
    j->tasks = batch * j->nr * j->nc;
    int64_t grain = per >= TN_GEMM_TASK_MIN ? 1 : ceil_div(TN_GEMM_TASK_MIN, per > 0 ? per : 1);
    tn__blas_parallel_for(j->tasks, grain, gemm_tasks, j);
    return j->rc;
}

/* out (B x M x N or M x N) = beta*out + alpha * a @ b over the batch. */
static int batched(const struct tn_tensor *a, const struct tn_tensor *b, struct tn_tensor *out,
                   struct tn_scalar alpha, struct tn_scalar beta, bool use_c)
{
    int nd = out->ndim;
    int64_t batch = nd == 3 ? out->sizes[0] : 1;
    int64_t M = out->sizes[nd - 2], N = out->sizes[nd - 1], K = a->sizes[a->ndim - 1];
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *target = out_rowmajor(out) ? tn_retain(out) : tn_contiguous(out);
    struct tn_tensor *ca = target ? blas_operand(a) : NULL, *cb = ca ? blas_operand(b) : NULL;
    int rc = cb ? TN_OK : tn_last_status();
    if (cb && K == 0 && !use_c)
        rc = tn_fill_(target, tn_int(0)); /* an empty sum, and BLAS may skip the write */
    if (rc == 0 && !(K == 0 && !use_c)) {
        size_t es = tn_dtype_size(out->dtype);
        struct gemm_job j = {
            .dt = out->dtype, .M = M, .N = N, .K = K, .a = tn_data(ca), .b = tn_data(cb),
            .c = tn_data(target), .as0 = ca->strides[ca->ndim - 2],
            .as1 = ca->strides[ca->ndim - 1], .bs0 = cb->strides[cb->ndim - 2],
            .bs1 = cb->strides[cb->ndim - 1], .ldc = M <= 1 ? (N > 1 ? N : 1) : target->strides[nd - 2],
            .sa = nd == 3 ? ca->strides[0] * (int64_t)es : 0,
            .sb = nd == 3 ? cb->strides[0] * (int64_t)es : 0,
            .sc = nd == 3 ? target->strides[0] * (int64_t)es : 0, .es = es, .alpha = alpha,
            .beta = beta, .use_c = use_c};
        rc = gemm_batch(&j, batch);
    }
    if (rc == 0 && target != out)
        rc = tn_copy_(out, target);
    tn_release(ca);
    tn_release(cb);
    tn_release(target);
    return rc;
}

int tn__cpu_mm_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *mat2,
                   struct tn_tensor *out)
{
    return batched(self, mat2, out, tn_int(1), tn_int(0), false);
}

/* PyTorch's small bmm (baddbmm_cpu_kernel, below 400 multiply-adds a
 * matrix): each element a sum over k in order, in the op math type (float
 * for bfloat16 and float16), no BLAS; its rounding is what assert_close
 * compares against where the terms cancel. */
#define TN_SMALL_BMM(SFX, T, CT, LD, ST)                                                       \
    static void small_bmm_##SFX(const struct tn_tensor *a, const struct tn_tensor *b,          \
                                struct tn_tensor *out)                                         \
    {                                                                                          \
        const T *pa = tn_data(a), *pb = tn_data(b);                                            \
        T *po = tn_data(out);                                                                  \
        for (int64_t bi = 0; bi < out->sizes[0]; bi++)                                         \
            for (int64_t i = 0; i < out->sizes[1]; i++)                                        \
                for (int64_t j = 0; j < out->sizes[2]; j++) {                                  \
                    CT acc = 0;                                                                \
                    for (int64_t k = 0; k < a->sizes[2]; k++) {                                \
                        CT x = LD(pa[bi * a->strides[0] + i * a->strides[1] + k * a->strides[2]]); \
                        CT y = LD(pb[bi * b->strides[0] + k * b->strides[1] + j * b->strides[2]]); \
                        acc += x * y;                                                          \
                    }                                                                          \
                    ST(po[bi * out->strides[0] + i * out->strides[1] + j * out->strides[2]], acc); \
                }                                                                              \
    }
/* no fused multiply-adds here (gcc's optimize option; clang has C's pragma) */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
TN_SMALL_BMM(f32, float, float, LD_ID, ST_ID)
TN_SMALL_BMM(f64, double, double, LD_ID, ST_ID)
TN_SMALL_BMM(bf16, tn_bfloat16, float, LD_BF, ST_BF)
#ifdef __clang__
#pragma STDC FP_CONTRACT DEFAULT
#else
#pragma GCC pop_options
#endif

int tn__cpu_bmm_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *mat2,
                    struct tn_tensor *out)
{
    if (out->dtype == TN_BOOL)
        return tn_set_error(TN_EDTYPE, "\"bmm\" not implemented for 'Bool'");
    int64_t work = self->sizes[2] * out->sizes[1] * out->sizes[2];
    void (*small)(const struct tn_tensor *, const struct tn_tensor *, struct tn_tensor *) = NULL;
    switch (out->dtype) {
    case TN_FLOAT32: small = small_bmm_f32; break;
    case TN_FLOAT64: small = small_bmm_f64; break;
    case TN_BFLOAT16: small = small_bmm_bf16; break;
    default: break;
    }
    if (small && work < 400 && self->dtype == out->dtype && mat2->dtype == out->dtype) {
        small(self, mat2, out);
        return TN_OK;
    }
    return batched(self, mat2, out, tn_int(1), tn_int(0), false);
}

int tn__cpu_addmm_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *mat1,
                      const struct tn_tensor *mat2, struct tn_scalar beta, struct tn_scalar alpha,
                      struct tn_tensor *out)
{
    bool use_c = tn_scalar_to_double(beta) != 0 ||
                 (beta.kind == TN_SCALAR_COMPLEX && beta.v.c.im != 0);
    if (use_c && self != out) {
        /* out starts as self broadcast (in-place addmm_ already holds it) */
        int rc = tn_copy_(out, self);
        if (rc < 0)
            return rc;
    }
    return batched(mat1, mat2, out, alpha, beta, use_c);
}
