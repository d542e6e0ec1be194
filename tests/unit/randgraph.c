/*
 * tests/unit/randgraph.c: the random graph generator and the comparison of
 * compiled against interpreted runs (see randgraph.h).
 */
#include "randgraph.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXD 4       /* dimensions of a generated value at most */
#define MAXS 6       /* a generated size at most */

/* ------------------------------------------------------------- choices */

void rg_src_seed(struct rg_src *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->state = seed;
}

void rg_src_bytes(struct rg_src *s, const unsigned char *data, size_t len)
{
    memset(s, 0, sizeof *s);
    s->data = data;
    s->len = len;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint32_t rg_pick(struct rg_src *s, uint32_t n)
{
    if (n <= 1)
        return 0;
    if (!s->data)
        return (uint32_t)(splitmix64(&s->state) % n);
    uint64_t v = 0;
    for (uint64_t span = 1; span < n; span <<= 8)
        v = v << 8 | (s->pos < s->len ? s->data[s->pos++] : 0);
    return (uint32_t)(v % n);
}

/* --------------------------------------------------------- text buffer */

struct sb {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_vadd(struct sb *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (b->oom || k < 0)
        return;
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    b->n += (size_t)k;
}

static void sb_add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vadd(b, fmt, ap);
    va_end(ap);
}

/* a JSON number that reads back as a float */
static void sb_float(struct sb *b, double f)
{
    char t[40];
    snprintf(t, sizeof t, "%.17g", f);
    sb_add(b, "%s%s", t, strpbrk(t, ".eEn") ? "" : ".0");
}

/* ------------------------------------------------------------ the model */

/* A value of the graph as the generator models it. */
struct val {
    char name[24];
    enum tn_dtype dt;
    int nd;
    int64_t sz[MAXD];
    double mag;      /* |element| at most */
    double err;      /* |compiled - interpreted| at most (0: both exact alike) */
    int chain;
    bool contiguous; /* known contiguous (view may apply) */
    bool stride0;    /* may have a stride 0 (an expand, or a view of one) */
};

struct gen {
    struct rg_src *src;
    struct rg_options o;
    struct sb nodes, ins, tvals, outs;
    struct val *v;
    int nv, cap;
    struct tn_value *dict;
    struct tn_generator *tg;
    int chain;
    int nnodes, ninputs;
    size_t node_done;  /* the text's length after the last whole node */
    struct rg_output *out;
    int nout, capout;
    int status;
    /* the node being written */
    int nargs;
    int kind;        /* 1 positional, 2 keyword */
};

#define P(n) rg_pick(G->src, (uint32_t)(n))
#define V(i) (G->v[i])

static bool is_float(enum tn_dtype dt)
{
    return tn_dtype_is_floating(dt);
}

/* one rounding of dt, relative */
static double ulp(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT16: return 0x1p-10;
    case TN_BFLOAT16: return 0x1p-7;
    case TN_FLOAT32: return 0x1p-23;
    case TN_FLOAT64: return 0x1p-52;
    default: return 0;
    }
}

/* what an eager op computing a result of magnitude mag in dt may differ by
 * from the fused one (rounding per op, vectorised transcendentals) */
static double rnd(enum tn_dtype dt, double mag)
{
    /* half types: eager rounds each result once (half an ulp), the
     * float arithmetic under it is far finer; float and double: a few
     * ulps for vectorised exp, erf, tanh and contracted multiply-adds */
    double k = dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? 1 : 4;
    return k * ulp(dt) * (mag > 1 ? mag : 1);
}

/* the largest magnitude a value of dt may reach: half types stay far from
 * their overflow, so that no side rounds to inf where the other does not */
static double cap_of(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT16:
    case TN_BFLOAT16: return 1e4;
    case TN_FLOAT32: return 1e6;
    case TN_FLOAT64: return 1e9;
    default: return INFINITY;
    }
}

static double int_max(enum tn_dtype dt)
{
    switch (dt) {
    case TN_UINT8: return 255;
    case TN_INT32: return 2147483647.0;
    case TN_INT64: return 9.3e18;
    case TN_BOOL: return 1;
    default: return INFINITY;
    }
}

static enum tn_dtype promote(enum tn_dtype a, int nda, enum tn_dtype b, int ndb)
{
    static struct tn_tensor ta, tb;
    ta.dtype = a;
    ta.ndim = nda;
    tb.dtype = b;
    tb.ndim = ndb;
    const struct tn_tensor *ts[2] = {&ta, &tb};
    return tn_result_type(ts, 2, NULL, 0);
}

static enum tn_dtype promote_scalar(enum tn_dtype a, int nda, struct tn_scalar s)
{
    static struct tn_tensor ta;
    ta.dtype = a;
    ta.ndim = nda;
    const struct tn_tensor *ts[1] = {&ta};
    return tn_result_type(ts, 1, &s, 1);
}

/* the dtype a float op gives for an input of dt (integers: the default) */
static enum tn_dtype float_of(enum tn_dtype dt)
{
    return is_float(dt) ? dt : TN_FLOAT32;
}

static int64_t prod(const int64_t *sz, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= sz[d];
    return n;
}

static int64_t numel(const struct val *x)
{
    return prod(x->sz, x->nd);
}

/* broadcasts a and b into out; its rank, or -1 */
static int bcast(const struct val *a, const struct val *b, int64_t *out)
{
    int n = a->nd > b->nd ? a->nd : b->nd;
    for (int j = 0; j < n; j++) {
        int da = a->nd - n + j, db = b->nd - n + j;
        int64_t x = da >= 0 ? a->sz[da] : 1, y = db >= 0 ? b->sz[db] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        out[j] = x == 1 ? y : x;
    }
    return n;
}

static int newval(struct gen *G, enum tn_dtype dt, int nd, const int64_t *sz, double mag,
                  double err)
{
    if (G->nv == G->cap) {
        int cap = G->cap ? G->cap * 2 : 64;
        struct val *p = realloc(G->v, (size_t)cap * sizeof *p);
        if (!p) {
            G->status = TN_ENOMEM;
            return -1;
        }
        G->v = p;
        G->cap = cap;
    }
    struct val *x = &G->v[G->nv];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "v%d", G->nv);
    x->dt = dt;
    x->nd = nd;
    if (nd)
        memcpy(x->sz, sz, (size_t)nd * sizeof *sz);
    x->mag = mag;
    x->err = err;
    x->chain = G->chain;
    return G->nv++;
}

/* The value's tensor_values entry (contiguous strides: the checker
 * compares dtypes and sizes; ops without a Meta kernel take these). */
static void declare(struct gen *G, int i)
{
    const struct val *x = &V(i);
    sb_add(&G->tvals, "%s\"%s\": {\"dtype\": %d, \"sizes\": [", G->tvals.n ? ",\n" : "",
           x->name, tn_graph_scalar_type(x->dt));
    int64_t st[MAXD];
    tn_contiguous_strides(x->sz, x->nd, st);
    for (int d = 0; d < x->nd; d++)
        sb_add(&G->tvals, "%s{\"as_int\": %lld}", d ? ", " : "", (long long)x->sz[d]);
    sb_add(&G->tvals, "], \"strides\": [");
    for (int d = 0; d < x->nd; d++)
        sb_add(&G->tvals, "%s{\"as_int\": %lld}", d ? ", " : "", (long long)st[d]);
    sb_add(&G->tvals, "], \"storage_offset\": {\"as_int\": 0}, \"requires_grad\": false, "
                      "\"device\": {\"type\": \"cpu\", \"index\": null}, \"layout\": 7}");
}

/* ----------------------------------------------------------- the inputs */

/* t (float32, float64 or int64) filled with values for dtype dt */
static void fill(struct gen *G, struct tn_tensor *t, enum tn_dtype dt, bool ints)
{
    if (is_float(dt) && !ints) {
        tn_uniform_(t, -2, 2, G->tg);
        return;
    }
    tn_random_(t, dt == TN_UINT8 ? 0 : dt == TN_BOOL ? 0 : -4, dt == TN_UINT8 ? 11 : dt == TN_BOOL ? 2 : 5,
               G->tg);
}

/* A tensor of dt with sizes sz: contiguous, or a permuted, strided,
 * offset or broadcast (stride 0) view of a bigger one. */
