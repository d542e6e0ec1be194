/*
 * core/thread.c: the kernels' thread pool and tn_parallel_for.
 *
 * One persistent pool; a job is split into chunks that workers (and the
 * calling thread) take with an atomic counter.  One job runs at a time: a
 * second caller, or a call from inside a job, runs inline instead of waiting.
 *
 * Waiting spins, then sleeps, as libgomp's workers do: waking a sleeping
 * thread (a futex call, then the scheduler) costs tens of microseconds, more
 * than half of a 128^3 product.  A worker done with a job polls for the next
 * one for a bounded time (tn_spin_ns, `pause` between looks) before it sleeps
 * on tn_pool_wake; the caller waiting for the job's last chunk polls the same
 * way before it sleeps on tn_pool_done.  After the bound every thread sleeps,
 * so an idle process costs nothing.  OMP_WAIT_POLICY (PASSIVE: sleep at once,
 * ACTIVE: spin a second) and TN_SPIN_US set the bound (libtensor(3)).
 *
 * The hot path takes no lock.  tn_pool_state publishes a job (generation,
 * workers asked, open bit) with a seq_cst store after its fields are written;
 * a worker counts itself in tn_job.active, then looks at the state again
 * (both seq_cst): either the caller closing the job and then reading active
 * before it rewrites the fields sees the worker, or the worker sees the job
 * closed.  A sleeper counts itself in a sleepers count, then re-checks its
 * condition (seq_cst); a waker writes the condition (seq_cst), then reads the
 * count: one of the two sees the other, so no wake-up is lost, and the
 * mutex the sleeper holds from its count to pthread_cond_wait keeps the
 * broadcast from falling between its check and its sleep.
 *
 * A fork leaves the child one thread: the pool's workers, and any thread
 * running a job, exist only in the parent, and a lock or sleepers count they
 * held is stale.  As PyTorch does, a pthread_atfork handler (set when the
 * first worker starts) makes the child forget the pool: every lock, count
 * and the job state start afresh, and the child's first parallel job starts
 * workers of its own.
 */
#include "core/internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define TN_MAX_THREADS 256
#define TN_SPIN_DEFAULT_NS ((int64_t)200 * 1000)     /* 200 us */
#define TN_SPIN_ACTIVE_NS ((int64_t)1000 * 1000 * 1000) /* OMP_WAIT_POLICY=ACTIVE: 1 s */
#define TN_SPIN_MAX_US ((int64_t)1000 * 1000 * 1000)   /* TN_SPIN_US at most 1000 s */

static pthread_mutex_t tn_pool_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t tn_pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* held by sleepers only */
static pthread_cond_t tn_pool_wake = PTHREAD_COND_INITIALIZER;   /* workers: a job posted */
static pthread_cond_t tn_pool_done = PTHREAD_COND_INITIALIZER;   /* caller: chunks or workers out */
static int tn_wake_sleepers, tn_done_sleepers; /* atomic: threads asleep (or going) on each */
static int tn_pool_started;  /* workers created so far; guarded by tn_pool_lock */
static int tn_num_threads;   /* 0 until first asked */
static uint64_t tn_pool_generation; /* jobs posted; guarded by tn_pool_lock */

/* The posted job, one atomic word: generation << 9 | helpers << 1 | open.
 * Workers 0 .. helpers-1 join an open job they have not run yet. */
static uint64_t tn_pool_state;
#define TN_STATE(gen, helpers, open) ((gen) << 9 | (uint64_t)(helpers) << 1 | (open))
#define TN_STATE_GEN(s) ((s) >> 9)
#define TN_STATE_HELPERS(s) ((int)((s) >> 1 & 0xff))

/* Written by the caller while no worker is counted in `active` and the job
 * is closed; read by workers between their count and their leaving. */
static struct {
    tn_range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    int64_t next;    /* atomic: the next chunk to take */
    int64_t pending; /* atomic: chunks not finished yet */
    int active;      /* atomic: workers looking at or inside the job */
} tn_job;

/* The spin bound (ns; atomic, as tests set it while workers read it), whether
 * the environment or a test set it, and the CPUs this process may run on. */
static struct {
    int64_t ns;
    bool set;
    int cpus;
} tn_spin;
static pthread_once_t tn_spin_once = PTHREAD_ONCE_INIT;

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

/* ------------------------------------------------------------ wait policy */

