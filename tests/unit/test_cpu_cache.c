/*
 * test_cpu_cache: the cache of large CPU blocks behind the CPU allocator
 * (lib/core/cpu_cache.c): reuse, size classes and alignment, the cap on
 * idle bytes and TN_CPU_CACHE_BYTES, tn_cpu_empty_cache, two threads at
 * once, and fork while another thread works the cache.
 */
#include "tn_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

/* A sanitizer build has no cache: every block goes to the sanitizer. */
#ifdef TN_SANITIZE
#define NEEDS_CACHE() TN_TEST_SKIP("a sanitizer build (TN_SANITIZE) bypasses the cache")
#else
#define NEEDS_CACHE() (void)0
#endif

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static void *cpu_alloc(size_t n)
{
    const struct tn_allocator *a = tn__allocator(TN_DEVICE_CPU);
    void *p = a->alloc(n, -1, a->ctx);
    assert_non_null(p);
    return p;
}

static void cpu_free(void *p)
{
    const struct tn_allocator *a = tn__allocator(TN_DEVICE_CPU);
    a->free(p, -1, a->ctx);
}

/* Sets TN_CPU_CACHE_BYTES (NULL: unset) and makes the cache read it, with
 * no idle block left. */
static void cache_env(const char *value)
{
    if (value)
        setenv("TN_CPU_CACHE_BYTES", value, 1);
    else
        unsetenv("TN_CPU_CACHE_BYTES");
    tn__cpu_cache_configure();
    tn_cpu_empty_cache();
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
}

static int restore(void **state)
{
    (void)state;
    cache_env(NULL);
    return 0;
}

static void test_reuse(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env(NULL);
    char *p = cpu_alloc(MIB);
    memset(p, 1, MIB);
    cpu_free(p);
    assert_int_equal(tn__cpu_cache_idle_bytes(), MIB);
    /* the same class (768 KiB, 1 MiB] gets the same block back */
    char *q = cpu_alloc(MIB - 100);
    assert_ptr_equal(q, p);
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    /* another class does not */
    char *r = cpu_alloc(700 * KIB);
    assert_ptr_not_equal(r, p);
    cpu_free(q);
    cpu_free(r);
    assert_int_equal(tn__cpu_cache_idle_bytes(), MIB + 768 * KIB);

    /* through tensors: a released output's memory serves the next one */
    struct tn_tensor *t = tn_empty(TN_SHAPE(512, 1024), TN_FLOAT32);
    void *data = tn_data(t);
    tn_release(t);
    t = tn_empty(TN_SHAPE(1024, 512), TN_FLOAT32);
    assert_ptr_equal(tn_data(t), data);
    tn_release(t);
    /* small blocks are not the cache's */
    void *s = cpu_alloc(TN_CPU_CACHE_MIN - 1);
    size_t idle = tn__cpu_cache_idle_bytes();
    cpu_free(s);
    assert_int_equal(tn__cpu_cache_idle_bytes(), idle);
}

static void test_alignment(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env(NULL);
    static const size_t sizes[] = {64 * KIB, 64 * KIB + 1, 100000, 2 * MIB - 64, 2 * MIB,
                                   2 * MIB + 1, 5 * MIB + 3, 33 * MIB};
    char *p[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        p[i] = cpu_alloc(sizes[i]);
        assert_int_equal((uintptr_t)p[i] % TN_ALIGNMENT, 0);
        assert_int_equal((uintptr_t)p[i] % (64 * KIB), 0);
        if (sizes[i] >= 2 * MIB)
            assert_int_equal((uintptr_t)p[i] % (2 * MIB), 0);
        memset(p[i], (int)i, sizes[i]); /* the whole request is writable */
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(p[i][0], (char)i);
        assert_int_equal(p[i][sizes[i] - 1], (char)i);
        cpu_free(p[i]);
    }
    /* capacities: 64 KiB, 80 KiB, 112 KiB, 2 MiB twice, 2.5 MiB, 6 MiB, 40 MiB */
    assert_int_equal(tn__cpu_cache_idle_bytes(),
                     (64 + 80 + 112 + 2048 + 2048 + 2560 + 6144 + 40960) * KIB);
}

static void test_cap(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env("3M");
    char *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = cpu_alloc(MIB);
    for (int i = 0; i < 4; i++)
        cpu_free(p[i]);
    /* the least recently freed went */
    assert_int_equal(tn__cpu_cache_idle_bytes(), 3 * MIB);
    /* a block over the cap is never kept */
    cpu_free(cpu_alloc(4 * MIB));
    assert_int_equal(tn__cpu_cache_idle_bytes(), 3 * MIB);
    /* the most recently freed comes back first */
    char *q = cpu_alloc(MIB);
    assert_ptr_equal(q, p[3]);
    cpu_free(q);
    /* a lower cap trims at once */
    setenv("TN_CPU_CACHE_BYTES", "2048k", 1);
    tn__cpu_cache_configure();
    assert_int_equal(tn__cpu_cache_idle_bytes(), 2 * MIB);
    setenv("TN_CPU_CACHE_BYTES", "65536", 1);
    tn__cpu_cache_configure();
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    cpu_free(cpu_alloc(64 * KIB));
    cpu_free(cpu_alloc(65 * KIB));
    assert_int_equal(tn__cpu_cache_idle_bytes(), 64 * KIB);
}

static void test_env_disable(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env("0");
    void *p = cpu_alloc(MIB);
    /* the block came from aligned_alloc, not from the cache */
    assert_false(tn__cpu_cache_free(p));
    free(p);
    cpu_free(cpu_alloc(3 * MIB));
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    /* a block mapped while the cache was on goes back to the system */
    cache_env(NULL);
    p = cpu_alloc(MIB);
    cache_env("0");
    cpu_free(p);
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    /* what is not a size leaves the default (on) */
    cache_env("lots");
    cpu_free(cpu_alloc(MIB));
    assert_int_equal(tn__cpu_cache_idle_bytes(), MIB);
}