static struct tn_tensor *make_tensor(struct gen *G, enum tn_dtype dt, int nd, const int64_t *sz,
                                     bool ints, bool *contig)
{
    int layout = nd ? (int)P(6) : 0;
    int64_t bs[MAXD], perm[MAXD];
    int d = nd ? (int)P(nd) : 0;
    for (int i = 0; i < nd; i++)
        bs[i] = sz[i];
    *contig = layout == 0 || layout == 5;
    if (layout == 1) { /* base[perm] permuted back */
        for (int i = 0; i < nd; i++)
            perm[i] = i;
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)P(i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int j = 0; j < nd; j++)
            bs[perm[j]] = sz[j];
    } else if (layout == 2)
        bs[d] = 2 * sz[d];
    else if (layout == 3)
        bs[d] = sz[d] + 1;
    else if (layout == 4)
        bs[d] = 1;
    enum tn_dtype fdt = is_float(dt) ? (dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32) : TN_INT64;
    struct tn_tensor *base = tn_empty(bs, nd, fdt);
    if (!base)
        return NULL;
    fill(G, base, dt, ints);
    struct tn_tensor *b = tn_to_dtype(base, dt), *t = NULL;
    tn_release(base);
    if (!b)
        return NULL;
    switch (layout) {
    case 1: t = tn_permute(b, perm, nd); break;
    case 2: t = tn_slice(b, d, (int64_t)P(2), TN_END, 2); break;
    case 3: t = tn_narrow(b, d, 1, sz[d]); break;
    case 4: t = tn_expand(b, sz, nd); break;
    default: t = tn_retain(b);
    }
    tn_release(b);
    return t;
}

static const enum tn_dtype dtypes[] = {TN_FLOAT32, TN_FLOAT64, TN_FLOAT16, TN_BFLOAT16,
                                       TN_INT64,   TN_INT32,   TN_UINT8,   TN_BOOL};
#define NDTYPES ((int)(sizeof dtypes / sizeof *dtypes))

static enum tn_dtype any_dtype(struct gen *G)
{
    return dtypes[P(NDTYPES)];
}

static enum tn_dtype float_dtype(struct gen *G)
{
    return dtypes[P(4)];
}

/* A new graph input of dt and sizes sz. */
static int new_input(struct gen *G, enum tn_dtype dt, int nd, const int64_t *sz)
{
    bool ints = is_float(dt) && P(3) == 0; /* integral values: ties for eq and floor */
    double mag = dt == TN_BOOL ? 1 : dt == TN_UINT8 ? 10 : is_float(dt) && !ints ? 2 : 4;
    int i = newval(G, dt, nd, sz, mag, 0);
    if (i < 0)
        return -1;
    snprintf(V(i).name, sizeof V(i).name, "in%d", G->ninputs);
    bool contig;
    struct tn_tensor *t = make_tensor(G, dt, nd, sz, ints, &contig);
    if (!t || tn_value_set(G->dict, tn_value_str(V(i).name), tn_value_tensor(t)) < 0) {
        tn_release(t);
        G->status = tn_last_status() < 0 ? tn_last_status() : TN_ENOMEM;
        return -1;
    }
    for (int d = 0; d < nd; d++)
        V(i).stride0 |= t->strides[d] == 0 && t->sizes[d] > 1;
    tn_release(t);
    V(i).contiguous = contig;
    sb_add(&G->ins, "%s{\"as_tensor\": {\"name\": \"%s\"}}", G->ninputs ? ", " : "", V(i).name);
    declare(G, i);
    G->ninputs++;
    return i;
}

/* a size: mostly 1..MAXS, sometimes 0 or 1 */
static int64_t rand_size(struct gen *G)
{
    uint32_t k = P(10);
    return k == 0 ? 2 : k == 1 ? 0 : k <= 3 ? 1 : (int64_t)P(MAXS) + 1;
}

/* A chain's first input: sizes 0..MAXS, or now and then a long last dim
 * (past a SIMD vector, or past the generated code's 4096-element blocks
 * and the thread pool's grain, with the other dims at most 2). */
static int fresh_input(struct gen *G, enum tn_dtype dt)
{
    static const int64_t longer[] = {8, 16, 17, 33, 100, 4097, 9000};
    int nd = (int)P(MAXD + 1);
    int64_t sz[MAXD];
    bool lng = nd && P(6) == 0;
    int64_t last = lng ? longer[P(sizeof longer / sizeof *longer)] : 0;
    for (int d = 0; d < nd; d++) {
        sz[d] = rand_size(G);
        if (last > 100 && sz[d] > 2)
            sz[d] = 2;
    }
    if (lng)
        sz[nd - 1] = last;
    return new_input(G, dt, nd, sz);
}

/* ------------------------------------------------------------ the nodes */

static void node_begin(struct gen *G, const char *target)
{
    sb_add(&G->nodes, "%s{\"target\": \"torch.ops.aten.%s\", \"inputs\": [", G->nnodes ? ",\n" : "",
           target);
    G->nargs = 0;
    G->kind = 1;
}

static void arg_begin(struct gen *G, const char *name)
{
    sb_add(&G->nodes, "%s{\"name\": \"%s\", \"arg\": ", G->nargs++ ? ", " : "", name);
}

static void arg_end(struct gen *G)
{
    sb_add(&G->nodes, ", \"kind\": %d}", G->kind);
}

static void arg_t(struct gen *G, const char *name, int v)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_tensor\": {\"name\": \"%s\"}}", V(v).name);
    arg_end(G);
}

static void arg_i(struct gen *G, const char *name, int64_t i)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_int\": %lld}", (long long)i);
    arg_end(G);
}

static void arg_f(struct gen *G, const char *name, double f)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_float\": ");
    sb_float(&G->nodes, f);
    sb_add(&G->nodes, "}");
    arg_end(G);
}

static void arg_b(struct gen *G, const char *name, bool b)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_bool\": %s}", b ? "true" : "false");
    arg_end(G);
}

static void arg_none(struct gen *G, const char *name)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_none\": true}");
    arg_end(G);
}

static void arg_ints(struct gen *G, const char *name, int n, const int64_t *x)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_ints\": [");
    for (int i = 0; i < n; i++)
        sb_add(&G->nodes, "%s%lld", i ? ", " : "", (long long)x[i]);
    sb_add(&G->nodes, "]}");
    arg_end(G);
}

static void arg_dtype(struct gen *G, const char *name, enum tn_dtype dt)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_scalar_type\": %d}", tn_graph_scalar_type(dt));
    arg_end(G);
}

static void arg_tensors(struct gen *G, const char *name, int n, const int *v)
{
    arg_begin(G, name);
    sb_add(&G->nodes, "{\"as_tensors\": [");
    for (int i = 0; i < n; i++)
        sb_add(&G->nodes, "%s{\"name\": \"%s\"}", i ? ", " : "", V(v[i]).name);
    sb_add(&G->nodes, "]}");
    arg_end(G);
}

/* A Python number operand: its scalar and how it is written. */
struct num {
    bool is_float;
    double f;
    int64_t i;
};

static void arg_num(struct gen *G, const char *name, struct num s)
{
    if (s.is_float)
        arg_f(G, name, s.f);
    else
        arg_i(G, name, s.i);
}

static struct tn_scalar num_scalar(struct num s)
{
    return s.is_float ? tn_float(s.f) : tn_int(s.i);
}

/* Ends the node with outputs named for values out[0..n) (new values). */
static void node_end_n(struct gen *G, int n, const int *out)
{
    sb_add(&G->nodes, "], \"outputs\": [");
    for (int k = 0; k < n; k++) {
        sb_add(&G->nodes, "%s{\"as_tensor\": {\"name\": \"%s\"}}", k ? ", " : "", V(out[k]).name);
        declare(G, out[k]);
    }
    sb_add(&G->nodes, "], \"name\": \"%s\"}", V(out[0]).name);
    G->nnodes++;
    G->node_done = G->nodes.n;
}

/* Ends a node returning Tensor[] (split, unbind): outputs out[0..n). */
static void node_end_list(struct gen *G, int n, const int *out)
{
    sb_add(&G->nodes, "], \"outputs\": [{\"as_tensors\": [");
    for (int k = 0; k < n; k++) {
        sb_add(&G->nodes, "%s{\"name\": \"%s\"}", k ? ", " : "", V(out[k]).name);
        declare(G, out[k]);
    }
    sb_add(&G->nodes, "]}], \"name\": \"%s\"}", V(out[0]).name);
    G->nnodes++;
    G->node_done = G->nodes.n;
}

/* Ends the node with one output: a new value. */
static int node_end(struct gen *G, enum tn_dtype dt, int nd, const int64_t *sz, double mag,
                    double err)
{
    int r = newval(G, dt, nd, sz, mag, err);
    if (r >= 0)
        node_end_n(G, 1, &r);
    return r;
}

