/*
 * bench/ops/bench_fft.c: one FFT timed through libtensor's public entries,
 * for bench/ops/fft.sh (which times torch.fft on the same shapes and prints
 * the ratios). Usage: bench_fft KIND N [BATCH]; KIND is fft (complex64 in,
 * c2c), rfft (float32 in, r2c) or irfft (complex64 half spectrum in, c2r
 * of length N). Prints the best time of the repeats in microseconds.
 */
#include "bench/bench.h"

#include <tensor/tensor.h>

#include <math.h>
#include <stdbool.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_fft fft|rfft|irfft N [BATCH]\n");
        return 2;
    }
    const char *kind = argv[1];
    int64_t n = strtoll(argv[2], NULL, 10), batch = argc > 3 ? strtoll(argv[3], NULL, 10) : 1;
    if (n < 1 || batch < 1 || (strcmp(kind, "fft") && strcmp(kind, "rfft") && strcmp(kind, "irfft"))) {
        fprintf(stderr, "bench_fft: bad arguments\n");
        return 2;
    }
    bool c2r = !strcmp(kind, "irfft"), r2c = !strcmp(kind, "rfft");
    int64_t len = c2r ? n / 2 + 1 : n;
    struct tn_tensor *x = tn_randn(TN_SHAPE(batch, len), r2c ? TN_FLOAT32 : TN_COMPLEX64, NULL);
    if (!x) {
        fprintf(stderr, "bench_fft: %s\n", tn_last_error());
        return 1;
    }
    int64_t nn = n;
    /* enough repeats for about 0.3 s of work at 5 n log n ns */
    double work = 5e-9 * (double)(n * batch) * (log2((double)n) + 1);
    int reps = work > 0.1 ? 3 : (int)(0.3 / work) + 1;
    if (reps > 2000)
        reps = 2000;
    double best;
    /* a first call plans the length (torch's plan cache is warmed alike) */
    struct tn_tensor *r = r2c ? tn_fft_rfft(x, &nn, -1, NULL) : c2r ? tn_fft_irfft(x, &nn, -1, NULL)
                                                             : tn_fft_fft(x, &nn, -1, NULL);
    TN_BENCH_BEST(reps, best, {
        tn_release(r);
        r = r2c ? tn_fft_rfft(x, &nn, -1, NULL) : c2r ? tn_fft_irfft(x, &nn, -1, NULL)
                                                     : tn_fft_fft(x, &nn, -1, NULL);
        if (!r) {
            fprintf(stderr, "bench_fft: %s\n", tn_last_error());
            return 1;
        }
    });
    tn_release(r);
    tn_release(x);
    printf("%.3f\n", best * 1e6);
    return 0;
}