static void test_empty_cache(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env(NULL);
    void *p[3] = {cpu_alloc(MIB), cpu_alloc(3 * MIB), cpu_alloc(200 * KIB)};
    void *keep = cpu_alloc(MIB);
    for (int i = 0; i < 3; i++)
        cpu_free(p[i]);
    assert_int_equal(tn__cpu_cache_idle_bytes(), (1024 + 3072 + 224) * KIB);
    tn_cpu_empty_cache();
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    /* a block in use is untouched, and cached when freed */
    memset(keep, 7, MIB);
    cpu_free(keep);
    assert_int_equal(tn__cpu_cache_idle_bytes(), MIB);
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static void test_many_blocks(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env("64M");
    enum { N = 300 };
    void *p[N], *q[N];
    for (int i = 0; i < N; i++)
        p[i] = cpu_alloc(64 * KIB);
    unsigned seed = 1;
    for (int i = N - 1; i > 0; i--) { /* freed in a shuffled order */
        int j = rand_r(&seed) % (i + 1);
        void *t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    for (int i = 0; i < N; i++)
        cpu_free(p[i]);
    assert_int_equal(tn__cpu_cache_idle_bytes(), N * 64 * KIB);
    /* every block comes back, each once */
    for (int i = 0; i < N; i++)
        q[i] = cpu_alloc(64 * KIB);
    assert_int_equal(tn__cpu_cache_idle_bytes(), 0);
    qsort(p, N, sizeof *p, ptr_cmp);
    qsort(q, N, sizeof *q, ptr_cmp);
    assert_memory_equal(p, q, sizeof p);
    for (int i = 0; i < N; i++)
        cpu_free(q[i]);
}

/* Each thread keeps up to 8 blocks of assorted classes filled with its own
 * byte, checks them before freeing, and frees the blocks the other thread
 * hands it. */
struct worker {
    unsigned char tag;
    int bad;
    void *handoff[64]; /* atomic */
    struct worker *peer;
};

static void fill(unsigned char *p, size_t n, unsigned char v)
{
    memset(p, v, 4096);
    memset(p + n - 4096, v, 4096);
}

static int check(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < 4096; i++)
        if (p[i] != v || p[n - 4096 + i] != v)
            return 1;
    return 0;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    static const size_t sizes[] = {64 * KIB, 100 * KIB, 256 * KIB, MIB, 3 * MIB, 5 * MIB};
    unsigned char *held[8] = {0};
    size_t heldn[8] = {0};
    unsigned seed = w->tag;
    for (int it = 0; it < 3000; it++) {
        int k = rand_r(&seed) % 8;
        if (held[k]) {
            w->bad += check(held[k], heldn[k], w->tag);
            /* every few blocks go to the other thread to free */
            int h = rand_r(&seed) % 64;
            void *expected = NULL;
            if (it % 3 == 0 && __atomic_compare_exchange_n(&w->peer->handoff[h], &expected,
                                                           held[k], false, __ATOMIC_ACQ_REL,
                                                           __ATOMIC_ACQUIRE))
                ;
            else
                cpu_free(held[k]);
        }
        heldn[k] = sizes[rand_r(&seed) % 6];
        held[k] = cpu_alloc(heldn[k]);
        fill(held[k], heldn[k], w->tag);
        void *in = __atomic_exchange_n(&w->handoff[it % 64], NULL, __ATOMIC_ACQ_REL);
        if (in)
            cpu_free(in);
    }
    for (int k = 0; k < 8; k++) {
        w->bad += check(held[k], heldn[k], w->tag);
        cpu_free(held[k]);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env("16M");
    struct worker w[2] = {{.tag = 0xA5}, {.tag = 0x5A}};
    w[0].peer = &w[1];
    w[1].peer = &w[0];
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 64; h++)
            if (w[i].handoff[h])
                cpu_free(w[i].handoff[h]);
    assert_int_equal(w[0].bad + w[1].bad, 0);
    assert_true(tn__cpu_cache_idle_bytes() <= 16 * MIB);
    assert_true(tn__cpu_cache_idle_bytes() > 0);
}

/* A thread that works the cache until told to stop. */
static volatile int churn_stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!churn_stop) {
        void *a = cpu_alloc(MIB), *b = cpu_alloc(128 * KIB);
        cpu_free(a);
        cpu_free(b);
    }
    return NULL;
}

static void test_fork(void **state)
{
    (void)state;
    NEEDS_CACHE();
    cache_env(NULL);
    churn_stop = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, churn, NULL), 0);
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            /* the child uses the cache it inherited */
            void *p = cpu_alloc(MIB);
            memset(p, 1, MIB);
            cpu_free(p);
            tn_cpu_empty_cache();
            _exit(0);
        }
        int st = -1;
        for (int ms = 0; ms < 5000 && waitpid(pid, &st, WNOHANG) == 0; ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (st == -1) {
            hung = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        } else {
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
    }
    churn_stop = 1;
    pthread_join(th, NULL);
    assert_int_equal(hung, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reuse, restore),
        cmocka_unit_test_teardown(test_alignment, restore),
        cmocka_unit_test_teardown(test_cap, restore),
        cmocka_unit_test_teardown(test_env_disable, restore),
        cmocka_unit_test_teardown(test_empty_cache, restore),
        cmocka_unit_test_teardown(test_many_blocks, restore),
        cmocka_unit_test_teardown(test_threads, restore),
        cmocka_unit_test_teardown(test_fork, restore),
    };
    return TN_RUN_TESTS(tests);
}