/* a node with self only */
static int unop(struct gen *G, const char *target, int a, enum tn_dtype dt, double mag, double err)
{
    node_begin(G, target);
    arg_t(G, "self", a);
    return node_end(G, dt, V(a).nd, V(a).sz, mag, err);
}

/* ----------------------------------------------------------- operands */

static int op_cast_to(struct gen *G, int a, enum tn_dtype dt);

/* x kept away from 0: abs(x) + 1 (lower bound 1), integers in float32
 * first (255 + 1 is 0 in uint8) */
static int guarded(struct gen *G, int x)
{
    if (!is_float(V(x).dt) && V(x).dt != TN_BOOL && (x = op_cast_to(G, x, TN_FLOAT32)) < 0)
        return -1;
    const struct val *a = &V(x);
    int ab = a->dt == TN_BOOL ? x : unop(G, "abs.default", x, a->dt, a->mag, a->err);
    if (ab < 0)
        return -1;
    enum tn_dtype dt = promote_scalar(V(ab).dt, V(ab).nd, tn_int(1));
    node_begin(G, "add.Tensor");
    arg_t(G, "self", ab);
    arg_i(G, "other", 1);
    return node_end(G, dt, V(ab).nd, V(ab).sz, V(ab).mag + 1,
                    V(ab).err + (is_float(dt) ? rnd(dt, V(ab).mag + 1) : 0));
}

/* A tensor operand broadcasting with value c: an earlier value of the
 * chain, or a new input of a broadcastable shape. With exact, one both
 * sides compute alike; with kind 'f' a float, 'b' a bool, 0 any. */
static int other_tensor(struct gen *G, int c, bool exact, char kind)
{
    int64_t tmp[MAXD];
    if (P(2)) {
        int cand[64], n = 0;
        for (int i = G->nv - 1; i >= 0 && n < 64; i--) {
            const struct val *x = &V(i);
            if (x->chain != G->chain || (exact && x->err > 0) || bcast(&V(c), x, tmp) < 0)
                continue;
            if ((kind == 'f' && !is_float(x->dt)) || (kind == 'b' && x->dt != TN_BOOL))
                continue;
            cand[n++] = i;
        }
        if (n)
            return cand[P(n)];
    }
    const struct val *a = &V(c);
    int nt = a->nd + (a->nd < MAXD ? (int)P(2) : 0);
    if (a->nd && P(3) == 0)
        nt = (int)P(a->nd + 1);
    int64_t t[MAXD];
    for (int j = 0; j < nt; j++) {
        int d = a->nd - nt + j;
        if (d < 0)
            t[j] = (int64_t)P(3) + 1;
        else if (a->sz[d] == 1)
            t[j] = (int64_t[]){1, 1, 0, 2, 3}[P(5)];
        else
            t[j] = P(3) == 0 ? 1 : a->sz[d];
    }
    enum tn_dtype dt = kind == 'b' ? TN_BOOL : kind == 'f' ? float_dtype(G)
                                            : P(2) ? a->dt : any_dtype(G);
    return new_input(G, dt, nt, t);
}

/* a Python number for an op on dt */
static struct num rand_num(struct gen *G, enum tn_dtype dt, bool nonzero)
{
    static const double fl[] = {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 0.1, -2.5};
    static const int64_t in[] = {2, -1, 3, 1, -3, 0};
    struct num s = {0};
    s.is_float = is_float(dt) ? P(4) != 0 : P(4) == 0;
    if (s.is_float)
        s.f = fl[P(8)];
    else
        s.i = in[P(nonzero ? 5 : 6)];
    return s;
}

static double num_mag(struct num s)
{
    return s.is_float ? fabs(s.f) : (double)llabs(s.i);
}

/* the magnitude of a result: capped to the dtype's range for integers
 * (they wrap alike on both sides); -1 when a float result would pass its
 * cap */
static double result_mag(enum tn_dtype dt, double mag)
{
    if (!is_float(dt))
        return mag > int_max(dt) ? int_max(dt) : mag;
    return mag > cap_of(dt) || !isfinite(mag) ? -1 : mag;
}

/* ---------------------------------------------------------- pointwise */

static int op_clone(struct gen *G, int a)
{
    bool contig = V(a).contiguous; /* clone keeps dense strides */
    int r = unop(G, "clone.default", a, V(a).dt, V(a).mag, V(a).err);
    if (r >= 0)
        V(r).contiguous = contig;
    return r;
}

/* exact ops: neg, abs, relu */
static int op_exact_unary(struct gen *G, int a)
{
    static const char *const names[] = {"neg.default", "abs.default", "relu.default"};
    const struct val *x = &V(a);
    if (x->dt == TN_BOOL)
        return -1;
    return unop(G, names[P(3)], a, x->dt, x->mag, x->err);
}

/* float functions with their magnitude and Lipschitz bound */
static int op_float_unary(struct gen *G, int a)
{
    enum { EXP, EXPM1, LOG, LOG1P, SQRT, RSQRT, RECIP, TANH, SIGM, ERF, SIN, COS, GELU, SILU,
           LEAKY, N };
    static const char *const names[] = {
        "exp.default",     "expm1.default",      "log.default",        "log1p.default",
        "sqrt.default",    "rsqrt.default",      "reciprocal.default", "tanh.default",
        "sigmoid.default", "erf.default",        "sin.default",        "cos.default",
        "gelu.default",    "silu.default",       "leaky_relu.default"};
    int k = (int)P(N);
    const struct val *x0 = &V(a);
    if (k >= GELU && !is_float(x0->dt))
        return -1; /* float-only activations */
    double m = x0->mag, mag, L;
    switch (k) {
    case EXP:
    case EXPM1: mag = exp(m); L = mag; break;
    case LOG: mag = log(m + 1) + 1; L = 1; break;
    case LOG1P: mag = log(m + 1) + 1; L = 1; break;
    case SQRT: mag = sqrt(m + 1); L = 0.5; break;
    case RSQRT: mag = 1; L = 0.5; break;
    case RECIP: mag = 1; L = 1; break;
    case GELU:
    case SILU:
    case LEAKY: mag = m; L = 1.2; break;
    default: mag = 1; L = 1.2; break;
    }
    enum tn_dtype dt = float_of(x0->dt);
    if (result_mag(dt, mag) < 0)
        return -1;
    if (k == LOG || k == SQRT || k == RSQRT || k == RECIP)
        a = guarded(G, a);
    else if (k == LOG1P && x0->dt != TN_BOOL)
        a = unop(G, "abs.default", a, x0->dt, x0->mag, x0->err);
    if (a < 0)
        return -1;
    return unop(G, names[k], a, dt, mag, L * V(a).err + rnd(dt, mag));
}

/* floor, ceil of a value both sides hold alike (the result is exact) */
static int op_round(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->err > 0 || x->dt == TN_BOOL)
        return -1;
    return unop(G, P(2) ? "floor.default" : "ceil.default", a, x->dt, x->mag + 1, 0);
}

static int op_clamp(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->dt == TN_BOOL)
        return -1;
    bool hard = is_float(x->dt) && P(3) == 0;
    node_begin(G, hard ? "hardtanh.default" : "clamp.default");
    arg_t(G, "self", a);
    struct num lo = rand_num(G, x->dt, false), hi = rand_num(G, x->dt, false);
    if (hard) {
        arg_f(G, "min_val", -1.5);
        arg_f(G, "max_val", 2);
    } else {
        lo.is_float = hi.is_float = is_float(x->dt); /* the tensor's kind: no promotion */
        if (lo.is_float)
            lo.f = -fabs(lo.f);
        if (x->dt == TN_UINT8)
            lo.i = 1, hi.i = 7;
        uint32_t which = P(3);
        if (which == 1)
            arg_none(G, "min");
        else
            arg_num(G, "min", lo);
        if (which == 2)
            arg_none(G, "max");
        else
            arg_num(G, "max", hi);
    }
    return node_end(G, x->dt, x->nd, x->sz, x->mag + 3, x->err);
}

static int op_logical_not(struct gen *G, int a)
{
    if (V(a).err > 0)
        return -1;
    return unop(G, "logical_not.default", a, TN_BOOL, 1, 0);
}

