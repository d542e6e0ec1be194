/*
 * bench/bench.h: timing helpers shared by the C benchmarks. A figure is
 * always a ratio against a baseline timed in the same run.
 */
#ifndef TN_BENCH_H
#define TN_BENCH_H

#include <stdio.h>
#include <time.h>

static inline double tn_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The best (lowest) time of `reps` runs of `stmt`, in seconds. */
#define TN_BENCH_BEST(reps, result, stmt)                                      \
    do {                                                                       \
        double best_ = 1e30;                                                   \
        for (int r_ = 0; r_ < (reps); r_++) {                                  \
            double t0_ = tn_bench_now();                                       \
            stmt;                                                              \
            double dt_ = tn_bench_now() - t0_;                                 \
            if (dt_ < best_)                                                   \
                best_ = dt_;                                                   \
        }                                                                      \
        (result) = best_;                                                      \
    } while (0)

#endif
