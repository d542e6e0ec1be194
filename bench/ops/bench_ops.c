/*
 * bench/ops/bench_ops: the operator figures of issue 4, each against a
 * baseline timed in the same run:
 *   - dispatch: microseconds per tn_add on 1-element tensors (the PyTorch
 *     eager loop is timed by bench/ops/dispatch.sh, which prints the ratio)
 *   - add and mul of two 16M-element float32 tensors against memcpy,
 *     as bandwidth over the bytes each touches
 *   - mm 1024x1024x1024 float32 against cblas_sgemm called directly
 * `bench_ops --dispatch-us` prints only the first number (wall, then CPU
 * time per call) and `bench_ops --ms
 * softmax|sum|conv2d|conv2d_train|conv64|layer_norm|interpolate` one workload's
 * milliseconds (for the scripts); `bench_ops --mm M K N` tn_mm_out against
 * cblas_sgemm at one shape (bench/ops/mm.sh).
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <tensor/tensor.h>

#include "bench/bench.h"

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall microseconds per call, best of 3 loops; *cpu_us gets the least
 * process CPU time per call of those loops (what the other programs on a
 * shared machine do not inflate). */
static double dispatch_us(int64_t calls, double *cpu_us)
{
    struct tn_tensor *a = tn_ones(TN_SHAPE(1), TN_FLOAT32), *b = tn_ones(TN_SHAPE(1), TN_FLOAT32);
    double best, cpu = 1e30;
    TN_BENCH_BEST(3, best, {
        double c0 = cpu_seconds();
        for (int64_t i = 0; i < calls; i++)
            tn_release(tn_add(a, b, tn_int(1)));
        double dc = cpu_seconds() - c0;
        cpu = dc < cpu ? dc : cpu;
    });
    tn_release(a);
    tn_release(b);
    *cpu_us = cpu / (double)calls * 1e6;
    return best / (double)calls * 1e6;
}

/* The convolution workloads: conv2d of a batch of 32 28x28 images through
 * 1->16->32 channels, 3x3, padding 1 (forward; "train": forward and
 * convolution_backward of both layers, no input gradient for the first),
 * and 32x64x56x56 -> 64 channels, 3x3, padding 1 (forward); layer_norm of
 * 8192 rows of 1024 float32 with weight and bias. */
struct conv_args {
    struct tn_tensor *x, *w1, *b1, *w2, *b2;
    bool big, train;
};

static void conv_step(const struct conv_args *c)
{
    static const int64_t one[1] = {1}, zero[2] = {0, 0};
    static const bool all[3] = {true, true, true}, params[3] = {false, true, true};
    struct tn_tensor *h = tn_conv2d(c->x, c->w1, c->b1, one, 1, one, 1, one, 1, 1);
    struct tn_tensor *y = c->big ? NULL : tn_conv2d(h, c->w2, c->b2, one, 1, one, 1, one, 1, 1);
    if (c->train) {
        struct tn_tensor *g[3], *g1[3];
        tn_convolution_backward(y, h, c->w2, (const int64_t[]){32}, 1, one, 1, one, 1, one, 1,
                                false, zero, 2, 1, all, 3, &g[0], &g[1], &g[2]);
        tn_convolution_backward(g[0], c->x, c->w1, (const int64_t[]){16}, 1, one, 1, one, 1, one,
                                1, false, zero, 2, 1, params, 3, &g1[0], &g1[1], &g1[2]);
        for (int i = 0; i < 3; i++) {
            tn_release(g[i]);
            tn_release(g1[i]);
        }
    }
    tn_release(h);
    tn_release(y);
}