/* add, sub, mul (Tensor, with a tensor or a number), div, maximum, minimum */
static int op_binary(struct gen *G, int a)
{
    enum { ADD, SUB, MUL, DIV, MAX, MIN, N, RSUB };
    static const char *const names[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
    int k = (int)P(N);
    const struct val *x = &V(a);
    bool scalar = k == RSUB || (k < MAX && P(3) == 0);
    if (x->dt == TN_BOOL && (k == SUB || k == RSUB || k == DIV))
        return -1;
    struct num s = rand_num(G, x->dt, k == DIV);
    int b = -1;
    if (!scalar) {
        b = other_tensor(G, a, false, 0);
        if (b < 0)
            return -1;
        if ((k == DIV || k == SUB) && V(b).dt == TN_BOOL)
            return -1;
        if (k == DIV && (b = guarded(G, b)) < 0) /* a denominator of 1 at least */
            return -1;
    }
    x = &V(a);
    enum tn_dtype dt = scalar ? promote_scalar(x->dt, x->nd, num_scalar(s))
                              : promote(x->dt, x->nd, V(b).dt, V(b).nd);
    if (dt == TN_DTYPE_UNSET)
        return -1;
    if (dt == TN_BOOL && k == SUB)
        return -1;
    if (k == DIV)
        dt = float_of(dt);
    struct val bv = {.nd = 0, .mag = scalar ? num_mag(s) : V(b).mag, .err = scalar ? 0 : V(b).err};
    if (!scalar)
        bv = V(b);
    int64_t sz[MAXD];
    int nd = scalar ? x->nd : bcast(x, &bv, sz);
    if (scalar && nd)
        memcpy(sz, x->sz, sizeof sz);
    if (nd < 0)
        return -1;
    double mag, err;
    double ma = x->mag, mb = bv.mag, ea = x->err, eb = bv.err;
    switch (k) {
    case ADD:
    case SUB:
    case RSUB: mag = ma + mb; err = ea + eb; break;
    case MUL: mag = ma * mb; err = ea * mb + eb * ma + ea * eb; break;
    case DIV: /* a denominator of 1 at least (a guarded tensor, or a number) */
        mb = scalar ? fabs(s.is_float ? s.f : (double)s.i) : 1;
        mag = ma / mb;
        err = ea / mb + (scalar ? 0 : eb * ma);
        break;
    default: mag = ma > mb ? ma : mb; err = ea > eb ? ea : eb; break;
    }
    if ((mag = result_mag(dt, mag)) < 0)
        return -1;
    if (is_float(dt) && k != MAX && k != MIN)
        err += rnd(dt, mag);
    char target[32];
    snprintf(target, sizeof target, "%s.%s", names[k],
             k >= MAX ? "default" : scalar && P(2) ? "Scalar" : "Tensor");
    node_begin(G, target);
    arg_t(G, "self", a);
    if (scalar)
        arg_num(G, "other", s);
    else
        arg_t(G, "other", b);
    if ((k == ADD || k == SUB || k == RSUB) && P(4) == 0 && dt != TN_BOOL) {
        G->kind = 2;
        arg_i(G, "alpha", 2);
        mag = result_mag(dt, ma + 2 * mb);
        if (mag < 0)
            mag = cap_of(dt); /* a little past the cap: still far from overflow */
        err += eb;
    }
    return node_end(G, dt, nd, sz, mag, err);
}

/* pow.Tensor_Tensor: a base kept at 1 or more, a float exponent in
 * [-2, 2] (pow.Tensor_Scalar is not in the registry) */
static int op_pow(struct gen *G, int a)
{
    if (!is_float(V(a).dt))
        return -1;
    int e = other_tensor(G, a, false, 'f');
    if (e < 0 || V(e).mag > 2)
        return -1;
    int64_t sz[MAXD];
    int nd = bcast(&V(a), &V(e), sz);
    enum tn_dtype dt = promote(V(a).dt, V(a).nd, V(e).dt, V(e).nd);
    double ma = V(a).mag + 1, mag = result_mag(dt, ma * ma);
    if (nd < 0 || dt == TN_DTYPE_UNSET || mag < 0)
        return -1;
    double err = V(a).err * 2 * ma + V(e).err * log(ma) * mag + rnd(dt, mag);
    if ((a = guarded(G, a)) < 0)
        return -1;
    node_begin(G, "pow.Tensor_Tensor");
    arg_t(G, "self", a);
    arg_t(G, "exponent", e);
    return node_end(G, dt, nd, sz, mag, err);
}

static int op_compare(struct gen *G, int a)
{
    static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    const struct val *x = &V(a);
    if (x->err > 0)
        return -1;
    int k = (int)P(6);
    bool scalar = P(3) == 0;
    struct num s = rand_num(G, x->dt, false);
    int b = scalar ? -1 : other_tensor(G, a, true, 0);
    if (!scalar && b < 0)
        return -1;
    x = &V(a);
    int64_t sz[MAXD];
    int nd = scalar ? x->nd : bcast(x, &V(b), sz);
    if (scalar && nd)
        memcpy(sz, x->sz, sizeof sz);
    char target[32];
    snprintf(target, sizeof target, "%s.%s", names[k], scalar && P(2) ? "Scalar" : "Tensor");
    node_begin(G, target);
    arg_t(G, "self", a);
    if (scalar)
        arg_num(G, "other", s);
    else
        arg_t(G, "other", b);
    return node_end(G, TN_BOOL, nd, sz, 1, 0);
}

static int op_where(struct gen *G, int a)
{
    int c = other_tensor(G, a, true, 'b');
    if (c < 0)
        return -1;
    int b = other_tensor(G, a, false, 0);
    if (b < 0)
        return -1;
    const struct val *x = &V(a), *y = &V(b);
    int64_t s1[MAXD], sz[MAXD];
    int n1 = bcast(x, y, s1);
    if (n1 < 0)
        return -1;
    struct val t = {.nd = n1};
    memcpy(t.sz, s1, sizeof s1);
    int nd = bcast(&V(c), &t, sz);
    if (nd < 0)
        return -1;
    enum tn_dtype dt = promote(x->dt, x->nd, y->dt, y->nd);
    if (dt == TN_DTYPE_UNSET)
        return -1;
    double mag = result_mag(dt, x->mag > y->mag ? x->mag : y->mag);
    if (mag < 0)
        return -1;
    node_begin(G, "where.self");
    arg_t(G, "condition", c);
    arg_t(G, "self", a);
    arg_t(G, "other", b);
    return node_end(G, dt, nd, sz, mag, x->err > y->err ? x->err : y->err);
}

/* to.dtype, _to_copy(dtype=) */
static int op_cast(struct gen *G, int a)
{
    return op_cast_to(G, a, any_dtype(G));
}

static int op_cast_to(struct gen *G, int a, enum tn_dtype dt)
{
    const struct val *x = &V(a);
    double mag = x->mag, err = x->err;
    if (!is_float(dt)) {
        /* to an integer or bool: only what both sides hold alike, and in
         * range (a float out of range converts to anything) */
        if (x->err > 0 || (is_float(x->dt) && x->mag > 100))
            return -1;
        if (is_float(x->dt) && dt == TN_UINT8) {
            a = unop(G, "abs.default", a, x->dt, x->mag, 0);
            if (a < 0)
                return -1;
        }
        mag = dt == TN_BOOL ? 1 : mag > int_max(dt) ? int_max(dt) : mag;
    } else {
        if (mag > cap_of(dt))
            return -1;
        if (err > 0)
            err += rnd(dt, mag);
    }
    bool copy = P(2);
    node_begin(G, copy ? "_to_copy.default" : "to.dtype");
    arg_t(G, "self", a);
    if (copy)
        G->kind = 2;
    arg_dtype(G, "dtype", dt);
    return node_end(G, dt, V(a).nd, V(a).sz, mag, err);
}

/* --------------------------------------------------------------- views */

/* ends a view's node: a's dtype and drift, new sizes */
static int view_like(struct gen *G, int a, int nd, const int64_t *sz)
{
    bool s0 = V(a).stride0;
    int r = node_end(G, V(a).dt, nd, sz, V(a).mag, V(a).err);
    if (r >= 0)
        V(r).stride0 = s0;
    return r;
}

static void shuffle(struct gen *G, int64_t *p, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)P(i + 1);
        int64_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

static int op_permute(struct gen *G, int a)
{
    const struct val *x = &V(a);
    int64_t p[MAXD], sz[MAXD];
    int nd = x->nd;
    uint32_t k = P(3);
    if (k == 0 && nd >= 1) { /* transpose.int */
        int64_t d0 = (int64_t)P(nd), d1 = (int64_t)P(nd);
        for (int i = 0; i < nd; i++)
            sz[i] = x->sz[i];
        sz[d0] = x->sz[d1];
        sz[d1] = x->sz[d0];
        node_begin(G, "transpose.int");
        arg_t(G, "self", a);
        arg_i(G, "dim0", P(2) ? d0 : d0 - nd);
        arg_i(G, "dim1", d1);
        return view_like(G, a, nd, sz);
    }
    if (k == 1 && nd <= 2) {
        for (int i = 0; i < nd; i++)
            sz[i] = x->sz[nd - 1 - i];
        node_begin(G, "t.default");
        arg_t(G, "self", a);
        return view_like(G, a, nd, sz);
    }
    shuffle(G, p, nd);
    for (int i = 0; i < nd; i++)
        sz[i] = x->sz[p[i]];
    node_begin(G, "permute.default");
    arg_t(G, "self", a);
    arg_ints(G, "dims", nd, p);
    return view_like(G, a, nd, sz);
}

static int op_unsqueeze(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->nd >= MAXD)
        return -1;
    int at = (int)P(x->nd + 1);
    int64_t sz[MAXD];
    for (int i = 0, j = 0; i <= x->nd; i++)
        sz[i] = i == at ? 1 : x->sz[j++];
    node_begin(G, "unsqueeze.default");
    arg_t(G, "self", a);
    arg_i(G, "dim", P(2) ? at : at - x->nd - 1);
    return view_like(G, a, x->nd + 1, sz);
}

