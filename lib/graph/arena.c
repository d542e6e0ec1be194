/*
 * graph/arena.c: jansson's tree in one arena. A 5,000-node graph is about
 * 300,000 JSON values; allocating and freeing them one by one through
 * malloc was half of reading the graph (perf). While tn__graph_json_load
 * parses (lib/graph/json.c, with jansson's constructors), the calling
 * thread's jansson allocations come from a bump arena, its frees are
 * no-ops, and tn__graph_json_drop releases the arena in a few calls
 * instead of walking the tree.
 *
 * jansson's allocation functions are process-wide, and a program that
 * links libtensor may use jansson itself, with allocation functions of its
 * own.  So ours are installed only while one of our parses runs (counted,
 * for parses on several threads at once) and the program's are put back
 * when the last one ends; while installed they hand every call to the
 * functions that were there before (the program's, malloc and free by
 * default) unless the calling thread is inside tn__graph_json_load and,
 * for a free, the pointer is in that thread's arena.  Nothing jansson
 * holds outlives a parse with our functions in it: the arena's tree is
 * released by tn__graph_json_drop, never through jansson.
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise */
#endif
#include "graph/internal.h"

#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct chunk {
    struct chunk *next;
    size_t size, used; /* of data */
    size_t mapped;     /* the bytes mapped at the chunk; 0: from malloc */
    alignas(max_align_t) unsigned char data[];
};

struct tn__json_arena {
    struct chunk *head; /* the newest chunk, where allocations go */
    size_t next_size;   /* the next chunk's size */
};

#define ALIGN ((size_t)alignof(max_align_t))
#define MAX_CHUNK ((size_t)64 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* A chunk of at least size bytes. Big ones are mapped on huge-page
 * boundaries with MADV_HUGEPAGE: the tree of a 5,000-node graph fills
 * 35 MB in one go, and faulting that in 4 KiB pages took a fifth of the
 * read (perf: clear_page, page faults). */
static struct chunk *chunk_new(size_t size)
{
    struct chunk *c = NULL;
    size_t want = sizeof *c + size;
#ifdef MADV_HUGEPAGE
    if (size >= HUGE_PAGE && want < SIZE_MAX / 2) {
        size_t len = (want + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        unsigned char *m = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            size_t lead = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
            if (lead)
                munmap(m, lead);
            munmap(m + lead + len, HUGE_PAGE - lead);
            madvise(m + lead, len, MADV_HUGEPAGE); /* a hint: failing is harmless */
            c = (struct chunk *)(m + lead);
            c->mapped = len;
            c->size = len - sizeof *c;
        }
    }
#endif
    if (!c) {
        if (!(c = malloc(want)))
            return NULL;
        c->mapped = 0;
        c->size = size;
    }
    c->used = 0;
    c->next = NULL;
    return c;
}

static void chunk_free(struct chunk *c)
{
    if (c->mapped)
        munmap(c, c->mapped);
    else
        free(c);
}

