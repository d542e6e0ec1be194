/*
 * lib/aoti/ops.c: the fallback op calls of the generated code
 * (c_shim_cpu.h's aoti_torch_cpu_*): what AOTInductor leaves to ATen on
 * the CPU rather than generating a kernel for, as matrix products,
 * convolutions and pooling, each run by libtensor's op.
 */
#include <string.h>

#include <tensor/ops.h>

#include "aoti/internal.h"

#define CHECK(t)                                                                                   \
    do {                                                                                           \
        if (tn__aoti_bad((t), __func__))                                                           \
            return AOTI_TORCH_FAILURE;                                                             \
    } while (0)

/* Whether a 4-dim tensor is laid out channels last (NHWC in memory), as
 * PyTorch's suggest_memory_format() tells it; sizes of 1 take any stride. */
static bool channels_last(const struct tn_tensor *t)
{
    if (!t || t->ndim != 4)
        return false;
    static const int order[4] = {1, 3, 2, 0}; /* fastest first */
    int64_t want = 1;
    for (int k = 0; k < 4; k++) {
        int d = order[k];
        if (t->sizes[d] != 1 && t->strides[d] != want)
            return false;
        want *= t->sizes[d];
    }
    return t->strides[1] == 1 && t->sizes[1] > 1;
}

/* r (released) with the given strides: itself when it has them, else a
 * copy laid out so, into *ret. */
static AOTITorchError restride(struct tn_tensor *r, const int64_t *strides, AtenTensorHandle *ret)
{
    if (!r || !memcmp(r->strides, strides, (size_t)r->ndim * sizeof *strides))
        return tn__aoti_ret(r, ret);
    struct tn_tensor *t = tn_empty_strided(r->sizes, r->ndim, strides, r->dtype);
    if (t && tn_copy_(t, r) < 0) {
        tn_release(t);
        t = NULL;
    }
    tn_release(r);
    return tn__aoti_ret(t, ret);
}

/* PyTorch's CPU convolution and pooling give a channels-last result for a
 * channels-last input (or weight), and AOTInductor's code reads the result
 * with that layout. */
static AOTITorchError ret_like(struct tn_tensor *r, bool last, AtenTensorHandle *ret)
{
    if (!r || !last || r->ndim != 4 || channels_last(r))
        return tn__aoti_ret(r, ret);
    const int64_t *n = r->sizes;
    int64_t st[4] = {n[1] * n[2] * n[3], 1, n[3] * n[1], n[1]};
    return restride(r, st, ret);
}

SHIM(aoti_torch_cpu_addmm_out, AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
     AtenTensorHandle mat2, double beta, double alpha)
{
    CHECK(out);
    return tn__aoti_rc(tn_addmm_out(self, mat1, mat2, tn__aoti_scalar(beta, out->dtype),
                                    tn__aoti_scalar(alpha, out->dtype), out));
}

SHIM(aoti_torch_cpu_mm_out, AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2)
{
    return tn__aoti_rc(tn_mm_out(self, mat2, out));
}

SHIM(aoti_torch_cpu_bmm_out, AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2)
{
    return tn__aoti_rc(tn_bmm_out(self, mat2, out));
}

SHIM(aoti_torch_cpu_baddbmm_out, AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle b1,
     AtenTensorHandle b2, double beta, double alpha)
{
    CHECK(out);
    struct tn_tensor *r = tn_baddbmm(self, b1, b2, tn__aoti_scalar(beta, out->dtype),
                                     tn__aoti_scalar(alpha, out->dtype));
    int rc = r ? tn_copy_(out, r) : -1;
    tn_release(r);
    return tn__aoti_rc(rc);
}

SHIM(aoti_torch_cpu_convolution, AtenTensorHandle input, AtenTensorHandle weight,
     AtenTensorHandle *bias, const int64_t *stride, int64_t stride_len, const int64_t *padding,
     int64_t padding_len, const int64_t *dilation, int64_t dilation_len, int32_t transposed,
     const int64_t *output_padding, int64_t output_padding_len, int64_t groups,
     AtenTensorHandle *ret0)
{
    return ret_like(tn_convolution(input, weight, bias ? *bias : NULL, stride, (int)stride_len,
                                   padding, (int)padding_len, dilation, (int)dilation_len,
                                   transposed != 0, output_padding, (int)output_padding_len,
                                   groups),
                    channels_last(input) || channels_last(weight), ret0);
}