static int op_squeeze(struct gen *G, int a)
{
    const struct val *x = &V(a);
    int64_t sz[MAXD];
    int nd = 0;
    uint32_t k = P(3);
    if (k == 0) {
        for (int i = 0; i < x->nd; i++)
            if (x->sz[i] != 1)
                sz[nd++] = x->sz[i];
        node_begin(G, "squeeze.default");
        arg_t(G, "self", a);
        return view_like(G, a, nd, sz);
    }
    if (x->nd == 0)
        return -1;
    int d = (int)P(x->nd);
    for (int i = 0; i < x->nd; i++)
        if (i != d || x->sz[i] != 1)
            sz[nd++] = x->sz[i];
    node_begin(G, k == 1 ? "squeeze.dim" : "squeeze.dims");
    arg_t(G, "self", a);
    if (k == 1)
        arg_i(G, "dim", P(2) ? d : d - x->nd);
    else
        arg_ints(G, "dim", 1, (int64_t[]){d});
    return view_like(G, a, nd, sz);
}

static int op_expand(struct gen *G, int a)
{
    const struct val *x = &V(a);
    int extra = x->nd < MAXD ? (int)P(2) : 0, nd = x->nd + extra;
    int64_t sz[MAXD], arg[MAXD];
    for (int j = 0; j < nd; j++) {
        int d = j - extra;
        if (d < 0)
            sz[j] = arg[j] = (int64_t)P(3) + 1;
        else if (x->sz[d] == 1) {
            sz[j] = arg[j] = (int64_t[]){1, 2, 3, 0, 4}[P(5)];
            if (sz[j] == 1 && P(2))
                arg[j] = -1;
        } else {
            sz[j] = x->sz[d];
            arg[j] = P(2) ? -1 : sz[j];
        }
    }
    node_begin(G, "expand.default");
    arg_t(G, "self", a);
    arg_ints(G, "size", nd, arg);
    int r = view_like(G, a, nd, sz);
    if (r >= 0)
        V(r).stride0 = true;
    return r;
}

static int op_slice(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->nd == 0)
        return -1;
    int d = (int)P(x->nd);
    int64_t n = x->sz[d], sz[MAXD];
    memcpy(sz, x->sz, sizeof sz);
    if (P(3) == 0) { /* select */
        if (n == 0)
            return -1;
        int64_t i = (int64_t)P(n);
        node_begin(G, "select.int");
        arg_t(G, "self", a);
        arg_i(G, "dim", d);
        arg_i(G, "index", P(2) ? i : i - n);
        for (int j = d; j + 1 < x->nd; j++)
            sz[j] = sz[j + 1];
        return view_like(G, a, x->nd - 1, sz);
    }
    int64_t start = (int64_t)P(n + 2) - 1, end = (int64_t)P(n + 3), step = (int64_t)P(3) + 1;
    bool no_start = P(4) == 0, no_end = P(4) == 0;
    if (P(3) == 0) /* from the end */
        end -= n + 1;
    int64_t s = no_start ? 0 : start, e = no_end ? n : end;
    if (s < 0)
        s += n;
    if (e < 0)
        e += n;
    s = s < 0 ? 0 : s > n ? n : s;
    e = e < 0 ? 0 : e > n ? n : e;
    sz[d] = e > s ? (e - s + step - 1) / step : 0;
    node_begin(G, "slice.Tensor");
    arg_t(G, "self", a);
    arg_i(G, "dim", d);
    if (no_start)
        arg_none(G, "start");
    else
        arg_i(G, "start", start);
    if (no_end && P(2))
        arg_i(G, "end", INT64_MAX);
    else if (no_end)
        arg_none(G, "end");
    else
        arg_i(G, "end", end);
    arg_i(G, "step", step);
    return view_like(G, a, x->nd, sz);
}

/* sizes of n elements in nd dims (a random factorisation) */
static int factorise(struct gen *G, int64_t n, int64_t *sz)
{
    int nd = (int)P(MAXD) + 1;
    for (int i = 0; i < nd; i++)
        sz[i] = 1;
    if (n == 0) {
        for (int i = 0; i < nd; i++)
            sz[i] = (int64_t)P(4);
        sz[P(nd)] = 0;
        return nd;
    }
    for (int64_t p = 2; n > 1; p++)
        while (n % p == 0) {
            sz[P(nd)] *= p;
            n /= p;
        }
    return nd;
}

static int op_reshape(struct gen *G, int a)
{
    const struct val *x = &V(a);
    int64_t sz[MAXD], arg[MAXD];
    uint32_t k = P(4);
    if (k == 0) { /* flatten.using_ints */
        int nd = x->nd ? x->nd : 1;
        int s = (int)P(nd), e = s + (int)P(nd - s);
        int n = 0;
        if (x->nd == 0)
            sz[n++] = 1;
        for (int i = 0; i < x->nd; i++) {
            if (i <= s || i > e)
                sz[n++] = x->sz[i];
            else
                sz[n - 1] *= x->sz[i];
        }
        node_begin(G, "flatten.using_ints");
        arg_t(G, "self", a);
        arg_i(G, "start_dim", s);
        arg_i(G, "end_dim", P(2) ? e : e - nd);
        return view_like(G, a, n, sz);
    }
    if (k == 1) { /* unflatten.int */
        if (x->nd == 0 || x->nd >= MAXD)
            return -1;
        int d = (int)P(x->nd);
        int64_t n = x->sz[d], f[2];
        if (n == 0) {
            f[0] = 0;
            f[1] = (int64_t)P(3) + 1;
        } else {
            f[0] = 1;
            for (int64_t p = 2; p <= n; p++)
                if (n % p == 0 && P(2))
                    f[0] = p;
            f[1] = n / f[0];
        }
        int nd = 0;
        for (int i = 0; i < x->nd; i++) {
            if (i == d) {
                sz[nd++] = f[0];
                sz[nd++] = f[1];
            } else
                sz[nd++] = x->sz[i];
        }
        int64_t fa[2] = {f[0], f[1]};
        if (n && P(3) == 0)
            fa[P(2)] = -1;
        node_begin(G, "unflatten.int");
        arg_t(G, "self", a);
        arg_i(G, "dim", d);
        arg_ints(G, "sizes", 2, fa);
        return view_like(G, a, nd, sz);
    }
    int64_t n = numel(x);
    int nd = factorise(G, n, sz);
    memcpy(arg, sz, sizeof arg);
    if (n && P(3) == 0)
        arg[P(nd)] = -1;
    if (k == 2) { /* view, of a contiguous value */
        if (!x->contiguous) {
            a = unop(G, "contiguous.default", a, x->dt, x->mag, x->err);
            if (a < 0)
                return -1;
            V(a).contiguous = true;
        }
        node_begin(G, "view.default");
        arg_t(G, "self", a);
        arg_ints(G, "size", nd, arg);
    } else {
        node_begin(G, "reshape.default");
        arg_t(G, "self", a);
        arg_ints(G, "shape", nd, arg);
    }
    return view_like(G, a, nd, sz);
}

/* ---------------------------------------------------------- reductions */

