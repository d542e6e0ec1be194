/*
 * Unit tests of the matrix products through the dispatcher: every case of
 * tests/fixtures/ops/linalg.json (real PyTorch), plus a product large
 * enough to check the BLAS path against a plain loop.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    /* mm of float16 and the 2.x wording of mm's errors: we follow 2.x */
    run_op_cases("../ops/linalg", true, true);
}

/* A strided, non-BLAS-friendly operand (a column slice of a transpose)
 * gives the same product as its contiguous copy. */
static void test_strided_operands(void **state)
{
    struct tn_tensor *a = tn_randn(TN_SHAPE(64, 48), TN_FLOAT64, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(40, 96), TN_FLOAT64, NULL);
    struct tn_tensor *bs = tn_slice(b, 1, 0, TN_END, 2);  /* 40 x 48, stride 2 */
    struct tn_tensor *bt = tn_t(bs);                      /* 48 x 40 */
    struct tn_tensor *btc = tn_contiguous(bt);
    struct tn_tensor *r1 = tn_mm(a, bt), *r2 = tn_mm(a, btc);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_memory_equal(tn_data(r1), tn_data(r2), tn_nbytes(r1));
    /* out= into a transposed output */
    struct tn_tensor *o = tn_empty(TN_SHAPE(40, 64), TN_FLOAT64);
    struct tn_tensor *ot = tn_t(o);
    assert_int_equal(tn_mm_out(a, btc, ot), 0);
    struct tn_tensor *otc = tn_contiguous(ot);
    assert_memory_equal(tn_data(otc), tn_data(r2), tn_nbytes(r2));
    tn_release(otc);
    tn_release(ot);
    tn_release(o);
    tn_release(r1);
    tn_release(r2);
    tn_release(btc);
    tn_release(bt);
    tn_release(bs);
    tn_release(b);
    tn_release(a);
}

/* Empty operands as PyTorch takes them: linear and matmul of a 3-D input
 * whose last dim is 0 (the rows are folded by their product, which -1
 * cannot infer from 0 elements) give the bias, or zeros; a clone of an
 * expanded empty tensor (a stride 0 over a size 2) is an empty tensor. */
static void test_empty_operands(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_zeros(TN_SHAPE(2, 3, 0), TN_FLOAT32);
    struct tn_tensor *w = tn_zeros(TN_SHAPE(4, 0), TN_FLOAT32);
    struct tn_tensor *b = tn_ones(TN_SHAPE(4), TN_FLOAT32);
    struct tn_tensor *y = tn_linear(x, w, b), *wt = tn_t(w), *m = tn_matmul(x, wt);
    assert_non_null(y);
    assert_non_null(m);
    assert_int_equal(y->ndim, 3);
    assert_int_equal(y->sizes[2], 4);
    assert_int_equal(m->sizes[2], 4);
    for (int i = 0; i < 24; i++) {
        assert_true(((float *)tn_data(y))[i] == 1.0f);
        assert_true(((float *)tn_data(m))[i] == 0.0f);
    }
    struct tn_tensor *e = tn_zeros(TN_SHAPE(1, 0), TN_FLOAT32);
    struct tn_tensor *ex = tn_expand(e, TN_SHAPE(2, 0));
    struct tn_tensor *c = tn_clone(ex);
    assert_non_null(c);
    assert_int_equal(c->sizes[0], 2);
    assert_int_equal(tn_numel(c), 0);
    tn_release(c);
    tn_release(ex);
    tn_release(e);
    tn_release(m);
    tn_release(wt);
    tn_release(y);
    tn_release(b);
    tn_release(w);
    tn_release(x);
}

/* out = beta*c + alpha*a@b by a plain loop over float64 tensors of any
 * strides (2-D, or 3-D batches); c may be NULL. */
