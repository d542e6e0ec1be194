/*
 * bench/nn/bench_convnet.c: steps per second of a small conv net (conv2d
 * 1->16, ReLU, max_pool 2, conv2d 16->32, ReLU, max_pool 2, linear to 10;
 * batch 32 of 28x28) through lib/nn: a training step (forward, cross
 * entropy, backward, SGD) where autograd has conv2d's derivative, else the
 * forward alone, which it says.  Prints "<mode> <steps/s> <CPU ms per
 * step>" (process CPU time over the timed steps, all threads: on a loaded
 * machine the steadier figure); convnet.sh runs the same in PyTorch and
 * prints the ratios.
 */
#include <tensor/tensor.h>
#include <tensor/autograd.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/nn/convnet.h"

/* One step; train: with backward and the optimizer. 0 or an error. */
static int step(struct tn_module *m, struct tn_optim *o, struct tn_tensor *x, struct tn_tensor *y,
                bool train)
{
    tn_optim_zero_grad(o, true);
    struct tn_tensor *out = tn_module_forward(m, x), *loss = NULL;
    int rc = out ? 0 : -1;
    if (!rc && train) {
        loss = tn_nn_cross_entropy(out, y, NULL, TN_REDUCTION_MEAN, -100);
        rc = loss ? tn_backward(&loss, 1, NULL, false, false) : -1;
        if (!rc)
            rc = tn_optim_step(o);
    }
    tn_release(out);
    tn_release(loss);
    return rc;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    struct tn_module *m;
    struct tn_tensor *x, *y;
    struct tn_optim *o;
    if (tn_bench_convnet(&m, &x, &y, &o) < 0) {
        fprintf(stderr, "bench_convnet: %s\n", tn_last_error());
        return 2;
    }
    bool train = step(m, o, x, y, true) == 0;
    if (!train) {
        fprintf(stderr, "bench_convnet: training step unavailable (%s): timing the forward\n",
                tn_last_error());
        if (step(m, o, x, y, false) != 0) {
            fprintf(stderr, "bench_convnet: %s\n", tn_last_error());
            return 2;
        }
    }
    double t0 = tn_bench_now();
    clock_t c0 = clock();
    for (int i = 0; i < steps; i++)
        if (step(m, o, x, y, train) != 0) {
            fprintf(stderr, "bench_convnet: %s\n", tn_last_error());
            return 2;
        }
    double dt = tn_bench_now() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("%s %.2f %.3f\n", train ? "train" : "forward", steps / dt, cpu * 1e3 / steps);
    tn_optim_free(o);
    tn_module_free(m);
    tn_release(x);
    tn_release(y);
    return 0;
}
