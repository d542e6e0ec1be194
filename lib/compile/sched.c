/*
 * compile/sched.c: fusion of kernels. Lowering made one kernel per
 * realized value, each a loop nest that a reduction or a store ends. Here
 * consecutive kernels over the same loop space become one kernel when
 * each reads what the ones before it wrote only at its own point (a
 * pointwise value at the same index, a reduction's result at the same
 * outer index): layer norm (mean, variance, normalise) and softmax (max,
 * exp-sum, normalise) become one pass over each row, in cache. A value
 * that only its kernel reads then never goes to memory: a reduction's
 * result is a local, a pointwise row is a stack array (up to ROW_MAX
 * elements). Before that, a pointwise kernel moves up beside an earlier
 * one over the same space that reads what it reads (hoist).
 */
#include "compile/internal.h"

#include <stdlib.h>
#include <string.h>

#define ROW_MAX 16384  /* elements of a row kept on the stack */
#define GROUP_MAX 16   /* stages in one kernel */

static int64_t outer_of(const struct tn__stage *s, int nred)
{
    int64_t n = 1;
    for (int d = 0; d < s->nd - nred; d++)
        n *= s->sizes[d];
    return n;
}

/* Whether stage b's space equals a's (with the group's row dims nred). */
static bool same_space(const struct tn__stage *a, const struct tn__stage *b, int nred)
{
    if (a->nd != b->nd || memcmp(a->sizes, b->sizes, (size_t)a->nd * sizeof a->sizes[0]))
        return false;
    return (a->red == TN_RED_NONE || a->nred == nred) && (b->red == TN_RED_NONE || b->nred == nred);
}

/* Whether every load in x of a buffer written by stages [g0, g1) reads it
 * at the point being computed. */
static bool local_reads(const struct tn__cprog *P, int x, int g0, int g1, int nred,
                        unsigned char *seen)
{
    if (x < 0 || seen[x])
        return true;
    seen[x] = 1;
    const struct tn__x *e = &P->xs[x];
    if (e->op != TN_X_LOAD)
        return local_reads(P, e->a, g0, g1, nred, seen) &&
               local_reads(P, e->b, g0, g1, nred, seen) && local_reads(P, e->c, g0, g1, nred, seen);
    for (int i = g0; i < g1; i++) {
        const struct tn__stage *s = &P->stages[i];
        if (s->buf != e->buf)
            continue;
        /* pointwise: contiguous over the whole space; reduction:
         * contiguous over the outer dims, 0 over the row */
        int nout = s->nd - (s->red == TN_RED_NONE ? 0 : nred);
        int64_t st[TN_MAX_DIMS];
        tn_contiguous_strides(s->sizes, nout, st);
        if (e->off)
            return false;
        for (int d = 0; d < s->nd; d++) {
            int64_t c = d < e->nd ? e->coef[d] : 0, want = d < nout ? st[d] : 0;
            if (s->sizes[d] != 1 && c != want)
                return false;
        }
    }
    return true;
}

/* Whether the list "a, b, c" holds the name q[0..n). */
static bool has_name(const char *list, const char *q, size_t n)
{
    for (const char *p = list; *p;) {
        size_t m = strcspn(p, ",");
        if (m == n && !strncmp(p, q, n))
            return true;
        p += m;
        p += strspn(p, ", ");
    }
    return false;
}

/* Marks in bufs[] the buffers expression x loads. */
static void loads_into(const struct tn__cprog *P, int x, unsigned char *seen, unsigned char *bufs)
{
    if (x < 0 || seen[x])
        return;
    seen[x] = 1;
    const struct tn__x *e = &P->xs[x];
    if (e->op == TN_X_LOAD)
        bufs[e->buf] = 1;
    loads_into(P, e->a, seen, bufs);
    loads_into(P, e->b, seen, bufs);
    loads_into(P, e->c, seen, bufs);
}

/* The buffers step st reads (rd) and writes (wr), each a mark per buffer.
 * An extern node's arguments count as written too: nothing moves past a
 * step that might write in place. */