/* a random non-empty set of dims (bits), as a list into dims */
static unsigned rand_dims(struct gen *G, int nd, int *n, int64_t *dims)
{
    unsigned mask = (unsigned)P((1u << nd) - 1) + 1;
    *n = 0;
    for (int d = 0; d < nd; d++)
        if (mask >> d & 1)
            dims[(*n)++] = P(2) ? d : d - nd;
    /* a shuffled order */
    for (int i = *n - 1; i > 0; i--) {
        int j = (int)P(i + 1);
        int64_t t = dims[i];
        dims[i] = dims[j];
        dims[j] = t;
    }
    return mask;
}

static int reduced_shape(const struct val *x, unsigned mask, bool keep, int64_t *sz,
                         int64_t *count)
{
    int nd = 0;
    *count = 1;
    for (int d = 0; d < x->nd; d++) {
        if (mask >> d & 1) {
            *count *= x->sz[d];
            if (keep)
                sz[nd++] = 1;
        } else
            sz[nd++] = x->sz[d];
    }
    return nd;
}

static int op_reduce(struct gen *G, int a)
{
    enum { SUM, MEAN, AMAX, AMIN, VAR, STD, N };
    int k = (int)P(N);
    const struct val *x = &V(a);
    bool fl = is_float(x->dt);
    if ((k == MEAN || k == VAR || k == STD) && !fl)
        return -1;
    if ((k == AMAX || k == AMIN) && x->dt == TN_BOOL)
        return -1;
    bool all = x->nd == 0 || P(4) == 0;
    int n = 0;
    int64_t dims[MAXD], sz[MAXD], count;
    unsigned mask = all ? (x->nd ? (1u << x->nd) - 1 : 0) : rand_dims(G, x->nd, &n, dims);
    bool keep = !all && P(2);
    bool def = all && (k == SUM || k == MEAN) && P(2); /* sum.default, mean.default */
    int nd = reduced_shape(x, mask, keep && !def, sz, &count);
    if ((k == AMAX || k == AMIN) && count == 0)
        return -1; /* an error in eager */
    enum tn_dtype dt = k == SUM && !fl ? TN_INT64 : x->dt;
    double c = (double)(count ? count : 1), mag, err;
    /* both sides accumulate in float (double for float64) in their own
     * order, and round the result once (added below) */
    double acc = rnd(x->dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32, 1);
    switch (k) {
    case SUM: mag = c * x->mag; err = c * x->err + acc * c * c * x->mag; break;
    case MEAN: mag = x->mag; err = x->err + acc * c * x->mag; break;
    case AMAX:
    case AMIN: mag = x->mag; err = x->err; break;
    case VAR: mag = 4 * x->mag * x->mag * c; err = 4 * x->mag * x->err * c + acc * c * mag; break;
    default: mag = 2 * x->mag * sqrt(c); err = 2 * x->err * sqrt(c) + acc * c * mag; break;
    }
    if ((mag = result_mag(dt, mag)) < 0)
        return -1;
    if (is_float(dt))
        err += rnd(dt, mag);
    static const char *const names[] = {"sum", "mean", "amax", "amin", "var", "std"};
    char target[40];
    snprintf(target, sizeof target, "%s.%s", names[k],
             k == SUM ? (def ? "default" : "dim_IntList")
             : k == MEAN ? (def ? "default" : "dim")
             : k >= VAR ? "correction" : "default");
    node_begin(G, target);
    arg_t(G, "self", a);
    if (!def) {
        if (all && (k == SUM || k == MEAN || k >= VAR) && P(2))
            arg_none(G, "dim");
        else if (all) {
            for (int d = 0; d < x->nd; d++)
                dims[d] = d;
            arg_ints(G, "dim", x->nd, dims);
        } else
            arg_ints(G, "dim", n, dims);
        if (k >= VAR) {
            G->kind = 2;
            int64_t corr = P(3) == 0 ? -1 : (int64_t)P(2); /* -1: None, which is 1 */
            if (corr < 0)
                arg_none(G, "correction");
            else
                arg_i(G, "correction", corr);
        }
        arg_b(G, "keepdim", keep);
    }
    return node_end(G, dt, nd, sz, mag, err);
}

/* softmax.int, _softmax, log_softmax.int, _log_softmax */
static int op_softmax(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (!is_float(x->dt))
        return -1;
    bool log = P(2), under = P(2);
    int nd = x->nd ? x->nd : 1;
    int64_t d = (int64_t)P(nd);
    int64_t n = x->nd ? x->sz[d] : 1;
    double mag = log ? 2 * x->mag + log1p((double)n) + 1 : 1;
    double err = 2 * x->err + rnd(x->dt, mag) + rnd(TN_FLOAT32, mag) * (double)(n + 1);
    node_begin(G, log ? (under ? "_log_softmax.default" : "log_softmax.int")
                      : (under ? "_softmax.default" : "softmax.int"));
    arg_t(G, "self", a);
    arg_i(G, "dim", P(2) ? d : d - nd);
    if (under)
        arg_b(G, "half_to_float", false);
    return node_end(G, x->dt, x->nd, x->sz, mag, err);
}

/* layer_norm over the last k dims, with or without weight and bias;
 * native_layer_norm gives the mean and rstd too */
static int op_layer_norm(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (!is_float(x->dt) || x->nd == 0)
        return -1;
    int k = (int)P(x->nd) + 1;
    int64_t ns[MAXD];
    memcpy(ns, x->sz + x->nd - k, (size_t)k * sizeof *ns);
    int64_t c = prod(ns, k);
    bool native = P(3) == 0;
    int w = -1, b = -1;
    if (P(2) && (w = new_input(G, x->dt, k, ns)) < 0)
        return -1;
    if (P(2) && (b = new_input(G, x->dt, k, ns)) < 0)
        return -1;
    x = &V(a);
    /* (x - mean) * rstd: |.| <= sqrt(c); an input drift grows by rstd (up
     * to 1/sqrt(eps)) */
    double mag = sqrt((double)c) * (w >= 0 ? 2 : 1) + (b >= 0 ? 2 : 0) + 1;
    double err = x->err * 700 + 16 * (rnd(TN_FLOAT32, mag) + rnd(x->dt, mag)) * (double)c;
    node_begin(G, native ? "native_layer_norm.default" : "layer_norm.default");
    arg_t(G, "input", a);
    arg_ints(G, "normalized_shape", k, ns);
    if (w >= 0)
        arg_t(G, "weight", w);
    else
        arg_none(G, "weight");
    if (b >= 0)
        arg_t(G, "bias", b);
    else
        arg_none(G, "bias");
    arg_f(G, "eps", 1e-5);
    if (!native) {
        arg_b(G, "cudnn_enable", false);
        return node_end(G, x->dt, x->nd, x->sz, mag, err);
    }
    int64_t ms[MAXD];
    for (int i = 0; i < x->nd; i++)
        ms[i] = i < x->nd - k ? x->sz[i] : 1;
    int out[3];
    out[0] = newval(G, x->dt, x->nd, x->sz, mag, err);
    out[1] = newval(G, x->dt, x->nd, ms, x->mag, x->err + rnd(x->dt, x->mag) * (double)c);
    out[2] = newval(G, x->dt, x->nd, ms, 400, 1e9); /* rstd: left out of comparisons */
    if (out[0] < 0 || out[1] < 0 || out[2] < 0)
        return -1;
    G->v[out[2]].chain = -1; /* never an operand or an output */
    G->v[out[1]].chain = -1;
    node_end_n(G, 3, out);
    return out[0];
}

/* alias, detach, dropout in eval: the value itself */
static int op_identity(struct gen *G, int a)
{
    uint32_t k = P(3);
    if (k < 2) {
        int r = unop(G, k ? "detach.default" : "alias.default", a, V(a).dt, V(a).mag, V(a).err);
        if (r >= 0)
            V(r).stride0 = V(a).stride0;
        return r;
    }
    if (!is_float(V(a).dt))
        return -1;
    node_begin(G, "dropout.default");
    arg_t(G, "input", a);
    arg_f(G, "p", 0.5);
    arg_b(G, "train", false);
    return node_end(G, V(a).dt, V(a).nd, V(a).sz, V(a).mag, V(a).err);
}

/* split.Tensor, split_with_sizes, unbind.int along a dim: views; the
 * chain goes on with one piece, the others stay for operands and outputs */
