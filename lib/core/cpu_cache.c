/*
 * core/cpu_cache.c: the cache of large CPU blocks behind the CPU allocator.
 *
 * Fresh memory costs a page fault per page at its first touch, and glibc
 * hands every large block back to the kernel when it is freed: a softmax,
 * a sum or a training step whose outputs are megabytes spent much of its
 * time faulting pages in again. Blocks from 64 KiB up are mapped here
 * instead, their size rounded up to a class (four classes per power of
 * two), and kept when freed for the next request of the same class. The
 * idle blocks are capped (TN_CPU_CACHE_BYTES bytes; by default an eighth of
 * the RAM, at most 1 GiB; 0 turns the cache off), the least recently freed
 * going first; tn_cpu_empty_cache() unmaps them all. Blocks of 2 MiB and
 * more are 2 MiB aligned and advised as transparent huge pages, so that a
 * first touch faults 2 MiB at a time where the kernel allows it. (On one
 * thread, each layer_norm of 8192x1024 float32 faulted its 32 MiB output in
 * again, 8,192 faults, and took 26 ms; with the cache only the first call
 * faults and the others take 3.7 ms. Huge pages make a sum over a 64 MiB
 * input a fifth faster.)
 *
 * One mutex guards the cache: the thread pool's workers and the process
 * group backends free blocks on threads of their own. Fork handlers hold
 * it across fork(), so that a child never starts with it locked. A
 * sanitizer build (TN_SANITIZE) never calls in here.
 */
#include "core/internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef TN_SANITIZE

#define TN_BIG_ALIGN ((size_t)64 << 10) /* every cached block is 64 KiB aligned */
#define TN_BIG_MAX ((size_t)1 << 48)    /* larger requests go to aligned_alloc */
#define TN_HUGE ((size_t)2 << 20)
#define TN_NCLASSES 192                 /* the class of TN_BIG_MAX is below */

/* One block this file mapped, in use or idle. */
struct tn_big {
    char *ptr;
    size_t bytes;                      /* its class's capacity */
    int cls;
    struct tn_big *lru_prev, *lru_next; /* idle blocks, most recently freed first */
    struct tn_big *cls_prev, *cls_next; /* idle blocks of the class, the same order */
};

static struct {
    pthread_mutex_t mu;
    size_t limit;                      /* idle bytes kept at most; 0: no cache */
    size_t idle;                       /* bytes in idle blocks */
    struct tn_big *lru_head, *lru_tail;
    struct tn_big *cls[TN_NCLASSES];
    /* every mapped block by address, open addressing with tombstones */
    struct tn_big **table;
    size_t tcap, tused, nlive;         /* slots, slots not empty, blocks */
} tn_big = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct tn_big tn_big_tomb; /* a freed slot of the table */

/* The class of n (64 KiB <= n <= TN_BIG_MAX) and its capacity: for n in
 * (2^k, 2^(k+1)], a multiple of 2^(k-2), so that at most a fifth of a
 * block goes unused (and untouched pages cost no memory). */
static int tn_big_class(size_t n, size_t *cap)
{
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1));
    size_t step = (size_t)1 << (k - 2);
    *cap = (n + step - 1) & ~(step - 1);
    return (k - 15) * 4 + (int)(*cap >> (k - 2)) - 5;
}

/* ------------------------------------------------- the table of blocks */

static size_t tn_big_slot0(const void *ptr, size_t tcap)
{
    return (size_t)(((uint64_t)(uintptr_t)ptr >> 16) * 0x9E3779B97F4A7C15ull >> 20) & (tcap - 1);
}

/* The slot holding ptr's block, or -1. */
static long tn_big_find(const void *ptr)
{
    if (!tn_big.tcap)
        return -1;
    for (size_t i = tn_big_slot0(ptr, tn_big.tcap);; i = (i + 1) & (tn_big.tcap - 1)) {
        struct tn_big *b = tn_big.table[i];
        if (!b)
            return -1;
        if (b != &tn_big_tomb && b->ptr == ptr)
            return (long)i;
    }
}

/* Puts b in the first free slot from its own; 1 when that slot was never
 * used (not a tombstone). */
static int tn_big_place(struct tn_big **table, size_t tcap, struct tn_big *b)
{
    size_t i = tn_big_slot0(b->ptr, tcap);
    while (table[i] && table[i] != &tn_big_tomb)
        i = (i + 1) & (tcap - 1);
    int fresh = !table[i];
    table[i] = b;
    return fresh;
}

