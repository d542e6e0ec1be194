/*
 * bench_pool: the thread pool's round trip under the wait policy the
 * environment sets (bench/core/pool.sh runs it under OMP_WAIT_POLICY=PASSIVE,
 * the old sleep-at-once behaviour, and under the default spin, and prints
 * the ratios). Prints five figures on one line, the best of many calls:
 *   two5_us   tn_parallel_for of 2 chunks of ~5 us of arithmetic each at
 *             2 threads
 *   one5_us   the same job at 1 thread (inline: the baseline)
 *   two20_us, one20_us  the same with chunks of ~20 us (half an mm 128^3)
 *   idle_ms   the process's CPU time over a 300 ms sleep after a burst
 *             of jobs (the workers must sleep: near 0)
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <tensor/tensor.h>

#include "../bench.h"

static int64_t iters; /* per chunk */

static void work(int64_t b, int64_t e, void *ctx)
{
    volatile double *sink = ctx;
    for (int64_t c = b; c < e; c++) {
        double x = (double)c;
        for (int64_t i = 0; i < iters; i++)
            x = x * 0.999999 + 1e-9;
        sink[c * 8] = x; /* each chunk its own cache line */
    }
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The best times of the 2-chunk job at 2 threads and at 1, with chunks of
 * `us` microseconds (per1: iterations a microsecond). */
static void job(double us, double per1, int reps, volatile double *sink, double *two, double *one)
{
    iters = (int64_t)(us * per1) > 0 ? (int64_t)(us * per1) : 1;
    tn_set_num_threads(2);
    TN_BENCH_BEST(reps, *two, tn_parallel_for(2, 1, work, (void *)sink));
    tn_set_num_threads(1);
    TN_BENCH_BEST(reps, *one, tn_parallel_for(2, 1, work, (void *)sink));
}

int main(void)
{
    volatile double sink[16];
    int reps = (int)tn_bench_size(1000, 1);
    iters = 1000;
    double t, two5, one5, two20, one20;
    TN_BENCH_BEST(20, t, work(0, 1, (void *)sink));
    double per1 = 1000 / (t > 0 ? t * 1e6 : 1e-3);
    job(5, per1, reps, sink, &two5, &one5);
    job(20, per1, reps, sink, &two20, &one20);

    tn_set_num_threads(2);
    for (int r = 0; r < reps; r++)
        tn_parallel_for(2, 1, work, (void *)sink);
    double c0 = cpu_now();
    struct timespec nap = {0, tn_bench_quick() ? 1000000 : 300000000};
    nanosleep(&nap, NULL);
    double idle = cpu_now() - c0;
    printf("%.2f %.2f %.2f %.2f %.3f\n", two5 * 1e6, one5 * 1e6, two20 * 1e6, one20 * 1e6,
           idle * 1e3);
    return 0;
}
