/*
 * compile/lower.c: a checked graph, specialised on its inputs' metadata,
 * into the loop-level IR. Every graph value becomes an expression over its
 * own index space: an input is a load with the input's strides; a view
 * rewrites the index of the expression it views (free); a pointwise op
 * builds a bigger expression (fused into its consumers); a reduction, a
 * value a library kernel (an extern step) reads and a graph output are
 * realized: a stage computes the expression into a buffer. Ops without a
 * lowering (decomp.c) run through the dispatcher as extern steps.
 */
#include "compile/internal.h"
#include "graph/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool views_input(const struct tn__cprog *P, int b, int depth);

/* ------------------------------------------------------------- arguments */

const struct tn_graph_arg *tn__arg(const struct tn_graph_node *n, const char *name)
{
    for (int i = 0; i < n->nin; i++)
        if (!strcmp(n->in[i].name, name))
            return &n->in[i].arg;
    return NULL;
}

int tn__arg_tensor(const struct tn_graph_node *n, const char *name)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    return a && a->kind == TN_GARG_TENSOR ? a->items[0].value : -1;
}

double tn__arg_float(const struct tn_graph_node *n, const char *name, double dflt)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    if (!a)
        return dflt;
    if (a->kind == TN_GARG_FLOAT)
        return a->items[0].f;
    if ((a->kind == TN_GARG_INT || a->kind == TN_GARG_BOOL) && a->items[0].value < 0)
        return (double)a->items[0].i;
    return dflt;
}

static int64_t item_int(const struct tn__lctx *L, const struct tn_graph_item *it)
{
    return it->value >= 0 ? L->P->ints[it->value] : it->i;
}

int64_t tn__arg_int(const struct tn__lctx *L, const struct tn_graph_node *n, const char *name,
                    int64_t dflt)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    if (!a || (a->kind != TN_GARG_INT && a->kind != TN_GARG_BOOL &&
               !(a->kind == TN_GARG_INTS && a->n == 1)))
        return dflt;
    return item_int(L, &a->items[0]);
}

int tn__arg_ints(const struct tn__lctx *L, const struct tn_graph_node *n, const char *name,
                 int64_t *out)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    if (!a)
        return -1;
    if (a->kind == TN_GARG_INT) {
        out[0] = item_int(L, &a->items[0]);
        return 1;
    }
    if (a->kind != TN_GARG_INTS || a->n > TN_MAX_DIMS)
        return -1;
    for (int k = 0; k < a->n; k++)
        out[k] = item_int(L, &a->items[k]);
    return a->n;
}

const struct tn_tensor *tn__out_meta(const struct tn__lctx *L, int k)
{
    if (k >= L->n->nout || L->n->outs[k] < 0)
        return NULL;
    return L->meta[L->n->outs[k]];
}

enum tn_dtype tn__compute_dtype(enum tn_dtype dt)
{
    return dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? TN_FLOAT32 : dt;
}

/* --------------------------------------------------------------- views */