static int op_split(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->nd == 0)
        return -1;
    int d = (int)P(x->nd);
    int64_t n = x->sz[d], pieces[MAXS + 1];
    int np = 0;
    uint32_t k = P(3);
    if (k == 2 && (n == 0 || n > MAXS))
        k = 0;
    int64_t step = n > 0 ? (int64_t)P(n) + 1 : 1;
    if (k == 0) { /* split_size step */
        for (int64_t at = 0; at < n && np < MAXS + 1; at += step)
            pieces[np++] = n - at < step ? n - at : step;
        if (n == 0)
            pieces[np++] = 0;
        if (np > MAXS)
            return -1;
    } else if (k == 1) { /* two sizes */
        int64_t cut = (int64_t)P(n + 1);
        pieces[np++] = cut;
        pieces[np++] = n - cut;
    } else { /* unbind */
        for (int64_t i = 0; i < n; i++)
            pieces[np++] = 1;
    }
    int64_t sz[MAXD];
    memcpy(sz, x->sz, sizeof sz);
    if (k == 2)
        for (int j = d; j + 1 < x->nd; j++)
            sz[j] = sz[j + 1];
    bool s0 = x->stride0;
    node_begin(G, k == 0 ? "split.Tensor" : k == 1 ? "split_with_sizes.default" : "unbind.int");
    arg_t(G, "self", a);
    if (k == 0)
        arg_i(G, "split_size", step);
    else if (k == 1)
        arg_ints(G, "split_sizes", np, pieces);
    arg_i(G, "dim", P(2) ? d : d - V(a).nd);
    int out[MAXS + 1];
    for (int i = 0; i < np; i++) {
        if (k != 2)
            sz[d] = pieces[i];
        out[i] = newval(G, V(a).dt, k == 2 ? V(a).nd - 1 : V(a).nd, sz, V(a).mag, V(a).err);
        if (out[i] < 0)
            return -1;
        V(out[i]).stride0 = s0;
    }
    node_end_list(G, np, out);
    return out[P(np)];
}

/* linear, mm, addmm (float32, float64): a product left to libtensor's
 * kernel, with its bias, alpha and beta fused after it */
static int op_matmul(struct gen *G, int a)
{
    const struct val *x = &V(a);
    enum tn_dtype dt = x->dt;
    if ((dt != TN_FLOAT32 && dt != TN_FLOAT64) || x->nd == 0)
        return -1;
    uint32_t k = P(3); /* linear, mm, addmm */
    if (k && x->nd != 2)
        return -1;
    int64_t K = x->sz[x->nd - 1], N = (int64_t)P(MAXS) + (P(8) ? 1 : 0);
    int w = new_input(G, dt, 2, k == 0 ? (int64_t[]){N, K} : (int64_t[]){K, N});
    int bias = -1;
    if (w >= 0 && (k == 2 || P(2))) {
        bool row = k != 2 || P(2); /* [N], or addmm's [M, N] */
        int64_t bs[2] = {row ? N : V(a).sz[0], N};
        bias = new_input(G, dt, row ? 1 : 2, bs);
    }
    if (w < 0 || (k == 2 && bias < 0))
        return -1;
    x = &V(a);
    double alpha = k == 2 ? (double[]){1, 0.5, 2}[P(3)] : 1, beta = k == 2 ? (double[]){1, 0, 2}[P(3)] : 1;
    double Kd = (double)K, mw = V(w).mag, mb = bias >= 0 ? V(bias).mag : 0;
    double mag = result_mag(dt, fabs(alpha) * Kd * x->mag * mw + fabs(beta) * mb);
    if (mag < 0)
        return -1;
    double err = fabs(alpha) * Kd * x->err * mw + rnd(dt, 1) * Kd * Kd * x->mag * mw * 2 +
                 rnd(dt, mag);
    int64_t sz[MAXD];
    memcpy(sz, x->sz, sizeof sz);
    sz[x->nd - 1] = N;
    if (k == 0) {
        node_begin(G, "linear.default");
        arg_t(G, "input", a);
        arg_t(G, "weight", w);
        if (bias >= 0)
            arg_t(G, "bias", bias);
        else
            arg_none(G, "bias");
    } else if (k == 1) {
        node_begin(G, "mm.default");
        arg_t(G, "self", a);
        arg_t(G, "mat2", w);
    } else {
        node_begin(G, "addmm.default");
        arg_t(G, "self", bias);
        arg_t(G, "mat1", a);
        arg_t(G, "mat2", w);
        G->kind = 2;
        arg_f(G, "beta", beta);
        arg_f(G, "alpha", alpha);
    }
    return node_end(G, dt, x->nd, sz, mag, err);
}

/* ------------------------------------------------ ops left to libtensor */

static int op_cumsum(struct gen *G, int a)
{
    const struct val *x = &V(a);
    int nd = x->nd ? x->nd : 1;
    int64_t d = (int64_t)P(nd), n = x->nd ? x->sz[d] : 1;
    enum tn_dtype dt = is_float(x->dt) ? x->dt : TN_INT64;
    double mag = result_mag(dt, x->mag * (double)n);
    if (mag < 0)
        return -1;
    node_begin(G, "cumsum.default");
    arg_t(G, "self", a);
    arg_i(G, "dim", P(2) ? d : d - nd);
    double err = x->err * (double)n + (is_float(dt) ? rnd(dt, mag) * (double)n : 0);
    return node_end(G, dt, x->nd, x->sz, mag, err);
}

static int op_cat(struct gen *G, int a)
{
    const struct val *x = &V(a);
    if (x->nd == 0)
        return -1;
    int d = (int)P(x->nd);
    int64_t sz[MAXD];
    memcpy(sz, x->sz, sizeof sz);
    sz[d] = (int64_t)P(4);
    int b = new_input(G, V(a).dt, V(a).nd, sz);
    if (b < 0)
        return -1;
    x = &V(a);
    sz[d] += x->sz[d];
    int ts[2] = {a, b};
    if (P(2)) {
        ts[0] = b;
        ts[1] = a;
    }
    node_begin(G, "cat.default");
    arg_tensors(G, "tensors", 2, ts);
    arg_i(G, "dim", P(2) ? d : d - x->nd);
    return node_end(G, x->dt, x->nd, sz, x->mag > 10 ? x->mag : 10, x->err);
}

/* ------------------------------------------------------------- chains */

typedef int (*op_fn)(struct gen *G, int a);

/* op 0 applies to anything: a choice past a fuzz input's end is 0 */
static const op_fn ops[] = {
    op_clone,   op_exact_unary, op_float_unary, op_float_unary, op_round,  op_clamp,
    op_logical_not, op_binary,  op_binary,      op_binary,      op_pow,    op_compare,
    op_where,   op_cast,        op_permute,     op_unsqueeze,   op_squeeze, op_expand,
    op_slice,   op_slice,       op_reshape,     op_reduce,      op_reduce, op_softmax,
    op_layer_norm, op_cumsum,   op_cat,         op_identity,    op_split,  op_matmul};
#define NOPS ((int)(sizeof ops / sizeof *ops))

static void add_output(struct gen *G, int v)
{
    for (int i = 0; i < G->nout; i++)
        if (!strcmp(G->out[i].name, V(v).name))
            return;
    if (G->nout == G->capout) {
        int cap = G->capout ? G->capout * 2 : 16;
        struct rg_output *p = realloc(G->out, (size_t)cap * sizeof *p);
        if (!p) {
            G->status = TN_ENOMEM;
            return;
        }
        G->out = p;
        G->capout = cap;
    }
    struct rg_output *o = &G->out[G->nout];
    snprintf(o->name, sizeof o->name, "%s", V(v).name);
    o->dtype = V(v).dt;
    o->err = V(v).err;
    sb_add(&G->outs, "%s{\"as_tensor\": {\"name\": \"%s\"}}", G->nout ? ", " : "", V(v).name);
    G->nout++;
}

static void chain(struct gen *G)
{
    int first = G->nv;
    int cur = fresh_input(G, any_dtype(G));
    if (cur < 0)
        return;
    int nops = (int)P(G->o.max_ops) + 1;
    for (int i = 0; i < nops && G->status == TN_OK; i++) {
        for (int tries = 0; tries < 20; tries++) {
            size_t save_len = G->nodes.n;
            int r = ops[P(NOPS)](G, cur);
            if (r >= 0) {
                cur = r;
                break;
            }
            /* an op that gave up after writing guards keeps them (they
             * are valid nodes); a node it gave up midway is undone */
            if (G->nodes.n != save_len)
                G->nodes.p[G->nodes.n = G->node_done > save_len ? G->node_done : save_len] = 0;
        }
    }
    if (G->status != TN_OK)
        return;
    add_output(G, cur);
    int extra = (int)P(3);
    for (int k = 0; k < extra; k++) {
        int v = first + (int)P(G->nv - first);
        if (V(v).chain == G->chain && (!strncmp(V(v).name, "v", 1) || P(4) == 0))
            add_output(G, v);
    }
}