/* Adds b to the table, rebuilding it when half its slots are taken. */
static int tn_big_insert(struct tn_big *b)
{
    if ((tn_big.tused + 1) * 2 > tn_big.tcap) {
        size_t cap = 64;
        while (cap < (tn_big.nlive + 1) * 4)
            cap *= 2;
        struct tn_big **t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < tn_big.tcap; i++)
            if (tn_big.table[i] && tn_big.table[i] != &tn_big_tomb)
                tn_big_place(t, cap, tn_big.table[i]);
        free(tn_big.table);
        tn_big.table = t;
        tn_big.tcap = cap;
        tn_big.tused = tn_big.nlive;
    }
    tn_big.tused += (size_t)tn_big_place(tn_big.table, tn_big.tcap, b);
    tn_big.nlive++;
    return 0;
}

static void tn_big_forget(struct tn_big *b)
{
    long i = tn_big_find(b->ptr);
    TN_ASSERT(i >= 0);
    tn_big.table[i] = &tn_big_tomb;
    tn_big.nlive--;
}

/* ----------------------------------------------------- the idle blocks */

static void tn_big_push_idle(struct tn_big *b)
{
    b->lru_prev = NULL;
    b->lru_next = tn_big.lru_head;
    if (tn_big.lru_head)
        tn_big.lru_head->lru_prev = b;
    else
        tn_big.lru_tail = b;
    tn_big.lru_head = b;
    b->cls_prev = NULL;
    b->cls_next = tn_big.cls[b->cls];
    if (b->cls_next)
        b->cls_next->cls_prev = b;
    tn_big.cls[b->cls] = b;
    tn_big.idle += b->bytes;
}

static void tn_big_unlink_idle(struct tn_big *b)
{
    if (b->lru_prev)
        b->lru_prev->lru_next = b->lru_next;
    else
        tn_big.lru_head = b->lru_next;
    if (b->lru_next)
        b->lru_next->lru_prev = b->lru_prev;
    else
        tn_big.lru_tail = b->lru_prev;
    if (b->cls_prev)
        b->cls_prev->cls_next = b->cls_next;
    else
        tn_big.cls[b->cls] = b->cls_next;
    if (b->cls_next)
        b->cls_next->cls_prev = b->cls_prev;
    tn_big.idle -= b->bytes;
}

/* Takes idle blocks off the cache, least recently freed first, until at
 * most `keep` idle bytes are left; returns them chained by lru_next for
 * tn_big_unmap (the caller holds the mutex). */
static struct tn_big *tn_big_trim(size_t keep)
{
    struct tn_big *out = NULL;
    while (tn_big.idle > keep) {
        struct tn_big *b = tn_big.lru_tail;
        tn_big_unlink_idle(b);
        tn_big_forget(b);
        b->lru_next = out;
        out = b;
    }
    return out;
}

/* Unmaps a chain from tn_big_trim, outside the mutex. */
static void tn_big_unmap(struct tn_big *b)
{
    while (b) {
        struct tn_big *next = b->lru_next;
        munmap(b->ptr, b->bytes);
        free(b);
        b = next;
    }
}

/* ------------------------------------------------------ configuration */

/* TN_CPU_CACHE_BYTES, or the default. */
static size_t tn_big_limit_from_env(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    size_t gib = (size_t)1 << 30, limit = gib;
    if (pages > 0 && psz > 0 && (size_t)pages / 8 * (size_t)psz < gib)
        limit = (size_t)pages / 8 * (size_t)psz;
    uint64_t v;
    return tn__env_bytes("TN_CPU_CACHE_BYTES", TN_BIG_MAX, &v) ? (size_t)v : limit;
}

void tn__cpu_cache_configure(void)
{
    size_t limit = tn_big_limit_from_env();
    pthread_mutex_lock(&tn_big.mu);
    tn_big.limit = limit;
    struct tn_big *drop = tn_big_trim(limit);
    pthread_mutex_unlock(&tn_big.mu);
    tn_big_unmap(drop);
}

static void tn_big_lock(void) { pthread_mutex_lock(&tn_big.mu); }
static void tn_big_unlock(void) { pthread_mutex_unlock(&tn_big.mu); }

static pthread_once_t tn_big_once = PTHREAD_ONCE_INIT;

