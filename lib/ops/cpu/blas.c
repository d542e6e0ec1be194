/*
 * ops/cpu/blas.c: OpenBLAS's threading, owned in one place.
 *
 * OpenBLAS (the pthreads build) starts its worker threads in its load-time
 * constructor, and each spins a while waiting for work: a process that
 * never multiplies a matrix (tckpt ls, a checkpoint conversion) paid for
 * them in CPU time.  Our constructor, which runs after OpenBLAS's (a
 * library's constructors run after those of the libraries it needs), stops
 * them again with blas_thread_shutdown_; OpenBLAS starts them anew at the
 * first threaded call (its exec_blas checks blas_server_avail).  The symbol
 * is taken weakly: an OpenBLAS without it (the OpenMP build) keeps its
 * behaviour.
 */
#include <config.h>

#include <cblas.h>

#include "ops/internal.h"

int blas_thread_shutdown_(void) __attribute__((weak));

__attribute__((constructor)) static void blas_lazy_workers(void)
{
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

/* fn over [0, n) on the pool with OpenBLAS single-threaded inside it (its
 * own workers spin after each call and would take the cores the tasks
 * want), then OpenBLAS gets tn_get_num_threads() threads back for its
 * other callers. */
void tn__blas_parallel_for(int64_t n, int64_t grain, tn_range_fn fn, void *ctx)
{
    openblas_set_num_threads(1);
    tn_parallel_for(n, grain, fn, ctx);
    openblas_set_num_threads(tn_get_num_threads());
}
