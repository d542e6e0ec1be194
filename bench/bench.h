/*
 * bench/bench.h: timing helpers shared by the C benchmarks. A figure is
 * always a ratio against a baseline timed in the same run.
 */
#ifndef TN_BENCH_H
#define TN_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock, or, with TN_BENCH_CLOCK=thread, the
 * calling thread's CPU time (1-thread figures on a machine loaded by
 * others: time spent preempted is not counted) */
static inline double tn_bench_now(void)
{
    static int thread = -1;
    if (thread < 0) {
        const char *c = getenv("TN_BENCH_CLOCK");
        thread = c && !strcmp(c, "thread");
    }
    struct timespec ts;
    clock_gettime(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether TN_BENCH_QUICK is set (and not 0): `make bench` in its quick
 * mode (tests/cli/bench.bats), which checks that every benchmark runs to
 * the end, with tiny sizes and one repeat; its figures mean nothing. */
static inline int tn_bench_quick(void)
{
    const char *q = getenv("TN_BENCH_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* `full`, or `quick` in the quick mode: a size or a count of iterations. */
static inline int64_t tn_bench_size(int64_t full, int64_t quick)
{
    return tn_bench_quick() ? quick : full;
}

/* The best (lowest) time of `reps` runs of `stmt`, in seconds (one run in
 * the quick mode). */
#define TN_BENCH_BEST(reps, result, stmt)                                      \
    do {                                                                       \
        double best_ = 1e30;                                                   \
        int reps_ = tn_bench_quick() ? 1 : (reps);                             \
        for (int r_ = 0; r_ < reps_; r_++) {                                   \
            double t0_ = tn_bench_now();                                       \
            stmt;                                                              \
            double dt_ = tn_bench_now() - t0_;                                 \
            if (dt_ < best_)                                                   \
                best_ = dt_;                                                   \
        }                                                                      \
        (result) = best_;                                                      \
    } while (0)

#endif
