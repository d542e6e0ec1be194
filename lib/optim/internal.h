/*
 * optim/internal.h: what lib/optim's files share (never installed).
 */
#ifndef TN_OPTIM_INTERNAL_H
#define TN_OPTIM_INTERNAL_H

#include <tensor/optim.h>

struct tn_optim {
    enum tn_optim_kind kind;
    enum tn_optim_compat compat;
    struct tn_sgd_options sgd;   /* SGD */
    struct tn_adam_options adam; /* Adam, AdamW */
    int n;
    struct tn_tensor **params;   /* owned references */
    struct tn_optim_param_state *state; /* n of them, tensors owned */
};

/* Python's repr(float) of d in buf ("1e-08", "-1.0"), for messages that
 * quote PyTorch's f-strings; returns buf. */
const char *tn__py_float(double d, char *buf, size_t len);

#endif
