/*
 * nn/layers.c: the layers with parameters, and their initialisation as
 * torch.nn's reset_parameters() draws it.
 *
 * The draws are PyTorch's, in PyTorch's order (weight, then bias), through
 * the core generator, so a model built after tn_manual_seed(s) holds the
 * values torch.manual_seed(s) gives torch.nn.  The bounds are computed in
 * double as Python computes them (kaiming_uniform_ with a = sqrt(5) is
 * not quite 1/sqrt(fan_in): a**2 is 5.000000000000001).
 */
#include "core/internal.h"
#include "nn/internal.h"
#include <tensor/ops.h>

#include <math.h>
#include <stdlib.h>

/* A parameter tensor of `sizes` in the default dtype (uninitialised).  It
 * requires grad only once initialised (done()), as PyTorch initialises
 * under no_grad: autograd refuses in-place writes to such a leaf. */
static struct tn_tensor *param_new(const int64_t *sizes, int ndim)
{
    struct tn_tensor *t = tn_empty(sizes, ndim, tn_get_default_dtype());
    if (t)
        t->flags |= TN_TENSOR_PARAMETER;
    return t;
}

/* Marks the initialised parameters of m as requiring grad; returns m. */
static void *done(struct tn_module *m)
{
    for (int i = 0; i < m->nslots; i++) {
        struct tn_tensor *t = *m->slots[i].tensor;
        if (t && !m->slots[i].buffer)
            t->requires_grad = true;
    }
    return m;
}

static struct tn_tensor *param_filled(const int64_t *sizes, int ndim, double value)
{
    struct tn_tensor *t = param_new(sizes, ndim);
    if (t && tn_fill_(t, tn_float(value)) != 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

/* init.kaiming_uniform_(w, a=math.sqrt(5)) for fan_in inputs, then the
 * bias's U(-1/sqrt(fan_in), 1/sqrt(fan_in)) when there is one. */
static int init_kaiming(struct tn_tensor *w, struct tn_tensor *b, int64_t fan_in,
                        struct tn_generator *g)
{
    if (fan_in == 0)
        return tn_set_error(TN_EINVAL, "Initializing zero-element tensors is a no-op");
    double a = sqrt(5.0);
    double gain = sqrt(2.0 / (1 + pow(a, 2)));
    double stdv = gain / sqrt((double)fan_in);
    double bound = sqrt(3.0) * stdv;
    int rc = tn_uniform_(w, -bound, bound, g);
    if (rc == 0 && b) {
        double bb = 1 / sqrt((double)fan_in);
        rc = tn_uniform_(b, -bb, bb, g);
    }
    return rc;
}

/* Frees a half-built layer and returns NULL (the last error stays). */
static void *layer_fail(struct tn_module *m)
{
    enum tn_status st = tn_last_status();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tn_last_error());
    tn_module_free(m);
    tn_set_error(st ? st : TN_ENOMEM, "%s", msg);
    return NULL;
}

/* ---------------------------------------------------------------- Linear */

static struct tn_tensor *linear_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_linear *l = (struct tn_nn_linear *)m;
    return tn_linear(x, l->weight, l->bias);
}

struct tn_nn_linear *tn_nn_linear_new(int64_t in_features, int64_t out_features, bool bias,
                                      struct tn_generator *g)
{
    if (in_features < 0 || out_features < 0) {
        tn_set_error(TN_EINVAL, "Trying to create tensor with negative dimension %lld: [%lld, %lld]",
                     (long long)(in_features < 0 ? in_features : out_features),
                     (long long)out_features, (long long)in_features);
        return NULL;
    }
    struct tn_nn_linear *l =
        (struct tn_nn_linear *)tn__module_alloc(sizeof *l, "Linear", linear_forward);
    if (!l)
        return NULL;
    l->in_features = in_features;
    l->out_features = out_features;
    tn__module_slot(&l->base, "weight", &l->weight, false);
    tn__module_slot(&l->base, "bias", &l->bias, false);
    if (!(l->weight = param_new(TN_SHAPE(out_features, in_features))) ||
        (bias && !(l->bias = param_new(TN_SHAPE(out_features)))) ||
        init_kaiming(l->weight, l->bias, in_features, g) != 0)
        return layer_fail(&l->base);
    return done(&l->base);
}

/* ---------------------------------------------------------------- Conv2d */

static struct tn_tensor *conv2d_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_conv2d *c = (struct tn_nn_conv2d *)m;
    return tn__nn_conv2d(x, c->weight, c->bias, c->stride, c->padding, c->dilation, c->groups);
}