SHIM(aoti_torch_cpu_max_pool2d_with_indices, AtenTensorHandle self, const int64_t *kernel_size,
     int64_t kernel_size_len, const int64_t *stride, int64_t stride_len, const int64_t *padding,
     int64_t padding_len, const int64_t *dilation, int64_t dilation_len, int32_t ceil_mode,
     AtenTensorHandle *ret0, AtenTensorHandle *ret1)
{
    struct tn_tensor *r0 = NULL, *r1 = NULL;
    if (tn_max_pool2d_with_indices(self, kernel_size, (int)kernel_size_len, stride, (int)stride_len,
                                   padding, (int)padding_len, dilation, (int)dilation_len,
                                   ceil_mode != 0, &r0, &r1) < 0)
        return AOTI_TORCH_FAILURE;
    bool last = channels_last(self);
    if (ret_like(r0, last, ret0)) {
        tn_release(r1);
        return AOTI_TORCH_FAILURE;
    }
    if (ret_like(r1, last, ret1)) {
        tn_release(*ret0);
        return AOTI_TORCH_FAILURE;
    }
    return AOTI_TORCH_SUCCESS;
}

SHIM(aoti_torch_cpu_avg_pool2d, AtenTensorHandle self, const int64_t *kernel_size,
     int64_t kernel_size_len, const int64_t *stride, int64_t stride_len, const int64_t *padding,
     int64_t padding_len, int32_t ceil_mode, int32_t count_include_pad, int64_t *divisor_override,
     AtenTensorHandle *ret0)
{
    return ret_like(tn_avg_pool2d(self, kernel_size, (int)kernel_size_len, stride, (int)stride_len,
                                  padding, (int)padding_len, ceil_mode != 0, count_include_pad != 0,
                                  divisor_override),
                    channels_last(self), ret0);
}

SHIM(aoti_torch_cpu__adaptive_avg_pool2d, AtenTensorHandle self, const int64_t *output_size,
     int64_t output_size_len, AtenTensorHandle *ret0)
{
    return ret_like(tn_adaptive_avg_pool2d(self, output_size, (int)output_size_len),
                    channels_last(self), ret0);
}

/* The layouts of PyTorch's CPU flash kernel, which the generated code reads
 * its results with: the output [B, H, L, E] is empty_like(query viewed as
 * [B, L, H, E]) transposed back (the query's strides when that view is
 * dense, else [B, L, H, E] contiguous, transposed), the logsumexp [B, H, L]
 * is [B, L, H] contiguous, transposed. libtensor's op gives these itself;
 * restride stays as the guard of that contract (a no-op when it holds). */
SHIM(aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu, AtenTensorHandle query,
     AtenTensorHandle key, AtenTensorHandle value, double dropout_p, int32_t is_causal,
     AtenTensorHandle *attn_mask, double *scale, AtenTensorHandle *ret0, AtenTensorHandle *ret1)
{
    struct tn_tensor *out = NULL, *lse = NULL;
    if (tn_underscore_scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal != 0, attn_mask ? *attn_mask : NULL, scale,
            &out, &lse) < 0)
        return AOTI_TORCH_FAILURE;
    if (out->ndim != 4 || lse->ndim != 3) {
        *ret0 = out;
        *ret1 = lse;
        return AOTI_TORCH_SUCCESS;
    }
    struct tn_tensor *q = tn_transpose(query, 1, 2), *e = q ? tn_empty_like(q, out->dtype) : NULL;
    const int64_t *n = out->sizes; /* B, H, L, E */
    int64_t want[4] = {e ? e->strides[0] : 0, e ? e->strides[2] : 0, e ? e->strides[1] : 0,
                       e ? e->strides[3] : 0};
    int64_t lse_want[3] = {n[1] * n[2], 1, n[1]};
    tn_release(q);
    tn_release(e);
    if (!e || restride(out, want, ret0)) {
        tn_release(lse);
        return AOTI_TORCH_FAILURE;
    }
    if (restride(lse, lse_want, ret1)) {
        tn_release(*ret0);
        return AOTI_TORCH_FAILURE;
    }
    return AOTI_TORCH_SUCCESS;
}
