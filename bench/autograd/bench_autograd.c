/*
 * bench/autograd/bench_autograd: one training step's forward and backward
 * of the demo's MLP (batch 64, 64-128-128-10, ReLU, log_softmax cross
 * entropy) through the Autograd kernels. Prints the best milliseconds per
 * step over 20 runs of 50 steps; mlp.sh compares it with PyTorch eager.
 * With --small: a chain of elementwise ops on a 4-element tensor and its
 * backward, where the kernels, nodes and apply functions are the cost, not
 * the arithmetic; prints the best microseconds per step (wall, then this
 * process's CPU time) over 20 runs of 200 steps (small.sh).
 */
#include <stdio.h>
#include <stdlib.h>

#include <tensor/tensor.h>

#include "bench/bench.h"

static struct tn_tensor *param(int64_t a, int64_t b)
{
    struct tn_tensor *t = b ? tn_randn(TN_SHAPE(a, b), TN_FLOAT32, NULL)
                            : tn_randn(TN_SHAPE(a), TN_FLOAT32, NULL);
    struct tn_tensor *s = tn_mul_scalar(t, tn_float(0.1));
    tn_release(t);
    tn_requires_grad_(s, true);
    return s;
}

static struct tn_tensor *linear(struct tn_tensor *x, struct tn_tensor *w, struct tn_tensor *b)
{
    struct tn_tensor *wt = tn_t(w), *y = tn_addmm(b, x, wt, tn_int(1), tn_int(1));
    tn_release(wt);
    return y;
}

/* 50 steps; 0, or 1 after printing why backward failed */
static int run_steps(struct tn_tensor **w, struct tn_tensor **b, struct tn_tensor *x,
                     struct tn_tensor *oh)
{
    for (int step = 0; step < 50; step++) {
        struct tn_tensor *h = tn_retain(x);
        for (int l = 0; l < 3; l++) {
            struct tn_tensor *y = linear(h, w[l], b[l]);
            tn_release(h);
            h = l < 2 ? tn_relu(y) : tn_retain(y);
            tn_release(y);
        }
        struct tn_tensor *lp = tn_log_softmax_int(h, 1, TN_DTYPE_UNSET), *m = tn_mul(lp, oh);
        struct tn_tensor *s = tn_sum(m, TN_DTYPE_UNSET);
        struct tn_tensor *loss = tn_mul_scalar(s, tn_float(-1.0 / 64));
        if (tn_backward(&loss, 1, NULL, false, false) < 0) {
            fprintf(stderr, "bench_autograd: %s\n", tn_last_error());
            return 1;
        }
        for (int l = 0; l < 3; l++) {
            tn_zero_grad(w[l]);
            tn_zero_grad(b[l]);
        }
        tn_release(loss);
        tn_release(s);
        tn_release(m);
        tn_release(lp);
        tn_release(h);
    }
    return 0;
}

/* One --small step: y = sum(-sin(exp(x) * x / (exp(x) + 1)) * 3), then
 * backward (exp, mul, div, add.Scalar, sin, neg, mul.Scalar, sum: nodes of
 * saved tensors alone and nodes that keep arguments). 0, or 1 after
 * printing why it failed. */
static int small_step(struct tn_tensor *x)
{
    struct tn_tensor *a = tn_exp(x), *b = tn_mul(a, x), *c = tn_add_scalar(a, tn_int(1), tn_int(1));
    struct tn_tensor *d = tn_div(b, c), *e = tn_sin(d), *f = tn_neg(e);
    struct tn_tensor *g = tn_mul_scalar(f, tn_float(3)), *y = tn_sum(g, TN_DTYPE_UNSET);
    int rc = y ? tn_backward(&y, 1, NULL, false, false) : -1;
    if (rc < 0)
        fprintf(stderr, "bench_autograd: %s\n", tn_last_error());
    tn_zero_grad(x);
    struct tn_tensor *all[] = {a, b, c, d, e, f, g, y};
    for (int i = 0; i < 8; i++)
        tn_release(all[i]);
    return rc < 0;
}

static int small(void)
{
    struct tn_tensor *x = tn_randn(TN_SHAPE(4), TN_FLOAT32, NULL);
    tn_requires_grad_(x, true);
    int steps = (int)tn_bench_size(200, 2), failed = 0;
    double best, cpu = 1e30;
    TN_BENCH_BEST(20, best, {
        clock_t c0 = clock();
        for (int i = 0; i < steps; i++)
            failed |= small_step(x);
        double c = (double)(clock() - c0) / CLOCKS_PER_SEC;
        cpu = c < cpu ? c : cpu;
    });
    tn_release(x);
    if (failed)
        return 1;
    printf("%.3f %.3f\n", best / steps * 1e6, cpu / steps * 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--small"))
        return small();
    if (argc > 1) {
        fprintf(stderr, "bench_autograd: unknown argument '%s' (--small or nothing)\n", argv[1]);
        return 2;
    }
    tn_manual_seed(0);
    struct tn_tensor *w[3] = {param(128, 64), param(128, 128), param(10, 128)};
    struct tn_tensor *b[3] = {param(128, 0), param(128, 0), param(10, 0)};
    struct tn_tensor *x = tn_randn(TN_SHAPE(64, 64), TN_FLOAT32, NULL);
    struct tn_tensor *oh = tn_zeros(TN_SHAPE(64, 10), TN_FLOAT32);
    for (int i = 0; i < 64; i++) {
        struct tn_tensor *row = tn_select(oh, 0, i), *e = tn_select(row, 0, i % 10);
        tn_fill_(e, tn_int(1));
        tn_release(e);
        tn_release(row);
    }
    double best;
    int failed = 0;
    TN_BENCH_BEST(20, best, failed |= run_steps(w, b, x, oh));
    if (failed)
        return 1;
    printf("%.4f\n", best / 50 * 1e3);
    for (int l = 0; l < 3; l++) {
        tn_release(w[l]);
        tn_release(b[l]);
    }
    tn_release(x);
    tn_release(oh);
    return 0;
}