/* n bytes from a, aligned for any object; NULL when out of memory. */
static void *bump(struct tn__json_arena *a, size_t n)
{
    if (n > SIZE_MAX / 2)
        return NULL;
    n = (n + ALIGN - 1) & ~(ALIGN - 1);
    struct chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        if (!(c = chunk_new(a->next_size > n ? a->next_size : n)))
            return NULL;
        c->next = a->head;
        a->head = c;
        if (a->next_size < MAX_CHUNK)
            a->next_size *= 2;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

/* The arena of the parse running on this thread, NULL outside one. Per
 * thread because the hooks are process-wide while any parse runs: another
 * thread's allocations (a host's own jansson use) go to prev_malloc. */
static _Thread_local struct tn__json_arena *active;
static json_malloc_t prev_malloc; /* the functions before ours, while ours are in */
static json_free_t prev_free;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static int hooks_users; /* parses running with our functions installed */

static void *arena_malloc(size_t n)
{
    return active ? bump(active, n) : prev_malloc(n);
}

static bool in_arena(const struct tn__json_arena *a, const void *p)
{
    uintptr_t u = (uintptr_t)p;
    for (const struct chunk *c = a->head; c; c = c->next)
        if (u >= (uintptr_t)c->data && u < (uintptr_t)c->data + c->size)
            return true;
    return false;
}

static void arena_free(void *p)
{
    struct tn__json_arena *a = active;
    if (p && !(a && in_arena(a, p)))
        prev_free(p);
}

/* Installs our functions for one parse (the first of those running saves
 * the program's).  Returns whether ours are the ones installed: false when
 * the program installed others meanwhile, and the parse then takes
 * jansson's own allocations. */
static bool hooks_enter(void)
{
    json_malloc_t m;
    json_free_t f;
    pthread_mutex_lock(&hooks_lock);
    if (hooks_users++ == 0) {
        json_get_alloc_funcs(&prev_malloc, &prev_free);
        json_set_alloc_funcs(arena_malloc, arena_free);
    }
    json_get_alloc_funcs(&m, &f);
    pthread_mutex_unlock(&hooks_lock);
    return m == arena_malloc;
}

/* Ends one parse; the last puts the program's functions back, unless the
 * program has installed others since (those stay). */
static void hooks_leave(void)
{
    json_malloc_t m;
    json_free_t f;
    pthread_mutex_lock(&hooks_lock);
    if (--hooks_users == 0) {
        json_get_alloc_funcs(&m, &f);
        if (m == arena_malloc)
            json_set_alloc_funcs(prev_malloc, prev_free);
    }
    pthread_mutex_unlock(&hooks_lock);
}

/* How deep text nests: its brackets counted outside strings, whether or
 * not it is JSON (for the message that refuses it). */
static int nesting(const char *text, size_t len)
{
    int d = 0, max = 0;
    for (size_t i = 0; i < len; i++) {
        switch (text[i]) {
        case '{':
        case '[':
            if (++d > max)
                max = d;
            break;
        case '}':
        case ']':
            d--;
            break;
        case '"': /* a string, to its end (an unterminated one to the text's) */
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\')
                    i++;
            break;
        }
    }
    return max;
}

int tn__graph_json_load(const char *text, size_t len, const char *label, int max_depth,
                        size_t flags, json_t **root, struct tn__json_arena **arena)
{
    json_error_t err;
    bool deep;
    *root = NULL;
    *arena = NULL;
    struct tn__json_arena *a = malloc(sizeof *a);
    if (!a)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", label);
    /* the tree: 5 to 10 bytes per byte of text */
    a->head = NULL;
    a->next_size = len < MAX_CHUNK / 8 ? 8 * len : MAX_CHUNK;
    if (a->next_size < ((size_t)64 << 10))
        a->next_size = (size_t)64 << 10;
    bool ours = hooks_enter(); /* else the program installed its own meanwhile */
    active = ours ? a : NULL;
    *root = tn__graph_json_parse(text, len, flags, max_depth, &deep);
    active = NULL;
    hooks_leave();
    if (*root) {
        if (ours)
            *arena = a;
        else
            tn__graph_json_drop(NULL, a);
        return TN_OK;
    }
    tn__graph_json_drop(NULL, a);
    /* refused (or out of memory): the reason in jansson's words, at its
     * line and column in the text, unless the text nests too deep for
     * jansson's recursive parser to be let at it (its own limit is 2048) */
    int depth = nesting(text, len);
    if (depth > max_depth)
        return tn_set_error(TN_EFORMAT, "%s: graph: JSON nested %d deep (the limit is %d)",
                            label, depth, max_depth);
    if (!(*root = json_loadb(text, len, flags, &err)))
        return tn_set_error(TN_EFORMAT, "%s:%d:%d: %s", label, err.line, err.column, err.text);
    return TN_OK; /* memory ran out in the arena but not in malloc */
}

void tn__graph_json_drop(json_t *root, struct tn__json_arena *arena)
{
    if (!arena) {
        json_decref(root);
        return;
    }
    for (struct chunk *c = arena->head, *next; c; c = next) {
        next = c->next;
        chunk_free(c);
    }
    free(arena);
}