static double conv_ms(const char *name)
{
    double best = -1;
    if (!strcmp(name, "layer_norm")) {
        struct tn_tensor *x = tn_randn(TN_SHAPE(8192, 1024), TN_FLOAT32, NULL);
        struct tn_tensor *w = tn_randn(TN_SHAPE(1024), TN_FLOAT32, NULL);
        struct tn_tensor *b = tn_randn(TN_SHAPE(1024), TN_FLOAT32, NULL);
        TN_BENCH_BEST(5, best, tn_release(tn_layer_norm(x, (const int64_t[]){1024}, 1, w, b, 1e-5,
                                                        true)));
        tn_release(x);
        tn_release(w);
        tn_release(b);
        return best * 1e3;
    }
    bool big = !strcmp(name, "conv64"), train = !strcmp(name, "conv2d_train");
    if (!big && !train && strcmp(name, "conv2d"))
        return -1;
    struct tn_tensor *x = big ? tn_randn(TN_SHAPE(32, 64, 56, 56), TN_FLOAT32, NULL)
                              : tn_randn(TN_SHAPE(32, 1, 28, 28), TN_FLOAT32, NULL);
    struct tn_tensor *w1 = big ? tn_randn(TN_SHAPE(64, 64, 3, 3), TN_FLOAT32, NULL)
                               : tn_randn(TN_SHAPE(16, 1, 3, 3), TN_FLOAT32, NULL);
    struct tn_tensor *b1 = tn_randn(TN_SHAPE(w1->sizes[0]), TN_FLOAT32, NULL);
    struct tn_tensor *w2 = tn_randn(TN_SHAPE(32, 16, 3, 3), TN_FLOAT32, NULL);
    struct tn_tensor *b2 = tn_randn(TN_SHAPE(32), TN_FLOAT32, NULL);
    struct conv_args c = {x, w1, b1, w2, b2, big, train};
    TN_BENCH_BEST(big ? 3 : 10, best, conv_step(&c));
    tn_release(x);
    tn_release(w1);
    tn_release(b1);
    tn_release(w2);
    tn_release(b2);
    return best * 1e3;
}

/* Milliseconds (best of 5) of one workload that bench/ops/torch.sh also
 * times in PyTorch: softmax over the last dim of 256x4096 float32, and a
 * sum over the last dim of 4096x4096 float32. */
static double workload_ms(const char *name)
{
    double best = -1;
    if (!strcmp(name, "softmax")) {
        struct tn_tensor *x = tn_randn(TN_SHAPE(256, 4096), TN_FLOAT32, NULL);
        TN_BENCH_BEST(5, best, tn_release(tn_softmax_int(x, -1, TN_DTYPE_UNSET)));
        tn_release(x);
    } else if (!strcmp(name, "sum")) {
        struct tn_tensor *x = tn_randn(TN_SHAPE(4096, 4096), TN_FLOAT32, NULL);
        TN_BENCH_BEST(5, best, tn_release(tn_sum_dim_intlist(x, (const int64_t[]){-1}, 1, false,
                                                               TN_DTYPE_UNSET)));
        tn_release(x);
    } else if (!strcmp(name, "index") || !strcmp(name, "index_put")) {
        /* x[idx] and x.index_put_((idx,), v, accumulate=True): 10000 random
         * rows of a 1000x1000 float32 tensor */
        struct tn_tensor *x = tn_randn(TN_SHAPE(1000, 1000), TN_FLOAT32, NULL);
        struct tn_tensor *i = tn_randint(0, 1000, TN_SHAPE(10000), TN_INT64, NULL);
        struct tn_tensor *v = tn_randn(TN_SHAPE(10000, 1000), TN_FLOAT32, NULL);
        const struct tn_tensor *idx[] = {i};
        if (name[5])
            TN_BENCH_BEST(5, best, tn_index_put_(x, idx, 1, v, true));
        else
            TN_BENCH_BEST(5, best, tn_release(tn_index(x, idx, 1)));
        tn_release(x);
        tn_release(i);
        tn_release(v);
    } else if (!strcmp(name, "interpolate")) {
        /* F.interpolate(x, scale_factor=2, mode="bilinear") of 8x16x64x64 float32 */
        struct tn_tensor *x = tn_randn(TN_SHAPE(8, 16, 64, 64), TN_FLOAT32, NULL);
        TN_BENCH_BEST(5, best, tn_release(tn_upsample_bilinear2d_vec(x, NULL, 0, false,
                                                                      (const double[]){2, 2}, 2)));
        tn_release(x);
    }
    return best < 0 ? conv_ms(name) : best * 1e3;
}

