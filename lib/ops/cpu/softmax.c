/*
 * ops/cpu/softmax.c: softmax and log_softmax along one dim on the CPU. Each
 * row (outer x inner positions, D elements apart by `inner`) takes its max,
 * the sum of exp(x - max) and then writes exp(x - max) / sum, or x - max -
 * log(sum); float16/bfloat16 compute in float, float64 in double. Rows are
 * split over the thread pool.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "ops/internal.h"

struct sjob {
    const char *in;
    char *out;
    int64_t D, inner;
    bool log;
};

#define LD_ID(v) (v)
#define ST_ID(d, v) ((d) = (v))
#define LD_H(v) tn_half_to_float(v)
#define ST_H(d, v) ((d) = tn_half_from_float(v))
#define LD_BF(v) tn_bfloat16_to_float(v)
#define ST_BF(d, v) ((d) = tn_bfloat16_from_float(v))

#define TN_SOFTMAX(SFX, T, CT, LD, ST, EXP, LOG)                                               \
    static void rows_##SFX(int64_t begin, int64_t end, void *ctx)                              \
    {                                                                                          \
        const struct sjob *j = ctx;                                                            \
        const T *in = (const T *)j->in;                                                        \
        T *out = (T *)j->out;                                                                  \
        for (int64_t r = begin; r < end; r++) {                                                \
            int64_t o = r / j->inner, i = r % j->inner;                                        \
            int64_t base = o * j->D * j->inner + i, st = j->inner;                             \
            CT mx = -INFINITY;                                                                 \
            for (int64_t d = 0; d < j->D; d++) {                                               \
                CT v = LD(in[base + d * st]);                                                  \
                mx = v > mx || isnan(v) ? v : mx;                                              \
            }                                                                                  \
            CT sum = 0;                                                                        \
            if (j->log) {                                                                      \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    sum += EXP(LD(in[base + d * st]) - mx);                                    \
                CT ls = LOG(sum);                                                              \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], LD(in[base + d * st]) - mx - ls);                   \
            } else if (sizeof(T) == sizeof(CT)) {                                              \
                /* exp once: keep it in out, then scale */                                    \
                for (int64_t d = 0; d < j->D; d++) {                                           \
                    CT e = EXP(LD(in[base + d * st]) - mx);                                    \
                    ST(out[base + d * st], e);                                                 \
                    sum += e;                                                                  \
                }                                                                              \
                CT inv = (CT)1 / sum;                                                          \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], LD(out[base + d * st]) * inv);                      \
            } else {                                                                           \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    sum += EXP(LD(in[base + d * st]) - mx);                                    \
                for (int64_t d = 0; d < j->D; d++)                                             \
                    ST(out[base + d * st], EXP(LD(in[base + d * st]) - mx) / sum);             \
            }                                                                                  \
        }                                                                                      \
    }
TN_SOFTMAX(f32, float, float, LD_ID, ST_ID, expf, logf)
TN_SOFTMAX(f64, double, double, LD_ID, ST_ID, exp, log)
TN_SOFTMAX(f16, tn_half, float, LD_H, ST_H, expf, logf)
TN_SOFTMAX(bf16, tn_bfloat16, float, LD_BF, ST_BF, expf, logf)

static int softmax(const struct tn_tensor *self, int64_t dim, bool log, struct tn_tensor *out)
{
    tn_range_fn fn = NULL;
    switch (self->dtype) {
    case TN_FLOAT32: fn = rows_f32; break;
    case TN_FLOAT64: fn = rows_f64; break;
    case TN_FLOAT16: fn = rows_f16; break;
    case TN_BFLOAT16: fn = rows_bf16; break;
    default: break;
    }
    int d = tn_wrap_dim(dim, self->ndim);
    if (d < 0)
        return tn_last_status();
    if (!fn)
        return tn_set_error(TN_EDTYPE, "\"%s%s\" not implemented for '%s'", log ? "log_softmax" : "softmax",
                            d == self->ndim - 1 ? "_lastdim_kernel_impl" : "_kernel_impl",
                            tn_dtype_info(self->dtype)->c10_name);
    if (tn_numel(out) == 0)
        return TN_OK;
    struct tn_tensor *in = tn_contiguous(self);
    struct tn_tensor *target = tn_is_contiguous(out) ? tn_retain(out) : tn_empty_like(in, TN_DTYPE_UNSET);
    if (!in || !target) {
        tn_release(in);
        tn_release(target);
        return tn_last_status();
    }
    struct sjob j = {tn_data(in), tn_data(target), 1, 1, log};
    int64_t outer = 1;
    for (int i = 0; i < self->ndim; i++) {
        if (i < d)
            outer *= self->sizes[i];
        else if (i == d)
            j.D = self->sizes[i];
        else
            j.inner *= self->sizes[i];
    }
    int64_t rows = outer * j.inner;
    int64_t grain = TN_PARALLEL_GRAIN / (j.D > 0 ? j.D : 1);
    tn_parallel_for(rows, grain > 0 ? grain : 1, fn, &j);
    int rc = target == out ? TN_OK : tn_copy_(out, target);
    tn_release(in);
    tn_release(target);
    return rc;
}

int tn__cpu_softmax_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim, bool half_to_float,
                        struct tn_tensor *out)
{
    return softmax(self, dim, false, out);
}

int tn__cpu_log_softmax_out(tn_keyset ks, const struct tn_tensor *self, int64_t dim,
                            bool half_to_float, struct tn_tensor *out)
{
    return softmax(self, dim, true, out);
}