struct tn_nn_conv2d *tn_nn_conv2d_new(int64_t in_channels, int64_t out_channels,
                                      int64_t kernel_size, int64_t stride, int64_t padding,
                                      int64_t dilation, int64_t groups, bool bias,
                                      struct tn_generator *g)
{
    if (groups <= 0) {
        tn_set_error(TN_EINVAL, "groups must be a positive integer");
        return NULL;
    }
    if (in_channels % groups != 0) {
        tn_set_error(TN_EINVAL, "in_channels must be divisible by groups");
        return NULL;
    }
    if (out_channels % groups != 0) {
        tn_set_error(TN_EINVAL, "out_channels must be divisible by groups");
        return NULL;
    }
    if (kernel_size <= 0 || stride <= 0 || padding < 0 || dilation <= 0) {
        tn_set_error(TN_EINVAL, "Conv2d: kernel_size, stride and dilation must be positive "
                     "and padding non-negative");
        return NULL;
    }
    struct tn_nn_conv2d *c =
        (struct tn_nn_conv2d *)tn__module_alloc(sizeof *c, "Conv2d", conv2d_forward);
    if (!c)
        return NULL;
    c->in_channels = in_channels;
    c->out_channels = out_channels;
    c->kernel_size[0] = c->kernel_size[1] = kernel_size;
    c->stride[0] = c->stride[1] = stride;
    c->padding[0] = c->padding[1] = padding;
    c->dilation[0] = c->dilation[1] = dilation;
    c->groups = groups;
    tn__module_slot(&c->base, "weight", &c->weight, false);
    tn__module_slot(&c->base, "bias", &c->bias, false);
    int64_t cin = in_channels / groups;
    if (!(c->weight = param_new(TN_SHAPE(out_channels, cin, kernel_size, kernel_size))) ||
        (bias && !(c->bias = param_new(TN_SHAPE(out_channels)))) ||
        init_kaiming(c->weight, c->bias, cin * kernel_size * kernel_size, g) != 0)
        return layer_fail(&c->base);
    return done(&c->base);
}

/* ------------------------------------------------------------- Embedding */

static struct tn_tensor *embedding_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_embedding *e = (struct tn_nn_embedding *)m;
    return tn__nn_embedding(e->weight, x, e->padding_idx);
}

struct tn_nn_embedding *tn_nn_embedding_new(int64_t num_embeddings, int64_t embedding_dim,
                                            int64_t padding_idx, struct tn_generator *g)
{
    if (padding_idx != -1 && (padding_idx < -num_embeddings || padding_idx >= num_embeddings)) {
        tn_set_error(TN_EINVAL, "Padding_idx must be within num_embeddings");
        return NULL;
    }
    if (padding_idx < -1)
        padding_idx += num_embeddings;
    struct tn_nn_embedding *e =
        (struct tn_nn_embedding *)tn__module_alloc(sizeof *e, "Embedding", embedding_forward);
    if (!e)
        return NULL;
    e->num_embeddings = num_embeddings;
    e->embedding_dim = embedding_dim;
    e->padding_idx = padding_idx;
    tn__module_slot(&e->base, "weight", &e->weight, false);
    if (!(e->weight = param_new(TN_SHAPE(num_embeddings, embedding_dim))) ||
        tn_normal_(e->weight, 0.0, 1.0, g) != 0)
        return layer_fail(&e->base);
    if (padding_idx >= 0) {
        struct tn_tensor *row = tn_select(e->weight, 0, padding_idx);
        int rc = row ? tn_fill_(row, tn_float(0.0)) : -1;
        tn_release(row);
        if (rc)
            return layer_fail(&e->base);
    }
    return done(&e->base);
}

/* ------------------------------------------------------------- LayerNorm */

static struct tn_tensor *layer_norm_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_layer_norm *l = (struct tn_nn_layer_norm *)m;
    return tn__nn_layer_norm(x, l->normalized_shape, l->ndim, l->weight, l->bias, l->eps);
}

struct tn_nn_layer_norm *tn_nn_layer_norm_new(const int64_t *normalized_shape, int ndim,
                                              double eps, bool elementwise_affine)
{
    if (ndim < 1 || ndim > TN_MAX_DIMS) {
        tn_set_error(TN_EINVAL, "LayerNorm: normalized_shape must have 1 to %d dimensions",
                     TN_MAX_DIMS);
        return NULL;
    }
    struct tn_nn_layer_norm *l =
        (struct tn_nn_layer_norm *)tn__module_alloc(sizeof *l, "LayerNorm", layer_norm_forward);
    if (!l)
        return NULL;
    for (int i = 0; i < ndim; i++)
        l->normalized_shape[i] = normalized_shape[i];
    l->ndim = ndim;
    l->eps = eps;
    tn__module_slot(&l->base, "weight", &l->weight, false);
    tn__module_slot(&l->base, "bias", &l->bias, false);
    if (elementwise_affine && (!(l->weight = param_filled(normalized_shape, ndim, 1.0)) ||
                               !(l->bias = param_filled(normalized_shape, ndim, 0.0))))
        return layer_fail(&l->base);
    return done(&l->base);
}