/* n floats (n % 16 == 0, both 16-byte aligned) from src to dst as a
 * plain copy loop: 64 bytes a step, with non-temporal stores where `nt`
 * (as the ops write outputs past tn__stream_bytes()); memcpy where the
 * build has no SSE2. */
static void copy_loop(float *dst, const float *src, int64_t n, bool nt)
{
#ifdef __SSE2__
    for (int64_t i = 0; i < n; i += 16) {
        __m128 v0 = _mm_load_ps(src + i), v1 = _mm_load_ps(src + i + 4);
        __m128 v2 = _mm_load_ps(src + i + 8), v3 = _mm_load_ps(src + i + 12);
        if (nt) {
            _mm_stream_ps(dst + i, v0);
            _mm_stream_ps(dst + i + 4, v1);
            _mm_stream_ps(dst + i + 8, v2);
            _mm_stream_ps(dst + i + 12, v3);
        } else {
            _mm_store_ps(dst + i, v0);
            _mm_store_ps(dst + i + 4, v1);
            _mm_store_ps(dst + i + 8, v2);
            _mm_store_ps(dst + i + 12, v3);
        }
    }
    _mm_sfence();
#else
    (void)nt;
    memcpy(dst, src, (size_t)n * sizeof(float));
#endif
}

/* --sweep OP N (bench/ops/sweep.sh): "SECONDS MEMCPY_SECONDS" of OP on N
 * float32 elements, each the best of enough runs to fill about a tenth of
 * a second: add, mul, exp (out=, as PyTorch's side), sum (of all), badd
 * (an N/1024 x 1024 matrix plus a row of 1024, out=), softmax and lsm
 * (log_softmax) over the rows of that matrix (new outputs, as PyTorch's
 * side); MEMCPY_SECONDS a copy of the N elements (the better of memcpy and
 * copy_loop) into a touched tensor. */
static int sweep(const char *op, int64_t n)
{
    int64_t rows = n / 1024 > 0 ? n / 1024 : 1, cols = n / rows;
    struct tn_tensor *a = tn_randn(TN_SHAPE(rows, cols), TN_FLOAT32, NULL);
    struct tn_tensor *b = !strcmp(op, "badd") ? tn_randn(TN_SHAPE(cols), TN_FLOAT32, NULL)
                                              : tn_randn(TN_SHAPE(rows, cols), TN_FLOAT32, NULL);
    struct tn_tensor *o = tn_empty(TN_SHAPE(rows, cols), TN_FLOAT32);
    /* memcpy's reference copies a into o, tensors allocated as the ops'
     * operands are, touched first (a fresh malloc'd destination of 10^5
     * floats was measured at 4.5-6 GB/s against 67 for these) */
    char *dst = tn_data(o);
    memset(dst, 0, (size_t)n * 4);
    int reps = (int)(2e7 / (double)n);
    reps = reps < 5 ? 5 : reps > 2000 ? 2000 : reps;
    double t = -1, tc;
    int rc = 0;
    if (!strcmp(op, "add") || !strcmp(op, "badd"))
        TN_BENCH_BEST(reps, t, rc |= tn_add_out(a, b, tn_int(1), o));
    else if (!strcmp(op, "mul"))
        TN_BENCH_BEST(reps, t, rc |= tn_mul_out(a, b, o));
    else if (!strcmp(op, "exp"))
        TN_BENCH_BEST(reps, t, rc |= tn_exp_out(a, o));
    else if (!strcmp(op, "sum"))
        TN_BENCH_BEST(reps, t, tn_release(tn_sum(a, TN_DTYPE_UNSET)));
    else if (!strcmp(op, "softmax"))
        TN_BENCH_BEST(reps, t, tn_release(tn_underscore_softmax(a, 1, false)));
    else if (!strcmp(op, "lsm"))
        TN_BENCH_BEST(reps, t, tn_release(tn_underscore_log_softmax(a, 1, false)));
    TN_BENCH_BEST(reps, tc, memcpy(dst, tn_data(a), (size_t)(rows * cols) * 4));
    /* the copy's best: glibc's memcpy turns to non-temporal stores of its
     * own above 3/4 of the L3 and was 8-9 GB/s at 10^8 floats, where add
     * moved 28 (a plain loop, streamed above 32 MiB as the ops, is the
     * reference where it is faster) */
    int64_t nc = rows * cols;
    if (nc % 16 == 0 && (uintptr_t)dst % 16 == 0 && (uintptr_t)tn_data(a) % 16 == 0) {
        double tl;
        TN_BENCH_BEST(reps, tl, copy_loop((float *)(void *)dst, tn_data(a), nc, nc * 4 >= (32 << 20)));
        tc = tl < tc ? tl : tc;
    }
    if (t >= 0 && !rc)
        printf("%.9f %.9f\n", t, tc);
    tn_release(a);
    tn_release(b);
    tn_release(o);
    return t < 0 || rc ? 2 : 0;
}

