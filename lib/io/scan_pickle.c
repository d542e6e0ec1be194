/*
 * io/scan_pickle.c: the auditor's model of the pickle machine: the stack,
 * marks and memo of every opcode of protocols 0-5 (decoded by
 * tn__pickle_decode, as the loader decodes them), globals resolved and
 * classified, FRAME and STOP checks.  Nothing is ever run.
 */
#include "io/scan_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STACK (1u << 20) /* 24 MiB of model values */
#define MAX_MARKS (1u << 20)
#define MAX_MEMO (1u << 20)
#define MAX_GLOBALS 65536u

/* V_TUPLE keeps its first item's text in s, n when that is a string. */
enum { V_OTHER, V_STR, V_BYTES, V_GLOBAL, V_RESULT, V_LIST, V_TUPLE };

struct sv {
    uint8_t k;
    uint32_t g; /* V_GLOBAL: index into the globals; else its node in the
                 * object graph (0: a scalar) */
    const char *s;
    size_t n;
    uint8_t x; /* what joblib's arrays need known: X_INT (n: a small int),
                * X_SHAPE (a tuple of them, n: their product), X_DTYPE
                * (numpy.dtype(s)), X_JAW (a joblib NumpyArrayWrapper) */
};

enum { X_NONE, X_INT, X_SHAPE, X_DTYPE, X_JAW };

/* The dict joblib's NumpyArrayWrapper is built from, as far as filled:
 * the array's element count, dtype and alignment (-1 none). */
struct jaw_state {
    uint32_t node;
    bool has_shape;
    uint64_t count;
    const char *dtype;
    size_t dtlen;
    int64_t align;
};

struct glob {
    char *mod, *name;
    uint64_t off;
    enum tn_scan_use use;
    int sev;
    const char *reason;
};

struct memo_slot {
    uint64_t key;
    bool used;
    struct sv v;
};

struct pm {
    struct tn__scan_ctx *c;
    const char *entry;
    struct sv *st;
    size_t n, cap;
    size_t *marks;
    size_t nmarks, capmarks;
    struct memo_slot *memo;
    size_t memocap, memon;
    /* Indices pickles number densely from 0 (every writer does) live in
     * this array, indexed directly: the hash above, scattered over MiBs,
     * was a quarter of scanning 20,000 tensors.  It grows only to cover an
     * index below twice the entries so far (plus 1024); others hash. */
    struct memo_slot *dense;
    size_t densecap;
    struct glob *g;
    size_t ng, capg;
    /* open-addressed index of g by (module, name): slot = index + 1, 0
     * empty; sized a power of two at least twice ng */
    uint32_t *gh;
    size_t ghcap;
    int proto;
    bool fatal;
    uint64_t start; /* offset of the pickle's first opcode */
    uint64_t frame_end; /* 0: not in a frame */
    uint32_t seen; /* anomaly reasons already reported (bit per reason) */
    uint8_t opseen[32]; /* opcodes reported outside the policy's unpickler */
    unsigned torch1_seen; /* torch1_refuse's kinds already reported */
    struct tn__scan_graph graph;
    struct jaw_state jaw;
    /* after the BUILD of a NumpyArrayWrapper: the array joblib wrote
     * next, raw bytes (skip_bytes, after an alignment byte and its padding
     * when skip_align) or a nested pickle (skip_pickle) */
    bool skip_pending, skip_align, skip_pickle;
    uint64_t skip_bytes;
};

/* The size of a joblib array element of dtype string s, 0 when it is not a
 * plain number type, -1 for objects (then a nested pickle follows). */
static int dtype_itemsize(const char *s, size_t n)
{
    static const struct {
        const char *t;
        int size;
    } types[] = {{"b1", 1}, {"?", 1}, {"i1", 1}, {"u1", 1}, {"i2", 2}, {"u2", 2}, {"f2", 2},
                 {"i4", 4}, {"u4", 4}, {"f4", 4}, {"i8", 8}, {"u8", 8}, {"f8", 8}, {"c8", 8},
                 {"c16", 16}, {"f16", 16}, {"O", -1}, {"O8", -1}, {"O4", -1}};
    if (n && strchr("<>|=", s[0]))
        s++, n--;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].t) == n && !memcmp(types[i].t, s, n))
            return types[i].size;
    return 0;
}

/* Items put into the dict `node`: the facts of a NumpyArrayWrapper state. */
static void jaw_items(struct pm *m, uint32_t node, const struct sv *it, size_t k)
{
    if (!node)
        return;
    if (m->jaw.node != node)
        m->jaw = (struct jaw_state){node, false, 0, NULL, 0, -1};
    for (size_t i = 0; i + 1 < k; i += 2) {
        const struct sv *key = &it[i], *v = &it[i + 1];
        if (key->k != V_STR)
            continue;
        if (key->n == 5 && !memcmp(key->s, "shape", 5)) {
            m->jaw.has_shape = v->x == X_SHAPE;
            m->jaw.count = v->n;
        } else if (key->n == 5 && !memcmp(key->s, "dtype", 5)) {
            m->jaw.dtype = v->x == X_DTYPE ? v->s : NULL;
            m->jaw.dtlen = v->n;
        } else if (key->n == 27 && !memcmp(key->s, "numpy_array_alignment_bytes", 27)) {
            m->jaw.align = v->x == X_INT ? (int64_t)v->n : -1;
        }
    }
}

/* v's node in the object graph (0: a scalar or a global). */
static uint32_t node_of(struct sv v) { return v.k == V_GLOBAL ? 0 : v.g; }

/* A new node holding the items st[b..n) (a tuple, list, call result). */
static uint32_t node_over(struct pm *m, size_t b, size_t n)
{
    uint32_t id = tn__graph_node(&m->graph);
    for (size_t i = b; i < n && id; i++)
        tn__graph_child(&m->graph, id, node_of(m->st[i]), false);
    return id;
}

