/*
 * tensor/nn.h: libtensor's nn module: layers as plain C structs with their
 * parameters named and ordered as torch.nn's state_dict names them, their
 * default initialisation (bit for bit PyTorch's for the same seed), train
 * and eval modes, and the losses.
 *
 * Every layer struct starts with `struct tn_module base`, so a pointer to
 * it converts to `struct tn_module *` (TN_MODULE(layer)).  Parameters are
 * leaf tensors with requires_grad set and TN_TENSOR_PARAMETER in their
 * flags; buffers (BatchNorm2d's running statistics) are plain tensors.
 * A layer owns its tensors; a Sequential owns its children.  Forward calls
 * go through the dispatcher, so autograd records them when grad is on.
 * Ownership and errors follow tensor/core.h.
 */
#ifndef TENSOR_NN_H
#define TENSOR_NN_H

#include <tensor/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- modules */

/* A named tensor slot of a module: a parameter or a buffer. */
struct tn_module_slot {
    const char *name;          /* "weight", "running_mean" */
    struct tn_tensor **tensor; /* points into the layer struct; *tensor may be NULL (no bias) */
    bool buffer;
};

#define TN_MODULE_MAX_SLOTS 8

struct tn_module {
    const char *type; /* "Linear", as PyTorch's class name */
    bool training;    /* true after construction, as in PyTorch */
    /* The layer's forward: a new tensor, or NULL with an error. */
    struct tn_tensor *(*forward)(struct tn_module *m, const struct tn_tensor *x);
    void (*destroy)(struct tn_module *m); /* frees what the layer owns beyond its slots */
    int nslots;
    struct tn_module_slot slots[TN_MODULE_MAX_SLOTS]; /* state_dict order */
    int nchildren;
    struct tn_module **children; /* owned; named "0", "1", ... */
};

#define TN_MODULE(layer) (&(layer)->base)

/* m(x): runs the forward.  NULL with an error. */
struct tn_tensor *tn_module_forward(struct tn_module *m, const struct tn_tensor *x);
/* model.train(mode) / model.eval(): sets training on m and every child. */
void tn_module_train(struct tn_module *m, bool mode);
/* Frees m, its tensors and its children.  NULL is fine. */
void tn_module_free(struct tn_module *m);

/* Visits every parameter and buffer of m and its children in state_dict
 * order with its dotted name ("0.weight"); NULL slots (bias=False) are
 * skipped.  Stops and returns fn's value when non-zero. */
typedef int (*tn_module_visit_fn)(const char *name, struct tn_tensor **slot, bool buffer,
                                  void *ctx);
int tn_module_visit(struct tn_module *m, tn_module_visit_fn fn, void *ctx);
/* model.parameters(): writes up to `cap` borrowed parameter pointers (no
 * buffers) to out in order and returns how many there are. */
int tn_module_parameters(struct tn_module *m, struct tn_tensor **out, int cap);
/* sum(p.numel() for p in model.parameters()). */
int64_t tn_module_num_parameters(struct tn_module *m);

/* ------------------------------------------------------------------ layers */

/* Constructors take the generator for the initialisation (NULL: the
 * default one, as torch.manual_seed sets it) and create float32 tensors
 * (the default dtype).  NULL with an error in PyTorch's words. */

struct tn_nn_linear {
    struct tn_module base;
    int64_t in_features, out_features;
    struct tn_tensor *weight; /* [out, in], kaiming_uniform_(a=sqrt(5)) */
    struct tn_tensor *bias;   /* [out], U(-1/sqrt(in), 1/sqrt(in)); NULL without bias */
};
struct tn_nn_linear *tn_nn_linear_new(int64_t in_features, int64_t out_features, bool bias,
                                      struct tn_generator *g);

struct tn_nn_conv2d {
    struct tn_module base;
    int64_t in_channels, out_channels, kernel_size[2], stride[2], padding[2], dilation[2],
        groups;
    struct tn_tensor *weight; /* [out, in/groups, kh, kw] */
    struct tn_tensor *bias;
};
/* Conv2d(in, out, kernel_size, stride, padding, dilation, groups, bias),
 * square kernel, stride, padding and dilation (padding_mode 'zeros'). */
struct tn_nn_conv2d *tn_nn_conv2d_new(int64_t in_channels, int64_t out_channels,
                                      int64_t kernel_size, int64_t stride, int64_t padding,
                                      int64_t dilation, int64_t groups, bool bias,
                                      struct tn_generator *g);

struct tn_nn_embedding {
    struct tn_module base;
    int64_t num_embeddings, embedding_dim, padding_idx; /* padding_idx -1: none */
    struct tn_tensor *weight; /* normal_(0, 1), the padding row zero */
};
struct tn_nn_embedding *tn_nn_embedding_new(int64_t num_embeddings, int64_t embedding_dim,
                                            int64_t padding_idx, struct tn_generator *g);