static void step_bufs(const struct tn__cprog *P, const struct tn__step *st, unsigned char *seen,
                      unsigned char *rd, unsigned char *wr)
{
    memset(rd, 0, (size_t)P->nbufs);
    memset(wr, 0, (size_t)P->nbufs);
    if (st->kind == TN_STEP_KERNEL) {
        memset(seen, 0, (size_t)P->nx + 1);
        for (int k = st->stage0; k < st->stage0 + st->nstages; k++) {
            wr[P->stages[k].buf] = 1;
            loads_into(P, P->stages[k].x, seen, rd);
        }
        return;
    }
    for (int k = 0; k < st->nargs; k++) {
        rd[st->args[k].buf] = 1;
        wr[st->args[k].buf] |= st->kind == TN_STEP_NODE;
    }
    for (int k = 0; k < st->nouts; k++)
        if (st->outbuf && st->outbuf[k] >= 0)
            wr[st->outbuf[k]] = 1;
}

#define HOIST_MAX 64 /* steps a pointwise kernel moves up past at most */

/* Every step's reads and writes as lists of buffers, made once per hoist
 * pass: step i's (by its place when the pass began) are pool[off[2i] ..
 * off[2i+1]) and pool[off[2i+1] .. off[2i+2]); at[p] is the step now at
 * place p, moved with the steps. */
struct bufsets {
    int *pool, *at;
    size_t *off, n, cap;
};

static bool bufsets_add(struct bufsets *S, const unsigned char *mark, int nbufs)
{
    for (int b = 0; b < nbufs; b++) {
        if (!mark[b])
            continue;
        if (S->n == S->cap) {
            size_t cap = S->cap ? 2 * S->cap : 1024;
            int *p = realloc(S->pool, cap * sizeof *p);
            if (!p)
                return false;
            S->pool = p;
            S->cap = cap;
        }
        S->pool[S->n++] = b;
    }
    return true;
}

static bool bufsets_make(struct bufsets *S, const struct tn__cprog *P, unsigned char *seen,
                         unsigned char *rd, unsigned char *wr)
{
    S->at = malloc(((size_t)P->nsteps + 1) * sizeof *S->at);
    S->off = malloc((2 * (size_t)P->nsteps + 1) * sizeof *S->off);
    if (!S->at || !S->off)
        return false;
    S->off[0] = 0;
    for (int i = 0; i < P->nsteps; i++) {
        S->at[i] = i;
        step_bufs(P, &P->steps[i], seen, rd, wr);
        if (!bufsets_add(S, rd, P->nbufs))
            return false;
        S->off[2 * i + 1] = S->n;
        if (!bufsets_add(S, wr, P->nbufs))
            return false;
        S->off[2 * i + 2] = S->n;
    }
    return true;
}

static void bufsets_free(struct bufsets *S)
{
    free(S->pool);
    free(S->at);
    free(S->off);
}

/* Whether the step at place k reads a buffer that jr marks (shares) and
 * whether it reads what jw marks or writes what either marks (clash). */
static void bufsets_meet(const struct bufsets *S, int k, const unsigned char *jr,
                         const unsigned char *jw, bool *shares, bool *clash)
{
    const size_t *o = &S->off[2 * (size_t)S->at[k]];
    *shares = *clash = false;
    for (size_t q = o[0]; q < o[1]; q++) {
        *shares |= jr[S->pool[q]];
        *clash |= jw[S->pool[q]];
    }
    for (size_t q = o[1]; q < o[2]; q++)
        *clash |= jr[S->pool[q]] || jw[S->pool[q]];
}

/* A pointwise kernel of one stage moves up to just after the nearest
 * earlier one over the same space that reads a buffer it reads, when no
 * step between writes what it reads or touches what it writes: the
 * forward's saved activations (a linear's output, realized for the
 * backward after the rest of the graph) then fuse with the kernel that
 * read the same product and bias (the linear's GELU), one pass over them
 * instead of two. Each step's buffers are found once, not once per
 * kernel that looks past it. */
