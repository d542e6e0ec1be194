/*
 * ops/nn_internal.h: what the nn kernels (lib/ops/nn*.c, cpu/nn*.c) share.
 * Most of them compute in float64 over contiguous copies and round once
 * into the input's dtype, which serves float16, bfloat16, float32 and
 * float64 with one loop; convolution and layer_norm have float32 paths.
 */
#ifndef TN_OPS_NN_INTERNAL_H
#define TN_OPS_NN_INTERNAL_H

#include "ops/internal.h"

/* A new contiguous float64 copy of t; NULL with an error. NULL t gives
 * NULL without one (an absent optional tensor). */
struct tn_tensor *tn__nn_f64(const struct tn_tensor *t);

/* t itself (retained) when it is contiguous and of dtype, else a new
 * contiguous copy in dtype; NULL for NULL. */
struct tn_tensor *tn__nn_as(const struct tn_tensor *t, enum tn_dtype dtype);

/* r (float64, released) as a new tensor of `dtype`; NULL passes through. */
struct tn_tensor *tn__nn_to(struct tn_tensor *r, enum tn_dtype dtype);

/* A new float64 tensor of zeros of the given shape. */
struct tn_tensor *tn__nn_zeros64(const int64_t *sizes, int ndim);

/* x * v and x + v for a Python float v: a float64 wrapped number, as
 * PyTorch wraps one, so that float64 inputs keep every digit. */
struct tn_tensor *tn__nn_scale(const struct tn_tensor *x, double v);
struct tn_tensor *tn__nn_plus(const struct tn_tensor *x, double v);

/* Releases up to 8 tensors (NULL fine); returns rc, for error paths. */
int tn__nn_drop(int rc, struct tn_tensor *a, struct tn_tensor *b, struct tn_tensor *c,
                struct tn_tensor *d);

/* x itself (retained) for reduction none, else its mean or sum
 * (lib/ops/nn_loss.c). */
struct tn_tensor *tn__nn_reduce_loss(struct tn_tensor *x, int64_t reduction);

/* The geometry of a pool over n = 2 (H, W) or 3 (T, H, W) spatial dims:
 * per spatial dim i the kernel, stride, padding, dilation (1 for the
 * average pools), input and output sizes; planes is the channel count,
 * size(-n - 1). */
struct tn__pool {
    int n;
    int64_t planes;
    int64_t k[3], s[3], p[3], d[3], in[3], out[3];
};

/* The pooling op whose arguments are checked: PyTorch words and orders
 * each one's checks a little differently. */
enum tn__pool_kind { TN_POOL_MAX2D, TN_POOL_AVG2D, TN_POOL_MAX3D, TN_POOL_AVG3D };

/* Checks a pool's arguments (lists of lengths nks, nst (0: the kernel),
 * npd, ndl; dl and ndl unused by the average pools, divisor_override by
 * the max pools; NULL for none) against self's shape as PyTorch 2.x does,
 * in its order and words (lib/ops/nn.c), and fills *g: 0, or a negative
 * status with the error set. The forward and backward kernels of
 * max_pool2d, avg_pool2d (cpu/nn_pool.c), max_pool3d and avg_pool3d
 * (nn.c) all start here. */
int tn__pool_check(enum tn__pool_kind kind, const struct tn_tensor *self, const int64_t *ks,
                   int nks, const int64_t *st, int nst, const int64_t *pd, int npd,
                   const int64_t *dl, int ndl, bool ceil_mode, const int64_t *divisor_override,
                   struct tn__pool *g);

/* max_pool2d's values without its indices (lib/ops/cpu/nn_pool.c) for a
 * float32 CPU input at dilation 1: a new tensor, or NULL with an error;
 * *handled false (and NULL) for the cases it leaves to the kernel with
 * indices, errors included. */
struct tn_tensor *tn__cpu_max_pool2d_values(const struct tn_tensor *self,
                                            const int64_t *kernel_size, int kernel_size_len,
                                            const int64_t *stride, int stride_len,
                                            const int64_t *padding, int padding_len,
                                            const int64_t *dilation, int dilation_len,
                                            bool ceil_mode, bool *handled);

/* The checks of a transposed convolution (channels, groups, stride,
 * padding, dilation, output padding, output size, as PyTorch words them)
 * and its output sizes osz (N, C_out, spatial...); *extra: whether the
 * regular convolution over osz gives more than the input's positions (an
 * output padding that reaches its stride), ext[i] those positions per dim
 * (3 at most). For every transposed convolution, cpu/conv3d.c's and
 * cpu/nn_conv.c's. */
int tn__conv_transposed_shape(const struct tn_tensor *input, const struct tn_tensor *weight,
                              const int64_t *stride, int stride_len, const int64_t *padding,
                              int padding_len, const int64_t *dilation, int dilation_len,
                              const int64_t *output_padding, int output_padding_len,
                              int64_t groups, int64_t *osz, int64_t *ext, bool *extra);

/* convolution and convolution_backward with transposed=True, for the
 * kernels of lib/ops/cpu/nn_conv.c (at its end). */
struct tn_tensor *tn__nn_conv_transposed(const struct tn_tensor *input,
                                         const struct tn_tensor *weight,
                                         const struct tn_tensor *bias, const int64_t *stride,
                                         int stride_len, const int64_t *padding, int padding_len,
                                         const int64_t *dilation, int dilation_len,
                                         const int64_t *output_padding, int output_padding_len,
                                         int64_t groups);
int tn__nn_conv_transposed_backward(const struct tn_tensor *grad_output,
                                    const struct tn_tensor *input,
                                    const struct tn_tensor *weight, const int64_t *stride,
                                    int stride_len, const int64_t *padding, int padding_len,
                                    const int64_t *dilation, int dilation_len,
                                    const int64_t *output_padding, int output_padding_len,
                                    int64_t groups, const bool *output_mask,
                                    struct tn_tensor **result0, struct tn_tensor **result1,
                                    struct tn_tensor **result2);

