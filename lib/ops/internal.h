/*
 * ops/internal.h: what the op modules share (never installed).
 */
#ifndef TN_OPS_INTERNAL_H
#define TN_OPS_INTERNAL_H

#define TN_OPS_NATIVE
#include <tensor/ops.h>

#include "core/internal.h"

/* The elementwise binary ops the CPU kernels know. */
enum tn_binop {
    TN_BINOP_ADD, TN_BINOP_SUB, TN_BINOP_MUL, TN_BINOP_DIV, TN_BINOP_DIV_TRUNC,
    TN_BINOP_DIV_FLOOR, TN_BINOP_EQ, TN_BINOP_NE, TN_BINOP_LT, TN_BINOP_LE, TN_BINOP_GT,
    TN_BINOP_GE, TN_BINOP_MAXIMUM, TN_BINOP_MINIMUM, TN_BINOP_REMAINDER, TN_BINOP_FMOD,
    TN_BINOP_POW, TN_BINOP_ATAN2, TN_BINOP_LAND, TN_BINOP_LOR, TN_BINOP_LXOR, TN_BINOP_BAND,
    TN_BINOP_BOR, TN_BINOP_BXOR,
    TN_BINOP_ADD1, TN_BINOP_SUB1, /* alpha 1: plain x + y, which vectorises without FMA */
    TN_NUM_BINOPS
};

/* The common dtype of two operands (torch.result_type), a tensor marked
 * TN_TENSOR_WRAPPED_NUMBER counting as a Python scalar. */
enum tn_dtype tn__binary_dtype(const struct tn_tensor *a, const struct tn_tensor *b);

/* out = op(a, b) on the CPU, a and b broadcast to out's shape and computed
 * in `compute` (a's and b's common dtype); out has the op's result dtype.
 * alpha scales b for add/sub. 0 or an error. */
int tn__cpu_binary(enum tn_binop op, const struct tn_tensor *a, const struct tn_tensor *b,
                   struct tn_scalar alpha, enum tn_dtype compute, struct tn_tensor *out);

/* Which dims of self a reduction over `dim` (NULL or empty: all) covers,
 * into mask[TN_MAX_DIMS]; 0 or PyTorch's error for a bad or repeated dim. */
int tn__reduce_mask(const char *op, const struct tn_tensor *self, const int64_t *dim, int dim_len,
                    bool *mask);

/* A 0-dim wrapped-number tensor holding s. */
struct tn_tensor *tn__wrapped_scalar(struct tn_scalar s);

/* The C++ type name PyTorch prints for a dtype in some checks
 * (caffe2::TypeMeta: "float", "c10::Half"), lib/ops/binary.c. */
const char *tn__dtype_meta_name(enum tn_dtype dt);

/* Kernels for x86-64 CPUs with AVX2 and FMA, picked at run time (the
 * build targets plain x86-64): TN_AVX2 marks such a function (include
 * <immintrin.h> for its intrinsics) and tn__have_avx2() says whether this
 * CPU runs it. */
#if defined(__x86_64__) && defined(__GNUC__)
#define TN_HAVE_AVX2 1
#define TN_AVX2 __attribute__((target("avx2,fma")))
static inline bool tn__have_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* The sum of n contiguous float32, and the sum of their squared distances
 * from c, in float64 over blocks of float32 lanes (lib/ops/cpu/reduce.c);
 * only where tn__have_avx2(). */
/* fn over [0, n) on the thread pool with OpenBLAS single-threaded inside
 * (lib/ops/cpu/linalg.c) */
void tn__blas_parallel_for(int64_t n, int64_t grain, tn_range_fn fn, void *ctx);
TN_AVX2 double tn__sum_f32_avx2(const float *x, int64_t n);
TN_AVX2 double tn__sqdev_f32_avx2(const float *x, int64_t n, float c);
#endif

#endif