static void hoist(struct tn__cprog *P, unsigned char *seen)
{
    unsigned char *m = calloc(2 * (size_t)P->nbufs + 2, 1);
    struct bufsets S = {0};
    bool ok = m && bufsets_make(&S, P, seen, m, m + P->nbufs);
    unsigned char *jr = m, *jw = m + P->nbufs;
    for (int j = 1; ok && j < P->nsteps; j++) {
        const struct tn__step *sj = &P->steps[j];
        if (sj->kind != TN_STEP_KERNEL || sj->nstages != 1 ||
            P->stages[sj->stage0].red != TN_RED_NONE || P->stages[sj->stage0].nd < 1)
            continue;
        const struct tn__stage *s = &P->stages[sj->stage0];
        const size_t *o = &S.off[2 * (size_t)S.at[j]];
        memset(m, 0, 2 * (size_t)P->nbufs);
        for (size_t q = o[0]; q < o[1]; q++)
            jr[S.pool[q]] = 1;
        for (size_t q = o[1]; q < o[2]; q++)
            jw[S.pool[q]] = 1;
        int to = -1;
        for (int k = j - 1; k >= 0 && k >= j - HOIST_MAX; k--) {
            const struct tn__step *sk = &P->steps[k];
            bool shares, clash;
            bufsets_meet(&S, k, jr, jw, &shares, &clash);
            const struct tn__stage *t = &P->stages[sk->stage0];
            if (sk->kind == TN_STEP_KERNEL && sk->nstages == 1 && t->red == TN_RED_NONE &&
                t->nd == s->nd && !memcmp(t->sizes, s->sizes, (size_t)s->nd * sizeof *s->sizes) &&
                shares && !clash) {
                to = k;
                break;
            }
            if (clash)
                break;
        }
        /* its stage moves too: a kernel's stages are consecutive, in
         * the steps' order */
        int a = to < 0 ? 0 : P->steps[to].stage0 + 1, b = sj->stage0;
        if (to < 0 || to == j - 1 || b < a)
            continue;
        struct tn__stage st = P->stages[b];
        memmove(&P->stages[a + 1], &P->stages[a], (size_t)(b - a) * sizeof *P->stages);
        P->stages[a] = st;
        struct tn__step moved = *sj;
        int at = S.at[j];
        moved.stage0 = a;
        for (int k = to + 1; k < j; k++)
            if (P->steps[k].kind == TN_STEP_KERNEL)
                P->steps[k].stage0++;
        memmove(&P->steps[to + 2], &P->steps[to + 1], (size_t)(j - to - 1) * sizeof *P->steps);
        memmove(&S.at[to + 2], &S.at[to + 1], (size_t)(j - to - 1) * sizeof *S.at);
        P->steps[to + 1] = moved;
        S.at[to + 1] = at;
    }
    bufsets_free(&S);
    free(m);
}

void tn__schedule(struct tn__cprog *P)
{
    unsigned char *seen = calloc((size_t)P->nx + 1, 1);
    if (!seen)
        return; /* no fusion: still correct */
    hoist(P, seen);
    int w = 0;
    for (int i = 0; i < P->nsteps;) {
        struct tn__step st = P->steps[i];
        int j = i + 1;
        if (st.kind == TN_STEP_KERNEL) {
            const struct tn__stage *s0 = &P->stages[st.stage0];
            /* the group's row dims: a reduction's reduced dims; -1 while
             * the group is pointwise only (horizontal fusion: the last
             * dim is the row then) */
            int nred = s0->red == TN_RED_NONE ? -1 : s0->nred;
            for (; j < P->nsteps && j - i < GROUP_MAX; j++) {
                const struct tn__step *n = &P->steps[j];
                if (n->kind != TN_STEP_KERNEL)
                    break;
                const struct tn__stage *s = &P->stages[n->stage0];
                int r = nred >= 0 ? nred : s->red != TN_RED_NONE ? s->nred : -1;
                /* no threshold on the rows' count: it would make the
                 * plan depend on a symbolic batch's size */
                if (r < 0 && s0->nd < 1)
                    break;
                if (!same_space(s0, s, r < 0 ? 0 : r) || (s->red != TN_RED_NONE && s->nred != r))
                    break;
                memset(seen, 0, (size_t)P->nx + 1);
                if (!local_reads(P, s->x, st.stage0, n->stage0, r < 0 ? 0 : r, seen))
                    break;
                nred = r;
            }
            if (nred < 0)
                nred = 1;
            st.nrow = nred;
            if (j - i > 1 && outer_of(s0, nred) > 0) {
                st.nstages = j - i;
                size_t len = 0;
                for (int k = i; k < j; k++)
                    len += strlen(P->steps[k].label ? P->steps[k].label : "") + 2;
                char *label = malloc(len + 1);
                if (label) {
                    label[0] = '\0';
                    /* each node once: the steps' labels are lists */
                    for (int k = i; k < j; k++)
                        for (const char *q = P->steps[k].label; q && *q;) {
                            size_t n = strcspn(q, ",");
                            if (!has_name(label, q, n)) {
                                if (label[0])
                                    strcat(label, ", ");
                                strncat(label, q, n);
                            }
                            q += n;
                            q += strspn(q, ", ");
                        }
                }
                for (int k = i; k < j; k++)
                    free(P->steps[k].label);
                st.label = label;
            } else {
                j = i + 1;
            }
        }
        P->steps[w++] = st;
        i = j;
    }
    P->nsteps = w;
    free(seen);
}