static double *plain_product(const struct tn_tensor *a, const struct tn_tensor *b,
                             const struct tn_tensor *c, double beta, double alpha)
{
    int nd = a->ndim;
    int64_t B = nd == 3 ? a->sizes[0] : 1, M = a->sizes[nd - 2], K = a->sizes[nd - 1];
    int64_t N = b->sizes[nd - 1];
    const double *pa = tn_data(a), *pb = tn_data(b), *pc = c ? tn_data(c) : NULL;
    double *r = calloc((size_t)(B * M * N), sizeof *r);
    for (int64_t q = 0; q < B; q++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += pa[(nd == 3 ? q * a->strides[0] : 0) + i * a->strides[nd - 2] +
                              k * a->strides[nd - 1]] *
                           pb[(nd == 3 ? q * b->strides[0] : 0) + k * b->strides[nd - 2] +
                              j * b->strides[nd - 1]];
                /* c: a bias of N values, broadcast over the rows */
                r[(q * M + i) * N + j] = (pc ? beta * pc[j * c->strides[0]] : 0) + alpha * acc;
            }
    return r;
}

static void assert_product(const struct tn_tensor *got, const double *want)
{
    assert_non_null(got);
    struct tn_tensor *g = tn_contiguous(got);
    const double *p = tn_data(g);
    for (int64_t i = 0; i < tn_numel(g); i++)
        if (fabs(p[i] - want[i]) > 1e-10 * (1 + fabs(want[i])))
            fail_msg("element %lld is %.17g, a plain loop gives %.17g", (long long)i, p[i],
                     want[i]);
    tn_release(g);
}

/* got (released here) against the plain loop's beta*c + alpha*a@b */
static void check_product(struct tn_tensor *got, const struct tn_tensor *a,
                          const struct tn_tensor *b, const struct tn_tensor *c, double beta,
                          double alpha)
{
    double *want = plain_product(a, b, c, beta, alpha);
    assert_product(got, want);
    free(want);
    tn_release(got);
}

/* On three threads the products split over the pool: the matrices of a
 * batch, the rows of a tall product, the columns of a wide one (blocks of
 * 16 with a ragged last one), addmm's bias and scalars included. A product
 * splits into at most one part per 2^21 multiply-adds (TN_GEMM_SPLIT_MIN),
 * so the sizes here are large enough for 3 or 2 parts, and a small one
 * stays whole. */