int tn__lv_remap(struct tn__lctx *L, const struct tn__lv *in, const struct tn__vmap *m,
                 int nd, const int64_t *sizes, struct tn__lv *out)
{
    struct tn__lv r = {.nd = nd, .dt = in->dt};
    memcpy(r.sizes, sizes, (size_t)nd * sizeof *sizes);
    if ((r.x = tn__x_remap(L->P, in->x, m)) < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    *out = r;
    return TN_OK;
}

int tn__bcast_lv(struct tn__lctx *L, const struct tn__lv *v, int nd, const int64_t *sizes)
{
    struct tn__vmap m = {.nold = v->nd};
    if (v->nd > nd)
        return -1;
    for (int d = 0; d < v->nd; d++) {
        m.src[d] = d + nd - v->nd;
        m.mul[d] = v->sizes[d] == 1 ? 0 : 1;
        m.add[d] = 0;
        if (v->sizes[d] != 1 && v->sizes[d] != sizes[m.src[d]])
            return -1;
    }
    bool same = v->nd == nd;
    for (int d = 0; same && d < nd; d++)
        same = v->sizes[d] == sizes[d];
    return same ? v->x : tn__x_remap(L->P, v->x, &m);
}

int tn__bcast(struct tn__lctx *L, int vi, int nd, const int64_t *sizes)
{
    return L->v[vi].x < 0 ? -1 : tn__bcast_lv(L, &L->v[vi], nd, sizes);
}

int tn__operand(struct tn__lctx *L, const struct tn_graph_node *n, const char *name, int k,
                enum tn_dtype dt)
{
    const struct tn_graph_arg *a = tn__arg(n, name);
    const struct tn_tensor *o = tn__out_meta(L, k);
    if (!a || !o)
        return -1;
    switch (a->kind) {
    case TN_GARG_TENSOR: {
        int x = tn__bcast(L, a->items[0].value, o->ndim, o->sizes);
        return x < 0 ? -1 : tn__x_cast(L->P, dt, x);
    }
    case TN_GARG_FLOAT:
        return tn__x_const(L->P, dt, a->items[0].f);
    case TN_GARG_INT:
    case TN_GARG_BOOL:
        return tn__x_const(L->P, dt, (double)item_int(L, &a->items[0]));
    default:
        return -1;
    }
}

int tn__set_out(struct tn__lctx *L, int k, int x, enum tn_dtype dt)
{
    const struct tn_tensor *o = tn__out_meta(L, k);
    if (!o)
        return TN_OK; /* an output nobody named */
    if (x < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    struct tn__lv *v = &L->v[L->n->outs[k]];
    v->x = tn__x_cast(L->P, o->dtype, x);
    (void)dt;
    v->nd = o->ndim;
    v->dt = o->dtype;
    memcpy(v->sizes, o->sizes, sizeof v->sizes);
    return v->x < 0 ? tn_set_error(TN_ENOMEM, "out of memory") : TN_OK;
}

int tn__set_view(struct tn__lctx *L, int k, int vi, const struct tn__vmap *m)
{
    const struct tn_tensor *o = tn__out_meta(L, k);
    if (!o)
        return TN_OK;
    return tn__lv_remap(L, &L->v[vi], m, o->ndim, o->sizes, &L->v[L->n->outs[k]]);
}

/* ----------------------------------------------------------- realizing */

static bool contiguous_load(const struct tn__cprog *P, const struct tn__lv *v)
{
    const struct tn__x *x = &P->xs[v->x];
    if (x->op != TN_X_LOAD || x->off)
        return false;
    int64_t st = 1;
    for (int d = v->nd - 1; d >= 0; d--) {
        int64_t c = d < x->nd ? x->coef[d] : 0;
        if (v->sizes[d] != 1 && c != st)
            return false;
        st *= v->sizes[d];
    }
    return true;
}

static int64_t numel_of(int nd, const int64_t *sizes)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= sizes[d];
    return n;
}

static int map_xs(struct tn__lctx *L, int ni);

/* A load of a step's result, buffer b: no node's expression (a kernel
 * reading it computes none of the nodes before), -1 when out of memory. */
static int result_load(struct tn__lctx *L, int b, int nd, const int64_t *coef)
{
    if (map_xs(L, L->n ? (int)(L->n - L->g->nodes) : -1) < 0)
        return -1;
    int x = tn__x_load(L->P, b, nd, 0, coef);
    return x < 0 || map_xs(L, -1) < 0 ? -1 : x;
}

/* A load of all of buffer b (contiguous) over sizes: a step's result. */
static int load_all(struct tn__lctx *L, int b, int nd, const int64_t *sizes)
{
    int64_t st[TN_MAX_DIMS];
    tn_contiguous_strides(sizes, nd, st);
    return result_load(L, b, nd, st);
}

/* The nodes whose expressions x reads, into mark (per node); whether x
 * reads memory. A load of a step's result is no node's (a view of it is
 * the view's); an expression made since xmapped is the node being
 * lowered's; one of constants only is anybody's (hash-consed: the first
 * maker's). */
static bool mark_nodes(const struct tn__lctx *L, int x, unsigned char *seen, unsigned char *mark)
{
    if (x < 0)
        return false;
    if (seen[x])
        return seen[x] == 2;
    const struct tn__x *e = &L->P->xs[x];
    bool reads = e->op == TN_X_LOAD;
    reads |= mark_nodes(L, e->a, seen, mark);
    reads |= mark_nodes(L, e->b, seen, mark);
    reads |= mark_nodes(L, e->c, seen, mark);
    int ni = x < L->xmapped ? L->xnode[x] : L->n ? (int)(L->n - L->g->nodes) : -1;
    if (ni >= 0 && reads)
        mark[ni] = 1;
    seen[x] = reads ? 2 : 1;
    return reads;
}

/* A kernel's label: the graph nodes its stage computes, in graph order
 * (the node being lowered, or the extern one whose argument it is, when
 * it only copies an input). */
static char *kernel_label(const struct tn__lctx *L, const struct tn__stage *s)
{
    const struct tn_graph *g = L->g;
    unsigned char *seen = calloc((size_t)L->P->nx + 1, 1);
    unsigned char *mark = calloc((size_t)g->nnodes + 1, 1);
    size_t len = 1;
    char *label = NULL;
    if (seen && mark) {
        mark_nodes(L, s->x, seen, mark);
        for (int i = 0; i < g->nnodes; i++)
            len += mark[i] ? strlen(g->nodes[i].name) + 2 : 0;
        const char *dflt = L->n ? L->n->name : L->ext ? L->ext : "output";
        label = malloc(len + strlen(dflt));
        if (label) {
            label[0] = '\0';
            for (int i = 0; i < g->nnodes; i++)
                if (mark[i]) {
                    if (label[0])
                        strcat(label, ", ");
                    strcat(label, g->nodes[i].name);
                }
            if (!label[0])
                strcpy(label, dflt);
        }
    }
    free(seen);
    free(mark);
    return label;
}

/* A kernel step of one stage. */
static int add_kernel(struct tn__lctx *L, const struct tn__stage *s)
{
    int si = tn__stage_new(L->P, s);
    struct tn__step *st = si < 0 ? NULL : tn__step_new(L->P, TN_STEP_KERNEL);
    if (!st)
        return tn_set_error(TN_ENOMEM, "out of memory");
    st->stage0 = si;
    st->nstages = 1;
    st->label = kernel_label(L, s);
    return st->label ? TN_OK : tn_set_error(TN_ENOMEM, "out of memory");
}

static int copy_lv(struct tn__lctx *L, struct tn__lv *v);

static int realize_lv(struct tn__lctx *L, struct tn__lv *v, bool contiguous)
{
    const struct tn__x *x = &L->P->xs[v->x];
    if (contiguous ? contiguous_load(L->P, v) : x->op == TN_X_LOAD)
        return TN_OK;
    return copy_lv(L, v);
}

/* v computed into a buffer of its own, contiguous. */
static int copy_lv(struct tn__lctx *L, struct tn__lv *v)
{
    int b = tn__buf_new(L->P, TN_BUF_TEMP, v->dt, numel_of(v->nd, v->sizes));
    if (b < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    struct tn__stage s = {.red = TN_RED_NONE, .buf = b, .x = v->x, .nd = v->nd, .nred = 0,
                          .acc = v->dt};
    memcpy(s.sizes, v->sizes, sizeof s.sizes);
    int rc = add_kernel(L, &s);
    if (rc < 0)
        return rc;
    v->x = load_all(L, b, v->nd, v->sizes);
    return v->x < 0 ? tn_set_error(TN_ENOMEM, "out of memory") : TN_OK;
}

static int cost(const struct tn__cprog *P, int x, unsigned char *seen)
{
    if (x < 0 || seen[x])
        return 0;
    seen[x] = 1;
    const struct tn__x *e = &P->xs[x];
    int c = e->op == TN_X_LOAD || e->op == TN_X_CONST || e->op == TN_X_CAST ? 0
            : e->op >= TN_X_EXP && e->op <= TN_X_EXPM1 && e->op != TN_X_RECIP ? 8 : 1;
    return c + cost(P, e->a, seen) + cost(P, e->b, seen) + cost(P, e->c, seen);
}

int tn__x_cost(const struct tn__cprog *P, int x)
{
    unsigned char *seen = calloc((size_t)P->nx + 1, 1);
    int c = seen ? cost(P, x, seen) : 100;
    free(seen);
    return c;
}

int tn__realize_costly(struct tn__lctx *L, struct tn__lv *v)
{
    return tn__x_cost(L->P, v->x) > 4 ? realize_lv(L, v, true) : TN_OK;
}

int tn__realize(struct tn__lctx *L, int vi, bool contiguous)
{
    return realize_lv(L, &L->v[vi], contiguous);
}

int tn__reduce(struct tn__lctx *L, const struct tn__lv *in, unsigned mask, int red,
               enum tn_dtype acc, bool keepdim, struct tn__lv *out)
{
    struct tn__vmap m = {.nold = in->nd};
    struct tn__stage s = {.red = red, .nd = in->nd, .acc = acc};
    int64_t osz[TN_MAX_DIMS];
    int no = 0, nr = 0;
    for (int d = 0; d < in->nd; d++)
        if (!(mask >> d & 1))
            osz[no++] = in->sizes[d];
    for (int d = 0, o = 0; d < in->nd; d++) {
        bool r = mask >> d & 1;
        m.src[d] = r ? no + nr++ : o++;
        m.mul[d] = 1;
        m.add[d] = 0;
        s.sizes[m.src[d]] = in->sizes[d];
    }
    s.nred = nr;
    if ((s.x = tn__x_remap(L->P, in->x, &m)) < 0 ||
        (s.buf = tn__buf_new(L->P, TN_BUF_TEMP, acc, numel_of(no, osz))) < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    int rc = add_kernel(L, &s);
    if (rc < 0)
        return rc;
    struct tn__lv r = {.nd = keepdim ? in->nd : no, .dt = acc};
    int64_t st[TN_MAX_DIMS], coef[TN_MAX_DIMS] = {0};
    tn_contiguous_strides(osz, no, st);
    for (int d = 0, o = 0; d < in->nd; d++) {
        bool rd = mask >> d & 1;
        if (keepdim) {
            r.sizes[d] = rd ? 1 : in->sizes[d];
            coef[d] = rd ? 0 : st[o];
        } else if (!rd) {
            r.sizes[o] = in->sizes[d];
            coef[o] = st[o];
        }
        o += !rd;
    }
    if ((r.x = result_load(L, s.buf, r.nd, coef)) < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    *out = r;
    return TN_OK;
}

/* The strides that view sizes/strides (nd) as nsizes (nnd) without a copy,
 * as PyTorch's view computes them; -1 when no view can. */
static int view_strides(int nd, const int64_t *sz, const int64_t *st, int nnd,
                        const int64_t *nsz, int64_t *nst)
{
    if (numel_of(nd, sz) == 0 || nd == 0) {
        tn_contiguous_strides(nsz, nnd, nst);
        return 0;
    }
    int vd = nnd - 1;
    int64_t base = st[nd - 1], tnumel = 1, vnumel = 1;
    for (int td = nd - 1; td >= 0; td--) {
        tnumel *= sz[td];
        if (td == 0 || (sz[td - 1] != 1 && st[td - 1] != tnumel * base)) {
            while (vd >= 0 && (vnumel < tnumel || nsz[vd] == 1)) {
                nst[vd] = vnumel * base;
                vnumel *= nsz[vd];
                vd--;
            }
            if (vnumel != tnumel)
                return -1;
            if (td > 0) {
                base = st[td - 1];
                tnumel = vnumel = 1;
            }
        }
    }
    return vd == -1 ? 0 : -1;
}

int tn__reshape(struct tn__lctx *L, struct tn__lv *lv, int nd, const int64_t *sizes)
{
    int rc = realize_lv(L, lv, false);
    if (rc < 0)
        return rc;
    const struct tn__x *x = &L->P->xs[lv->x];
    int64_t st[TN_MAX_DIMS], nst[TN_MAX_DIMS];
    for (int d = 0; d < lv->nd; d++)
        st[d] = d < x->nd ? x->coef[d] : 0;
    if (view_strides(lv->nd, lv->sizes, st, nd, sizes, nst) < 0) {
        if ((rc = realize_lv(L, lv, true)) < 0)
            return rc;
        tn_contiguous_strides(sizes, nd, nst);
    }
    x = &L->P->xs[lv->x];
    int nx = tn__x_load(L->P, x->buf, nd, x->off, nst);
    if (nx < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    lv->x = nx;
    lv->nd = nd;
    memcpy(lv->sizes, sizes, (size_t)nd * sizeof *sizes);
    return TN_OK;
}

/* The view a load value is, for extern steps and outputs. */
static void view_of(const struct tn__cprog *P, const struct tn__lv *v, struct tn__view *w)
{
    const struct tn__x *x = &P->xs[v->x];
    w->buf = x->buf;
    w->nd = v->nd;
    w->off = x->off;
    for (int d = 0; d < v->nd; d++) {
        w->sizes[d] = v->sizes[d];
        w->strides[d] = d < x->nd ? x->coef[d] : 0;
    }
}

int tn__matmul(struct tn__lctx *L, const struct tn__lv *a, const struct tn__lv *b,
               struct tn__lv *out)
{
    struct tn__lv aa = *a, bb = *b;
    int rc;
    if ((rc = realize_lv(L, &aa, false)) < 0 || (rc = realize_lv(L, &bb, false)) < 0)
        return rc;
    int nd = a->nd;
    for (int i = 0; i < 2 && nd > 2; i++) { /* bmm.c reads strided matrices in place */
        struct tn__lv *v = i ? &bb : &aa;
        struct tn__view w;
        bool t;
        int64_t ld;
        view_of(L->P, v, &w);
        if (!tn__gemm_layout(&w, &t, &ld) && (rc = realize_lv(L, v, true)) < 0)
            return rc;
    }
    struct tn__step *st = tn__step_new(L->P, TN_STEP_MATMUL);
    if (!st)
        return tn_set_error(TN_ENOMEM, "out of memory");
    st->nargs = 2;
    st->nouts = 1;
    st->args = calloc(2, sizeof *st->args);
    st->outbuf = calloc(1, sizeof *st->outbuf);
    st->label = strdup(L->n->name);
    int64_t sz[TN_MAX_DIMS];
    memcpy(sz, a->sizes, (size_t)nd * sizeof *sz);
    sz[nd - 1] = b->sizes[nd - 1];
    enum tn_dtype dt = tn_promote_types(a->dt, b->dt);
    int ob = tn__buf_new(L->P, TN_BUF_EXTERN, dt, numel_of(nd, sz));
    if (!st->args || !st->outbuf || !st->label || ob < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    view_of(L->P, &aa, &st->args[0]);
    view_of(L->P, &bb, &st->args[1]);
    st->outbuf[0] = ob;
    struct tn__lv r = {.nd = nd, .dt = dt};
    memcpy(r.sizes, sz, (size_t)nd * sizeof *sz);
    if ((r.x = load_all(L, ob, nd, sz)) < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    *out = r;
    return TN_OK;
}

/* ----------------------------------------------------------- the driver */

/* Node n through the dispatcher: its tensor arguments realized, its
 * tensor outputs into buffers of their own. */
static int lower_extern(struct tn__lctx *L, int ni, const char *why)
{
    const struct tn_graph_node *n = &L->g->nodes[ni];
    int nargs = 0, rc;
    for (int i = 0; i < n->nin; i++)
        if (n->in[i].arg.kind == TN_GARG_TENSOR || n->in[i].arg.kind == TN_GARG_TENSORS)
            nargs += n->in[i].arg.n;
    struct tn__step *st = tn__step_new(L->P, TN_STEP_NODE);
    if (!st)
        return tn_set_error(TN_ENOMEM, "out of memory");
    st->node = ni;
    st->argv = calloc((size_t)nargs + 1, sizeof *st->argv);
    st->args = calloc((size_t)nargs + 1, sizeof *st->args);
    st->outbuf = calloc((size_t)n->nout + 1, sizeof *st->outbuf);
    st->why = strdup(why);
    st->label = strdup(n->name);
    if (!st->argv || !st->args || !st->outbuf || !st->why || !st->label)
        return tn_set_error(TN_ENOMEM, "out of memory");
    int si = L->P->nsteps - 1, k = 0;
    for (int i = 0; i < n->nin; i++) {
        if (n->in[i].arg.kind != TN_GARG_TENSOR && n->in[i].arg.kind != TN_GARG_TENSORS)
            continue;
        for (int j = 0; j < n->in[i].arg.n; j++) {
            int v = n->in[i].arg.items[j].value;
            if (v < 0 || L->v[v].x < 0)
                continue;
            if ((rc = tn__realize(L, v, false)) < 0)
                return rc;
            /* realizing appended kernel steps: ours moved */
            st = &L->P->steps[si];
            st->argv[k] = v;
            view_of(L->P, &L->v[v], &st->args[k++]);
        }
    }
    /* the kernels realizing the arguments run first: the node's step goes last */
    if (si != L->P->nsteps - 1) {
        struct tn__step me = L->P->steps[si];
        memmove(&L->P->steps[si], &L->P->steps[si + 1],
                (size_t)(L->P->nsteps - 1 - si) * sizeof me);
        L->P->steps[L->P->nsteps - 1] = me;
        st = &L->P->steps[L->P->nsteps - 1];
    }
    st->nargs = k;
    st->nouts = n->nout;
    for (int o = 0; o < n->nout; o++) {
        int v = n->outs[o];
        st->outbuf[o] = -1;
        if (v < 0 || L->g->values[v].is_sym || !L->meta[v])
            continue;
        const struct tn_tensor *t = L->meta[v];
        /* a view (of an argument: the check's Meta run made it one) shares
         * its argument's memory, which must outlive it (keep_bases) */
        L->P->steps[L->P->nsteps - 1].views |= t->base != NULL;
        int b = tn__buf_new(L->P, TN_BUF_EXTERN, t->dtype, tn_numel(t));
        if (b < 0)
            return tn_set_error(TN_ENOMEM, "out of memory");
        L->P->steps[L->P->nsteps - 1].outbuf[o] = b;
        struct tn__lv *lv = &L->v[v];
        lv->nd = t->ndim;
        lv->dt = t->dtype;
        memcpy(lv->sizes, t->sizes, sizeof lv->sizes);
        if ((lv->x = load_all(L, b, t->ndim, t->sizes)) < 0)
            return tn_set_error(TN_ENOMEM, "out of memory");
    }
    return TN_OK;
}

static bool computable(enum tn_dtype dt)
{
    return dt >= 0 && dt < TN_NUM_DTYPES && !tn_dtype_is_complex(dt);
}

/* Why node n cannot be lowered whatever its lowering says ("" if it can). */
static const char *blocked(const struct tn__lctx *L, const struct tn_graph_node *n)
{
    for (int i = 0; i < n->nin; i++)
        for (int j = 0; j < n->in[i].arg.n; j++) {
            int v = n->in[i].arg.items[j].value;
            if ((n->in[i].arg.kind == TN_GARG_TENSOR || n->in[i].arg.kind == TN_GARG_TENSORS) &&
                v >= 0 && (!L->meta[v] || !computable(L->meta[v]->dtype)))
                return "a dtype the generated code does not compute";
        }
    for (int k = 0; k < n->nout; k++) {
        int v = n->outs[k];
        if (v >= 0 && !L->g->values[v].is_sym && (!L->meta[v] || !computable(L->meta[v]->dtype)))
            return "a dtype the generated code does not compute";
    }
    return "";
}

/* The Meta pass at these inputs: every value's sizes and dtype, every
 * SymInt's value. */
static int meta_pass(struct tn__lctx *L, struct tn_tensor *const *inputs)
{
    const struct tn_graph *g = L->g;
    struct tn__graph_slot *slots = calloc((size_t)g->nvalues + 1, sizeof *slots);
    int64_t *vals = calloc((size_t)g->nsymbols + 1, sizeof *vals);
    struct tn__graph_scratch s = {0};
    const struct tn_device meta = {TN_DEVICE_META, -1};
    int rc = TN_OK;
    if (!slots || !vals) {
        rc = tn_set_error(TN_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_graph_value *v = &g->values[g->inputs[i].value];
        for (int d = 0; d < v->ndim; d++) {
            char name[72];
            if (v->exprs[d] && tn__graph_bare_symbol(v->exprs[d], name, sizeof name) == 0)
                for (int k = 0; k < g->nsymbols; k++)
                    if (!strcmp(g->symbols[k].name, name))
                        vals[k] = inputs[i]->sizes[d];
        }
        slots[g->inputs[i].value].t =
            tn_empty_on(inputs[i]->sizes, inputs[i]->ndim, inputs[i]->dtype, meta);
        if (!slots[g->inputs[i].value].t) {
            rc = tn_last_status();
            goto out;
        }
    }
    tn_keyset old = tn_dispatch_set_excluded(tn_dispatch_excluded() | TN_KEYSET(TN_KEY_AUTOGRAD));
    tn__graph_meta_devices = true;
    for (int ni = 0; ni < g->nnodes && rc == TN_OK; ni++) {
        const struct tn_graph_node *n = &g->nodes[ni];
        if (tn__runtime_only(g, n, L->rt)) /* its numbers come from the data of each run */
            continue;
        if (tn__graph_call(g, n, slots, &s) == TN_OK)
            continue;
        if (tn_last_status() != TN_EDEVICE) {
            rc = tn_last_status();
            break;
        }
        /* no Meta kernel: tensor_values at these symbols */
        tn_clear_error();
        for (int k = 0; k < n->nout && rc == TN_OK; k++) {
            int vi = n->outs[k];
            if (vi < 0 || g->values[vi].is_sym)
                continue;
            const struct tn_graph_value *v = &g->values[vi];
            int64_t sz[TN_MAX_DIMS];
            for (int d = 0; d < v->ndim && rc == TN_OK; d++) {
                sz[d] = v->sizes[d];
                if (v->exprs[d] && tn__graph_eval(g, v->exprs[d], vals, &sz[d]) < 0)
                    rc = tn_set_error(TN_EINVAL, "%s: node '%s': the size '%s' of '%s' does not "
                                      "evaluate", g->label, n->name, v->exprs[d], v->name);
            }
            if (rc == TN_OK && !(slots[vi].t = tn_empty_on(sz, v->ndim, v->dtype, meta)))
                rc = tn_last_status();
        }
    }
    tn__graph_meta_devices = false;
    tn_dispatch_set_excluded(old);
    for (int i = 0; i < g->nvalues; i++) {
        L->meta[i] = slots[i].t;
        slots[i].t = NULL;
        L->P->ints[i] = slots[i].i;
    }
out:
    for (int i = 0; slots && i < g->nvalues; i++)
        tn_release(slots[i].t);
    free(slots);
    free(vals);
    free(s.ints);
    return rc;
}

/* An op that writes one of its arguments: the whole graph is left to the
 * interpreter (functionalisation is not done yet). */
static bool mutates(const struct tn_graph_node *n)
{
    if (strcmp(n->op->ns, "aten") && strcmp(n->op->ns, "prims"))
        return false; /* _operator::and_ and the like compute a number */
    const char *q = strstr(n->op->qualname, "::");
    q = q ? q + 2 : n->op->qualname;
    const char *dot = strchr(q, '.');
    size_t len = dot ? (size_t)(dot - q) : strlen(q);
    return (len > 1 && q[len - 1] == '_' && q[0] != '_') || (dot && !strncmp(dot, ".out", 4));
}

/* The expressions made since the last call: node ni's (-1: before any). */
static int map_xs(struct tn__lctx *L, int ni)
{
    int *m = realloc(L->xnode, ((size_t)L->P->nx + 1) * sizeof *m);
    if (!m)
        return tn_set_error(TN_ENOMEM, "out of memory");
    L->xnode = m;
    for (; L->xmapped < L->P->nx; L->xmapped++)
        m[L->xmapped] = ni;
    return TN_OK;
}

static int lower_graph(struct tn__lctx *L, struct tn_tensor *const *inputs)
{
    int rc2;
    const struct tn_graph *g = L->g;
    struct tn__cprog *P = L->P;
    int rc = meta_pass(L, inputs);
    if (rc < 0)
        return rc;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_op *op = g->nodes[i].op;
        if (mutates(&g->nodes[i]))
            return tn_set_error(TN_EINVAL, "%s: node '%s' (%s) writes its argument in place "
                                "(not compiled yet)", g->label, g->nodes[i].name, op->qualname);
    }
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_tensor *t = inputs[i];
        int b = tn__buf_new(P, TN_BUF_INPUT, t->dtype, tn_numel(t));
        if (b < 0)
            return tn_set_error(TN_ENOMEM, "out of memory");
        P->bufs[b].input = i;
        struct tn__lv *v = &L->v[g->inputs[i].value];
        v->nd = t->ndim;
        v->dt = t->dtype;
        memcpy(v->sizes, t->sizes, sizeof v->sizes);
        if ((v->x = tn__x_load(P, b, t->ndim, 0, t->strides)) < 0)
            return tn_set_error(TN_ENOMEM, "out of memory");
    }
    if ((rc = map_xs(L, -1)) < 0) /* the inputs' loads: no node's */
        return rc;
    for (int ni = 0; ni < g->nnodes; ni++) {
        const struct tn_graph_node *n = &g->nodes[ni];
        tn__lower_fn fn = tn__decomp_find(n->op->qualname);
        char num[200];
        const char *why = tn__runtime_reason(g, n, L->rt, num, sizeof num);
        if (!why)
            why = blocked(L, n);
        L->n = n;
        L->ext = NULL;
        L->why[0] = '\0';
        rc = 1;
        if (why == num) /* a number of this run: whatever the lowering */
            snprintf(L->why, sizeof L->why, "%s", why);
        else if (tn__graph_is_random(n->op)) /* impure: each run, in graph order, never merged */
            snprintf(L->why, sizeof L->why, "it draws random numbers");
        else if (!fn)
            snprintf(L->why, sizeof L->why, "no lowering for %s", n->op->qualname);
        else if (*why)
            snprintf(L->why, sizeof L->why, "%s", why);
        else
            rc = fn(L, n);
        if (rc < 0)
            return tn_error_prefix("%s: node '%s'", g->label, n->name);
        if ((rc2 = map_xs(L, ni)) < 0)
            return rc2;
        if (rc == 0) {
            P->nfused++;
            /* a value many read, costly to recompute: computed once */
            for (int k = 0; k < n->nout; k++) {
                int v = n->outs[k];
                if (v >= 0 && L->v[v].x >= 0 && L->uses[v] > 1 &&
                    (rc = tn__realize_costly(L, &L->v[v])) < 0)
                    return rc;
            }
            continue;
        }
        L->n = NULL;
        L->ext = n->name;
        if ((rc = lower_extern(L, ni, L->why)) < 0 || (rc = map_xs(L, ni)) < 0)
            return rc;
    }
    L->n = NULL;
    for (int i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i].value;
        struct tn__lv *lv = &L->v[v];
        if (lv->x < 0)
            return tn_set_error(TN_EINVAL, "%s: output '%s' is not a tensor", g->label,
                                g->values[v].name);
        const struct tn__x *x = &P->xs[lv->x];
        /* an output never aliases an input: the caller owns what it gets */
        bool fresh = x->op == TN_X_LOAD && P->bufs[x->buf].kind != TN_BUF_INPUT;
        if (!fresh && (rc = realize_lv(L, lv, true)) < 0)
            return rc;
        /* nor through a view an extern step made of one (view_as) */
        x = &P->xs[lv->x];
        if (x->op == TN_X_LOAD && P->bufs[x->buf].kind != TN_BUF_INPUT &&
            views_input(P, x->buf, 0) && (rc = copy_lv(L, lv)) < 0)
            return rc;
        view_of(P, lv, &P->outs[i]);
        P->bufs[P->outs[i].buf].output = true;
    }
    return TN_OK;
}

/* The extern step that writes buffer b, -1 when none. */
static int producer(const struct tn__cprog *P, int b)
{
    for (int s = 0; s < P->nsteps; s++)
        if (P->steps[s].kind == TN_STEP_NODE)
            for (int o = 0; o < P->steps[s].nouts; o++)
                if (P->steps[s].outbuf[o] == b)
                    return s;
    return -1;
}

/* Whether buffer b is a graph input or a view an extern step made of one
 * (view_as, reshape_as of an input: contiguous, so kept as a view). */
static bool views_input(const struct tn__cprog *P, int b, int depth)
{
    if (P->bufs[b].kind == TN_BUF_INPUT)
        return true;
    int s = depth < 64 ? producer(P, b) : -1;
    if (s < 0 || !P->steps[s].views)
        return false;
    for (int k = 0; k < P->steps[s].nargs; k++)
        if (views_input(P, P->steps[s].args[k].buf, depth + 1))
            return true;
    return false;
}

/* A view an extern step returns shares its arguments' memory: they live
 * as long as it does (their arena space is not reused while it is read).
 * Backwards, so a view of a view passes its reach on. */
static void keep_bases(struct tn__cprog *P)
{
    for (int s = P->nsteps - 1; s >= 0; s--) {
        const struct tn__step *st = &P->steps[s];
        if (st->kind != TN_STEP_NODE || !st->views)
            continue;
        int last = -1;
        for (int o = 0; o < st->nouts; o++)
            if (st->outbuf[o] >= 0 && P->bufs[st->outbuf[o]].last > last)
                last = P->bufs[st->outbuf[o]].last;
        for (int k = 0; k < st->nargs; k++) {
            struct tn__buf *b = &P->bufs[st->args[k].buf];
            if (b->last < last)
                b->last = last;
        }
    }
}

/* Each buffer's last reader, so the executor frees it there. */
static void last_uses(struct tn__cprog *P)
{
    unsigned char *seen = calloc((size_t)P->nx + 1, 1);
    for (int s = 0; s < P->nsteps; s++) {
        const struct tn__step *st = &P->steps[s];
        if (st->kind != TN_STEP_KERNEL) {
            for (int k = 0; k < st->nargs; k++)
                P->bufs[st->args[k].buf].last = s;
            continue;
        }
        for (int i = st->stage0; i < st->stage0 + st->nstages; i++) {
            P->bufs[P->stages[i].buf].last = s > P->bufs[P->stages[i].buf].last
                                                 ? s : P->bufs[P->stages[i].buf].last;
            /* the loads of its expression */
            int stack[256], sp = 0;
            if (seen)
                memset(seen, 0, (size_t)P->nx + 1);
            stack[sp++] = P->stages[i].x;
            while (sp) {
                int x = stack[--sp];
                if (x < 0 || (seen && seen[x]))
                    continue;
                if (seen)
                    seen[x] = 1;
                const struct tn__x *e = &P->xs[x];
                if (e->op == TN_X_LOAD)
                    P->bufs[e->buf].last = s;
                for (int c = 0; c < 3 && sp < 253; c++) {
                    int o = c == 0 ? e->a : c == 1 ? e->b : e->c;
                    if (o >= 0)
                        stack[sp++] = o;
                }
            }
        }
    }
    free(seen);
}

struct tn__cprog *tn__lower(const struct tn_graph *g, struct tn_tensor *const *inputs)
{
    struct tn__cprog *P = calloc(1, sizeof *P);
    struct tn__lctx L = {.P = P, .g = g};
    if (P) {
        P->g = g;
        P->ints = calloc((size_t)g->nvalues + 1, sizeof *P->ints);
        P->outs = calloc((size_t)g->noutputs + 1, sizeof *P->outs);
        L.v = calloc((size_t)g->nvalues + 1, sizeof *L.v);
        L.meta = calloc((size_t)g->nvalues + 1, sizeof *L.meta);
        L.uses = calloc((size_t)g->nvalues + 1, sizeof *L.uses);
        L.rt = calloc((size_t)g->nvalues + 1, sizeof *L.rt);
    }
    if (!P || !P->ints || !P->outs || !L.v || !L.meta || !L.uses || !L.rt) {
        tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto fail;
    }
    for (int i = 0; i < g->nvalues; i++)
        L.v[i].x = -1;
    for (int ni = 0; ni < g->nnodes; ni++)
        for (int i = 0; i < g->nodes[ni].nin; i++)
            for (int j = 0; j < g->nodes[ni].in[i].arg.n; j++) {
                int v = g->nodes[ni].in[i].arg.items[j].value;
                if (v >= 0)
                    L.uses[v]++;
            }
    for (int i = 0; i < g->noutputs; i++)
        L.uses[g->outputs[i].value]++;
    if (tn__runtime_numbers(g, L.rt) < 0 || lower_graph(&L, inputs) < 0)
        goto fail;
    last_uses(P);
    tn__schedule(P);
    last_uses(P);
    for (int i = 0; i < P->nbufs; i++)
        if (P->bufs[i].output)
            P->bufs[i].last = P->nsteps;
    keep_bases(P);
    tn__schedule_private(P);
    if (tn__plan_memory(P) < 0)
        goto fail;
    goto done;
fail:
    tn__cprog_free(P);
    P = NULL;
done:
    for (int i = 0; L.meta && i < g->nvalues; i++)
        tn_release(L.meta[i]);
    free(L.meta);
    free(L.v);
    free(L.uses);
    free(L.rt);
    free(L.xnode);
    return P;
}
