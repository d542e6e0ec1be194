/*
 * bench/ops/bench_sdpa: one scaled_dot_product_attention workload for
 * bench/ops/sdpa.sh, which times PyTorch's on the same shapes and prints
 * the ratios. `bench_sdpa L fwd|train` runs query, key and value of
 * 1 x 8 heads x L x 64 float32 (S = L): the forward, or the forward and
 * the backward of its sum through autograd, and prints two numbers: the
 * best of 3 runs in milliseconds, and the peak memory of the first run
 * (after a warm-up at L = 128), in MiB above what the process held (VmHWM after resetting it through
 * /proc/self/clear_refs, less VmRSS before; -1 where /proc lacks them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/tensor.h>

#include "bench/bench.h"

/* VmRSS or VmHWM of this process in KiB, -1 if unknown */
static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool ok = f && fputs("5", f) >= 0;
    if (f)
        ok = fclose(f) == 0 && ok;
    return ok;
}

static int step(struct tn_tensor *const *in, bool train)
{
    struct tn_tensor *qkv[3];
    for (int i = 0; i < 3; i++) {
        qkv[i] = train ? tn_detach(in[i]) : tn_retain(in[i]);
        if (train && tn_requires_grad_(qkv[i], true) < 0)
            return -1;
    }
    struct tn_tensor *o = tn_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 0, false,
                                                          NULL, false);
    int rc = o ? 0 : -1;
    if (o && train) {
        struct tn_tensor *s = tn_sum(o, TN_DTYPE_UNSET);
        rc = s ? tn_backward(&s, 1, NULL, false, false) : -1;
        tn_release(s);
    }
    tn_release(o);
    for (int i = 0; i < 3; i++)
        tn_release(qkv[i]);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "fwd") != 0 && strcmp(argv[2], "train") != 0)) {
        fprintf(stderr, "usage: bench_sdpa L fwd|train\n");
        return 2;
    }
    int64_t L = strtoll(argv[1], NULL, 10);
    bool train = strcmp(argv[2], "train") == 0;
    struct tn_tensor *in[3], *warm[3];
    for (int i = 0; i < 3; i++) {
        in[i] = tn_randn(TN_SHAPE(1, 8, L, 64), TN_FLOAT32, NULL);
        warm[i] = tn_randn(TN_SHAPE(1, 8, 128, 64), TN_FLOAT32, NULL);
    }
    /* warm on L = 128: the thread pool and OpenBLAS's buffers exist
     * before the peak, and no page of this size's own run is resident */
    if (step(warm, train) < 0) {
        fprintf(stderr, "bench_sdpa: %s\n", tn_last_error());
        return 1;
    }
    long before = status_kib("VmRSS");
    bool peak_ok = reset_peak();
    if (step(in, train) < 0) {
        fprintf(stderr, "bench_sdpa: %s\n", tn_last_error());
        return 1;
    }
    long hwm = status_kib("VmHWM");
    double best;
    TN_BENCH_BEST(3, best, step(in, train));
    printf("%.2f %.1f\n", best * 1e3,
           peak_ok && hwm >= 0 && before >= 0 ? (double)(hwm - before) / 1024 : -1.0);
    for (int i = 0; i < 3; i++) {
        tn_release(in[i]);
        tn_release(warm[i]);
    }
    return 0;
}
