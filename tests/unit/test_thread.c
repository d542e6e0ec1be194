/*
 * test_thread: the kernels' thread pool (lib/core/thread.c) under each wait
 * policy: every element of every job run once (jobs of one chunk to many,
 * fewer helpers than workers), callers on several threads at once, nested
 * calls inline, no wake-up lost at the edge of the spin, the policy read
 * from OMP_WAIT_POLICY and TN_SPIN_US, workers asleep once the pool is
 * idle, and a working pool of its own in the child of a fork (after a job,
 * and from a thread while another thread runs jobs).  No timing is asserted: a lost wake-up hangs (ttest's time limit
 * catches it), and the idle check waits as long as a loaded machine needs.
 */
#include "tn_test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

/* The bounds the tests run under: sleep at once, a microsecond (the edge
 * between spin and sleep met on most waits), the default. */
static const int64_t spins[] = {0, 1000, 200 * 1000};

static void count_range(int64_t b, int64_t e, void *arg)
{
    int64_t *marks = arg;
    for (int64_t i = b; i < e; i++)
        marks[i]++;
}

/* reps calls of tn_parallel_for(n, grain) over marks, then each mark
 * checked and cleared */
static void run_jobs(int64_t *marks, int64_t n, int64_t grain, int reps)
{
    for (int r = 0; r < reps; r++)
        tn_parallel_for(n, grain, count_range, marks);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(marks[i], reps);
    memset(marks, 0, (size_t)n * sizeof *marks);
}

static void test_every_element_once(void **state)
{
    (void)state;
    static const int64_t sizes[][2] = {{2, 1}, {3, 1}, {7, 2}, {1000, 1}, {100003, 1000}};
    int64_t *marks = calloc(100003, sizeof *marks);
    int64_t old = tn__thread_spin(-1);
    for (size_t s = 0; s < sizeof spins / sizeof *spins; s++) {
        tn__thread_spin(spins[s]);
        for (int threads = 2; threads <= 4; threads++) {
            tn_set_num_threads(threads);
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
                run_jobs(marks, sizes[k][0], sizes[k][1], sizes[k][0] < 1000 ? 500 : 20);
        }
    }
    tn__thread_spin(old);
    tn_set_num_threads(2);
    free(marks);
}

/* Callers on four threads at once: one gets the pool, the others run
 * inline, each call whole. */
static void *caller(void *arg)
{
    int64_t *marks = arg;
    for (int k = 0; k < 20; k++)
        run_jobs(marks, 4099, 1, 25);
    return NULL;
}