static struct sv *top(struct pm *m, uint64_t off);

/* Links the container on top of the stack to each of st[b..n) in the
 * object graph (an empty stack: nothing; top reports the underflow). */
static void fill_top(struct pm *m, size_t b, size_t n, uint64_t off)
{
    struct sv *t = top(m, off);
    if (!t)
        return;
    for (size_t i = b; i < n; i++)
        tn__graph_child(&m->graph, node_of(*t), node_of(m->st[i]), false);
}

/* --policy torch1.13: what 1.13's unpickler refuses by the type of what it
 * acts on (a bit per kind: reported once per pickle). */
static void torch1_refuse(struct pm *m, unsigned bit, uint64_t off, const char *reason,
                          const char *detail)
{
    if (m->c->o->policy != TN_ALLOW_TORCH1 || (m->torch1_seen & 1u << bit))
        return;
    m->torch1_seen |= 1u << bit;
    size_t n = m->c->r->n;
    tn__scan_add(m->c, m->entry, off, "", "", TN_SCAN_NONE, TN_SCAN_UNKNOWN, reason);
    tn__scan_set_detail(m->c, n, detail);
}

/* --policy torch1.13: what PyTorch 1.13's weights_only unpickler refuses
 * beyond globals: any opcode it lacks (BINFLOAT, STACK_GLOBAL, FRAME,
 * MEMOIZE, SHORT_BINUNICODE, ...), once per opcode and pickle. */
static void torch1_op(struct pm *m, const struct tn_pickle_op *op)
{
    if (m->c->o->policy != TN_ALLOW_TORCH1 || tn__pickle_op_allowed(op->code, TN_ALLOW_TORCH1) ||
        (m->opseen[op->code >> 3] >> (op->code & 7) & 1))
        return;
    m->opseen[op->code >> 3] |= (uint8_t)(1u << (op->code & 7));
    size_t n = m->c->r->n;
    tn__scan_add(m->c, m->entry, op->pos, "", "", TN_SCAN_NONE, TN_SCAN_UNKNOWN,
                 "opcode-not-allowed");
    char d[128];
    snprintf(d, sizeof d, "opcode %s is outside PyTorch 1.13's weights_only unpickler",
             tn__pickle_op_name(op->code));
    tn__scan_set_detail(m->c, n, d);
}

/* Reports an anomaly once per stream. */
static void pm_anomaly(struct pm *m, unsigned bit, uint64_t off, const char *reason)
{
    if (m->seen & (1u << bit))
        return;
    m->seen |= 1u << bit;
    tn__scan_anomaly(m->c, m->entry, off, reason);
}

/* Pushes v; past MAX_STACK the stream stops (a finding, m->fatal), without
 * memory too (c->oom). */
static void push(struct pm *m, struct sv v, uint64_t off)
{
    if (m->n == m->cap) {
        if (m->cap >= MAX_STACK) {
            pm_anomaly(m, 0, off, "stack-limit");
            m->fatal = true;
            return;
        }
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct sv *s = realloc(m->st, cap * sizeof *s);
        if (!s) {
            m->c->oom = true;
            m->fatal = true;
            return;
        }
        m->st = s;
        m->cap = cap;
    }
    m->st[m->n++] = v;
}

/* The stack depth at the topmost MARK (0 without one): what pops may not go
 * below. */
static size_t floor_of(const struct pm *m) { return m->nmarks ? m->marks[m->nmarks - 1] : 0; }

/* Pops one item; an underflow (where CPython stops with an error, after
 * whatever ran before) is reported and yields an unknown value. */
static struct sv pop(struct pm *m, uint64_t off)
{
    if (m->n > floor_of(m))
        return m->st[--m->n];
    pm_anomaly(m, 1, off, "stack-underflow");
    return (struct sv){V_OTHER, 0, NULL, 0, X_NONE};
}

/* The top item above the floor (borrowed, valid until the next push), or NULL
 * with a stack-underflow finding. */
static struct sv *top(struct pm *m, uint64_t off)
{
    if (m->n > floor_of(m))
        return &m->st[m->n - 1];
    pm_anomaly(m, 1, off, "stack-underflow");
    return NULL;
}

/* The items above the topmost mark: their index; the mark is popped. */
static size_t pop_mark(struct pm *m, uint64_t off)
{
    if (!m->nmarks) {
        pm_anomaly(m, 2, off, "mark-missing");
        return m->n;
    }
    return m->marks[--m->nmarks];
}

/* Where the opcode's slice of the stack starts (its column in the opcode
 * table, io/internal.h): above the topmost MARK, which is popped (a missing
 * one reported), or at the top k items; m->n when fewer than k sit above
 * the floor (drop_slice's pops report that underflow). */
static size_t slice_start(struct pm *m, int code, uint64_t off)
{
    struct tn__pickle_slice sl = tn__pickle_op_slice(code);
    if (sl.items == TN_PICKLE_SLICE_MARK)
        return pop_mark(m, off);
    size_t k = (size_t)sl.items;
    return m->n >= floor_of(m) + k ? m->n - k : m->n;
}

/* Drops the slice slice_start found at b: down to b after a MARK, else the
 * top k items one pop at a time (each missing one a stack-underflow). */
static void drop_slice(struct pm *m, int code, size_t b, uint64_t off)
{
    struct tn__pickle_slice sl = tn__pickle_op_slice(code);
    if (sl.items == TN_PICKLE_SLICE_MARK) {
        m->n = b;
        return;
    }
    for (int k = sl.items; k > 0; k--)
        pop(m, off);
}

