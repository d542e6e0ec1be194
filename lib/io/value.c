/*
 * io/value.c: nested Python values (dict, OrderedDict, list, tuple, int,
 * float, str, bool, None, tensor) as checkpoints hold them.
 */
#include "io/internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A new value of kind with one reference (the caller's), zeroed; NULL with
 * TN_ENOMEM. */
static struct tn_value *value_new(enum tn_value_kind kind)
{
    struct tn_value *v = calloc(1, sizeof *v);
    if (!v) {
        tn_set_error(TN_ENOMEM, "out of memory for a value");
        return NULL;
    }
    v->refcount = 1;
    v->kind = kind;
    return v;
}

/* Constructors (tensor/io.h): each returns a new reference, NULL with
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
    struct tn_value *v = value_new(TN_VALUE_STR);
    if (!v)
        return NULL;
    v->v.str.s = malloc(len + 1);
    if (!v->v.str.s) {
        free(v);
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

/* Frees one node whose count reached zero, pushing children whose counts
 * reach zero onto `work`: iterative, so hostile nesting cannot exhaust the
 * C stack. */
static void free_node(struct tn_value *v, struct tn_value ***work, size_t *n, size_t *cap)
{
    struct tn_value *kids_inline[1];
    struct tn_value **kids = kids_inline;
    size_t nk = 0;
    switch (v->kind) {
    case TN_VALUE_STR:
    case TN_VALUE_GLOBAL:
    case TN_VALUE_OPAQUE:
        free(v->v.str.s);
        break;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        kids = v->v.seq.items;
        nk = v->v.seq.n;
        break;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        for (size_t i = 0; i < v->v.dict.n; i++) {
            /* keys go on the same walk, through the vals array's slots */
            struct tn_value *k = v->v.dict.keys[i];
            if (k && TN_ATOMIC_DEC(&k->refcount) == 0) {
                if (*n == *cap) {
                    size_t c = *cap ? *cap * 2 : 64;
                    struct tn_value **w = realloc(*work, c * sizeof *w);
                    if (!w)
                        TN_ASSERT(!"out of memory freeing a value");
                    *work = w;
                    *cap = c;
                }
                (*work)[(*n)++] = k;
            }
        }
        free(v->v.dict.keys);
        free(v->v.dict.index);
        kids = v->v.dict.vals;
        nk = v->v.dict.n;
        if (v->v.dict.attrs) {
            struct tn_value *a = v->v.dict.attrs;
            if (TN_ATOMIC_DEC(&a->refcount) == 0) {
                if (*n == *cap) {
                    size_t c = *cap ? *cap * 2 : 64;
                    struct tn_value **w = realloc(*work, c * sizeof *w);
                    if (!w)
                        TN_ASSERT(!"out of memory freeing a value");
                    *work = w;
                    *cap = c;
                }
                (*work)[(*n)++] = a;
            }
        }
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
    for (size_t i = 0; i < nk; i++) {
        struct tn_value *c = kids[i];
        if (c && TN_ATOMIC_DEC(&c->refcount) == 0) {
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                struct tn_value **w = realloc(*work, nc * sizeof *w);
                if (!w)
                    TN_ASSERT(!"out of memory freeing a value");
                *work = w;
                *cap = nc;
            }
            (*work)[(*n)++] = c;
        }
    }
    if (kids != kids_inline)
        free(kids);
    free(v);
}

/* Drops a reference; the last frees v and, without recursion (a work list, so
 * a deep tree from a hostile pickle cannot overflow the stack), every child
 * whose last reference it held. NULL is fine. */
void tn_value_release(struct tn_value *v)
{
    if (!v || TN_ATOMIC_DEC(&v->refcount) != 0)
        return;
    struct tn_value **work = NULL;
    size_t n = 0, cap = 0;
    free_node(v, &work, &n, &cap);
    while (n)
        free_node(work[--n], &work, &n, &cap);
    free(work);
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
        struct tn_value **p = realloc(seq->v.seq.items, cap * sizeof *p);
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
        size_t cap = d->v.dict.cap ? d->v.dict.cap * 2 : 8;
        struct tn_value **k = realloc(d->v.dict.keys, cap * sizeof *k);
        if (k)
            d->v.dict.keys = k;
        struct tn_value **v = k ? realloc(d->v.dict.vals, cap * sizeof *v) : NULL;
        if (!v) {
            tn_value_release(key);
            tn_value_release(val);
            return tn_set_error(TN_ENOMEM, "out of memory growing a dict");
        }
        d->v.dict.vals = v;
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

/* d[key] = val for a C string key (io/internal.h); consumes val, a NULL val
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
static void path_key(struct tn_io_buf *p, const struct tn_value *k)
{
    if (p->len)
        tn__io_buf_byte(p, '.');
    switch (k->kind) {
    case TN_VALUE_STR: tn__io_buf_put(p, k->v.str.s, k->v.str.len); break;
    case TN_VALUE_INT: tn__io_buf_printf(p, "%lld", (long long)k->v.i); break;
    case TN_VALUE_BOOL: tn__io_buf_printf(p, "%s", k->v.b ? "True" : "False"); break;
    case TN_VALUE_FLOAT: tn__io_buf_printf(p, "%.17g", k->v.f); break;
    case TN_VALUE_NONE: tn__io_buf_printf(p, "None"); break;
    default: tn__io_buf_printf(p, "<%s>", tn_value_kind_name(k->kind)); break;
    }
}

/* Calls fn on every leaf under v: a tensor, a scalar, a string, an empty
 * container (the containers themselves are gone through). */
static int walk(const struct tn_value *v, struct tn_io_buf *path, tn_value_leaf_fn fn, void *ctx,
                int depth)
{
    if (depth > 1000)
        return tn_set_error(TN_EFORMAT, "value nested more than 1000 deep");
    size_t mark = path->len;
    int rc = 0;
    bool seq = v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST;
    bool dict = v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT;
    if ((!seq && !dict) || (seq ? v->v.seq.n : v->v.dict.n) == 0) {
        tn__io_buf_byte(path, 0);
        if (path->failed)
            return tn_set_error(TN_ENOMEM, "out of memory");
        path->len--;
        return fn((const char *)path->data, v, ctx);
    }
    if (seq) {
        for (size_t i = 0; i < v->v.seq.n && !rc; i++) {
            if (path->len)
                tn__io_buf_byte(path, '.');
            tn__io_buf_printf(path, "%zu", i);
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

/* Calls fn on every leaf of v (tensor/io.h) with its dotted path (state_dict
 * style), depth first in order; stops at and returns the first non-zero
 * result. */
int tn_value_walk(const struct tn_value *v, tn_value_leaf_fn fn, void *ctx)
{
    struct tn_io_buf path = {0};
    tn__io_buf_byte(&path, 0);
    path.len = 0;
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
