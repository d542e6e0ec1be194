/*
 * compile/ir.c: the loop-level IR's pools: expressions (hash-consed, so a
 * subexpression two consumers share is one node and computed once),
 * their rewriting under a view of the loop space, buffers, stages, steps.
 */
#include "compile/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t x_hash(const struct tn__x *x)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ULL)
    MIX(x->op);
    MIX(x->dt + 1);
    MIX(x->a + 1);
    MIX(x->b + 1);
    MIX(x->c + 1);
    uint64_t kb;
    memcpy(&kb, &x->k, sizeof kb);
    MIX(kb);
    MIX(x->ki);
    MIX(x->buf + 1);
    MIX(x->nd);
    MIX(x->off);
    for (int d = 0; d < x->nd; d++)
        MIX(x->coef[d]);
#undef MIX
    return h;
}

static bool x_same(const struct tn__x *p, const struct tn__x *q)
{
    if (p->op != q->op || p->dt != q->dt || p->a != q->a || p->b != q->b || p->c != q->c ||
        memcmp(&p->k, &q->k, sizeof p->k) || p->ki != q->ki || p->buf != q->buf ||
        p->nd != q->nd || p->off != q->off)
        return false;
    return !memcmp(p->coef, q->coef, (size_t)p->nd * sizeof p->coef[0]);
}

static int rehash(struct tn__cprog *P, int cap)
{
    int *t = calloc((size_t)cap, sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < P->nx; i++) {
        size_t j = (size_t)(x_hash(&P->xs[i]) & (uint64_t)(cap - 1));
        while (t[j])
            j = (j + 1) & (size_t)(cap - 1);
        t[j] = i + 1;
    }
    free(P->xhash);
    P->xhash = t;
    P->hcap = cap;
    return 0;
}