/* FNV-1a over "mod\0name", for the table of globals met. */
static size_t global_hash(const char *mod, const char *name)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a over "mod\0name" */
    for (const char *p = mod; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    h *= 1099511628211u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    return (size_t)(h ^ h >> 32);
}

/* The slot of (mod, name) in m->gh: its entry, or the empty slot for it. */
static size_t global_slot(const struct pm *m, const char *mod, const char *name)
{
    size_t i = global_hash(mod, name) & (m->ghcap - 1);
    while (m->gh[i]) {
        const struct glob *g = &m->g[m->gh[i] - 1];
        if (!strcmp(g->mod, mod) && !strcmp(g->name, name))
            break;
        i = (i + 1) & (m->ghcap - 1);
    }
    return i;
}

/* Grows the index to hold one more global (rehashing every one). */
static bool global_index_grow(struct pm *m)
{
    if (m->ghcap >= 2 * (m->ng + 1))
        return true;
    size_t cap = m->ghcap ? m->ghcap * 2 : 64;
    uint32_t *gh = calloc(cap, sizeof *gh);
    if (!gh)
        return false;
    free(m->gh);
    m->gh = gh;
    m->ghcap = cap;
    for (size_t k = 0; k < m->ng; k++)
        m->gh[global_slot(m, m->g[k].mod, m->g[k].name)] = (uint32_t)k + 1;
    return true;
}

/* The global module.name (already resolved) as an index, created on first
 * sight with its verdict: a pickle naming a global a million times (or a
 * thousand globals in turn) holds one finding per global. */
static long global_index(struct pm *m, const char *mod, const char *name, uint64_t off, int sev,
                         const char *reason)
{
    if (m->ghcap) {
        size_t slot = global_slot(m, mod, name);
        if (m->gh[slot])
            return (long)m->gh[slot] - 1;
    }
    if (!global_index_grow(m)) {
        m->c->oom = true;
        m->fatal = true;
        return -1;
    }
    if (m->ng == m->capg) {
        if (m->capg >= MAX_GLOBALS) {
            pm_anomaly(m, 3, off, "globals-limit");
            m->fatal = true;
            return -1;
        }
        size_t cap = m->capg ? m->capg * 2 : 16;
        struct glob *g = realloc(m->g, cap * sizeof *g);
        if (!g) {
            m->c->oom = true;
            m->fatal = true;
            return -1;
        }
        m->g = g;
        m->capg = cap;
    }
    struct glob *g = &m->g[m->ng];
    g->mod = tn__scan_dupn(mod, strlen(mod));
    g->name = tn__scan_dupn(name, strlen(name));
    if (!g->mod || !g->name) {
        free(g->mod);
        free(g->name);
        m->c->oom = true;
        m->fatal = true;
        return -1;
    }
    g->off = off;
    g->use = TN_SCAN_IMPORTED;
    g->sev = sev;
    g->reason = reason;
    m->gh[global_slot(m, g->mod, g->name)] = (uint32_t)m->ng + 1;
    return (long)m->ng++;
}

/* Pushes global mod.name (lengths given: the bytes come from the stream and
 * may hold NULs, which are a finding rather than a truncation), resolved
 * through the policy's renames and graded by its allowlist; the global is
 * recorded once per stream. Without memory the stream stops (c->oom). */
static void push_global(struct pm *m, const char *mod, size_t ml, const char *name, size_t nl,
                        uint64_t off)
{
    char *a = tn__scan_dupn(mod, ml), *b = tn__scan_dupn(name, nl);
    if (!a || !b) {
        free(a);
        free(b);
        m->c->oom = true;
        m->fatal = true;
        return;
    }
    const char *rm, *rn;
    tn__scan_resolve(a, b, m->proto, &rm, &rn);
    int sev;
    const char *reason = NULL;
    if (memchr(mod, 0, ml) || memchr(name, 0, nl)) {
        sev = TN_SCAN_UNKNOWN; /* CPython refuses; a C scanner must not truncate it */
        reason = "global-nul";
    } else {
        sev = tn_scan_global_severity(a, b, m->proto, m->c->o);
        reason = sev == TN_SCAN_DANGEROUS ? "dangerous-global" : "global-not-allowed";
    }
    long i = global_index(m, rm, rn, off, sev, reason);
    free(a);
    free(b);
    if (i >= 0)
        push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0, X_NONE}, off);
}

/* A tuple of small ints st[b..e) is a shape: n gets their product. */
static void shape_of(const struct pm *m, struct sv *v, size_t b, size_t e)
{
    uint64_t p = 1;
    for (size_t i = b; i < e; i++) {
        if (m->st[i].x != X_INT)
            return;
        p = m->st[i].n && p > UINT64_MAX / m->st[i].n ? UINT64_MAX : p * m->st[i].n;
    }
    v->x = X_SHAPE;
    v->n = (size_t)p;
}

/* A tuple whose first item is first. */
static struct sv tuple_of(struct sv first)
{
    return first.k == V_STR ? (struct sv){V_TUPLE, 0, first.s, first.n, X_NONE}
                            : (struct sv){V_TUPLE, 0, NULL, 0, X_NONE};
}

/* A callable (or class) was used: record how, or flag it as unresolved. */
static void use(struct pm *m, struct sv f, enum tn_scan_use u, uint64_t off)
{
    if (f.k == V_GLOBAL) {
        if (m->g[f.g].use < u)
            m->g[f.g].use = u;
        return;
    }
    long i = global_index(m, "?", "?", off, TN_SCAN_UNKNOWN, "callable-unresolved");
    if (i >= 0 && m->g[i].use < u)
        m->g[i].use = u;
}

