/*
 * tests/cli/nn/convnet_losses.c: the conv net of bench/nn/convnet.sh (conv2d
 * 1->16, ReLU, max_pool 2, conv2d 16->32, ReLU, max_pool 2, flatten, linear
 * to 10; batch 32 of 28x28 from seed 0) trained by SGD with momentum
 * through lib/nn and lib/optim; prints the loss of each of the first
 * argv[1] steps, one a line, for nn_convnet.bats to hold against PyTorch's.
 * A conv layer left out of training (its weight without a gradient) shows
 * from the second loss on.
 */
#include <tensor/tensor.h>
#include <tensor/autograd.h>

#include <stdio.h>
#include <stdlib.h>

#include "bench/nn/convnet.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    struct tn_module *m;
    struct tn_tensor *x, *y;
    struct tn_optim *o;
    int rc = tn_bench_convnet(&m, &x, &y, &o) < 0;
    for (int s = 0; s < steps && !rc; s++) {
        tn_optim_zero_grad(o, true);
        struct tn_tensor *out = tn_module_forward(m, x);
        struct tn_tensor *loss = out ? tn_nn_cross_entropy(out, y, NULL, TN_REDUCTION_MEAN, -100)
                                     : NULL;
        rc = !loss || tn_backward(&loss, 1, NULL, false, false) || tn_optim_step(o);
        if (!rc)
            printf("%.9g\n", *(const float *)tn_data(loss));
        tn_release(out);
        tn_release(loss);
    }
    if (rc)
        fprintf(stderr, "convnet_losses: %s\n", tn_last_error());
    tn_optim_free(o);
    tn_module_free(m);
    tn_release(x);
    tn_release(y);
    return rc;
}