int rg_generate(struct rg_src *src, const struct rg_options *opts, struct rg_graph *out)
{
    struct gen G0 = {0}, *G = &G0;
    memset(out, 0, sizeof *out);
    G->src = src;
    G->o.chains = opts && opts->chains > 0 ? opts->chains : 4;
    G->o.max_ops = opts && opts->max_ops > 0 ? opts->max_ops : 8;
    G->dict = tn_value_dict();
    uint64_t seed = (uint64_t)P(1u << 16) << 16 | P(1u << 16);
    G->tg = tn_generator_new(seed);
    if (!G->dict || !G->tg)
        G->status = TN_ENOMEM;
    int nchains = G->o.chains;
    for (G->chain = 0; G->chain < nchains && G->status == TN_OK; G->chain++)
        chain(G);
    struct sb j = {0};
    sb_add(&j, "{\"inputs\": [%s],\n\"outputs\": [%s],\n\"nodes\": [\n%s],\n"
               "\"tensor_values\": {%s},\n\"sym_int_values\": {}, \"sym_bool_values\": {}, "
               "\"is_single_tensor_return\": false}\n",
           G->ins.p ? G->ins.p : "", G->outs.p ? G->outs.p : "", G->nodes.p ? G->nodes.p : "",
           G->tvals.p ? G->tvals.p : "");
    if (j.oom || G->nodes.oom || G->ins.oom || G->tvals.oom || G->outs.oom)
        G->status = TN_ENOMEM;
    free(G->nodes.p);
    free(G->ins.p);
    free(G->tvals.p);
    free(G->outs.p);
    free(G->v);
    tn_generator_free(G->tg);
    out->json = j.p;
    out->inputs = G->dict;
    out->outputs = G->out;
    out->noutputs = G->nout;
    out->nnodes = G->nnodes;
    if (G->status != TN_OK) {
        rg_graph_free(out);
        return G->status;
    }
    return TN_OK;
}

void rg_graph_free(struct rg_graph *g)
{
    free(g->json);
    tn_value_release(g->inputs);
    free(g->outputs);
    memset(g, 0, sizeof *g);
}

/* ---------------------------------------------------------- comparing */

static char *msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *msg(const char *fmt, ...)
{
    struct sb b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vadd(&b, fmt, ap);
    va_end(ap);
    return b.p;
}

struct problems {
    struct sb text;
};

static void on_problem(const char *node, const char *m, void *ctx)
{
    sb_add(&((struct problems *)ctx)->text, "node '%s': %s; ", node, m);
}

static char *shape_text(const struct tn_tensor *t)
{
    char buf[160];
    return msg("%s%s", tn_dtype_name(t->dtype), tn_shape_format(t->sizes, t->ndim, buf, sizeof buf));
}

/* the flat index i as coordinates */
static void coords(const struct tn_tensor *t, int64_t i, char *buf, size_t len)
{
    int64_t c[TN_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        c[d] = t->sizes[d] ? i % t->sizes[d] : 0;
        i = t->sizes[d] ? i / t->sizes[d] : 0;
    }
    tn_shape_format(c, t->ndim, buf, len);
}

static char *compare_tensor(const struct rg_output *o, const struct tn_tensor *got,
                            const struct tn_tensor *want)
{
    bool same = got->dtype == want->dtype && got->ndim == want->ndim;
    for (int d = 0; same && d < got->ndim; d++)
        same = got->sizes[d] == want->sizes[d];
    if (!same) {
        char *g = shape_text(got), *w = shape_text(want);
        char *m = msg("output %s: compiled %s, interpreted %s", o->name, g, w);
        free(g);
        free(w);
        return m;
    }
    if (tn_numel(want) == 0) /* (and stride 0 may be in it: no copy) */
        return NULL;
    bool fl = is_float(want->dtype);
    struct tn_tensor *x = tn_to_dtype(got, fl ? TN_FLOAT64 : TN_INT64);
    struct tn_tensor *y = tn_to_dtype(want, fl ? TN_FLOAT64 : TN_INT64);
    struct tn_tensor *xc = x ? tn_contiguous(x) : NULL, *yc = y ? tn_contiguous(y) : NULL;
    char *m = NULL;
    if (!xc || !yc)
        m = msg("output %s: %s", o->name, tn_last_error());
    int64_t n = tn_numel(want);
    for (int64_t i = 0; !m && i < n; i++) {
        char at[128];
        if (fl) {
            double a = ((const double *)tn_data(xc))[i], b = ((const double *)tn_data(yc))[i];
            bool ok = a == b || (isnan(a) && isnan(b)) ||
                      (isfinite(a) && isfinite(b) &&
                       fabs(a - b) <= 2 * o->err + 2 * ulp(want->dtype) * fabs(b) + 1e-300);
            if (!ok) {
                coords(want, i, at, sizeof at);
                m = msg("output %s (%s): element %s is %.9g compiled, %.9g interpreted "
                        "(allowed drift %.3g)", o->name, tn_dtype_name(want->dtype), at, a, b,
                        2 * o->err + 2 * ulp(want->dtype) * fabs(b));
            }
        } else {
            int64_t a = ((const int64_t *)tn_data(xc))[i], b = ((const int64_t *)tn_data(yc))[i];
            if (a != b) {
                coords(want, i, at, sizeof at);
                m = msg("output %s (%s): element %s is %lld compiled, %lld interpreted", o->name,
                        tn_dtype_name(want->dtype), at, (long long)a, (long long)b);
            }
        }
    }
    tn_release(x);
    tn_release(y);
    tn_release(xc);
    tn_release(yc);
    return m;
}

struct warned {
    char *text;
};

static void on_warn(const char *m, void *ctx)
{
    struct warned *w = ctx;
    if (!w->text)
        w->text = msg("%s", m);
}

int rg_compare_outputs(const struct rg_graph *rg, const struct tn_value *got,
                       const struct tn_value *want, char **why)
{
    *why = NULL;
    for (int i = 0; !*why && i < rg->noutputs; i++) {
        const struct rg_output *out = &rg->outputs[i];
        struct tn_value *a = tn_value_get(got, out->name), *b = tn_value_get(want, out->name);
        if (!a || !b || a->kind != TN_VALUE_TENSOR || b->kind != TN_VALUE_TENSOR)
            *why = msg("output %s: missing (%s)", out->name, !b ? "interpreted" : "compiled");
        else
            *why = compare_tensor(out, a->v.tensor, b->v.tensor);
    }
    return *why ? 1 : 0;
}

int rg_compare(const struct rg_graph *rg, const char *cache_dir, char **why)
{
    return rg_compare_explain(rg, cache_dir, why, NULL);
}

int rg_compare_explain(const struct rg_graph *rg, const char *cache_dir, char **why,
                       char **explain)
{
    *why = NULL;
    if (explain)
        *explain = NULL;
    struct problems p = {0};
    struct tn_graph *g = tn_graph_parse(rg->json, strlen(rg->json), "random.json", NULL);
    if (!g) {
        *why = msg("the generator wrote a graph that does not parse: %s", tn_last_error());
        return 1;
    }
    int np = tn_graph_check(g, on_problem, &p);
    if (np != 0) {
        *why = msg("the generator wrote a graph that does not check: %s",
                   np < 0 ? tn_last_error() : p.text.p);
        free(p.text.p);
        tn_graph_free(g);
        return 1;
    }
    struct tn_value *want = NULL, *got = NULL;
    if (tn_graph_run(g, NULL, rg->inputs, &want, NULL) < 0) {
        *why = msg("the interpreter failed: %s", tn_last_error());
        tn_graph_free(g);
        return 1;
    }
    struct warned w = {0};
    struct tn_compile_options o = {.cache_dir = cache_dir, .strict = true, .warn = on_warn,
                                   .warn_ctx = &w};
    struct tn_compiled *c = tn_compile_new(g, &o);
    int rc = c ? tn_compile_run(c, NULL, rg->inputs, &got) : tn_last_status();
    if (rc < 0)
        *why = msg("compiled run failed: %s", tn_last_error());
    else if (w.text)
        *why = msg("compiled run warned: %s", w.text);
    if (!*why)
        rg_compare_outputs(rg, got, want, why);
    if (explain && c)
        *explain = tn_compile_explain(c);
    free(w.text);
    tn_compile_free(c);
    tn_value_release(want);
    tn_value_release(got);
    tn_graph_free(g);
    return *why ? 1 : 0;
}