/* The hash table's slot for key: its entry, or the empty slot for it. */
static struct memo_slot *memo_probe(struct memo_slot *t, size_t cap, uint64_t key)
{
    size_t h = (size_t)(key * 0x9e3779b97f4a7c15ull) & (cap - 1);
    while (t[h].used && t[h].key != key)
        h = (h + 1) & (cap - 1);
    return &t[h];
}

/* The memo slot of index key: a dense array for indexes near the count put so
 * far, a hash table for sparse ones (so a hostile index cannot make us
 * allocate its size); create makes the slot, up to MAX_MEMO (a finding, then
 * m->fatal). NULL when absent and not created. */
static struct memo_slot *memo_find(struct pm *m, uint64_t key, bool create, uint64_t off)
{
    if (key < m->densecap && m->dense[key].used)
        return &m->dense[key];
    if (m->memocap) { /* an index put before the array covered it */
        struct memo_slot *s = memo_probe(m->memo, m->memocap, key);
        if (s->used)
            return s;
    }
    if (!create)
        return NULL;
    if (m->memon >= MAX_MEMO) {
        pm_anomaly(m, 4, off, "memo-limit");
        m->fatal = true;
        return NULL;
    }
    if (key >= m->densecap && key < 2 * (uint64_t)m->memon + 1024) {
        size_t cap = m->densecap ? m->densecap * 2 : 1024;
        while (cap <= key)
            cap *= 2;
        struct memo_slot *d = realloc(m->dense, cap * sizeof *d);
        if (!d) {
            m->c->oom = true;
            m->fatal = true;
            return NULL;
        }
        memset(d + m->densecap, 0, (cap - m->densecap) * sizeof *d);
        m->dense = d;
        m->densecap = cap;
    }
    struct memo_slot *s;
    if (key < m->densecap) {
        s = &m->dense[key];
    } else {
        if ((m->memon + 1) * 2 > m->memocap) {
            size_t cap = m->memocap ? m->memocap * 2 : 64;
            while (cap < (m->memon + 1) * 2)
                cap *= 2;
            struct memo_slot *t = calloc(cap, sizeof *t);
            if (!t) {
                m->c->oom = true;
                m->fatal = true;
                return NULL;
            }
            for (size_t i = 0; i < m->memocap; i++)
                if (m->memo[i].used)
                    *memo_probe(t, cap, m->memo[i].key) = m->memo[i];
            free(m->memo);
            m->memo = t;
            m->memocap = cap;
        }
        s = memo_probe(m->memo, m->memocap, key);
    }
    s->used = true;
    s->key = key;
    m->memon++;
    return s;
}

/* PUT/BINPUT/MEMOIZE: records the top item under idx (a negative index is a
 * finding). */
static void memo_put(struct pm *m, int64_t idx, uint64_t off)
{
    struct sv *t = top(m, off);
    if (idx < 0) {
        pm_anomaly(m, 5, off, "memo-negative");
        return;
    }
    struct memo_slot *s = memo_find(m, (uint64_t)idx, true, off);
    if (s)
        s->v = t ? *t : (struct sv){V_OTHER, 0, NULL, 0, X_NONE};
}

/* GET/BINGET: pushes the item memoized under idx, or an unknown value with a
 * memo-missing finding. */
static void memo_get(struct pm *m, int64_t idx, uint64_t off)
{
    struct memo_slot *s = idx >= 0 ? memo_find(m, (uint64_t)idx, false, off) : NULL;
    if (!s) {
        pm_anomaly(m, 6, off, "memo-missing");
        push(m, (struct sv){V_OTHER, 0, NULL, 0, X_NONE}, off);
        return;
    }
    push(m, s->v, off);
}

/* STRING/UNICODE text arguments: a constant when no escape is involved. */
static struct sv text_value(const char *s, size_t n, bool quoted)
{
    if (quoted) {
        if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
            return (struct sv){V_OTHER, 0, NULL, 0, X_NONE};
        s++;
        n -= 2;
    }
    if (memchr(s, '\\', n))
        return (struct sv){V_OTHER, 0, NULL, 0, X_NONE};
    return (struct sv){V_STR, 0, s, n, X_NONE};
}

/* The key of a text GET or PUT as CPython's C unpickler reads it:
 * PyLong_FromString(line, NULL, 10) over the NUL-terminated line, so
 * whitespace around it ("10\r", " 10"), a sign ("+10") and underscores
 * between digits ("1_0") are accepted, and a NUL ends it.  *plain: only
 * the digits a pickler writes. */