/* ----------------------------------------------------------- BatchNorm2d */

static struct tn_tensor *batch_norm_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_batch_norm2d *b = (struct tn_nn_batch_norm2d *)m;
    if (x->ndim != 4) {
        tn_set_error(TN_ESHAPE, "expected 4D input (got %dD input)", x->ndim);
        return NULL;
    }
    if (m->training) {
        /* num_batches_tracked += 1; momentum is never None here */
        int64_t *n = tn_data(b->num_batches_tracked);
        (*n)++;
    }
    return tn__nn_batch_norm(x, b->weight, b->bias, b->running_mean, b->running_var,
                             m->training, b->momentum, b->eps);
}

struct tn_nn_batch_norm2d *tn_nn_batch_norm2d_new(int64_t num_features, double eps,
                                                  double momentum)
{
    struct tn_nn_batch_norm2d *b = (struct tn_nn_batch_norm2d *)tn__module_alloc(
        sizeof *b, "BatchNorm2d", batch_norm_forward);
    if (!b)
        return NULL;
    b->num_features = num_features;
    b->eps = eps;
    b->momentum = momentum;
    tn__module_slot(&b->base, "weight", &b->weight, false);
    tn__module_slot(&b->base, "bias", &b->bias, false);
    tn__module_slot(&b->base, "running_mean", &b->running_mean, true);
    tn__module_slot(&b->base, "running_var", &b->running_var, true);
    tn__module_slot(&b->base, "num_batches_tracked", &b->num_batches_tracked, true);
    enum tn_dtype dt = tn_get_default_dtype();
    if (!(b->weight = param_filled(TN_SHAPE(num_features), 1.0)) ||
        !(b->bias = param_filled(TN_SHAPE(num_features), 0.0)) ||
        !(b->running_mean = tn_zeros(TN_SHAPE(num_features), dt)) ||
        !(b->running_var = tn_ones(TN_SHAPE(num_features), dt)) ||
        !(b->num_batches_tracked = tn_zeros(NULL, 0, TN_INT64)))
        return layer_fail(&b->base);
    return done(&b->base);
}

/* ------------------------------------------------------------- MaxPool2d */

static struct tn_tensor *max_pool_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_max_pool2d *p = (struct tn_nn_max_pool2d *)m;
    const int64_t dil[2] = {1, 1};
    return tn_max_pool2d(x, p->kernel_size, 2, p->stride, 2, p->padding, 2, dil, 2, false);
}

struct tn_nn_max_pool2d *tn_nn_max_pool2d_new(int64_t kernel_size, int64_t stride,
                                              int64_t padding)
{
    if (kernel_size <= 0 || stride < 0 || padding < 0) {
        tn_set_error(TN_EINVAL, "MaxPool2d: kernel_size must be positive, stride and padding "
                     "non-negative");
        return NULL;
    }
    struct tn_nn_max_pool2d *p =
        (struct tn_nn_max_pool2d *)tn__module_alloc(sizeof *p, "MaxPool2d", max_pool_forward);
    if (p) {
        p->kernel_size[0] = p->kernel_size[1] = kernel_size;
        p->stride[0] = p->stride[1] = stride ? stride : kernel_size;
        p->padding[0] = p->padding[1] = padding;
    }
    return p;
}

/* --------------------------------------------------------------- Dropout */

static struct tn_tensor *dropout_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_nn_dropout *d = (struct tn_nn_dropout *)m;
    if (!m->training || d->p == 0)
        return tn_retain((struct tn_tensor *)x);
    if (d->p == 1)
        return tn_mul_scalar(x, tn_float(0.0));
    /* at::native::dropout: input * (bernoulli_(1 - p) / (1 - p)) */
    struct tn_tensor *noise = tn_empty_like(x, TN_DTYPE_UNSET), *scaled = NULL, *out = NULL;
    if (noise && tn_bernoulli_(noise, 1 - d->p, d->g) == 0 &&
        (scaled = tn_div_scalar(noise, tn_float(1 - d->p))))
        out = tn_mul(x, scaled);
    tn_release(noise);
    tn_release(scaled);
    return out;
}

struct tn_nn_dropout *tn_nn_dropout_new(double p, struct tn_generator *g)
{
    if (!(p >= 0 && p <= 1)) {
        char b[40];
        snprintf(b, sizeof b, "%g", p);
        tn_set_error(TN_EINVAL, "dropout probability has to be between 0 and 1, but got %s", b);
        return NULL;
    }
    struct tn_nn_dropout *d =
        (struct tn_nn_dropout *)tn__module_alloc(sizeof *d, "Dropout", dropout_forward);
    if (d) {
        d->p = p;
        d->g = g;
    }
    return d;
}