/* --conv C H O K S G [N] (bench/ops/conv.sh, resnet18_conv.sh): seconds
 * (best of enough runs) of conv2d of an N x C x H x H float32 input (N 1
 * when not given) with O filters K x K, stride S, padding K/2, G groups,
 * with a bias. */
static int conv_shape(char **v, int64_t n)
{
    int64_t c = atoll(v[0]), h = atoll(v[1]), o = atoll(v[2]), k = atoll(v[3]),
            st = atoll(v[4]), g = atoll(v[5]);
    struct tn_tensor *x = tn_randn(TN_SHAPE(n, c, h, h), TN_FLOAT32, NULL);
    struct tn_tensor *w = tn_randn(TN_SHAPE(o, c / g, k, k), TN_FLOAT32, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(o), TN_FLOAT32, NULL);
    const int64_t stride[2] = {st, st}, pad[2] = {k / 2, k / 2}, dil[2] = {1, 1};
    double t;
    int bad = 0;
    TN_BENCH_BEST(20, t, {
        struct tn_tensor *y = tn_conv2d(x, w, b, stride, 2, pad, 2, dil, 2, g);
        bad |= !y;
        tn_release(y);
    });
    if (!bad)
        printf("%.9f\n", t);
    tn_release(x);
    tn_release(w);
    tn_release(b);
    return bad ? 2 : 0;
}

/* `--mm M K N [t]`: tn_mm_out of (M x K) @ (K x N) float32 against
 * cblas_sgemm called directly (OpenBLAS at tn_get_num_threads() threads),
 * best of 200 calls each; prints "OURS_US BLAS_US RATIO" (ratio = ours /
 * blas: above 1 we are slower). With t, the right operand is an N x K
 * weight transposed, as linear passes it. Issue 27: mm 128x128 at 2
 * threads, and linears of one row. */
static int mm_shape(char **v, bool t)
{
    int64_t M = strtoll(v[0], NULL, 10), K = strtoll(v[1], NULL, 10), N = strtoll(v[2], NULL, 10);
    struct tn_tensor *x = tn_randn(TN_SHAPE(M, K), TN_FLOAT32, NULL);
    struct tn_tensor *w = t ? tn_randn(TN_SHAPE(N, K), TN_FLOAT32, NULL)
                            : tn_randn(TN_SHAPE(K, N), TN_FLOAT32, NULL);
    struct tn_tensor *y = t ? tn_t(w) : tn_retain(w);
    struct tn_tensor *z = tn_empty(TN_SHAPE(M, N), TN_FLOAT32);
    openblas_set_num_threads(tn_get_num_threads());
    double tblas = 0, tmm = 0;
    for (int round = 0; round < 2; round++) { /* alternate, keep the best */
        double b, m;
        TN_BENCH_BEST(200, b, cblas_sgemm(CblasRowMajor, CblasNoTrans,
                                          t ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                                          1.0f, tn_data(x), (int)K, tn_data(w), t ? (int)K : (int)N,
                                          0.0f, tn_data(z), (int)N));
        TN_BENCH_BEST(200, m, tn_mm_out(x, y, z));
        tblas = round && tblas < b ? tblas : b;
        tmm = round && tmm < m ? tmm : m;
    }
    printf("%.2f %.2f %.3f\n", tmm * 1e6, tblas * 1e6, tmm / tblas);
    tn_release(w);
    tn_release(x);
    tn_release(y);
    tn_release(z);
    return 0;
}

