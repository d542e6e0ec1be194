/*
 * core/value.c: nested Python values (dict, OrderedDict, list, tuple, int,
 * float, str, bool, None, tensor) as checkpoints hold them (tensor/value.h).
 * In core so that nn and optim build state_dicts of them and io reads and
 * writes them, neither using the other.
 */
#include "core/internal.h"
#include <tensor/value.h>

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Arenas.  A load makes hundreds of thousands of small values (a DCP
 * .metadata of 10,000 keys about 400,000), and one malloc and one free
 * each was a fifth of `tckpt ls`.  Between tn__value_arena_begin and _end
 * the thread's values (nodes, string bytes, container arrays) are carved
 * from blocks: 64 KiB, then each twice the last up to 2 MiB, each aligned
 * to its size.  (Huge pages, asked for with madvise, cut the page faults
 * tenfold but cost three times the system time on this shared machine,
 * in the kernel's compaction: not asked for.)  A new block's pages are
 * faulted in at once with madvise(MADV_POPULATE_WRITE) (Linux 5.14; one
 * call instead of a fault per 4 KiB page as the values fill it; ignored
 * where refused).  Every 64 KiB unit of a block
 * starts with a pointer to the block's head, so any piece finds its block.
 * A block counts the pieces carved from it that still live, plus one while
 * the arena carves from it; it is freed when the count reaches zero, on
 * whichever thread drops the last value, so values keep their usual
 * reference counting and may outlive the load and each other in any order
 * (one live value keeps its whole block).  priv_mem says which parts of a
 * value lie in a block. */
#define UNIT ((size_t)1 << 16)
#define BLOCK_BIG ((size_t)1 << 21)
#define UNIT_HEAD ((size_t)16) /* the back pointer at each unit's start */
#define BLOCK_MAX (UNIT / 8)   /* larger requests go to malloc */
enum {
    MEM_NODE = 1,  /* the node (and, for a str, its bytes just after it) */
    MEM_ARRAY = 2, /* a sequence's items, a dict's keys and values */
};
struct block {
    struct block *self; /* unit 0's back pointer */
    long live;          /* pieces carved and not yet dropped, + 1 while current */
};

/* The innermost arena begun on this thread (tn__value_arena_begin), or NULL:
 * the value parsers of this thread carve from it.  Per thread because a
 * parse runs on one thread and must not carve from an arena another thread's
 * parse owns and ends; arenas nest through their outer link. */
static _Thread_local struct tn__value_arena *arena;

/* The block a carved piece p lies in: every 64 KiB unit of a block starts
 * with a pointer to the block's head (p must be a carved piece). */
static struct block *block_of(const void *p)
{
    return *(struct block **)((uintptr_t)p & ~(uintptr_t)(UNIT - 1));
}

/* Drops one piece (or the arena's hold) of block b: the last frees it. */
static void block_drop(struct block *b)
{
    if (TN_ATOMIC_DEC(&b->live) == 0)
        free(b);
}

/* Contract in core/internal.h: makes a (the caller's, on its stack) this
 * thread's innermost arena; the values parsed until the matching end are
 * carved from its blocks.  Never fails (a failed block falls back to malloc). */
void tn__value_arena_begin(struct tn__value_arena *a)
{
    memset(a, 0, sizeof *a);
    a->outer = arena;
    arena = a;
}

/* Ends a: drops its hold on the block being carved (each block is freed
 * when its last value is released) and restores the outer arena. */
void tn__value_arena_end(struct tn__value_arena *a)
{
    if (a->block)
        block_drop(a->block);
    arena = a->outer;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14's, where the headers are older */
#endif

/* Faults in the n bytes at p (page-aligned) writable, in one call. */
static void populate(void *p, size_t n)
{
#ifdef __linux__
    (void)madvise(p, n, MADV_POPULATE_WRITE);
#else
    (void)p, (void)n;
#endif
}

/* Makes a's next block current (dropping its hold on the last); false
 * when none could be had. */
static bool next_block(struct tn__value_arena *a)
{
    size_t size = a->size ? a->size * 2 : UNIT;
    if (size > BLOCK_BIG)
        size = BLOCK_BIG;
    struct block *b = aligned_alloc(size, size);
    if (!b)
        return false;
    populate(b, size);
    b->self = b;
    b->live = 1;
    if (a->block)
        block_drop(a->block);
    a->block = b;
    a->size = size;
    a->used = sizeof *b;
    return true;
}

/* n bytes (16-aligned) from the thread's arena, *in set when they lie in a
 * block; else from malloc (no arena, a large request, or a new block that
 * could not be had). NULL when out of memory. */
static void *piece(size_t n, bool *in)
{
    struct tn__value_arena *a = arena;
    *in = false;
    n = (n + 15) & ~(size_t)15;
#if defined(TN_SANITIZE) || defined(__SANITIZE_ADDRESS__)
    a = NULL; /* under the sanitizers each value is its own allocation, checked */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    a = NULL;
#endif
#endif
    if (!a || n > BLOCK_MAX)
        return malloc(n);
    size_t unit_end = ((a->used - 1) | (UNIT - 1)) + 1; /* used is past a head when set */
    if (!a->block || a->used + n > unit_end) {
        if (a->block && unit_end < a->size) {
            /* the next unit of this block, headed by its back pointer */
            *(struct block **)((char *)a->block + unit_end) = a->block;
            a->used = unit_end + UNIT_HEAD;
        } else if (!next_block(a)) {
            return malloc(n);
        }
    }
    void *p = (char *)a->block + a->used;
    a->used += n;
    TN_ATOMIC_INC(&((struct block *)a->block)->live);
    *in = true;
    return p;
}

/* Gives back what piece() gave. */
static void piece_free(void *p, bool in)
{
    if (in)
        block_drop(block_of(p));
    else
        free(p);
}

/* A new node of kind with `extra` bytes after it (a str's), one reference
 * (the caller's), zeroed; NULL with TN_ENOMEM. */
static struct tn_value *node_new(enum tn_value_kind kind, size_t extra)
{
    bool in;
    struct tn_value *v = piece(sizeof *v + extra, &in);
    if (!v) {
        tn_set_error(TN_ENOMEM, "out of memory for a value");
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->refcount = 1;
    v->kind = kind;
    v->priv_mem = in ? MEM_NODE : 0;
    return v;
}

/* Frees a str, global or opaque value's bytes unless they follow its node. */
static void str_free(struct tn_value *v)
{
    if (v->v.str.s != (char *)(v + 1))
        free(v->v.str.s);
}

/* A new value of kind with one reference (the caller's), zeroed; NULL with
 * TN_ENOMEM. */
static struct tn_value *value_new(enum tn_value_kind kind) { return node_new(kind, 0); }

/* Frees the node itself (its parts are gone). */
static void node_free(struct tn_value *v) { piece_free(v, v->priv_mem & MEM_NODE); }

/* A new array of n bytes for container c's items (a dict's keys, then its
 * values, in one array): from the arena where there is one, with
 * MEM_ARRAY set to say where it lies (*in_arena); NULL when out of memory. */
static void *array_new(size_t n, bool *in_arena) { return piece(n, in_arena); }

/* Frees container c's array (NULL is fine) as MEM_ARRAY says it was had. */
static void array_free(const struct tn_value *c, void *p)
{
    if (p)
        piece_free(p, c->priv_mem & MEM_ARRAY);
}

/* Puts the new array p (from array_new) in the place of c's old one, which
 * it frees. */
static void array_swap(struct tn_value *c, void **slot, void *p, bool in_arena)
{
    array_free(c, *slot);
    *slot = p;
    c->priv_mem = (uint8_t)(in_arena ? c->priv_mem | MEM_ARRAY : c->priv_mem & ~MEM_ARRAY);
}

/* Constructors (tensor/value.h): each returns a new reference, NULL with
 * TN_ENOMEM. */
struct tn_value *tn_value_none(void) { return value_new(TN_VALUE_NONE); }

/* A new bool value; NULL with TN_ENOMEM. */
struct tn_value *tn_value_bool(bool b)
{
    struct tn_value *v = value_new(TN_VALUE_BOOL);
    if (v)
        v->v.b = b;
    return v;
}

/* Small ints, shared like CPython's: a checkpoint's sizes, strides and
 * offsets are mostly small, and one allocation per int was a tenth of
 * loading 20,000 tensors.  Values are immutable; the refcount starts so high
 * that the (atomic) counting never frees them. */
#define SMALL_INT_MIN (-8)
#define SMALL_INT_MAX 1024
static struct tn_value small_ints[SMALL_INT_MAX - SMALL_INT_MIN + 1];
static pthread_once_t small_ints_once = PTHREAD_ONCE_INIT;

/* Fills the shared small ints once (pthread_once). */
static void small_ints_init(void)
{
    for (int k = SMALL_INT_MIN; k <= SMALL_INT_MAX; k++) {
        struct tn_value *v = &small_ints[k - SMALL_INT_MIN];
        v->refcount = LONG_MAX / 2;
        v->kind = TN_VALUE_INT;
        v->v.i = k;
    }
}

/* An int value: a shared immortal one for -8..1024 (release is a no-op on
 * it), else new; NULL with TN_ENOMEM. */
struct tn_value *tn_value_int(int64_t i)
{
    if (i >= SMALL_INT_MIN && i <= SMALL_INT_MAX) {
        pthread_once(&small_ints_once, small_ints_init);
        return &small_ints[i - SMALL_INT_MIN];
    }
    struct tn_value *v = value_new(TN_VALUE_INT);
    if (v)
        v->v.i = i;
    return v;
}

/* A new float value; NULL with TN_ENOMEM. */
struct tn_value *tn_value_float(double f)
{
    struct tn_value *v = value_new(TN_VALUE_FLOAT);
    if (v)
        v->v.f = f;
    return v;
}

/* A new str value holding a NUL-terminated copy of s's len bytes (s may hold
 * NULs; len is kept). NULL with TN_ENOMEM. */
struct tn_value *tn_value_str_n(const char *s, size_t len)
{
    /* in an arena, the bytes follow the node (str_free knows them there) */
    bool inline_bytes = arena && len < BLOCK_MAX / 2;
    struct tn_value *v = node_new(TN_VALUE_STR, inline_bytes ? len + 1 : 0);
    if (!v)
        return NULL;
    v->v.str.s = inline_bytes ? (char *)(v + 1) : malloc(len + 1);
    if (!v->v.str.s) {
        node_free(v);
        tn_set_error(TN_ENOMEM, "out of memory for a string of %zu bytes", len);
        return NULL;
    }
    memcpy(v->v.str.s, s, len);
    v->v.str.s[len] = 0;
    v->v.str.len = len;
    return v;
}

/* tn_value_str_n over a C string. */
struct tn_value *tn_value_str(const char *s) { return tn_value_str_n(s, strlen(s)); }
/* Empty containers, new references; NULL with TN_ENOMEM. */
struct tn_value *tn_value_tuple(void) { return value_new(TN_VALUE_TUPLE); }
struct tn_value *tn_value_list(void) { return value_new(TN_VALUE_LIST); }
struct tn_value *tn_value_dict(void) { return value_new(TN_VALUE_DICT); }
struct tn_value *tn_value_odict(void) { return value_new(TN_VALUE_ODICT); }

/* A value holding its own reference to t (the caller keeps its own). NULL
 * with TN_ENOMEM. */
struct tn_value *tn_value_tensor(struct tn_tensor *t)
{
    struct tn_value *v = value_new(TN_VALUE_TENSOR);
    if (v)
        v->v.tensor = tn_retain(t);
    return v;
}

/* Adds a reference (atomic) and returns v; NULL is fine. */
struct tn_value *tn_value_retain(struct tn_value *v)
{
    if (v)
        TN_ATOMIC_INC(&v->refcount);
    return v;
}

/* Whether v holds other values (the release walk descends into it). */
static bool holds_values(const struct tn_value *v)
{
    return v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST || v->kind == TN_VALUE_DICT ||
           v->kind == TN_VALUE_ODICT;
}

/* The child of container v at walk position *i (a sequence's items; a
 * dict's keys, values, then attrs), the position moved past it; NULL
 * when none are left. */
static struct tn_value *next_child(const struct tn_value *v, size_t *i)
{
    /* the node PREFETCH places on is fetched while the walk goes on: the
     * walk's time is the memory's (nodes lie where their load left them) */
    enum { PREFETCH = 8 };
    if (v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST) {
        if (*i + PREFETCH < v->v.seq.n)
            __builtin_prefetch(v->v.seq.items[*i + PREFETCH], 1);
        return *i < v->v.seq.n ? v->v.seq.items[(*i)++] : NULL;
    }
    size_t n = v->v.dict.n;
    while (*i <= 2 * n) {
        size_t k = (*i)++;
        if (k + PREFETCH < 2 * n)
            __builtin_prefetch(k + PREFETCH < n ? v->v.dict.keys[k + PREFETCH]
                                                : v->v.dict.vals[k + PREFETCH - n], 1);
        struct tn_value *c = k < n ? v->v.dict.keys[k] : k < 2 * n ? v->v.dict.vals[k - n]
                                                                   : v->v.dict.attrs;
        if (c)
            return c;
    }
    return NULL;
}

/* Frees a value whose count reached zero once its children are released:
 * its own parts, then the node. */
static void free_node(struct tn_value *v)
{
    switch (v->kind) {
    case TN_VALUE_STR:
    case TN_VALUE_GLOBAL:
    case TN_VALUE_OPAQUE:
        str_free(v);
        break;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        array_free(v, v->v.seq.items);
        break;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        array_free(v, v->v.dict.keys); /* the values' array with it */
        free(v->v.dict.index);
        break;
    case TN_VALUE_TENSOR:
        tn_release(v->v.tensor);
        break;
    case TN_VALUE_STORAGE:
        tn_storage_release(v->v.storage.storage);
        break;
    default:
        break;
    }
    node_free(v);
}

/* Drops a reference; the last frees v and every child whose last reference
 * it held, depth first with a stack of its own (a deep tree from a hostile
 * pickle cannot overflow the C stack).  Each child is freed right after
 * its count drops, while it is in the cache: the whole tree of a 10,000-key
 * DCP .metadata is freed in a few milliseconds.  NULL is fine. */
void tn_value_release(struct tn_value *v)
{
    if (!v || TN_ATOMIC_DEC(&v->refcount) != 0)
        return;
    if (!holds_values(v)) {
        free_node(v);
        return;
    }
    struct frame {
        struct tn_value *v;
        size_t i; /* next_child's position */
    } first[64], *st = first;
    size_t n = 1, cap = 64;
    st[0] = (struct frame){v, 0};
    while (n) {
        struct frame *f = &st[n - 1];
        struct tn_value *c = next_child(f->v, &f->i);
        if (!c) {
            free_node(f->v);
            n--;
            continue;
        }
        if (TN_ATOMIC_DEC(&c->refcount) != 0)
            continue;
        if (!holds_values(c)) {
            free_node(c);
            continue;
        }
        if (n == cap) {
            struct frame *w = st == first ? malloc(2 * cap * sizeof *w)
                                          : realloc(st, 2 * cap * sizeof *w);
            if (!w)
                TN_ASSERT(!"out of memory freeing a value");
            if (st == first)
                memcpy(w, first, sizeof first);
            st = w;
            cap *= 2;
        }
        st[n++] = (struct frame){c, 0};
    }
    if (st != first)
        free(st);
}

/* Appends item to a tuple or list (a bug for other kinds), taking over item's
 * reference, also on failure. 0 or TN_ENOMEM. */
int tn_value_append(struct tn_value *seq, struct tn_value *item)
{
    TN_ASSERT(seq->kind == TN_VALUE_TUPLE || seq->kind == TN_VALUE_LIST);
    if (!item) /* a constructor that ran out of memory: callers pass its result on */
        return tn_set_error(TN_ENOMEM, "out of memory making a %s item",
                            seq->kind == TN_VALUE_TUPLE ? "tuple" : "list");
    if (seq->v.seq.n == seq->v.seq.cap) {
        size_t cap = seq->v.seq.cap ? seq->v.seq.cap * 2 : 4;
        bool in;
        struct tn_value **p = array_new(cap * sizeof *p, &in);
        if (p) {
            if (seq->v.seq.n)
                memcpy(p, seq->v.seq.items, seq->v.seq.n * sizeof *p);
            array_swap(seq, (void **)&seq->v.seq.items, p, in);
        }
        if (!p) {
            tn_value_release(item);
            return tn_set_error(TN_ENOMEM, "out of memory growing a %s",
                                tn_value_kind_name(seq->kind));
        }
        seq->v.seq.items = p;
        seq->v.seq.cap = cap;
    }
    seq->v.seq.items[seq->v.seq.n++] = item;
    return 0;
}

/* Python's == for dict keys: bool, int and float compare by number (True == 1
 * == 1.0), str by bytes, tuples item by item, tensors by identity; other
 * kinds are never equal. */
bool tn_value_key_equal(const struct tn_value *a, const struct tn_value *b)
{
    if (a == b)
        return true;
    /* Python: True == 1 == 1.0 as dict keys. */
    bool an = a->kind == TN_VALUE_BOOL || a->kind == TN_VALUE_INT || a->kind == TN_VALUE_FLOAT;
    bool bn = b->kind == TN_VALUE_BOOL || b->kind == TN_VALUE_INT || b->kind == TN_VALUE_FLOAT;
    if (an && bn) {
        if (a->kind == TN_VALUE_FLOAT || b->kind == TN_VALUE_FLOAT) {
            double x = a->kind == TN_VALUE_FLOAT ? a->v.f : a->kind == TN_VALUE_INT ? (double)a->v.i : a->v.b;
            double y = b->kind == TN_VALUE_FLOAT ? b->v.f : b->kind == TN_VALUE_INT ? (double)b->v.i : b->v.b;
            return x == y;
        }
        int64_t x = a->kind == TN_VALUE_INT ? a->v.i : a->v.b;
        int64_t y = b->kind == TN_VALUE_INT ? b->v.i : b->v.b;
        return x == y;
    }
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case TN_VALUE_NONE:
        return true;
    case TN_VALUE_STR:
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, a->v.str.len);
    case TN_VALUE_TUPLE:
        if (a->v.seq.n != b->v.seq.n)
            return false;
        for (size_t i = 0; i < a->v.seq.n; i++)
            if (!tn_value_key_equal(a->v.seq.items[i], b->v.seq.items[i]))
                return false;
        return true;
    case TN_VALUE_TENSOR:
        return a->v.tensor == b->v.tensor;
    default:
        return false;
    }
}

/* A 64-bit finalizer (murmur3's) spreading a key hash over the table. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* A hash consistent with tn_value_key_equal (1 == 1.0 == True). */
static uint64_t key_hash(const struct tn_value *k)
{
    switch (k->kind) {
    case TN_VALUE_NONE: return 0x9e3779b97f4a7c15ull;
    case TN_VALUE_BOOL: return mix64((uint64_t)k->v.b);
    case TN_VALUE_INT: return mix64((uint64_t)k->v.i);
    case TN_VALUE_FLOAT: {
        double f = k->v.f;
        if (f >= -9.2e18 && f <= 9.2e18 && f == (double)(int64_t)f)
            return mix64((uint64_t)(int64_t)f);
        uint64_t bits;
        memcpy(&bits, &f, 8);
        return mix64(bits);
    }
    case TN_VALUE_STR: {
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < k->v.str.len; i++)
            h = (h ^ (unsigned char)k->v.str.s[i]) * 1099511628211ull;
        return h;
    }
    case TN_VALUE_TUPLE: {
        uint64_t h = 0x345678;
        for (size_t i = 0; i < k->v.seq.n; i++)
            h = mix64(h ^ key_hash(k->v.seq.items[i]));
        return h;
    }
    default:
        return mix64((uint64_t)(uintptr_t)(k->kind == TN_VALUE_TENSOR ? (void *)k->v.tensor
                                                                     : (void *)k));
    }
}