static void test_callers_at_once(void **state)
{
    (void)state;
    int64_t old = tn__thread_spin(-1);
    tn_set_num_threads(3);
    for (size_t s = 0; s < sizeof spins / sizeof *spins; s++) {
        tn__thread_spin(spins[s]);
        pthread_t th[4];
        int64_t *marks[4];
        for (int i = 0; i < 4; i++) {
            marks[i] = calloc(4099, sizeof *marks[i]);
            assert_int_equal(pthread_create(&th[i], NULL, caller, marks[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            assert_int_equal(pthread_join(th[i], NULL), 0);
            free(marks[i]);
        }
    }
    tn__thread_spin(old);
    tn_set_num_threads(2);
}

struct nest {
    int64_t *marks;
    int inline_; /* atomic: calls of inner_range (1: the inner job ran inline) */
};

static void inner_range(int64_t b, int64_t e, void *arg)
{
    struct nest *c = arg;
    (void)b, (void)e;
    __atomic_fetch_add(&c->inline_, 1, __ATOMIC_RELAXED);
}

static void outer_range(int64_t b, int64_t e, void *arg)
{
    struct nest *c = arg;
    for (int64_t i = b; i < e; i++) {
        struct nest one = {NULL, 0};
        tn_parallel_for(100, 1, inner_range, &one); /* inline: one call of [0, 100) */
        c->marks[i] += __atomic_load_n(&one.inline_, __ATOMIC_RELAXED);
    }
}

static void test_nested_inline(void **state)
{
    (void)state;
    tn_set_num_threads(4);
    int64_t marks[64] = {0};
    struct nest c = {marks, 0};
    tn_parallel_for(64, 1, outer_range, &c);
    for (int i = 0; i < 64; i++)
        assert_int_equal(marks[i], 1);
    tn_set_num_threads(2);
}

static void test_policy_from_env(void **state)
{
    (void)state;
    unsetenv("TN_SPIN_US");
    unsetenv("OMP_WAIT_POLICY");
    assert_int_equal(tn__thread_spin_env(), -1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    assert_int_equal(tn__thread_spin_env(), 0);
    setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
    assert_true(tn__thread_spin_env() >= 100 * 1000 * 1000); /* longer than the default */
    setenv("TN_SPIN_US", "50", 1); /* wins over the policy */
    assert_int_equal(tn__thread_spin_env(), 50 * 1000);
    setenv("TN_SPIN_US", "50us", 1); /* not read: the policy's */
    assert_true(tn__thread_spin_env() >= 100 * 1000 * 1000);
    setenv("TN_SPIN_US", "-3", 1);
    unsetenv("OMP_WAIT_POLICY");
    assert_int_equal(tn__thread_spin_env(), -1);
    unsetenv("TN_SPIN_US");
}

/* Threads of this process other than the caller that are running or
 * runnable (state R in /proc/self/task/TID/stat); -1 without /proc. */
static int others_running(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int running = 0;
    long self = 0;
    char path[300], line[256];
    FILE *f = fopen("/proc/thread-self/stat", "r");
    if (f && fgets(line, sizeof line, f))
        self = strtol(line, NULL, 10);
    if (f)
        fclose(f);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || strtol(de->d_name, NULL, 10) == self)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        const char *paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        running += paren && paren[1] == ' ' && paren[2] == 'R';
        fclose(f);
    }
    closedir(d);
    return running;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* After a burst of work, with the default bound, every worker goes to
 * sleep (an idle process costs nothing); with a long bound they still
 * spin a moment later. Waits up to 20 s for a loaded machine to run them. */
static void test_idle_workers_sleep(void **state)
{
    (void)state;
    if (others_running() < 0)
        TN_TEST_SKIP("no /proc/self/task");
    int64_t *marks = calloc(4099, sizeof *marks);
    int64_t old = tn__thread_spin(-1);
    tn_set_num_threads(4);
    tn__thread_spin(200 * 1000);
    run_jobs(marks, 4099, 1, 500);
    int n = 0, waited = 0;
    while ((n = others_running()) > 0 && waited < 20000)
        sleep_ms(10), waited += 10;
    assert_int_equal(n, 0);

    tn__thread_spin((int64_t)3 * 1000 * 1000 * 1000); /* 3 s */
    run_jobs(marks, 4099, 1, 50);
    assert_true(others_running() > 0);
    tn__thread_spin(0); /* the next waits sleep at once */
    run_jobs(marks, 4099, 1, 1);
    waited = 0;
    while ((n = others_running()) > 0 && waited < 20000)
        sleep_ms(10), waited += 10;
    assert_int_equal(n, 0);
    tn__thread_spin(old);
    tn_set_num_threads(2);
    free(marks);
}

/* Threads of this process (entries of /proc/self/task); -1 without /proc. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The child's side of a fork: it has one thread, runs parallel jobs of 3
 * threads (checking every element), and then has workers of its own. Exit
 * status 0 when all held; no cmocka calls, which would return into the
 * parent's test. */
_Noreturn static void child_jobs(void)
{
    int code = 0;
    if (thread_count() > 1)
        code |= 1; /* the parent's threads came along */
    tn_set_num_threads(3);
    int64_t *marks = calloc(4099, sizeof *marks);
    for (int r = 0; marks && r < 20; r++)
        tn_parallel_for(4099, 1, count_range, marks);
    for (int64_t i = 0; marks && i < 4099; i++)
        if (marks[i] != 20)
            code |= 2; /* an element run twice or never */
    if (!marks)
        code |= 4;
    if (thread_count() == 1)
        code |= 8; /* no pool: the jobs ran on this thread alone */
    free(marks);
    _exit(code);
}

/* Waits up to 60 s for the child (it must not wait forever on the parent's
 * pool), killing it past that; its exit status, or -1. */
static int reap(pid_t pid)
{
    for (int waited = 0; waited < 60000; waited += 5) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0)
            return -1;
        sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static int fork_child_jobs(void)
{
    pid_t pid = fork();
    if (pid == 0)
        child_jobs();
    return pid < 0 ? -1 : reap(pid);
}

/* A fork after parallel jobs, under each wait policy: the child runs jobs
 * on a fresh pool and exits; the parent's pool still works. */
static void test_fork_after_job(void **state)
{
    (void)state;
    if (thread_count() < 0)
        TN_TEST_SKIP("no /proc/self/task");
    int64_t *marks = calloc(4099, sizeof *marks);
    int64_t old = tn__thread_spin(-1);
    tn_set_num_threads(3);
    for (size_t s = 0; s < sizeof spins / sizeof *spins; s++) {
        tn__thread_spin(spins[s]);
        run_jobs(marks, 4099, 1, 50);
        assert_int_equal(fork_child_jobs(), 0);
        run_jobs(marks, 4099, 1, 50);
    }
    tn__thread_spin(old);
    tn_set_num_threads(2);
    free(marks);
}

struct busy {
    int64_t *marks;
    int stop; /* atomic */
};

static void *busy_jobs(void *arg)
{
    struct busy *b = arg;
    while (!__atomic_load_n(&b->stop, __ATOMIC_RELAXED))
        run_jobs(b->marks, 40009, 1, 5);
    return NULL;
}

struct forks {
    int n, failed;
};

static void *forker(void *arg)
{
    struct forks *f = arg;
    for (int i = 0; i < f->n; i++)
        f->failed += fork_child_jobs() != 0;
    return NULL;
}

/* Forks from one thread while another runs jobs (the pool's lock held, its
 * workers inside a job or going to sleep): each child gets a pool of its
 * own and exits. */
static void test_fork_during_jobs(void **state)
{
    (void)state;
    if (thread_count() < 0)
        TN_TEST_SKIP("no /proc/self/task");
    int64_t old = tn__thread_spin(-1);
    tn_set_num_threads(3);
    for (size_t s = 0; s < sizeof spins / sizeof *spins; s++) {
        tn__thread_spin(spins[s]);
        struct busy b = {calloc(40009, sizeof(int64_t)), 0};
        struct forks f = {20, 0};
        pthread_t jobs, forks;
        assert_int_equal(pthread_create(&jobs, NULL, busy_jobs, &b), 0);
        assert_int_equal(pthread_create(&forks, NULL, forker, &f), 0);
        assert_int_equal(pthread_join(forks, NULL), 0);
        __atomic_store_n(&b.stop, 1, __ATOMIC_RELAXED);
        assert_int_equal(pthread_join(jobs, NULL), 0);
        assert_int_equal(f.failed, 0);
        free(b.marks);
    }
    tn__thread_spin(old);
    tn_set_num_threads(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_element_once),
        cmocka_unit_test(test_callers_at_once),
        cmocka_unit_test(test_nested_inline),
        cmocka_unit_test(test_policy_from_env),
        cmocka_unit_test(test_idle_workers_sleep),
        cmocka_unit_test(test_fork_after_job),
        cmocka_unit_test(test_fork_during_jobs),
    };
    return TN_RUN_TESTS(tests);
}
