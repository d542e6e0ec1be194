/*
 * bench/compile/bench_skinny.c: a compiled program's product of a few
 * rows by a linear layer's weight (tn__skinny_mm, lib/compile/skinny.c)
 * against tn_mm (OpenBLAS's sgemm, what the interpreter's linear runs), at
 * 1 thread, over 24 distinct weights (ViT-B's MLP shapes: 226 MB at K 3072
 * N 768, out of every cache, as a model's forward reads them). The two
 * alternate, the best of 6 rounds each; TN_BENCH_CLOCK=thread counts CPU
 * time only, for a machine loaded by others. Prints ms and the ratio
 * (below 1: skinny is faster).
 */
#include <config.h>

#include <tensor/tensor.h>

#include "bench/bench.h"
#include "compile/internal.h"

#define NW 24

int main(void)
{
    static const int64_t shapes[][3] = {
        {5, 3072, 768}, {3, 3072, 768}, {8, 3072, 768}, {5, 2048, 512}, {2, 3072, 3072},
    };
    tn_set_num_threads(1);
    printf("%4s %6s %6s %12s %12s %8s\n", "M", "K", "N", "sgemm_ms", "skinny_ms", "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], K = tn_bench_size(shapes[s][1], 2048), N = shapes[s][2];
        int nw = (int)tn_bench_size(NW, 1);
        struct tn_tensor *a = tn_randn((int64_t[]){M, K}, 2, TN_FLOAT32, NULL), *w[NW];
        for (int i = 0; i < nw; i++)
            w[i] = tn_randn((int64_t[]){N, K}, 2, TN_FLOAT32, NULL);
        double best[2] = {1e30, 1e30};
        for (int round = 0; round < (tn_bench_quick() ? 1 : 6); round++)
            for (int v = 0; v < 2; v++) {
                double t0 = tn_bench_now();
                for (int i = 0; i < nw; i++) {
                    struct tn_tensor *wt = tn_transpose(w[i], 0, 1);
                    struct tn_tensor *r = v ? tn__skinny_mm(a, wt) : tn_mm(a, wt);
                    if (!r && v) /* no AVX-512: the baseline's figure */
                        r = tn_mm(a, wt);
                    if (!r) {
                        fprintf(stderr, "bench_skinny: %s\n", tn_last_error());
                        return 1;
                    }
                    tn_release(r);
                    tn_release(wt);
                }
                double t = tn_bench_now() - t0;
                best[v] = t < best[v] ? t : best[v];
            }
        printf("%4lld %6lld %6lld %12.3f %12.3f %8.2f\n", (long long)M, (long long)K, (long long)N,
               best[0] * 1e3, best[1] * 1e3, best[1] / best[0]);
        for (int i = 0; i < nw; i++)
            tn_release(w[i]);
        tn_release(a);
    }
    return 0;
}