/* Rebuilds the lookup table for a dict of n entries (slots hold index+1). */
static int index_build(struct tn_value *d, size_t want)
{
    size_t cap = 32;
    while (cap < 2 * want)
        cap *= 2;
    size_t *ix = calloc(cap, sizeof *ix);
    if (!ix)
        return tn_set_error(TN_ENOMEM, "out of memory indexing a dict");
    for (size_t i = 0; i < d->v.dict.n; i++) {
        size_t j = (size_t)key_hash(d->v.dict.keys[i]) & (cap - 1);
        while (ix[j])
            j = (j + 1) & (cap - 1);
        ix[j] = i + 1;
    }
    free(d->v.dict.index);
    d->v.dict.index = ix;
    d->v.dict.index_cap = cap;
    return 0;
}

/* The position of key in d, or -1; small dicts are scanned. */
static long dict_find(const struct tn_value *d, const struct tn_value *key)
{
    if (!d->v.dict.index) {
        if (key->kind == TN_VALUE_STR) { /* the common case, without the calls */
            for (size_t i = 0; i < d->v.dict.n; i++) {
                const struct tn_value *k = d->v.dict.keys[i];
                if (k == key || (k->kind == TN_VALUE_STR && k->v.str.len == key->v.str.len &&
                                 !memcmp(k->v.str.s, key->v.str.s, key->v.str.len)))
                    return (long)i;
            }
            return -1;
        }
        for (size_t i = 0; i < d->v.dict.n; i++)
            if (tn_value_key_equal(d->v.dict.keys[i], key))
                return (long)i;
        return -1;
    }
    size_t cap = d->v.dict.index_cap;
    for (size_t j = (size_t)key_hash(key) & (cap - 1); d->v.dict.index[j]; j = (j + 1) & (cap - 1))
        if (tn_value_key_equal(d->v.dict.keys[d->v.dict.index[j] - 1], key))
            return (long)d->v.dict.index[j] - 1;
    return -1;
}

