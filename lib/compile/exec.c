/*
 * compile/exec.c: runs a lowered program: kernels from the loaded
 * library over libtensor's thread pool, matrix products and the nodes
 * left extern through libtensor, buffers allocated at their first write
 * and released after their last read.
 */
#include "compile/internal.h"
#include "graph/internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/autograd.h>
#include <tensor/ops.h>

int tn__exec_bind(struct tn__cprog *P, void *lib, void ***fns)
{
    void **f = calloc((size_t)P->nsteps + 1, sizeof *f);
    if (!f)
        return tn_set_error(TN_ENOMEM, "out of memory");
    for (int i = 0; i < P->nsteps; i++) {
        if (P->steps[i].kind != TN_STEP_KERNEL)
            continue;
        char name[32];
        snprintf(name, sizeof name, "tn_k%d", i);
        if (!(f[i] = dlsym(lib, name))) {
            free(f);
            return tn_set_error(TN_EFORMAT, "the compiled library lacks %s", name);
        }
    }
    *fns = f;
    return TN_OK;
}

/* A tensor viewing buffer w->buf of T as w says. */
static struct tn_tensor *view(struct tn_tensor *const *T, const struct tn__view *w)
{
    const struct tn_tensor *b = T[w->buf];
    return tn_as_strided(b, w->sizes, w->nd, w->strides, b->offset + w->off);
}

/* t as buffer b (contiguous, of the size planned); takes t. */
static int set_buf(const struct tn__cprog *P, struct tn_tensor **T, char **B, int b,
                   struct tn_tensor *t, const char *what)
{
    if (!t) /* an output the op left undefined (a mask's false) */
        return tn_set_error(TN_ERUNTIME, "%s: %s gave no tensor where the compiled plan "
                            "expects one", P->g->label, what);
    if (tn_numel(t) != P->bufs[b].numel || t->dtype != P->bufs[b].dt) {
        char got[128];
        tn__graph_describe(t, got, sizeof got);
        tn_release(t);
        return tn_set_error(TN_ERUNTIME, "%s: %s gave %s, not the %s of %lld elements the "
                            "compiled plan expects", P->g->label, what, got,
                            tn_dtype_name(P->bufs[b].dt), (long long)P->bufs[b].numel);
    }
    if (!tn_is_contiguous(t)) {
        struct tn_tensor *c = tn_contiguous(t);
        tn_release(t);
        if (!(t = c))
            return tn_last_status();
    }
    T[b] = t;
    B[b] = tn_data(t);
    return TN_OK;
}

static int run_node(const struct tn__cprog *P, const struct tn__step *st, struct tn_tensor **T,
                    char **B, struct tn__graph_slot *slots, struct tn__graph_scratch *sc)
{
    const struct tn_graph *g = P->g;
    const struct tn_graph_node *n = &g->nodes[st->node];
    int rc = TN_OK;
    for (int k = 0; k < st->nargs && rc == TN_OK; k++)
        if (!(slots[st->argv[k]].t = view(T, &st->args[k])))
            rc = tn_last_status();
    if (rc == TN_OK && (rc = tn__exec_conv_bw(n, slots)) == 1) /* (convbw.c) */
        rc = tn__graph_call(g, n, slots, sc);
    for (int o = 0; o < n->nout && rc == TN_OK; o++) {
        int v = n->outs[o];
        if (v >= 0 && st->outbuf[o] >= 0) {
            char what[300];
            snprintf(what, sizeof what, "node '%s'", n->name);
            rc = set_buf(P, T, B, st->outbuf[o], slots[v].t, what);
            slots[v].t = NULL;
        }
    }
    for (int k = 0; k < st->nargs; k++) {
        tn_release(slots[st->argv[k]].t);
        slots[st->argv[k]].t = NULL;
    }
    for (int o = 0; o < n->nout; o++)
        if (n->outs[o] >= 0) {
            tn_release(slots[n->outs[o]].t);
            slots[n->outs[o]].t = NULL;
        }
    return rc;
}

static int run_matmul(const struct tn__cprog *P, const struct tn__step *st, struct tn_tensor **T,
                      char **B)
{
    if (st->args[0].nd > 2) {
        const struct tn__view *a = &st->args[0], *b = &st->args[1];
        struct tn_tensor *r = tn__bmm_run(a, B[a->buf], b, B[b->buf], P->bufs[st->outbuf[0]].dt);
        if (!r)
            return tn_error_prefix("%s: %s: bmm", P->g->label, st->label);
        return set_buf(P, T, B, st->outbuf[0], r, st->label);
    }
    struct tn_tensor *a = view(T, &st->args[0]), *b = a ? view(T, &st->args[1]) : NULL;
    struct tn_tensor *r = a && b ? tn__skinny_mm(a, b) : NULL;
    if (a && b && !r)
        r = tn_mm(a, b);
    tn_release(a);
    tn_release(b);
    if (!r)
        return tn_error_prefix("%s: %s: mm", P->g->label, st->label);
    return set_buf(P, T, B, st->outbuf[0], r, st->label);
}

