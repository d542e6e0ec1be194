/*
 * nn/internal.h: what lib/nn's files share (never installed).
 */
#ifndef TN_NN_INTERNAL_H
#define TN_NN_INTERNAL_H

#include <tensor/nn.h>

/* The longest dotted state_dict name, NUL included. */
#define TN_NN_NAME_MAX 256

/* A zeroed module struct of `size` bytes in training mode, or NULL with
 * TN_ENOMEM. */
struct tn_module *tn__module_alloc(size_t size, const char *type,
                                   struct tn_tensor *(*forward)(struct tn_module *,
                                                                const struct tn_tensor *));
/* Appends a named slot (state_dict order is the order of these calls). */
void tn__module_slot(struct tn_module *m, const char *name, struct tn_tensor **slot, bool buffer);

/* The functional forms of the layers whose operators live in lib/ops
 * (nn/functional.c): a new tensor, or NULL with an error. */
struct tn_tensor *tn__nn_conv2d(const struct tn_tensor *x, const struct tn_tensor *w,
                                const struct tn_tensor *b, const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2],
                                int64_t groups);
struct tn_tensor *tn__nn_embedding(const struct tn_tensor *w, const struct tn_tensor *idx,
                                   int64_t padding_idx);
struct tn_tensor *tn__nn_layer_norm(const struct tn_tensor *x, const int64_t *shape, int ndim,
                                    const struct tn_tensor *w, const struct tn_tensor *b,
                                    double eps);
struct tn_tensor *tn__nn_batch_norm(const struct tn_tensor *x, const struct tn_tensor *w,
                                    const struct tn_tensor *b, struct tn_tensor *running_mean,
                                    struct tn_tensor *running_var, bool training,
                                    double momentum, double eps);

#endif