/* d[key] = val on a dict or odict (a bug for other kinds), taking over both
 * references, also on failure; an existing key keeps its place and gets val.
 * A NULL key or val (a constructor out of memory, as in
 * tn_value_set(d, tn_value_str(k), v)) releases the other and fails.
 * 0 or TN_ENOMEM. */
int tn_value_set(struct tn_value *d, struct tn_value *key, struct tn_value *val)
{
    TN_ASSERT(d->kind == TN_VALUE_DICT || d->kind == TN_VALUE_ODICT);
    if (!key || !val) {
        tn_value_release(key);
        tn_value_release(val);
        return tn_set_error(TN_ENOMEM, "out of memory making a dict entry");
    }
    long at = dict_find(d, key);
    if (at >= 0) {
        tn_value_release(key);
        tn_value_release(d->v.dict.vals[at]);
        d->v.dict.vals[at] = val;
        return 0;
    }
    if (d->v.dict.n == d->v.dict.cap) {
        /* keys and values in one array: cap keys, then cap values; 4 to
         * start, as most dicts of a load are an object's few attributes */
        size_t cap = d->v.dict.cap ? d->v.dict.cap * 2 : 4;
        bool in;
        struct tn_value **k = array_new(2 * cap * sizeof *k, &in);
        if (!k) {
            tn_value_release(key);
            tn_value_release(val);
            return tn_set_error(TN_ENOMEM, "out of memory growing a dict");
        }
        if (d->v.dict.n) {
            memcpy(k, d->v.dict.keys, d->v.dict.n * sizeof *k);
            memcpy(k + cap, d->v.dict.vals, d->v.dict.n * sizeof *k);
        }
        array_swap(d, (void **)&d->v.dict.keys, k, in);
        d->v.dict.vals = k + cap;
        d->v.dict.cap = cap;
    }
    d->v.dict.keys[d->v.dict.n] = key;
    d->v.dict.vals[d->v.dict.n] = val;
    d->v.dict.n++;
    size_t n = d->v.dict.n;
    if (n > 16 && (!d->v.dict.index || 2 * n > d->v.dict.index_cap)) {
        if (index_build(d, n * 2) < 0) {
            d->v.dict.n--;
            tn_value_release(key);
            tn_value_release(val);
            return tn_last_status();
        }
    } else if (d->v.dict.index) {
        size_t cap = d->v.dict.index_cap;
        size_t j = (size_t)key_hash(key) & (cap - 1);
        while (d->v.dict.index[j])
            j = (j + 1) & (cap - 1);
        d->v.dict.index[j] = n;
    }
    return 0;
}