int tn__x_add(struct tn__cprog *P, const struct tn__x *proto)
{
    struct tn__x x = *proto;
    for (int d = x.nd; d < TN_MAX_DIMS; d++)
        x.coef[d] = 0;
    if (x.op != TN_X_LOAD) {
        x.buf = -1;
        x.nd = 0;
        x.off = 0;
    }
    if ((P->nx + 1) * 2 > P->hcap && rehash(P, P->hcap ? P->hcap * 2 : 256) < 0)
        return -1;
    size_t j = (size_t)(x_hash(&x) & (uint64_t)(P->hcap - 1));
    for (; P->xhash[j]; j = (j + 1) & (size_t)(P->hcap - 1))
        if (x_same(&P->xs[P->xhash[j] - 1], &x))
            return P->xhash[j] - 1;
    if (P->nx == P->capx) {
        int cap = P->capx ? P->capx * 2 : 256;
        struct tn__x *p = realloc(P->xs, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        P->xs = p;
        P->capx = cap;
    }
    P->xs[P->nx] = x;
    P->xhash[j] = P->nx + 1;
    return P->nx++;
}

static struct tn__x blank(int op, enum tn_dtype dt)
{
    struct tn__x x;
    memset(&x, 0, sizeof x);
    x.op = (uint8_t)op;
    x.dt = (int8_t)dt;
    x.a = x.b = x.c = x.buf = -1;
    return x;
}

int tn__x_const(struct tn__cprog *P, enum tn_dtype dt, double k)
{
    struct tn__x x = blank(TN_X_CONST, dt);
    if (tn_dtype_is_floating(dt))
        x.k = k;
    else if (dt == TN_BOOL)
        x.ki = k != 0;
    else
        x.ki = (int64_t)k;
    return tn__x_add(P, &x);
}

int tn__x_cast(struct tn__cprog *P, enum tn_dtype dt, int a)
{
    if (a < 0)
        return -1;
    enum tn_dtype from = (enum tn_dtype)P->xs[a].dt;
    if (from == dt)
        return a;
    if (P->xs[a].op == TN_X_CONST) /* fold */
        return tn__x_const(P, dt, tn_dtype_is_floating(from) ? P->xs[a].k
                                                            : (double)P->xs[a].ki);
    struct tn__x x = blank(TN_X_CAST, dt);
    x.a = a;
    return tn__x_add(P, &x);
}

int tn__x_un(struct tn__cprog *P, int op, enum tn_dtype dt, int a)
{
    if (a < 0)
        return -1;
    struct tn__x x = blank(op, dt);
    x.a = a;
    return tn__x_add(P, &x);
}

int tn__x_bin(struct tn__cprog *P, int op, enum tn_dtype dt, int a, int b)
{
    if (a < 0 || b < 0)
        return -1;
    /* x * 1, x + 0, x / 1: the identity (decompositions write them) */
    const struct tn__x *kb = &P->xs[b];
    if (kb->op == TN_X_CONST && tn_dtype_is_floating((enum tn_dtype)kb->dt) &&
        P->xs[a].dt == dt &&
        (((op == TN_X_MUL || op == TN_X_DIV) && kb->k == 1.0) ||
         ((op == TN_X_ADD || op == TN_X_SUB) && kb->k == 0.0 && !signbit(kb->k))))
        return a;
    /* erf(x) + 1 (gelu's derivative): 1 + erf as one op, as gelu computes it */
    if (op == TN_X_ADD && kb->op == TN_X_CONST && kb->k == 1.0 && P->xs[a].op == TN_X_ERF &&
        P->xs[a].dt == dt && dt == TN_FLOAT32)
        return tn__x_erf1p(P, dt, P->xs[a].a);
    if (op == TN_X_ADD || op == TN_X_MUL || op == TN_X_MAX || op == TN_X_MIN ||
        op == TN_X_EQ || op == TN_X_NE || op == TN_X_AND || op == TN_X_OR) {
        if (a > b) { /* commutative: one order, so CSE sees a+b and b+a alike */
            int t = a;
            a = b;
            b = t;
        }
    }
    struct tn__x x = blank(op, dt);
    x.a = a;
    x.b = b;
    return tn__x_add(P, &x);
}

/* 1 + erf(z), GELU's: in float32 erfc's polynomial times exp(-z^2), that
 * exp a node of its own and written exp(x x (-c^2)) where z = x c, as
 * GELU's derivative writes exp(-x^2/2) beside erf(x/sqrt 2): hash-consing
 * makes the two one exp per element */
int tn__x_erf1p(struct tn__cprog *P, enum tn_dtype dt, int z)
{
    if (z < 0 || dt != TN_FLOAT32)
        return tn__x_un(P, TN_X_ERF1P, dt, z);
    const struct tn__x *e = &P->xs[z];
    int sq;
    if (e->op == TN_X_MUL && (P->xs[e->a].op == TN_X_CONST || P->xs[e->b].op == TN_X_CONST)) {
        int x = P->xs[e->a].op == TN_X_CONST ? e->b : e->a;
        double c = P->xs[P->xs[e->a].op == TN_X_CONST ? e->a : e->b].k;
        sq = tn__x_bin(P, TN_X_MUL, dt, tn__x_bin(P, TN_X_MUL, dt, x, x),
                       tn__x_const(P, dt, -(double)(float)(c * c)));
    } else {
        sq = tn__x_un(P, TN_X_NEG, dt, tn__x_bin(P, TN_X_MUL, dt, z, z));
    }
    return tn__x_bin(P, TN_X_ERF1PE, dt, z, tn__x_un(P, TN_X_EXP, dt, sq));
}

int tn__x_where(struct tn__cprog *P, int c, int a, int b)
{
    if (c < 0 || a < 0 || b < 0)
        return -1;
    struct tn__x x = blank(TN_X_WHERE, (enum tn_dtype)P->xs[a].dt);
    x.a = c;
    x.b = a;
    x.c = b;
    return tn__x_add(P, &x);
}

int tn__x_load(struct tn__cprog *P, int buf, int nd, int64_t off, const int64_t *coef)
{
    struct tn__x x = blank(TN_X_LOAD, P->bufs[buf].dt);
    x.buf = buf;
    x.nd = nd;
    x.off = off;
    memcpy(x.coef, coef, (size_t)nd * sizeof *coef);
    return tn__x_add(P, &x);
}

static int remap(struct tn__cprog *P, int x, const struct tn__vmap *m, int *memo)
{
    if (x < 0)
        return x;
    if (memo[x])
        return memo[x] - 1;
    struct tn__x n = P->xs[x];
    int r;
    if (n.op == TN_X_CONST) {
        r = x;
    } else if (n.op == TN_X_LOAD) {
        int64_t coef[TN_MAX_DIMS] = {0}, off = n.off;
        int nd = 0;
        for (int d = 0; d < m->nold; d++) {
            int64_t c = d < n.nd ? n.coef[d] : 0;
            off += c * m->add[d];
            if (m->src[d] >= 0) {
                coef[m->src[d]] += c * m->mul[d];
                if (m->src[d] + 1 > nd)
                    nd = m->src[d] + 1;
            }
        }
        r = tn__x_load(P, n.buf, nd, off, coef);
    } else {
        n.a = remap(P, n.a, m, memo);
        n.b = remap(P, n.b, m, memo);
        n.c = remap(P, n.c, m, memo);
        if ((P->xs[x].a >= 0 && n.a < 0) || (P->xs[x].b >= 0 && n.b < 0) ||
            (P->xs[x].c >= 0 && n.c < 0))
            return -1;
        r = tn__x_add(P, &n);
    }
    if (r >= 0)
        memo[x] = r + 1;
    return r;
}

int tn__x_remap(struct tn__cprog *P, int x, const struct tn__vmap *m)
{
    int *memo = calloc((size_t)P->nx + 1, sizeof *memo);
    if (!memo)
        return -1;
    int r = remap(P, x, m, memo);
    free(memo);
    return r;
}

#define GROW(arr, n, cap)                                                                  \
    do {                                                                                   \
        if ((n) == (cap)) {                                                                \
            int c_ = (cap) ? (cap) * 2 : 16;                                               \
            void *p_ = realloc((arr), (size_t)c_ * sizeof *(arr));                         \
            if (!p_)                                                                       \
                return GROW_FAIL;                                                          \
            (arr) = p_;                                                                    \
            (cap) = c_;                                                                    \
        }                                                                                  \
    } while (0)

int tn__buf_new(struct tn__cprog *P, int kind, enum tn_dtype dt, int64_t numel)
{
#define GROW_FAIL -1
    GROW(P->bufs, P->nbufs, P->capbufs);
    struct tn__buf *b = &P->bufs[P->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->dt = dt;
    b->numel = numel;
    b->input = -1;
    b->last = -1;
    b->arena = -1;
    return P->nbufs++;
}

int tn__stage_new(struct tn__cprog *P, const struct tn__stage *s)
{
    GROW(P->stages, P->nstages, P->capstages);
    P->stages[P->nstages] = *s;
    return P->nstages++;
#undef GROW_FAIL
}

struct tn__step *tn__step_new(struct tn__cprog *P, int kind)
{
#define GROW_FAIL NULL
    GROW(P->steps, P->nsteps, P->capsteps);
#undef GROW_FAIL
    struct tn__step *s = &P->steps[P->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->node = -1;
    return s;
}

void tn__cprog_free(struct tn__cprog *P)
{
    if (!P)
        return;
    for (int i = 0; i < P->nsteps; i++) {
        free(P->steps[i].argv);
        free(P->steps[i].args);
        free(P->steps[i].outbuf);
        free(P->steps[i].why);
        free(P->steps[i].label);
    }
    free(P->steps);
    free(P->stages);
    free(P->bufs);
    free(P->xs);
    free(P->xhash);
    free(P->outs);
    free(P->ints);
    free(P);
}