int64_t tn__thread_spin_env(void)
{
    int64_t ns = -1;
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (policy && !strcasecmp(policy, "passive"))
        ns = 0;
    else if (policy && !strcasecmp(policy, "active"))
        ns = TN_SPIN_ACTIVE_NS;
    const char *us = getenv("TN_SPIN_US");
    if (us && *us >= '0' && *us <= '9') {
        char *end;
        long long v = strtoll(us, &end, 10);
        if (!*end && v <= TN_SPIN_MAX_US)
            ns = (int64_t)v * 1000;
    }
    return ns;
}

static void tn_spin_configure(void)
{
    int64_t ns = tn__thread_spin_env();
    cpu_set_t cpus;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    tn_spin.cpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus)
                   : online < 1                                 ? 1
                                                                : (int)online;
    tn_spin.set = ns >= 0;
    __atomic_store_n(&tn_spin.ns, ns >= 0 ? ns : TN_SPIN_DEFAULT_NS, __ATOMIC_RELAXED);
}

/* The bound for a wait starting now. By default none when the pool has more
 * threads than the process has CPUs (libgomp's throttled spin): a spinner
 * would take the CPU the thread it waits for needs. */
static int64_t tn_spin_bound(void)
{
    pthread_once(&tn_spin_once, tn_spin_configure);
    if (!__atomic_load_n(&tn_spin.set, __ATOMIC_RELAXED) && tn_get_num_threads() > tn_spin.cpus)
        return 0;
    return __atomic_load_n(&tn_spin.ns, __ATOMIC_RELAXED);
}

int64_t tn__thread_spin(int64_t ns)
{
    pthread_once(&tn_spin_once, tn_spin_configure);
    int64_t old = __atomic_load_n(&tn_spin.ns, __ATOMIC_RELAXED);
    if (ns >= 0) {
        __atomic_store_n(&tn_spin.set, true, __ATOMIC_RELAXED);
        __atomic_store_n(&tn_spin.ns, ns, __ATOMIC_RELAXED);
    }
    return old;
}

static inline void tn_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t tn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A condition to wait for: ready(arg), with seq_cst loads. */
typedef bool (*tn_ready_fn)(void *arg);

/* Polls ready(arg) for the spin bound, with a pause between looks (the
 * clock read every 16th); whether it held. */
static bool tn_spin_until(tn_ready_fn ready, void *arg)
{
    int64_t bound = tn_spin_bound(), end = 0;
    if (bound <= 0)
        return ready(arg);
    for (unsigned i = 1;; i++) {
        if (ready(arg))
            return true;
        tn_cpu_relax();
        if (i % 16 == 0) {
            int64_t now = tn_now_ns();
            if (end == 0)
                end = now + bound;
            else if (now >= end)
                return ready(arg);
        }
    }
}

/* Waits until ready(arg): polls, then sleeps on cv. Whoever makes the
 * condition true does so with a seq_cst write, then calls tn_wake with the
 * same cv and count. */
static void tn_wait(tn_ready_fn ready, void *arg, pthread_cond_t *cv, int *sleepers)
{
    if (tn_spin_until(ready, arg))
        return;
    pthread_mutex_lock(&tn_pool_mu);
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    while (!ready(arg))
        pthread_cond_wait(cv, &tn_pool_mu);
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&tn_pool_mu);
}

/* Wakes the sleepers on cv, if any, after a seq_cst write made their
 * condition true. */
static void tn_wake(pthread_cond_t *cv, int *sleepers)
{
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) == 0)
        return;
    pthread_mutex_lock(&tn_pool_mu);
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(&tn_pool_mu);
}

/* ------------------------------------------------------------------- pool */

/* Takes chunks until none are left, then accounts them (waking the caller
 * when they were the last). */
static void tn_run_chunks(void)
{
    int64_t done = 0;
    for (;;) {
        int64_t c = __atomic_fetch_add(&tn_job.next, 1, __ATOMIC_RELAXED);
        if (c >= tn_job.nchunks)
            break;
        int64_t b = c * tn_job.chunk;
        int64_t e = b + tn_job.chunk < tn_job.n ? b + tn_job.chunk : tn_job.n;
        tn_job.fn(b, e, tn_job.ctx);
        done++;
    }
    if (done > 0 && __atomic_sub_fetch(&tn_job.pending, done, __ATOMIC_SEQ_CST) == 0)
        tn_wake(&tn_pool_done, &tn_done_sleepers);
}