static bool cpython_key(const char *s, size_t n, int64_t *key, bool *plain)
{
    const char *z = memchr(s, 0, n);
    size_t i = 0;
    if (z)
        n = (size_t)(z - s);
    *plain = n > 0 && !z && (n == 1 || s[0] != '0');
    for (size_t k = 0; k < n && *plain; k++)
        *plain = s[k] >= '0' && s[k] <= '9';
#define SPACE(ch) ((ch) == ' ' || ((ch) >= '\t' && (ch) <= '\r'))
    while (i < n && SPACE(s[i]))
        i++;
    bool neg = i < n && s[i] == '-';
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    uint64_t v = 0;
    size_t digits = 0;
    for (; i < n; i++) {
        if (s[i] == '_' && digits && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')
            continue;
        if (s[i] < '0' || s[i] > '9')
            break;
        if (v > ((uint64_t)INT64_MAX - 9) / 10)
            return false; /* past Py_ssize_t: OverflowError */
        v = v * 10 + (uint64_t)(s[i] - '0');
        digits++;
    }
    while (i < n && SPACE(s[i]))
        i++;
#undef SPACE
    if (!digits || i != n)
        return false;
    *key = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* Is v the global mod.name? */
static bool is_global(const struct pm *m, struct sv v, const char *mod, const char *name)
{
    return v.k == V_GLOBAL && !strcmp(m->g[v.g].mod, mod) && !strcmp(m->g[v.g].name, name);
}

/* Runs one decoded opcode on the abstract machine: the stack holds what the
 * scan needs of each value (strings, globals, list and shape facts, graph
 * nodes), never a Python object, and every stack error CPython would raise is
 * a finding instead of a stop, so the rest of the stream is still audited.
 * Returns nothing; m->fatal stops the stream. */
static void step(struct pm *m, const struct tn_pickle_op *op)
{
    uint64_t off = op->pos;
    struct sv other = {V_OTHER, 0, NULL, 0, X_NONE};
    switch (op->code) {
    /* PROTO n: the version; past 5 or not first in the stream is an anomaly */
    case TN_OP_PROTO:
        if (op->i > 5)
            pm_anomaly(m, 7, off, "protocol-unsupported");
        if (off != m->start)
            pm_anomaly(m, 8, off, "proto-misplaced");
        m->proto = (int)op->i;
        return;
    /* FRAME n: the frame's end, checked for nesting and a sane length */
    case TN_OP_FRAME:
        if (m->frame_end && off < m->frame_end)
            pm_anomaly(m, 9, off, "frame-nested");
        if (op->i < 0 || (uint64_t)op->i > UINT64_MAX / 2) {
            pm_anomaly(m, 10, off, "frame-length");
            m->frame_end = 0;
            return;
        }
        m->frame_end = off + 9 + (uint64_t)op->i;
        return;
    case TN_OP_STOP: return; /* handled by the caller */
    /* MARK: remembers the stack height (MAX_MARKS deep, else the stream stops) */
    case TN_OP_MARK:
        if (m->nmarks == m->capmarks) {
            if (m->capmarks >= MAX_MARKS) {
                pm_anomaly(m, 11, off, "mark-limit");
                m->fatal = true;
                return;
            }
            size_t cap = m->capmarks ? m->capmarks * 2 : 16;
            size_t *p = realloc(m->marks, cap * sizeof *p);
            if (!p) {
                m->c->oom = true;
                m->fatal = true;
                return;
            }
            m->marks = p;
            m->capmarks = cap;
        }
        m->marks[m->nmarks++] = m->n;
        return;
    /* POP: drops the top item, or a bare mark as CPython does */
    case TN_OP_POP:
        if (m->n > floor_of(m))
            m->n--;
        else if (m->nmarks)
            m->nmarks--; /* CPython's POP takes a bare mark */
        else
            pm_anomaly(m, 1, off, "stack-underflow");
        return;
    /* POP_MARK: drops everything down to the topmost mark */
    case TN_OP_POP_MARK:
        m->n = pop_mark(m, off);
        return;
    /* DUP: pushes a copy of the top item */
    case TN_OP_DUP: {
        struct sv *t = top(m, off);
        push(m, t ? *t : other, off);
        return;
    }
    /* STRING, UNICODE: a str when unescaped (STRING unquoted), else opaque */
    case TN_OP_STRING: push(m, text_value(op->s, op->slen, true), off); return;
    case TN_OP_UNICODE: push(m, text_value(op->s, op->slen, false), off); return;
    /* the binary strings and bytes: pushed as views into the stream */
    case TN_OP_BINSTRING: case TN_OP_SHORT_BINSTRING: case TN_OP_BINUNICODE:
    case TN_OP_SHORT_BINUNICODE: case TN_OP_BINUNICODE8:
        push(m, (struct sv){V_STR, 0, op->s, op->slen, X_NONE}, off);
        return;
    case TN_OP_BINBYTES: case TN_OP_SHORT_BINBYTES: case TN_OP_BINBYTES8:
        push(m, (struct sv){V_BYTES, 0, op->s, op->slen, X_NONE}, off);
        return;
    /* ints: a small non-negative one is kept (shapes, sizes), others are opaque */
    case TN_OP_BININT: case TN_OP_BININT1: case TN_OP_BININT2: case TN_OP_LONG1:
        if (!op->big && op->i >= 0) {
            push(m, (struct sv){V_OTHER, 0, NULL, (size_t)op->i, X_INT}, off);
            return;
        }
        push(m, other, off);
        return;
    /* other scalars: opaque */
    case TN_OP_INT: case TN_OP_LONG: case TN_OP_LONG4: case TN_OP_FLOAT: case TN_OP_BINFLOAT:
    case TN_OP_NONE: case TN_OP_NEWTRUE: case TN_OP_NEWFALSE: case TN_OP_BYTEARRAY8:
        push(m, other, off);
        return;
    /* EMPTY_TUPLE: a 0-d shape; EMPTY_LIST, _DICT, _SET: a new container node */
    case TN_OP_EMPTY_TUPLE: /* a 0-d shape: one element */
        push(m, (struct sv){V_OTHER, 0, NULL, 1, X_SHAPE}, off);
        return;
    case TN_OP_EMPTY_LIST:
        push(m, (struct sv){V_LIST, tn__graph_node(&m->graph), NULL, 0, X_NONE}, off);
        return;
    case TN_OP_EMPTY_DICT: case TN_OP_EMPTY_SET:
        push(m, (struct sv){V_OTHER, tn__graph_node(&m->graph), NULL, 0, X_NONE}, off);
        return;
    /* NEXT_BUFFER: an out-of-band buffer (protocol 5) is an anomaly */
    case TN_OP_NEXT_BUFFER:
        pm_anomaly(m, 12, off, "out-of-band-buffer");
        push(m, other, off);
        return;
    /* READONLY_BUFFER: checks only that an item is there */
    case TN_OP_READONLY_BUFFER:
        top(m, off);
        return;
    /* TUPLE, LIST, DICT, FROZENSET: MARK, items -> one container over them;
     * TUPLE1..3: the top 1..3 items -> one tuple (with fewer, an opaque
     * tuple and a stack-underflow) */
    case TN_OP_TUPLE: case TN_OP_LIST: case TN_OP_DICT: case TN_OP_FROZENSET:
    case TN_OP_TUPLE1: case TN_OP_TUPLE2: case TN_OP_TUPLE3: {
        size_t b = slice_start(m, op->code, off);
        bool tuple = op->code != TN_OP_LIST && op->code != TN_OP_DICT &&
                     op->code != TN_OP_FROZENSET;
        /* after a MARK every item above it; else all k items or none */
        bool whole = tn__pickle_op_slice(op->code).items == TN_PICKLE_SLICE_MARK || b < m->n;
        struct sv first = b < m->n ? m->st[b] : other;
        struct sv v = op->code == TN_OP_LIST ? (struct sv){V_LIST, 0, NULL, 0, X_NONE}
                      : tuple              ? tuple_of(first)
                                           : other;
        if (tuple && whole)
            shape_of(m, &v, b, m->n);
        v.g = whole ? node_over(m, b, m->n) : 0;
        drop_slice(m, op->code, b, off);
        push(m, v, off);
        return;
    }
    /* APPEND, APPENDS: items into the container below them */
    case TN_OP_APPEND: case TN_OP_APPENDS: {
        size_t b = slice_start(m, op->code, off), e = m->n;
        drop_slice(m, op->code, b, off);
        fill_top(m, b, e, off);
        struct sv *t = top(m, off);
        if (t && t->k != V_LIST) /* 1.13 appends to lists only */
            torch1_refuse(m, 1, off, "append-not-allowed", "PyTorch 1.13's weights_only "
                          "unpickler appends to lists only");
        return;
    }
    /* SETITEM(S), ADDITEMS: pairs (or set items) into the container below */
    case TN_OP_SETITEM: case TN_OP_SETITEMS: case TN_OP_ADDITEMS: {
        size_t e = m->n, b = slice_start(m, op->code, off);
        drop_slice(m, op->code, b, off);
        fill_top(m, b, e, off);
        struct sv *t = op->code != TN_OP_ADDITEMS && m->n > floor_of(m) ? &m->st[m->n - 1] : NULL;
        if (t)
            jaw_items(m, node_of(*t), &m->st[b], e - b);
        return;
    }
    /* GLOBAL "mod\nname\n": pushes the global, recorded as imported */
    case TN_OP_GLOBAL:
        push_global(m, op->s, op->slen, op->s2, op->s2len, off);
        if (!m->fatal)
            use(m, m->st[m->n - 1], TN_SCAN_IMPORTED, off);
        return;
    /* STACK_GLOBAL: mod, name -> the global (unresolved when not two strs) */
    case TN_OP_STACK_GLOBAL: {
        struct sv name = pop(m, off), mod = pop(m, off);
        if (name.k == V_STR && mod.k == V_STR) {
            push_global(m, mod.s, mod.n, name.s, name.n, off);
            return;
        }
        long i = global_index(m, "?", "?", off, TN_SCAN_UNKNOWN, "stack-global-unresolved");
        if (i >= 0)
            push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0, X_NONE}, off);
        return;
    }
    /* INST "mod\nname\n": MARK, args -> a call of the global (recorded) */
    case TN_OP_INST: {
        m->n = pop_mark(m, off);
        push_global(m, op->s, op->slen, op->s2, op->s2len, off);
        if (m->fatal)
            return;
        struct sv f = pop(m, off);
        use(m, f, TN_SCAN_CALLED, off);
        push(m, (struct sv){V_RESULT, tn__graph_node(&m->graph), NULL, 0, X_NONE}, off);
        return;
    }
    /* OBJ: MARK, cls, args -> a call of cls (recorded) */
    case TN_OP_OBJ: {
        size_t b = pop_mark(m, off);
        struct sv f = b < m->n ? m->st[b] : other;
        if (b >= m->n)
            pm_anomaly(m, 1, off, "stack-underflow");
        uint32_t id = node_over(m, b + 1 < m->n ? b + 1 : m->n, m->n);
        m->n = b;
        use(m, f, TN_SCAN_CALLED, off);
        push(m, (struct sv){V_RESULT, id, NULL, 0, X_NONE}, off);
        return;
    }
    /* NEWOBJ(_EX): cls, args(, kwargs) -> an instance built (recorded) */
    case TN_OP_NEWOBJ: case TN_OP_NEWOBJ_EX: {
        struct sv kw = op->code == TN_OP_NEWOBJ_EX ? pop(m, off) : other;
        struct sv args = pop(m, off);
        struct sv f = pop(m, off);
        uint32_t id = tn__graph_node(&m->graph);
        tn__graph_child(&m->graph, id, node_of(args), false);
        if (op->code == TN_OP_NEWOBJ_EX)
            tn__graph_child(&m->graph, id, node_of(kw), false);
        use(m, f, TN_SCAN_BUILT, off);
        if (op->code == TN_OP_NEWOBJ &&
            !(f.k == V_GLOBAL && !strcmp(m->g[f.g].mod, "torch.nn.parameter") &&
              !strcmp(m->g[f.g].name, "Parameter")))
            torch1_refuse(m, 0, off, "newobj-not-allowed", "PyTorch 1.13's weights_only "
                          "unpickler builds only torch.nn.Parameter with NEWOBJ");
        push(m, (struct sv){V_RESULT, id, NULL, 0,
                            is_global(m, f, "joblib.numpy_pickle", "NumpyArrayWrapper") ? X_JAW
                                                                                    : X_NONE},
             off);
        return;
    }
    /* REDUCE: callable, args -> a call (recorded; numpy.dtype kept for joblib) */
    case TN_OP_REDUCE: {
        struct sv args = pop(m, off);
        struct sv f = pop(m, off);
        use(m, f, TN_SCAN_CALLED, off);
        /* the result counts as holding its arguments (list(x) copies x) */
        uint32_t id = tn__graph_node(&m->graph);
        tn__graph_child(&m->graph, id, node_of(args), false);
        struct sv r = {V_RESULT, id, NULL, 0, X_NONE};
        if (is_global(m, f, "numpy", "dtype") && args.k == V_TUPLE && args.s)
            r = (struct sv){V_RESULT, id, args.s, args.n, X_DTYPE};
        push(m, r, off);
        return;
    }
    /* BUILD: obj, state -> obj; on a global it is a monkey patch (anomaly) */
    case TN_OP_BUILD: {
        struct sv state = pop(m, off);
        struct sv *t = top(m, off);
        if (t)
            tn__graph_child(&m->graph, node_of(*t), node_of(state), true);
        /* joblib writes the array right after its wrapper's BUILD */
        if (t && t->x == X_JAW && node_of(state) && node_of(state) == m->jaw.node &&
            m->jaw.has_shape && m->jaw.dtype) {
            int size = dtype_itemsize(m->jaw.dtype, m->jaw.dtlen);
            if (size < 0 || (size > 0 && m->jaw.count <= UINT64_MAX / (unsigned)size)) {
                m->skip_pending = true;
                m->skip_pickle = size < 0;
                m->skip_bytes = size > 0 ? m->jaw.count * (unsigned)size : 0;
                m->skip_align = m->jaw.align >= 0; /* joblib reads it unless None */
            }
        }
        /* 1.13 builds a Tensor, a Parameter or an OrderedDict: an object
         * some call made, never a literal */
        if (t && t->k != V_RESULT && t->k != V_GLOBAL)
            torch1_refuse(m, 2, off, "build-not-allowed", "PyTorch 1.13's weights_only "
                          "unpickler builds only tensors, parameters and OrderedDicts");
        if (t && t->k == V_GLOBAL) {
            /* setattr on a class or module object: a monkey patch */
            pm_anomaly(m, 13, off, "build-on-global");
            if (m->g[t->g].use < TN_SCAN_BUILT)
                m->g[t->g].use = TN_SCAN_BUILT;
        }
        return;
    }
    /* EXT1/2/4: a copyreg extension code, recorded as a global */
    case TN_OP_EXT1: case TN_OP_EXT2: case TN_OP_EXT4: {
        /* --policy pickle: copyreg's registry is empty in a stock
         * interpreter (only copyreg.add_extension, itself dangerous, fills
         * it), so the load stops with "unregistered extension code" */
        char nm[40];
        snprintf(nm, sizeof nm, "extension %lld", (long long)op->i);
        long i = global_index(m, "copyreg", nm, off,
                              m->c->o->policy == TN_ALLOW_PICKLE ? 0 : TN_SCAN_UNKNOWN,
                              "extension-code");
        if (i >= 0)
            push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0, X_NONE}, off);
        return;
    }
    /* PERSID, BINPERSID: a persistent id -> an opaque object */
    case TN_OP_PERSID:
        push(m, other, off);
        return;
    case TN_OP_BINPERSID: {
        /* 1.13 loads ('storage', ...) tuples only: a tuple is built from
         * MARK or TUPLE1-3, never a string, list or call */
        struct sv pid = pop(m, off);
        if (pid.k != V_TUPLE || !pid.s || pid.n != 7 || memcmp(pid.s, "storage", 7))
            torch1_refuse(m, 3, off, "persid-not-allowed", "PyTorch 1.13's weights_only "
                          "unpickler loads only ('storage', ...) persistent ids");
        push(m, other, off);
        return;
    }
    /* GET, PUT "n\n": the memo by a text key (a non-canonical key is an anomaly) */
    case TN_OP_GET: case TN_OP_PUT: {
        int64_t key;
        bool plain;
        if (!cpython_key(op->s, op->slen, &key, &plain))
            key = -1; /* CPython stops with an error */
        else if (!plain)
            pm_anomaly(m, 18, off, "memo-key-noncanonical");
        if (op->code == TN_OP_GET)
            memo_get(m, key, off);
        else
            memo_put(m, key, off);
        return;
    }
    /* BINGET, LONG_BINGET: pushes memo[i]; BINPUT, LONG_BINPUT, MEMOIZE: stores the top */
    case TN_OP_BINGET: case TN_OP_LONG_BINGET:
        memo_get(m, op->i, off);
        return;
    case TN_OP_BINPUT: case TN_OP_LONG_BINPUT:
        memo_put(m, op->i, off);
        return;
    case TN_OP_MEMOIZE:
        memo_put(m, (int64_t)m->memon, off);
        return;
    default:
        pm_anomaly(m, 14, off, "opcode-unknown");
        return;
    }
}

