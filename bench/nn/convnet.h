/*
 * bench/nn/convnet.h: the small conv net of issue 5 and its training setup,
 * shared by bench_convnet (steps per second) and
 * tests/cli/nn/convnet_losses (the first losses against PyTorch): conv2d
 * 1->16, ReLU, max_pool 2, conv2d 16->32, ReLU, max_pool 2, flatten, linear
 * to 10, built after manual_seed(0) in the order of PyTorch's
 * nn.Sequential, then a batch of 32 randn 1x28x28 inputs and randint
 * labels, and SGD (lr 0.01, momentum 0.9): what the same seed gives
 * PyTorch.  0, or -1 with an error and nothing made.
 */
#ifndef TN_BENCH_NN_CONVNET_H
#define TN_BENCH_NN_CONVNET_H

#include <tensor/tensor.h>

static inline int tn_bench_convnet(struct tn_module **m, struct tn_tensor **x,
                                   struct tn_tensor **y, struct tn_optim **o)
{
    tn_manual_seed(0);
    struct tn_module *l[8] = {
        (struct tn_module *)tn_nn_conv2d_new(1, 16, 3, 1, 1, 1, 1, true, NULL),
        tn_nn_activation_new(TN_NN_RELU),
        (struct tn_module *)tn_nn_max_pool2d_new(2, 0, 0),
        (struct tn_module *)tn_nn_conv2d_new(16, 32, 3, 1, 1, 1, 1, true, NULL),
        tn_nn_activation_new(TN_NN_RELU),
        (struct tn_module *)tn_nn_max_pool2d_new(2, 0, 0),
        tn_nn_activation_new(TN_NN_FLATTEN),
        (struct tn_module *)tn_nn_linear_new(32 * 7 * 7, 10, true, NULL),
    };
    *m = tn_nn_sequential_new(l, 8);
    *x = tn_randn(TN_SHAPE(32, 1, 28, 28), TN_FLOAT32, NULL);
    *y = tn_randint(0, 10, TN_SHAPE(32), TN_INT64, NULL);
    struct tn_tensor *p[8];
    int np = *m ? tn_module_parameters(*m, p, 8) : -1;
    struct tn_sgd_options so = tn_sgd_defaults();
    so.lr = 0.01;
    so.momentum = 0.9;
    *o = np >= 0 && *x && *y ? tn_sgd_new(p, np, &so) : NULL;
    if (*o)
        return 0;
    tn_module_free(*m);
    tn_release(*x);
    tn_release(*y);
    *m = NULL;
    *x = *y = NULL;
    return -1;
}

#endif