void tn__schedule_private(struct tn__cprog *P)
{
    for (int i = 0; i < P->nsteps; i++) {
        const struct tn__step *st = &P->steps[i];
        if (st->kind != TN_STEP_KERNEL || st->nstages < 2)
            continue;
        for (int k = st->stage0; k < st->stage0 + st->nstages; k++) {
            const struct tn__stage *s = &P->stages[k];
            struct tn__buf *b = &P->bufs[s->buf];
            int nred = st->nrow;
            int64_t row = 1;
            for (int d = s->nd - nred; d < s->nd; d++)
                row *= s->sizes[d];
            if (!b->output && b->last == i && (s->red != TN_RED_NONE || row <= ROW_MAX))
                b->private_ = true;
        }
    }
}

/* ------------------------------------------------------ memory planning */

struct block {
    int64_t off, bytes;
    int last;
};

int tn__plan_memory(struct tn__cprog *P)
{
    int *def = malloc(((size_t)P->nbufs + 1) * sizeof *def);
    struct block *live = malloc(((size_t)P->nbufs + 1) * sizeof *live);
    if (!def || !live) {
        free(def);
        free(live);
        return tn_set_error(TN_ENOMEM, "out of memory");
    }
    for (int b = 0; b < P->nbufs; b++)
        def[b] = -1;
    for (int s = 0; s < P->nsteps; s++) {
        const struct tn__step *st = &P->steps[s];
        if (st->kind == TN_STEP_KERNEL)
            for (int k = st->stage0; k < st->stage0 + st->nstages; k++)
                if (def[P->stages[k].buf] < 0)
                    def[P->stages[k].buf] = s;
    }
    int nlive = 0;
    P->arena_bytes = P->temp_bytes = 0;
    for (int s = 0; s < P->nsteps; s++) {
        /* what died before this step leaves room */
        int w = 0;
        for (int i = 0; i < nlive; i++)
            if (live[i].last >= s)
                live[w++] = live[i];
        nlive = w;
        for (int b = 0; b < P->nbufs; b++) {
            struct tn__buf *x = &P->bufs[b];
            if (def[b] != s || x->kind != TN_BUF_TEMP || x->private_ || x->output)
                continue;
            int64_t bytes = (x->numel * (int64_t)tn_dtype_size(x->dt) + 63) / 64 * 64;
            if (!bytes)
                continue;
            /* the lowest gap between live blocks (kept sorted by offset) */
            int64_t off = 0;
            int at = 0;
            for (; at < nlive; at++) {
                if (live[at].off - off >= bytes)
                    break;
                if (live[at].off + live[at].bytes > off)
                    off = live[at].off + live[at].bytes;
            }
            memmove(&live[at + 1], &live[at], (size_t)(nlive - at) * sizeof *live);
            live[at] = (struct block){off, bytes, x->last < s ? s : x->last};
            nlive++;
            x->arena = off;
            P->temp_bytes += bytes;
            if (off + bytes > P->arena_bytes)
                P->arena_bytes = off + bytes;
        }
    }
    free(def);
    free(live);
    return TN_OK;
}