static void tn_big_init(void)
{
    tn__cpu_cache_configure();
    pthread_atfork(tn_big_lock, tn_big_unlock, tn_big_unlock);
}

/* ------------------------------------------------------------- blocks */

/* A fresh mapping of `bytes`, 2 MiB aligned and advised as huge pages from
 * 2 MiB up, else 64 KiB aligned; NULL when the kernel refuses. */
static char *tn_big_map(size_t bytes)
{
    size_t align = bytes >= TN_HUGE ? TN_HUGE : TN_BIG_ALIGN, len = bytes + align;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + len > a + bytes)
        munmap(a + bytes, (size_t)(p + len - (a + bytes)));
#ifdef MADV_HUGEPAGE
    if (bytes >= TN_HUGE)
        madvise(a, bytes, MADV_HUGEPAGE);
#endif
    return a;
}

void *tn__cpu_cache_alloc(size_t nbytes)
{
    if (nbytes < TN_CPU_CACHE_MIN || nbytes > TN_BIG_MAX)
        return NULL;
    pthread_once(&tn_big_once, tn_big_init);
    size_t cap;
    int cls = tn_big_class(nbytes, &cap);
    pthread_mutex_lock(&tn_big.mu);
    size_t limit = tn_big.limit;
    struct tn_big *b = tn_big.cls[cls];
    if (b)
        tn_big_unlink_idle(b);
    pthread_mutex_unlock(&tn_big.mu);
    if (b)
        return b->ptr;
    if (!limit)
        return NULL;
    b = malloc(sizeof *b);
    char *p = b ? tn_big_map(cap) : NULL;
    if (b && !p) {
        /* the idle blocks of other classes may be what is missing */
        tn_cpu_empty_cache();
        p = tn_big_map(cap);
    }
    if (!p) {
        free(b);
        return NULL;
    }
    *b = (struct tn_big){.ptr = p, .bytes = cap, .cls = cls};
    pthread_mutex_lock(&tn_big.mu);
    int rc = tn_big_insert(b);
    pthread_mutex_unlock(&tn_big.mu);
    if (rc < 0) {
        munmap(p, cap);
        free(b);
        return NULL;
    }
    return p;
}

bool tn__cpu_cache_free(void *ptr)
{
    /* only 64 KiB aligned addresses can be blocks of the cache */
    if (!ptr || ((uintptr_t)ptr & (TN_BIG_ALIGN - 1)))
        return false;
    struct tn_big *drop = NULL;
    pthread_mutex_lock(&tn_big.mu);
    long i = tn_big_find(ptr);
    if (i < 0) {
        pthread_mutex_unlock(&tn_big.mu);
        return false;
    }
    struct tn_big *b = tn_big.table[i];
    if (b->bytes > tn_big.limit) {
        tn_big_forget(b);
        b->lru_next = NULL;
        drop = b;
    } else {
        tn_big_push_idle(b);
        drop = tn_big_trim(tn_big.limit);
    }
    pthread_mutex_unlock(&tn_big.mu);
    tn_big_unmap(drop);
    return true;
}

size_t tn__cpu_cache_idle_bytes(void)
{
    pthread_mutex_lock(&tn_big.mu);
    size_t n = tn_big.idle;
    pthread_mutex_unlock(&tn_big.mu);
    return n;
}

void tn_cpu_empty_cache(void)
{
    pthread_mutex_lock(&tn_big.mu);
    struct tn_big *drop = tn_big_trim(0);
    pthread_mutex_unlock(&tn_big.mu);
    tn_big_unmap(drop);
}

#else /* TN_SANITIZE: no cache, so that ASan sees every block */

void *tn__cpu_cache_alloc(size_t nbytes)
{
    (void)nbytes;
    return NULL;
}

bool tn__cpu_cache_free(void *ptr)
{
    (void)ptr;
    return false;
}

size_t tn__cpu_cache_idle_bytes(void) { return 0; }
void tn__cpu_cache_configure(void) {}
void tn_cpu_empty_cache(void) {}

#endif

bool tn__env_bytes(const char *name, uint64_t max, uint64_t *bytes)
{
    const char *env = getenv(name);
    if (!env || !*env || *env < '0' || *env > '9')
        return false;
    char *end;
    unsigned long long v = strtoull(env, &end, 10);
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (unsigned long long)(max >> shift))
        return false;
    *bytes = (uint64_t)v << shift;
    return true;
}