/* The 1-D and 2-D CPU kernels of convolution and convolution_backward
 * (cpu/nn_conv.c), which tn__cpu_convolution_nd and
 * tn__cpu_convolution_backward_nd (cpu/conv3d.c, the registered kernels)
 * hand what they do not take themselves. */
struct tn_tensor *tn__cpu_convolution(tn_keyset ks, const struct tn_tensor *input,
                                      const struct tn_tensor *weight, const struct tn_tensor *bias,
                                      const int64_t *stride, int stride_len,
                                      const int64_t *padding, int padding_len,
                                      const int64_t *dilation, int dilation_len, bool transposed,
                                      const int64_t *output_padding, int output_padding_len,
                                      int64_t groups);
int tn__cpu_convolution_backward(tn_keyset ks, const struct tn_tensor *grad_output,
                                 const struct tn_tensor *input, const struct tn_tensor *weight,
                                 const int64_t *bias_sizes, int bias_sizes_len,
                                 const int64_t *stride, int stride_len, const int64_t *padding,
                                 int padding_len, const int64_t *dilation, int dilation_len,
                                 bool transposed, const int64_t *output_padding,
                                 int output_padding_len, int64_t groups, const bool *output_mask,
                                 int output_mask_len, struct tn_tensor **result0,
                                 struct tn_tensor **result1, struct tn_tensor **result2);

/* Floating dtypes only: PyTorch's "\"name\" not implemented for 'Long'". */
int tn__nn_check_float(const char *kernel, const struct tn_tensor *t);
/* 0, or PyTorch's '"kernel" not implemented for 'Int'' unless ok */
int tn__nn_check_dtype(const char *kernel, enum tn_dtype dtype, bool ok);
int tn__nn_check_loss_dtype(const char *kernel, const struct tn_tensor *self,
                            const struct tn_tensor *target);

/* One value of an int[] argument (stride, padding, ...) for spatial dim i:
 * PyTorch expands a single value to every dim; def when there is none. */
static inline int64_t tn__nn_param(const int64_t *v, int len, int i, int64_t def)
{
    return len <= 0 ? def : v[len == 1 ? 0 : i];
}

/* Intermediate tensors of a decomposition, released together at the end:
 * TN_KEEP(k, x, tn_mul(a, b)) leaves x owned by k or jumps to `fail`. */
struct tn_keep {
    struct tn_tensor *t[32];
    int n;
};
static inline struct tn_tensor *tn__keep(struct tn_keep *k, struct tn_tensor *t)
{
    if (t) {
        TN_ASSERT(k->n < 32);
        k->t[k->n++] = t;
    }
    return t;
}
#define TN_KEEP(k, var, expr)                                                                  \
    do {                                                                                       \
        if (!((var) = tn__keep((k), (expr))))                                                  \
            goto fail;                                                                         \
    } while (0)
static inline void tn__keep_free(struct tn_keep *k)
{
    while (k->n > 0)
        tn_release(k->t[--k->n]);
}
/* The result r kept by k, retained for the caller, with k emptied. */
static inline struct tn_tensor *tn__keep_out(struct tn_keep *k, struct tn_tensor *r)
{
    tn_retain(r);
    tn__keep_free(k);
    return r;
}

/* grid sampling (ops/cpu/nn_grid_sample.c), for grid_sampler_3d: PyTorch's
 * checks of grid_sampler_2d (nd 4) or _3d (nd 5), 0 or an error; and a
 * grid coordinate in [-1, 1] to a source index of a dim of `size` with
 * padding 0 zeros, 1 border, 2 reflection, *g its derivative. */
int tn__gs_check(const struct tn_tensor *input, const struct tn_tensor *grid,
                 int64_t interpolation_mode, int64_t padding_mode, int nd);
double tn__gs_source_index(double c, int64_t size, int padding, bool align, double *g);
/* bicubic's pieces: the coordinate unpadded (*g its derivative), the four
 * taps' cubic weights at fraction t and their derivatives, a tap's padded
 * index (-1: it reads a zero) */
double tn__gs_unnormalize(double c, int64_t size, bool align, double *g);
void tn__gs_cubic_coeffs(double c[4], double t);
void tn__gs_cubic_coeffs_grad(double c[4], double t);
int64_t tn__gs_tap1(int64_t x, int64_t size, int padding, bool align);
/* Contiguous float64 copies of input and grid, and a float64 output of
 * zeros of osz (nd dims): 0, or an error with none of them kept. */
int tn__gs_f64(const struct tn_tensor *input, const struct tn_tensor *grid, const int64_t *osz,
               int nd, struct tn_tensor **x, struct tn_tensor **gr, struct tn_tensor **out);
/* The backward's results: gin and ggr (float64, owned: each released or
 * passed on) into dt where wanted, NULL where not; 0 or an error with both
 * NULL. */
int tn__gs_results(struct tn_tensor *gin, struct tn_tensor *ggr, bool want_in, bool want_grid,
                   enum tn_dtype dt, struct tn_tensor **result0, struct tn_tensor **result1);
/* The float16 / bfloat16 forward (ops/cpu/nn_grid_sample16.c) of checked
 * 4-D (any mode) or 5-D (bilinear, nearest) CPU input and grid: each step
 * rounded into the dtype as PyTorch's kernels do; NULL with an error. */
struct tn_tensor *tn__gs_forward16(const struct tn_tensor *input, const struct tn_tensor *grid,
                                   int mode, int pad, bool align);

#endif