/* The value a pickle of `bytes` bytes returns: a walk of it longer than
 * 64 values a byte (and 2^24), or containers holding themselves, is an
 * expansion bomb for whatever materialises it. */
static void expansion(struct pm *m, struct sv v, uint64_t bytes)
{
    uint64_t len, lim = bytes > (UINT64_MAX >> 7) ? UINT64_MAX : 64 * bytes;
    bool cycle;
    if (lim < (1u << 24))
        lim = 1u << 24;
    if (m->graph.limit) {
        tn__scan_incomplete(m->c, "a pickle builds more objects than the scanner's graph limit");
        return;
    }
    if (tn__graph_walk(&m->graph, node_of(v), &len, &cycle) < 0 || (len <= lim && !cycle))
        return;
    char d[200];
    if (cycle)
        snprintf(d, sizeof d, "a container that holds itself: a walk of the value never ends");
    else if (len == UINT64_MAX)
        snprintf(d, sizeof d, "a walk of the value meets more than 2^64 values (references "
                 "through the memo and DUP) from %llu bytes", (unsigned long long)bytes);
    else
        snprintf(d, sizeof d, "a walk of the value meets %llu values (references through the "
                 "memo and DUP) from %llu bytes", (unsigned long long)len,
                 (unsigned long long)bytes);
    size_t n = m->c->r->n;
    tn__scan_anomaly(m->c, m->entry, m->start, "expansion");
    tn__scan_set_detail(m->c, n, d);
}