static void test_threads(void **state)
{
    int prev = tn_get_num_threads();
    tn_set_num_threads(3);
    struct tn_tensor *a = tn_randn(TN_SHAPE(400, 128), TN_FLOAT64, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(128, 150), TN_FLOAT64, NULL);
    check_product(tn_mm(a, b), a, b, NULL, 0, 1); /* rows: 144, 144, 112 */
    struct tn_tensor *bias = tn_randn(TN_SHAPE(150), TN_FLOAT64, NULL);
    check_product(tn_addmm(bias, a, b, tn_float(0.5), tn_float(2.0)), a, b, bias, 0.5, 2.0);
    /* wide, with a transposed operand: columns 208, 208, 185 */
    struct tn_tensor *w = tn_randn(TN_SHAPE(40, 300), TN_FLOAT64, NULL);
    struct tn_tensor *v = tn_randn(TN_SHAPE(601, 300), TN_FLOAT64, NULL);
    struct tn_tensor *vt = tn_t(v);
    check_product(tn_mm(w, vt), w, vt, NULL, 0, 1);
    /* a batch of 4 over the threads, and a batch of 2 split by rows (160, 140) */
    struct tn_tensor *x = tn_randn(TN_SHAPE(4, 100, 64), TN_FLOAT64, NULL);
    struct tn_tensor *y = tn_randn(TN_SHAPE(4, 70, 64), TN_FLOAT64, NULL);
    struct tn_tensor *yt = tn_transpose(y, 1, 2);
    check_product(tn_bmm(x, yt), x, yt, NULL, 0, 1);
    struct tn_tensor *x2 = tn_randn(TN_SHAPE(2, 300, 128), TN_FLOAT64, NULL);
    struct tn_tensor *y2 = tn_randn(TN_SHAPE(2, 128, 110), TN_FLOAT64, NULL);
    check_product(tn_bmm(x2, y2), x2, y2, NULL, 0, 1);
    /* 128^3 is one part's worth: one task, on one thread */
    struct tn_tensor *s1 = tn_randn(TN_SHAPE(128, 128), TN_FLOAT64, NULL);
    struct tn_tensor *s2 = tn_randn(TN_SHAPE(128, 128), TN_FLOAT64, NULL);
    check_product(tn_mm(s1, s2), s1, s2, NULL, 0, 1);
    struct tn_tensor *all[] = {a, b, bias, w, v, vt, x, y, yt, x2, y2, s1, s2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
    tn_set_num_threads(prev);
}

/* One row or one column goes to cblas_?gemv with the vector at its own
 * stride: a row sliced with step 3 (as1 = 3), a column of a wide matrix
 * (bs0 = 40), a column output written at stride ldc through addmm_ on a
 * column of a wider out, and a 1 x 1 of a stepped slice. */
static void test_gemv_strides(void **state)
{
    struct tn_tensor *big = tn_randn(TN_SHAPE(2, 60), TN_FLOAT64, NULL);
    struct tn_tensor *row = tn_slice(big, 1, 0, TN_END, 3); /* 2 x 20, stride (60, 3) */
    struct tn_tensor *r1 = tn_slice(row, 0, 0, 1, 1);         /* 1 x 20 */
    struct tn_tensor *b = tn_randn(TN_SHAPE(20, 30), TN_FLOAT64, NULL);
    check_product(tn_mm(r1, b), r1, b, NULL, 0, 1);
    struct tn_tensor *wide = tn_randn(TN_SHAPE(20, 40), TN_FLOAT64, NULL);
    struct tn_tensor *col = tn_slice(wide, 1, 5, 6, 1); /* 20 x 1, stride (40, 1) */
    struct tn_tensor *a = tn_randn(TN_SHAPE(7, 20), TN_FLOAT64, NULL);
    check_product(tn_mm(a, col), a, col, NULL, 0, 1);
    struct tn_tensor *a2 = tn_randn(TN_SHAPE(20, 7), TN_FLOAT64, NULL), *at = tn_t(a2);
    check_product(tn_mm(at, col), at, col, NULL, 0, 1);
    struct tn_tensor *dot = tn_mm(r1, col);
    check_product(dot, r1, col, NULL, 0, 1);
    /* out's column 2 of a 7 x 4: c at stride 4, not read at beta 0 (NaN) */
    struct tn_tensor *out = tn_full(TN_SHAPE(7, 4), tn_float(NAN), TN_FLOAT64);
    struct tn_tensor *oc = tn_slice(out, 1, 2, 3, 1);
    assert_int_equal(tn_mm_out(a, col, oc), 0);
    check_product(tn_retain(oc), a, col, NULL, 0, 1);
    assert_true(isnan(((double *)tn_data(out))[0]));
    struct tn_tensor *all[] = {big, row, r1, b, wide, col, a, a2, at, out, oc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* float32 a (M x K) @ b (K x N) into columns [0, N) of an M x (N + 5)
 * buffer of NaN (plus c, M x N, when given: addmm at beta = alpha = 1),
 * against the float64 product of the same values; the 5 columns past N must
 * stay NaN. */
static void check_f32_product(const struct tn_tensor *a, const struct tn_tensor *b,
                              const struct tn_tensor *c)
{
    int64_t M = a->sizes[0], K = a->sizes[1], N = b->sizes[1];
    struct tn_tensor *buf = tn_full(TN_SHAPE(M, N + 5), tn_float(NAN), TN_FLOAT32);
    struct tn_tensor *out = tn_slice(buf, 1, 0, N, 1);
    if (c)
        assert_int_equal(tn_copy_(out, c), 0);
    struct tn_tensor *got = c ? tn_addmm(out, a, b, tn_int(1), tn_int(1)) : NULL;
    if (!c)
        assert_int_equal(tn_mm_out(a, b, out), 0);
    struct tn_tensor *a64 = tn_to_dtype(a, TN_FLOAT64), *b64 = tn_to_dtype(b, TN_FLOAT64);
    struct tn_tensor *w = tn_mm(a64, b64);
    struct tn_tensor *c64 = c ? tn_to_dtype(c, TN_FLOAT64) : NULL;
    struct tn_tensor *want = c ? tn_add(w, c64, tn_int(1)) : tn_retain(w);
    struct tn_tensor *g64 = tn_to_dtype(c ? got : out, TN_FLOAT64), *gc = tn_contiguous(g64);
    assert_non_null(want);
    assert_non_null(gc);
    const double *p = tn_data(gc), *q = tn_data(want);
    for (int64_t i = 0; i < M * N; i++)
        if (!(fabs(p[i] - q[i]) <= 1e-5 * (K + fabs(q[i]))))
            fail_msg("%lldx%lldx%lld: element %lld is %.9g, float64 gives %.9g", (long long)M,
                     (long long)K, (long long)N, (long long)i, p[i], q[i]);
    const float *pb = tn_data(buf);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < N + 5; j++)
            if (!isnan(pb[i * (N + 5) + j]))
                fail_msg("%lldx%lldx%lld: [%lld][%lld] past the output written",
                         (long long)M, (long long)K, (long long)N, (long long)i, (long long)j);
    struct tn_tensor *all[] = {buf, out, got, a64, b64, w, c64, want, g64, gc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* float32 products from 128^3 up to 256 a dim, a row-major, b row-major or
 * transposed, which take the AVX-512 small-product kernel where the CPU has it: row
 * blocks of 8 with 3 rows left, column blocks of 32 with 1 and 8 left (the
 * masked loads and stores), strided operands, c added. */
static void test_small_f32(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{128, 128, 128}, {131, 129, 161}, {250, 256, 40},
                                        {256, 256, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        struct tn_tensor *a = tn_randn(TN_SHAPE(shapes[s][0], shapes[s][1]), TN_FLOAT32, NULL);
        struct tn_tensor *b = tn_randn(TN_SHAPE(shapes[s][1], shapes[s][2]), TN_FLOAT32, NULL);
        struct tn_tensor *c = tn_randn(TN_SHAPE(shapes[s][0], shapes[s][2]), TN_FLOAT32, NULL);
        check_f32_product(a, b, NULL);
        check_f32_product(a, b, c);
        /* b transposed, as linear passes its weight (packed 32 columns at
         * a time: 16 x 16 blocks, the last k and columns one by one) */
        struct tn_tensor *wt = tn_randn(TN_SHAPE(shapes[s][2], shapes[s][1]), TN_FLOAT32, NULL);
        struct tn_tensor *bt = tn_t(wt);
        check_f32_product(a, bt, NULL);
        check_f32_product(a, bt, c);
        tn_release(a);
        tn_release(b);
        tn_release(c);
        tn_release(wt);
        tn_release(bt);
    }
    struct tn_tensor *x = tn_randn(TN_SHAPE(64, 200), TN_FLOAT32, NULL);
    struct tn_tensor *wbig = tn_randn(TN_SHAPE(250, 300), TN_FLOAT32, NULL);
    struct tn_tensor *wk = tn_slice(wbig, 1, 7, 207, 1), *wkt = tn_t(wk); /* row stride 300 */
    check_f32_product(x, wkt, NULL);
    tn_release(x);
    tn_release(wbig);
    tn_release(wk);
    tn_release(wkt);
    struct tn_tensor *abig = tn_randn(TN_SHAPE(200, 300), TN_FLOAT32, NULL);
    struct tn_tensor *a = tn_slice(abig, 1, 10, 266, 1); /* 200 x 256, row stride 300 */
    struct tn_tensor *bbig = tn_randn(TN_SHAPE(256, 100), TN_FLOAT32, NULL);
    struct tn_tensor *b = tn_slice(bbig, 1, 3, 67, 1); /* 256 x 64, row stride 100 */
    check_f32_product(a, b, NULL);
    struct tn_tensor *all[] = {abig, a, bbig, b};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* float32 products the AVX2 kernel takes where the CPU has AVX2 but not
 * AVX-512 (lib/ops/cpu/sgemm_avx2.c): a transformer block's (512 rows,
 * 64..256 features, the weight's gradient with a transposed and K = 512
 * taken 128 at a time, each part added), rows in blocks of 6 with 5, 3
 * and 1 left, columns in 16-column panels with 1, 5 and 9 left (masked
 * stores: the columns past N stay untouched), K of 1 and a part of 44, c
 * added. */
static void test_small_f32_avx2(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{512, 64, 192}, {512, 256, 64}, {11, 300, 17},
                                        {9, 1, 21},     {13, 7, 5},     {32, 16, 32}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        struct tn_tensor *a = tn_randn(TN_SHAPE(M, K), TN_FLOAT32, NULL);
        struct tn_tensor *at = tn_randn(TN_SHAPE(K, M), TN_FLOAT32, NULL), *ta = tn_t(at);
        struct tn_tensor *b = tn_randn(TN_SHAPE(K, N), TN_FLOAT32, NULL);
        struct tn_tensor *wt = tn_randn(TN_SHAPE(N, K), TN_FLOAT32, NULL), *bt = tn_t(wt);
        struct tn_tensor *c = tn_randn(TN_SHAPE(M, N), TN_FLOAT32, NULL);
        check_f32_product(a, b, NULL);
        check_f32_product(a, bt, c);
        check_f32_product(ta, b, NULL);
        check_f32_product(ta, bt, c);
        struct tn_tensor *all[] = {a, at, ta, b, wt, bt, c};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            tn_release(all[i]);
    }
}

/* a @ b (+ c) in float32 at the current thread count, into a fresh
 * NaN-filled M x N (a panel skipped stays NaN) */
static struct tn_tensor *f32_product(const struct tn_tensor *a, const struct tn_tensor *b,
                                     const struct tn_tensor *c)
{
    struct tn_tensor *out = tn_full(TN_SHAPE(a->sizes[0], b->sizes[1]), tn_float(NAN),
                                    TN_FLOAT32);
    if (c)
        assert_int_equal(tn_copy_(out, c), 0);
    if (c)
        assert_int_equal(tn_addmm_(out, a, b, tn_int(1), tn_int(1)), 0);
    else
        assert_int_equal(tn_mm_out(a, b, out), 0);
    return out;
}

/* On 2 threads the AVX2 small-product kernel splits c's 16-column panels
 * over the pool (from 2^18 multiply-adds a task) where gemm_batch leaves
 * the product whole (under 2^22 multiply-adds): 8 panels in 2 tasks, 13
 * panels with a ragged last one (64 x 100 x 202: tasks of 3 panels), 3
 * panels of which one task takes 2, K over 128 (its parts added, so a part
 * counted twice shows), a or b transposed, c added; the larger products
 * (200 x 300 x 202, 64 x 256 x 256) in gemm_batch's blocks instead. Each result is bit for
 * bit the one thread's, and a plain triple loop in float64 agrees within
 * float32's rounding: a panel skipped or done twice fails both. */
static void test_small_f32_threads(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{128, 128, 128}, {200, 300, 202}, {96, 129, 40},
                                        {512, 64, 64},   {64, 256, 256},  {64, 100, 202}};
    int prev = tn_get_num_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        struct tn_tensor *at = tn_randn(TN_SHAPE(K, M), TN_FLOAT32, NULL);
        struct tn_tensor *wt = tn_randn(TN_SHAPE(N, K), TN_FLOAT32, NULL);
        struct tn_tensor *ops[3][2] = {{tn_randn(TN_SHAPE(M, K), TN_FLOAT32, NULL),
                                        tn_randn(TN_SHAPE(K, N), TN_FLOAT32, NULL)},
                                       {tn_t(at), tn_randn(TN_SHAPE(K, N), TN_FLOAT32, NULL)},
                                       {tn_randn(TN_SHAPE(M, K), TN_FLOAT32, NULL), tn_t(wt)}};
        struct tn_tensor *c = tn_randn(TN_SHAPE(M, N), TN_FLOAT32, NULL);
        for (int o = 0; o < 3; o++)
            for (int add = 0; add < 2; add++) {
                const struct tn_tensor *a = ops[o][0], *b = ops[o][1], *cc = add ? c : NULL;
                tn_set_num_threads(1);
                struct tn_tensor *one = f32_product(a, b, cc);
                tn_set_num_threads(2);
                struct tn_tensor *two = f32_product(a, b, cc);
                if (memcmp(tn_data(one), tn_data(two), (size_t)(M * N) * sizeof(float)))
                    fail_msg("%lldx%lldx%lld (operands %d, c %d): 2 threads differ from 1",
                             (long long)M, (long long)K, (long long)N, o, add);
                struct tn_tensor *a64 = tn_to_dtype(a, TN_FLOAT64);
                struct tn_tensor *b64 = tn_to_dtype(b, TN_FLOAT64);
                double *want = plain_product(a64, b64, NULL, 0, 1);
                const float *g = tn_data(two), *pc = tn_data(c);
                for (int64_t i = 0; i < M * N; i++) {
                    double q = want[i] + (add ? pc[i] : 0.0);
                    if (!(fabs(g[i] - q) <= 1e-5 * (K + fabs(q))))
                        fail_msg("%lldx%lldx%lld (operands %d, c %d): element %lld is %.9g, "
                                 "a loop in float64 gives %.9g",
                                 (long long)M, (long long)K, (long long)N, o, add,
                                 (long long)i, g[i], q);
                }
                free(want);
                struct tn_tensor *all[] = {one, two, a64, b64};
                for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                    tn_release(all[i]);
            }
        struct tn_tensor *all[] = {at, wt, c, ops[0][0], ops[0][1], ops[1][0],
                                   ops[1][1], ops[2][0], ops[2][1]};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            tn_release(all[i]);
    }
    tn_set_num_threads(prev);
}

/* float32 products of a few rows by a linear layer's weight, transposed,
 * which take the AVX2 kernel that reads the weight in place
 * (lib/ops/cpu/sgemm_skinny.c): convnext's last stages (4 and 16 rows by
 * 3072x768 and 1536x384 weights), tiles of 4 rows with 1, 2 and 3 left,
 * of 3 weight rows with 1 and 2 left, k with a partial vector, a's rows
 * strided (a column slice), c added. */
static void test_skinny_f32(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{4, 768, 3072}, {16, 1536, 384}, {2, 128, 32},
                                        {3, 133, 35},   {5, 301, 67},    {64, 192, 65},
                                        {7, 1029, 34}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        struct tn_tensor *a = tn_randn(TN_SHAPE(M, K), TN_FLOAT32, NULL);
        struct tn_tensor *wide = tn_randn(TN_SHAPE(M, K + 3), TN_FLOAT32, NULL);
        struct tn_tensor *as = tn_slice(wide, 1, 1, K + 1, 1);
        struct tn_tensor *wt = tn_randn(TN_SHAPE(N, K), TN_FLOAT32, NULL), *bt = tn_t(wt);
        struct tn_tensor *c = tn_randn(TN_SHAPE(M, N), TN_FLOAT32, NULL);
        check_f32_product(a, bt, NULL);
        check_f32_product(a, bt, c);
        check_f32_product(as, bt, c);
        struct tn_tensor *all[] = {a, wide, as, wt, bt, c};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            tn_release(all[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_strided_operands),
        cmocka_unit_test(test_empty_operands),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_gemv_strides),
        cmocka_unit_test(test_small_f32),
        cmocka_unit_test(test_small_f32_avx2),
        cmocka_unit_test(test_small_f32_threads),
        cmocka_unit_test(test_skinny_f32),
    };
    return TN_RUN_TESTS(tests);
}