int main(int argc, char **argv)
{
    double cpu_us;
    if ((argc == 8 || argc == 9) && !strcmp(argv[1], "--conv"))
        return conv_shape(argv + 2, argc == 9 ? atoll(argv[8]) : 1);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "--mm"))
        return mm_shape(argv + 2, argc == 6 && !strcmp(argv[5], "t"));
    if (argc > 3 && !strcmp(argv[1], "--sweep"))
        return sweep(argv[2], strtoll(argv[3], NULL, 10));
    if (argc > 1 && !strcmp(argv[1], "--dispatch-us")) {
        double wall_us = dispatch_us(tn_bench_size(1000000, 1000), &cpu_us);
        printf("%.4f %.4f\n", wall_us, cpu_us);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "--ms")) {
        printf("%.4f\n", workload_ms(argv[2]));
        return 0;
    }
    printf("dispatch: tn_add on 1-element float32 tensors: %.3f us per call "
           "(bench/ops/dispatch.sh compares PyTorch eager)\n", dispatch_us(tn_bench_size(1000000, 1000), &cpu_us));

    int64_t n = tn_bench_size(16 << 20, 1 << 12);
    struct tn_tensor *a = tn_randn(TN_SHAPE(n), TN_FLOAT32, NULL);
    struct tn_tensor *b = tn_randn(TN_SHAPE(n), TN_FLOAT32, NULL);
    struct tn_tensor *o = tn_empty(TN_SHAPE(n), TN_FLOAT32);
    char *src = malloc((size_t)n * 4), *dst = malloc((size_t)n * 4);
    memset(src, 1, (size_t)n * 4);
    memset(dst, 0, (size_t)n * 4);
    double tcpy, tadd, tmul, taddnew;
    TN_BENCH_BEST(5, tcpy, memcpy(dst, src, (size_t)n * 4));
    TN_BENCH_BEST(5, tadd, tn_add_out(a, b, tn_int(1), o));
    TN_BENCH_BEST(5, tmul, tn_mul_out(a, b, o));
    TN_BENCH_BEST(5, taddnew, tn_release(tn_add(a, b, tn_int(1))));
    double gb = 1e-9 * (double)n * 4;
    double bw_cpy = 2 * gb / tcpy, bw_add = 3 * gb / tadd, bw_mul = 3 * gb / tmul;
    printf("memcpy 64 MiB: %.1f GB/s (read + write)\n", bw_cpy);
    printf("add  16M float32 (out=): %.1f GB/s = %.0f%% of memcpy; with a new output %.1f ms\n",
           bw_add, 100 * bw_add / bw_cpy, taddnew * 1e3);
    printf("mul  16M float32 (out=): %.1f GB/s = %.0f%% of memcpy\n", bw_mul, 100 * bw_mul / bw_cpy);
    free(src);
    free(dst);
    tn_release(a);
    tn_release(b);
    tn_release(o);

    int64_t m = tn_bench_size(1024, 32);
    struct tn_tensor *x = tn_randn(TN_SHAPE(m, m), TN_FLOAT32, NULL);
    struct tn_tensor *y = tn_randn(TN_SHAPE(m, m), TN_FLOAT32, NULL);
    struct tn_tensor *z = tn_empty(TN_SHAPE(m, m), TN_FLOAT32);
    double tblas, tmm, tmmout;
    TN_BENCH_BEST(3, tblas, cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m,
                                        (int)m, 1.0f, tn_data(x), (int)m, tn_data(y), (int)m, 0.0f,
                                        tn_data(z), (int)m));
    TN_BENCH_BEST(3, tmm, tn_release(tn_mm(x, y)));
    TN_BENCH_BEST(3, tmmout, tn_mm_out(x, y, z));
    double gf = 2e-9 * (double)m * m * m;
    printf("mm 1024^3 float32: cblas_sgemm %.1f GFLOP/s; tn_mm_out %.1f GFLOP/s = %.0f%%; "
           "tn_mm (new output) %.1f GFLOP/s = %.0f%%\n", gf / tblas, gf / tmmout,
           100 * tblas / tmmout, gf / tmm, 100 * tblas / tmm);
    tn_release(x);
    tn_release(y);
    tn_release(z);
    return 0;
}
