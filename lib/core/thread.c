/*
 * core/thread.c: the kernels' thread pool and tn_parallel_for.
 *
 * One persistent pool; a job is split into chunks that workers (and the
 * calling thread) take with an atomic counter.  One job runs at a time: a
 * second caller, or a call from inside a job, runs inline instead of waiting.
 */
#include "core/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define TN_MAX_THREADS 256

static pthread_mutex_t tn_pool_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t tn_pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards the fields below */
static pthread_cond_t tn_pool_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t tn_pool_done = PTHREAD_COND_INITIALIZER;
static int tn_pool_started;  /* workers created so far */
static int tn_num_threads;   /* 0 until first asked */
static uint64_t tn_pool_generation;

static struct {
    tn_range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    int64_t next;    /* atomic: the next chunk to take */
    int64_t pending; /* chunks not finished yet; guarded by tn_pool_mu */
    int active;      /* workers inside the job; guarded by tn_pool_mu */
    int helpers;     /* workers asked to join this job */
} tn_job;

/* Whether this thread runs a job's chunks (a worker, or the caller while
 * it helps): a tn_parallel_for nested inside runs inline instead of
 * waiting on the pool it is part of. */
static _Thread_local bool tn_in_pool;

static int tn_default_threads(void)
{
    const char *env = getenv("TN_NUM_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1 && v <= TN_MAX_THREADS)
            return (int)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > TN_MAX_THREADS ? TN_MAX_THREADS : (int)n;
}

int tn_get_num_threads(void)
{
    int n = __atomic_load_n(&tn_num_threads, __ATOMIC_ACQUIRE);
    if (n == 0) {
        n = tn_default_threads();
        __atomic_store_n(&tn_num_threads, n, __ATOMIC_RELEASE);
    }
    return n;
}

void tn_set_num_threads(int n)
{
    if (n < 1)
        n = 1;
    if (n > TN_MAX_THREADS)
        n = TN_MAX_THREADS;
    __atomic_store_n(&tn_num_threads, n, __ATOMIC_RELEASE);
}

/* Takes chunks until none are left; returns how many this thread ran. */
static int64_t tn_run_chunks(void)
{
    int64_t done = 0;
    for (;;) {
        int64_t c = __atomic_fetch_add(&tn_job.next, 1, __ATOMIC_ACQ_REL);
        if (c >= tn_job.nchunks)
            return done;
        int64_t b = c * tn_job.chunk;
        int64_t e = b + tn_job.chunk < tn_job.n ? b + tn_job.chunk : tn_job.n;
        tn_job.fn(b, e, tn_job.ctx);
        done++;
    }
}

/* Accounts finished chunks; the caller holds tn_pool_mu. */
static void tn_finish_chunks(int64_t done)
{
    tn_job.pending -= done;
    if (tn_job.pending == 0 && tn_job.active == 0)
        pthread_cond_broadcast(&tn_pool_done);
}

static void *tn_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    tn_in_pool = true;
    pthread_mutex_lock(&tn_pool_mu);
    for (;;) {
        while (tn_pool_generation == seen || id >= tn_job.helpers) {
            seen = tn_pool_generation;
            pthread_cond_wait(&tn_pool_wake, &tn_pool_mu);
        }
        /* A worker stays counted as active until it is out of the job, so
         * the next job is never set up under its feet. */
        seen = tn_pool_generation;
        tn_job.active++;
        pthread_mutex_unlock(&tn_pool_mu);
        int64_t done = tn_run_chunks();
        pthread_mutex_lock(&tn_pool_mu);
        tn_job.active--;
        tn_finish_chunks(done);
    }
    return NULL;
}

/* Starts workers up to `want` (the caller holds tn_pool_lock). Returns how
 * many exist. */
static int tn_pool_grow(int want)
{
    while (tn_pool_started < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, tn_worker, (void *)(intptr_t)tn_pool_started);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        tn_pool_started++;
    }
    return tn_pool_started;
}

void tn_parallel_for(int64_t n, int64_t grain, tn_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    int nt = tn_get_num_threads();
    if (grain < 1)
        grain = 1;
    if (nt <= 1 || n <= grain || tn_in_pool || pthread_mutex_trylock(&tn_pool_lock) != 0) {
        fn(0, n, ctx);
        return;
    }
    int64_t nchunks = (n + grain - 1) / grain;
    if (nchunks > nt)
        nchunks = nt;
    int helpers = tn_pool_grow((int)nchunks - 1);
    if (helpers == 0) {
        pthread_mutex_unlock(&tn_pool_lock);
        fn(0, n, ctx);
        return;
    }
    pthread_mutex_lock(&tn_pool_mu);
    while (tn_job.active > 0) /* a late worker still leaving the last job */
        pthread_cond_wait(&tn_pool_done, &tn_pool_mu);
    tn_job.fn = fn;
    tn_job.ctx = ctx;
    tn_job.n = n;
    tn_job.chunk = (n + nchunks - 1) / nchunks;
    tn_job.nchunks = (n + tn_job.chunk - 1) / tn_job.chunk;
    tn_job.next = 0;
    tn_job.pending = tn_job.nchunks;
    tn_job.helpers = helpers < (int)nchunks - 1 ? helpers : (int)nchunks - 1;
    tn_pool_generation++;
    pthread_cond_broadcast(&tn_pool_wake);
    pthread_mutex_unlock(&tn_pool_mu);

    tn_in_pool = true;
    int64_t done = tn_run_chunks();
    tn_in_pool = false;

    pthread_mutex_lock(&tn_pool_mu);
    tn_finish_chunks(done);
    while (tn_job.pending > 0 || tn_job.active > 0)
        pthread_cond_wait(&tn_pool_done, &tn_pool_mu);
    pthread_mutex_unlock(&tn_pool_mu);
    pthread_mutex_unlock(&tn_pool_lock);
}