/* After a NumpyArrayWrapper's BUILD, joblib's unpickler reads the array
 * from the stream: an alignment byte and that many bytes of padding, then
 * the raw elements, or for objects a pickle of its own (scanned).  *pos
 * moves past it; -1 when the stream ends first (reported). */
static int skip_array(struct pm *m, const unsigned char *b, size_t len, size_t *pos)
{
    m->skip_pending = false;
    m->frame_end = 0; /* joblib commits the frame before the array */
    if (m->skip_pickle) {
        if (m->c->depth > 32)
            return 0;
        m->c->depth++;
        int rc = tn__scan_one_pickle(m->c, b, len, pos, m->entry);
        m->c->depth--;
        return rc;
    }
    size_t p = *pos;
    if (m->skip_align) {
        if (p >= len || (size_t)b[p] >= len - p) {
            pm_anomaly(m, 15, p, "truncated");
            return -1;
        }
        p += 1 + (size_t)b[p];
    }
    if (m->skip_bytes > len - p) {
        pm_anomaly(m, 15, p, "truncated");
        return -1;
    }
    *pos = p + (size_t)m->skip_bytes;
    return 0;
}

/* Runs the model over one pickle starting at *pos; leaves *pos after its
 * STOP.  Returns 0 when a STOP was reached, -1 when the stream broke (the
 * anomaly is reported) or a limit stopped it. */