int tn__exec(const struct tn__cprog *P, void *const *fns, struct tn_tensor *const *inputs,
             struct tn_value **outputs, const struct tn_compile_options *o)
{
    const struct tn_graph *g = P->g;
    struct tn_tensor **T = calloc((size_t)P->nbufs + 1, sizeof *T);
    char **B = calloc((size_t)P->nbufs + 1, sizeof *B);
    struct tn__graph_slot *slots = calloc((size_t)g->nvalues + 1, sizeof *slots);
    struct tn__graph_scratch sc = {0};
    struct tn_value *out = NULL;
    struct tn_tensor *arena = NULL;
    /* the buffers each step reads last, as lists (a scan of every
     * buffer after every step took a tenth of a small model's run) */
    int *first = malloc(((size_t)P->nsteps + 1) * sizeof *first);
    int *next = malloc(((size_t)P->nbufs + 1) * sizeof *next);
    int rc = TN_OK;
    *outputs = NULL;
    if (!T || !B || !slots || !first || !next) {
        rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) {
        slots[v].i = P->ints[v];
        slots[v].set = g->values[v].is_sym;
    }
    for (int i = 0; i < P->nsteps; i++)
        first[i] = -1;
    for (int b = P->nbufs - 1; b >= 0; b--)
        if (P->bufs[b].last >= 0 && P->bufs[b].last < P->nsteps &&
            P->bufs[b].kind != TN_BUF_INPUT) {
            next[b] = first[P->bufs[b].last];
            first[P->bufs[b].last] = b;
        }
    for (int b = 0; b < P->nbufs; b++)
        if (P->bufs[b].kind == TN_BUF_INPUT) {
            T[b] = tn_retain(inputs[P->bufs[b].input]);
            B[b] = tn_data(T[b]);
        }
    /* one arena for the temporaries (tn__plan_memory placed them) */
    if (P->arena_bytes > 0 &&
        !(arena = tn_empty((int64_t[]){P->arena_bytes}, 1, TN_UINT8))) {
        rc = tn_last_status();
        goto done;
    }
    bool grad = tn_set_grad_enabled(false);
    for (int s = 0; s < P->nsteps && rc == TN_OK; s++) {
        const struct tn__step *st = &P->steps[s];
        double t0 = o && o->step_done ? tn__graph_now() : 0;
        if (st->kind == TN_STEP_KERNEL) {
            for (int i = st->stage0; i < st->stage0 + st->nstages && rc == TN_OK; i++) {
                int b = P->stages[i].buf;
                const struct tn__buf *pb = &P->bufs[b];
                if (T[b] || pb->private_)
                    continue;
                if (pb->arena >= 0)
                    T[b] = tn_tensor_from_storage(arena->storage,
                                                  pb->arena / (int64_t)tn_dtype_size(pb->dt),
                                                  (int64_t[]){pb->numel}, 1, NULL, pb->dt);
                else
                    T[b] = tn_empty((int64_t[]){pb->numel}, 1, pb->dt);
                if (!T[b])
                    rc = tn_last_status();
                else
                    B[b] = tn_data(T[b]);
            }
            if (rc == TN_OK && st->nouter > 0)
                tn_parallel_for(st->nouter, st->grain, (tn_range_fn)fns[s], B);
        } else if (st->kind == TN_STEP_MATMUL) {
            rc = run_matmul(P, st, T, B);
        } else {
            rc = run_node(P, st, T, B, slots, &sc);
        }
        if (rc == TN_OK && o && o->step_done) {
            const struct tn_graph_node *n = st->kind == TN_STEP_NODE ? &g->nodes[st->node] : NULL;
            o->step_done(o->step_ctx, s, n ? n->name : st->label,
                         n ? n->target : st->kind == TN_STEP_KERNEL ? "kernel" : "matmul",
                         tn__graph_now() - t0);
        }
        for (int b = first[s]; b >= 0; b = next[b]) {
            tn_release(T[b]);
            T[b] = NULL;
            B[b] = NULL;
        }
    }
    tn_set_grad_enabled(grad);
    if (rc < 0)
        goto done;
    if (!(out = tn_value_dict())) {
        rc = tn_last_status();
        goto done;
    }
    for (int i = 0; i < g->noutputs && rc == TN_OK; i++) {
        struct tn_tensor *t = T[P->outs[i].buf] ? view(T, &P->outs[i]) : NULL;
        struct tn_value *k = tn_value_str(g->values[g->outputs[i].value].name);
        struct tn_value *tv = t ? tn_value_tensor(t) : NULL;
        tn_release(t);
        if (!k || !tv) {
            tn_value_release(k);
            tn_value_release(tv);
            rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        } else {
            rc = tn_value_set(out, k, tv);
        }
    }
    if (rc == TN_OK) {
        *outputs = out;
        out = NULL;
    }
done:
    for (int b = 0; T && b < P->nbufs; b++)
        tn_release(T[b]);
    tn_value_release(out);
    tn_release(arena);
    free(T);
    free(B);
    free(first);
    free(next);
    free(slots);
    free(sc.ints);
    return rc;
}