/* d[key] = val for a C string key (core/internal.h); consumes val, a NULL val
 * counting as its failed construction. */
int tn__value_set_str(struct tn_value *d, const char *key, struct tn_value *val)
{
    return tn_value_set(d, tn_value_str(key), val); /* a NULL key or val fails there */
}

/* d[key] for a str key, borrowed from d, or NULL when d is not a dict or
 * lacks the key. */
struct tn_value *tn_value_get(const struct tn_value *d, const char *key)
{
    if (d->kind != TN_VALUE_DICT && d->kind != TN_VALUE_ODICT)
        return NULL;
    struct tn_value k = {.refcount = 1, .kind = TN_VALUE_STR};
    k.v.str.s = (char *)(uintptr_t)key;
    k.v.str.len = strlen(key);
    long at = dict_find(d, &k);
    return at >= 0 ? d->v.dict.vals[at] : NULL;
}

/* Python's type name of a kind ("OrderedDict", "Tensor"), a static string;
 * "?" for no kind. */
const char *tn_value_kind_name(enum tn_value_kind kind)
{
    static const char *const names[] = {"NoneType", "bool", "int", "float", "str", "tuple",
                                        "list", "dict", "OrderedDict", "Tensor", "global",
                                        "storage", "object"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* Appends a key's text to the path: strings as they are, numbers in
 * decimal, anything else as its type name. */
static void path_key(struct tn__bytes *p, const struct tn_value *k)
{
    if (p->len)
        tn__bytes_byte(p, '.');
    switch (k->kind) {
    case TN_VALUE_STR: tn__bytes_put(p, k->v.str.s, k->v.str.len); break;
    case TN_VALUE_INT: tn__bytes_printf(p, "%lld", (long long)k->v.i); break;
    case TN_VALUE_BOOL: tn__bytes_printf(p, "%s", k->v.b ? "True" : "False"); break;
    case TN_VALUE_FLOAT: tn__bytes_printf(p, "%.17g", k->v.f); break;
    case TN_VALUE_NONE: tn__bytes_printf(p, "None"); break;
    default: tn__bytes_printf(p, "<%s>", tn_value_kind_name(k->kind)); break;
    }
}

/* Calls fn on every leaf under v: a tensor, a scalar, a string, an empty
 * container (the containers themselves are gone through). */
static int walk(const struct tn_value *v, struct tn__bytes *path, tn_value_leaf_fn fn, void *ctx,
                int depth)
{
    if (depth > 1000)
        return tn_set_error(TN_EFORMAT, "value nested more than 1000 deep");
    size_t mark = path->len;
    int rc = 0;
    bool seq = v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST;
    bool dict = v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT;
    if ((!seq && !dict) || (seq ? v->v.seq.n : v->v.dict.n) == 0) {
        tn__bytes_byte(path, 0);
        if (path->failed)
            return tn_set_error(TN_ENOMEM, "out of memory");
        path->len--;
        return fn((const char *)path->data, v, ctx);
    }
    if (seq) {
        for (size_t i = 0; i < v->v.seq.n && !rc; i++) {
            if (path->len)
                tn__bytes_byte(path, '.');
            tn__bytes_printf(path, "%zu", i);
            rc = walk(v->v.seq.items[i], path, fn, ctx, depth + 1);
            path->len = mark;
        }
        return rc;
    }
    for (size_t i = 0; i < v->v.dict.n && !rc; i++) {
        path_key(path, v->v.dict.keys[i]);
        rc = walk(v->v.dict.vals[i], path, fn, ctx, depth + 1);
        path->len = mark;
    }
    return rc;
}

/* Calls fn on every leaf of v (tensor/value.h) with its dotted path (state_dict
 * style), depth first in order; stops at and returns the first non-zero
 * result. */
int tn_value_walk(const struct tn_value *v, tn_value_leaf_fn fn, void *ctx)
{
    struct tn__bytes path = {0};
    int rc = walk(v, &path, fn, ctx, 0);
    free(path.data);
    return rc;
}

struct tensor_walk {
    tn_value_tensor_fn fn;
    void *ctx;
};

/* tn_value_walk's leaf callback for tn_value_walk_tensors: passes tensors on,
 * skips the rest. */
static int tensor_leaf(const char *path, const struct tn_value *v, void *ctx)
{
    const struct tensor_walk *w = ctx;
    return v->kind == TN_VALUE_TENSOR ? w->fn(path, v->v.tensor, w->ctx) : 0;
}

/* Calls fn on every tensor of v with its dotted path; stops at and returns
 * the first non-zero result. */
int tn_value_walk_tensors(const struct tn_value *v, tn_value_tensor_fn fn, void *ctx)
{
    struct tensor_walk w = {fn, ctx};
    return tn_value_walk(v, tensor_leaf, &w);
}
