/*
 * bench_copy: copy_ of a non-contiguous 64 MiB float32 tensor into a
 * contiguous one, and a float32 -> bfloat16 conversion, each against memcpy
 * of the same bytes in the same run. Prints bandwidth ratios.
 */
#include <stdlib.h>
#include <string.h>

#include <tensor/tensor.h>

#include "../bench.h"

#define N 4096 /* 4096 x 4096 float32 = 64 MiB */

int main(void)
{
    const int reps = 7;
    size_t bytes = (size_t)N * N * sizeof(float);
    struct tn_tensor *src = tn_rand(TN_SHAPE(N, N), TN_FLOAT32, NULL);
    struct tn_tensor *dst = tn_empty(TN_SHAPE(N, N), TN_FLOAT32);
    struct tn_tensor *bf = tn_empty(TN_SHAPE(N, N), TN_BFLOAT16);
    struct tn_tensor *srct = tn_t(src);  /* a transposed (non-contiguous) view */
    struct tn_tensor *half_cols = tn_slice(src, 1, 0, TN_END, 2);
    struct tn_tensor *dst2 = tn_empty(TN_SHAPE(N, N / 2), TN_FLOAT32);
    if (!src || !dst || !bf || !srct || !half_cols || !dst2) {
        fprintf(stderr, "bench_copy: %s\n", tn_last_error());
        return 2;
    }
    double t_memcpy, t_memcpy_half, t_t, t_step, t_bf;
    memcpy(tn_data(dst), tn_data(src), bytes); /* fault the pages in */
    TN_BENCH_BEST(reps, t_memcpy, memcpy(tn_data(dst), tn_data(src), bytes));
    TN_BENCH_BEST(reps, t_memcpy_half, memcpy(tn_data(dst2), tn_data(src), bytes / 2));
    TN_BENCH_BEST(reps, t_t, tn_copy_(dst, srct));
    TN_BENCH_BEST(reps, t_step, tn_copy_(dst2, half_cols));
    TN_BENCH_BEST(reps, t_bf, tn_copy_(bf, src));
    double gbs = bytes / t_memcpy / 1e9;
    printf("threads: %d; memcpy of 64 MiB: %.2f GB/s\n", tn_get_num_threads(), gbs);
    printf("copy_ of a transposed 4096x4096 float32 view to contiguous: %.2f GB/s = %.2fx memcpy\n",
           bytes / t_t / 1e9, t_memcpy / t_t);
    printf("copy_ of x[:, ::2] (32 MiB) to contiguous: %.2f GB/s = %.2fx memcpy of 32 MiB\n",
           bytes / 2 / t_step / 1e9, t_memcpy_half / t_step);
    /* the conversion reads 64 MiB and writes 32 MiB: compare bytes moved */
    printf("float32 -> bfloat16 of 64 MiB: %.2f GB/s (read+write) = %.2fx memcpy bandwidth\n",
           bytes * 1.5 / t_bf / 1e9, (bytes * 1.5 / t_bf) / (2.0 * bytes / t_memcpy));
    tn_release(src);
    tn_release(dst);
    tn_release(bf);
    tn_release(srct);
    tn_release(half_cols);
    tn_release(dst2);
    return 0;
}