static bool tn_chunks_done(void *arg)
{
    (void)arg;
    return __atomic_load_n(&tn_job.pending, __ATOMIC_SEQ_CST) == 0;
}

static bool tn_workers_out(void *arg)
{
    (void)arg;
    return __atomic_load_n(&tn_job.active, __ATOMIC_SEQ_CST) == 0;
}

/* A worker's look at the state: whether it holds a job for this worker. */
struct tn_look {
    int id;
    uint64_t seen;  /* the generation it ran last */
    uint64_t state; /* the state it saw */
};

static bool tn_job_for(void *arg)
{
    struct tn_look *w = arg;
    uint64_t s = __atomic_load_n(&tn_pool_state, __ATOMIC_SEQ_CST);
    w->state = s;
    return (s & 1) && TN_STATE_GEN(s) != w->seen && w->id < TN_STATE_HELPERS(s);
}

static void *tn_worker(void *arg)
{
    struct tn_look w = {(int)(intptr_t)arg, 0, 0};
    tn_in_pool = true;
    for (;;) {
        tn_wait(tn_job_for, &w, &tn_pool_wake, &tn_wake_sleepers);
        /* Counted first, then the job looked at again: a job still open now
         * keeps its fields until this worker leaves. */
        __atomic_fetch_add(&tn_job.active, 1, __ATOMIC_SEQ_CST);
        if (tn_job_for(&w)) {
            w.seen = TN_STATE_GEN(w.state);
            tn_run_chunks();
        }
        if (__atomic_sub_fetch(&tn_job.active, 1, __ATOMIC_SEQ_CST) == 0)
            tn_wake(&tn_pool_done, &tn_done_sleepers);
    }
    return NULL;
}

/* The child of a fork: the pool's threads, and whatever thread ran a job,
 * exist in the parent only, so the pool (locks, counts, posted job) starts
 * afresh and tn_pool_grow makes new workers on the first parallel job. */
static void tn_pool_forget(void)
{
    static const pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static const pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    tn_pool_lock = mu;
    tn_pool_mu = mu;
    tn_pool_wake = cv;
    tn_pool_done = cv;
    tn_wake_sleepers = tn_done_sleepers = 0;
    tn_pool_started = 0;
    tn_pool_state = TN_STATE(tn_pool_generation, 0, 0);
    tn_job.next = tn_job.pending = 0;
    tn_job.active = 0;
}

/* Before a fork: the wait policy read, so that no thread of the parent is
 * inside its pthread_once when the child is made. */
static void tn_pool_before_fork(void)
{
    pthread_once(&tn_spin_once, tn_spin_configure);
}

static void tn_pool_atfork(void)
{
    pthread_atfork(tn_pool_before_fork, NULL, tn_pool_forget);
}
static pthread_once_t tn_atfork_once = PTHREAD_ONCE_INIT;

/* Starts workers up to `want` (the caller holds tn_pool_lock). Returns how
 * many exist. */
static int tn_pool_grow(int want)
{
    if (want > 0)
        pthread_once(&tn_atfork_once, tn_pool_atfork);
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
    if (helpers > (int)nchunks - 1)
        helpers = (int)nchunks - 1;
    /* a late worker still looking at the last job */
    tn_wait(tn_workers_out, NULL, &tn_pool_done, &tn_done_sleepers);
    tn_job.fn = fn;
    tn_job.ctx = ctx;
    tn_job.n = n;
    tn_job.chunk = (n + nchunks - 1) / nchunks;
    tn_job.nchunks = (n + tn_job.chunk - 1) / tn_job.chunk;
    __atomic_store_n(&tn_job.next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&tn_job.pending, tn_job.nchunks, __ATOMIC_RELAXED);
    uint64_t gen = ++tn_pool_generation;
    __atomic_store_n(&tn_pool_state, TN_STATE(gen, helpers, 1), __ATOMIC_SEQ_CST);
    tn_wake(&tn_pool_wake, &tn_wake_sleepers);

    tn_in_pool = true;
    tn_run_chunks();
    tn_in_pool = false;

    tn_wait(tn_chunks_done, NULL, &tn_pool_done, &tn_done_sleepers);
    __atomic_store_n(&tn_pool_state, TN_STATE(gen, helpers, 0), __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&tn_pool_lock);
}