struct tn_nn_layer_norm {
    struct tn_module base;
    int64_t normalized_shape[TN_MAX_DIMS];
    int ndim;
    double eps;
    struct tn_tensor *weight, *bias; /* ones, zeros; NULL without elementwise_affine */
};
struct tn_nn_layer_norm *tn_nn_layer_norm_new(const int64_t *normalized_shape, int ndim,
                                              double eps, bool elementwise_affine);

struct tn_nn_batch_norm2d {
    struct tn_module base;
    int64_t num_features;
    double eps, momentum;
    struct tn_tensor *weight, *bias;                 /* ones, zeros */
    struct tn_tensor *running_mean, *running_var;    /* buffers: zeros, ones */
    struct tn_tensor *num_batches_tracked;           /* buffer: int64 0 */
};
struct tn_nn_batch_norm2d *tn_nn_batch_norm2d_new(int64_t num_features, double eps,
                                                  double momentum);

struct tn_nn_max_pool2d {
    struct tn_module base;
    int64_t kernel_size[2], stride[2], padding[2];
};
/* MaxPool2d(kernel_size, stride (0: kernel_size, PyTorch's None), padding). */
struct tn_nn_max_pool2d *tn_nn_max_pool2d_new(int64_t kernel_size, int64_t stride,
                                              int64_t padding);

struct tn_nn_dropout {
    struct tn_module base;
    double p;
    struct tn_generator *g; /* borrowed; NULL: the default generator */
};
/* Dropout(p): in training, zeroes elements with probability p and scales
 * the rest by 1/(1-p); the identity in eval mode. */
struct tn_nn_dropout *tn_nn_dropout_new(double p, struct tn_generator *g);

/* Parameterless activations: ReLU, GELU (approximate "none"), Tanh,
 * Sigmoid, SiLU, and Flatten (start_dim 1, end_dim -1). */
enum tn_nn_activation {
    TN_NN_RELU,
    TN_NN_GELU,
    TN_NN_TANH,
    TN_NN_SIGMOID,
    TN_NN_SILU,
    TN_NN_FLATTEN
};
struct tn_module *tn_nn_activation_new(enum tn_nn_activation kind);

/* Sequential(*modules): takes over the n modules (also on failure). */
struct tn_module *tn_nn_sequential_new(struct tn_module *const *modules, int n);

/* ------------------------------------------------------------------ losses */

/* The losses take torch.nn.functional's reduction as enum tn_reduction
 * (tensor/core.h). */

/* F.nll_loss(input [N, C] log-probabilities, target [N] int64, weight [C]
 * or NULL, reduction, ignore_index (-100 is PyTorch's default)). */
struct tn_tensor *tn_nn_nll_loss(const struct tn_tensor *input, const struct tn_tensor *target,
                                 const struct tn_tensor *weight, enum tn_reduction reduction,
                                 int64_t ignore_index);
/* F.cross_entropy over class indices: log_softmax over dim 1, then nll_loss. */
struct tn_tensor *tn_nn_cross_entropy(const struct tn_tensor *input,
                                      const struct tn_tensor *target,
                                      const struct tn_tensor *weight,
                                      enum tn_reduction reduction, int64_t ignore_index);
/* F.mse_loss(input, target) (same shapes). */
struct tn_tensor *tn_nn_mse_loss(const struct tn_tensor *input, const struct tn_tensor *target,
                                 enum tn_reduction reduction);
/* F.binary_cross_entropy_with_logits(input, target) (same shapes):
 * (1 - target) * input + softplus(-input). */
struct tn_tensor *tn_nn_bce_with_logits(const struct tn_tensor *input,
                                        const struct tn_tensor *target,
                                        enum tn_reduction reduction);
/* F.binary_cross_entropy(input, target, weight) (same shapes; weight NULL
 * or broadcast to the input): -weight (target log(input) + (1 - target)
 * log(1 - input)), each log clamped at -100; inputs and targets outside
 * [0, 1] are errors. */
struct tn_tensor *tn_nn_bce(const struct tn_tensor *input, const struct tn_tensor *target,
                            const struct tn_tensor *weight, enum tn_reduction reduction);

/* ---------------------------------- state_dict (lib/nn/state_dict.c) */

struct tn_value;

/* model.state_dict(): an OrderedDict of name -> tensor (detached, sharing
 * the parameters' storage, as PyTorch's) for tn_save, so that
 * torch.load(weights_only=True) opens the file and model.load_state_dict
 * accepts it.  NULL with an error. */
struct tn_value *tn_module_state_dict(struct tn_module *m);
/* model.load_state_dict(sd, strict): copies each tensor of a DICT/ODICT
 * into the slot of the same name.  strict: every slot must be present and
 * no other key (PyTorch's "Missing key(s) in state_dict: ..." and
 * "Unexpected key(s) in state_dict: ..."); shapes must match ("size
 * mismatch for 0.weight: copying a param with shape [..] from checkpoint,
 * the shape in current model is [..]."). Returns 0 or an error. */
int tn_module_load_state_dict(struct tn_module *m, const struct tn_value *sd, bool strict);

#ifdef __cplusplus
}
#endif
#endif