int tn__scan_one_pickle(struct tn__scan_ctx *c, const unsigned char *b, size_t len, size_t *pos,
                        const char *entry)
{
    struct pm m = {.c = c, .entry = entry, .start = *pos};
    int rc = -1;
    for (;;) {
        struct tn_pickle_op op;
        size_t p = *pos;
        if (m.frame_end && p == m.frame_end)
            m.frame_end = 0;
        if (tn__pickle_decode(b, len, pos, &op, entry) < 0) {
            const char *msg = tn_last_error();
            pm_anomaly(&m, 15, p, p >= len ? "truncated" : strstr(msg, "invalid") ?
                       "opcode-invalid" : "truncated");
            break;
        }
        if (m.frame_end && *pos > m.frame_end) {
            pm_anomaly(&m, 16, p, "frame-boundary");
            m.frame_end = 0;
        }
        if (op.code == TN_OP_FRAME && m.frame_end == 0 && op.i >= 0 && (uint64_t)op.i > len - *pos)
            pm_anomaly(&m, 10, p, "frame-length");
        if (op.code == TN_OP_STOP) {
            if (m.n != 1 || m.nmarks)
                pm_anomaly(&m, 17, p, "stop-stack");
            if (m.frame_end && *pos != m.frame_end)
                pm_anomaly(&m, 16, p, "frame-boundary");
            if (m.n)
                expansion(&m, m.st[m.n - 1], *pos - m.start);
            rc = 0;
            break;
        }
        torch1_op(&m, &op);
        step(&m, &op);
        if (m.fatal)
            break;
        if (m.skip_pending && skip_array(&m, b, len, pos) < 0)
            break;
    }
    for (size_t i = 0; i < m.ng; i++) {
        if (m.g[i].sev)
            tn__scan_add(c, entry, m.g[i].off, m.g[i].mod, m.g[i].name, m.g[i].use, m.g[i].sev,
                m.g[i].reason);
        free(m.g[i].mod);
        free(m.g[i].name);
    }
    if (m.fatal)
        tn__scan_incomplete(c, "a pickle exceeded the scanner's limits");
    if (m.graph.oom)
        c->oom = true;
    tn__graph_free(&m.graph);
    free(m.g);
    free(m.gh);
    free(m.st);
    free(m.marks);
    free(m.memo);
    free(m.dense);
    return rc;
}

/* Every pickle in b: stacked pickles are scanned in turn.  `expect`
 * pickles are normal (0: any number, reported as stacked after the first);
 * bytes after them that are no pickle are "trailing-bytes" unless
 * `tail_ok` (legacy storage data). */
void tn__scan_pickles(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                      const char *entry, int expect, bool tail_ok)
{
    size_t pos = 0;
    for (int k = 0; pos < len; k++) {
        if (expect && k >= expect && tail_ok)
            return;
        /* --policy pickle: pickles stacked in a plain pickle file (pickle.dump
         * called in turn) are no anomaly when each one is whole */
        bool quiet = false;
        size_t at = pos;
        if (k > 0 && (!expect || k >= expect)) {
            /* Trailing bytes: a loader reading one pickle ignores them, a
             * scanner reading only one misses them.  Scan them. */
            size_t q = pos;
            while (q < len && (b[q] == 0 || b[q] == '\n'))
                q++;
            if (q == len)
                return;
            quiet = !expect && c->o->policy == TN_ALLOW_PICKLE;
            if (!quiet)
                tn__scan_anomaly(c, entry, pos, "trailing-data");
        }
        int rc = tn__scan_one_pickle(c, b, len, &pos, entry);
        if (quiet && rc < 0)
            tn__scan_anomaly(c, entry, at, "trailing-data");
        if (rc < 0)
            return;
    }
}
