/*
 * compile/compile.c: compiled entries behind guards. An entry is
 * specialised on every input's dtype, sizes and strides; a run looks for
 * the entry its inputs match, compiles a new one when none does (up to the
 * recompile limit), and otherwise runs the interpreter, saying why once
 * through the warning callback.
 */
#include "compile/internal.h"
#include "graph/internal.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tn__input_meta {
    enum tn_dtype dt;
    int nd;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
};

/* A loaded library: the kernels of one generated source. Input shapes
 * whose programs generate the same source share it (a batch size, where
 * no kernel depends on it), so only a new source counts against the
 * recompile limit. */
struct lib {
    char *src;
    void *handle;
    struct tn__cc_info info;
};

struct entry {
    struct tn__input_meta *m;     /* per graph input */
    struct tn__cprog *P;          /* NULL: this specialisation runs in the interpreter */
    int lib;
    void **fns;
};

struct tn_compiled {
    const struct tn_graph *g;
    struct tn_compile_options o;
    struct entry *e;
    int n, cap;
    struct lib *libs;
    int nlibs;
    int last;                     /* the entry of the last run or build */
    bool warned_limit;
    struct tn_compile_stats st;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void warn(struct tn_compiled *c, const char *fmt, ...)
{
    if (!c->o.warn)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->o.warn(msg, c->o.warn_ctx);
}

struct tn_compiled *tn_compile_new(const struct tn_graph *g, const struct tn_compile_options *opts)
{
    struct tn_compiled *c = calloc(1, sizeof *c);
    if (!c) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    c->g = g;
    if (opts)
        c->o = *opts;
    if (c->o.recompile_limit <= 0)
        c->o.recompile_limit = 8;
    if (c->o.cc_timeout <= 0)
        c->o.cc_timeout = 300;
    c->last = -1;
    return c;
}

void tn_compile_free(struct tn_compiled *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].m);
        tn__cprog_free(c->e[i].P);
        free(c->e[i].fns);
    }
    /* the libraries stay loaded: dlclose would unmap code that another
     * compiled graph of the process may share (the same cache entry) */
    for (int i = 0; i < c->nlibs; i++)
        free(c->libs[i].src);
    free(c->libs);
    free(c->e);
    free(c);
}

static bool matches(const struct tn_graph *g, const struct entry *e, struct tn_tensor *const *in)
{
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn__input_meta *m = &e->m[i];
        const struct tn_tensor *t = in[i];
        if (t->dtype != m->dt || t->ndim != m->nd)
            return false;
        for (int d = 0; d < t->ndim; d++)
            if (t->sizes[d] != m->sizes[d] || (t->sizes[d] != 1 && t->strides[d] != m->strides[d]))
                return false;
    }
    return true;
}

/* A new zeroed slot after c->libs' last (not yet counted), or NULL on out
 * of memory. */
static struct lib *lib_slot(struct tn_compiled *c)
{
    struct lib *p = realloc(c->libs, (size_t)(c->nlibs + 1) * sizeof *p);
    if (!p) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    c->libs = p;
    memset(&p[c->nlibs], 0, sizeof *p);
    return &p[c->nlibs];
}

/* Lowers and generates entry e for these inputs, and loads its kernels:
 * a library of the same source already loaded, or one from tn__cc_load
 * (the on-disk cache, or the C compiler) when under the recompile limit.
 * *limit is set when the limit stopped it. */
static int build(struct tn_compiled *c, struct entry *e, struct tn_tensor *const *in, bool *limit)
{
    double t0 = now();
    *limit = false;
    struct tn__cprog *P = tn__lower(c->g, in);
    if (!P)
        return tn_last_status();
    char *src = tn__codegen(P);
    int rc = src ? TN_OK : tn_last_status(), li = -1;
    for (int i = 0; rc == TN_OK && i < c->nlibs && li < 0; i++)
        if (!strcmp(c->libs[i].src, src))
            li = i;
    /* the package's own kernels (tn_model_open): no compiler, and no
     * count against the limit */
    char hex[65] = "";
    bool own = false;
    if (rc == TN_OK && li < 0 && c->o.kernels_lib && c->o.kernels_sha) {
        tn__sha256_hex(src, strlen(src), hex);
        own = !strcmp(hex, c->o.kernels_sha);
    }
    if (rc == TN_OK && li < 0 && !own && c->nlibs >= c->o.recompile_limit) {
        *limit = true;
        rc = tn_set_error(TN_EINVAL, "%s: the recompile limit (%d) is reached", c->g->label,
                          c->o.recompile_limit);
    }
    if (rc == TN_OK && li < 0) {
        struct lib *l = lib_slot(c);
        if (l && own) {
            l->handle = c->o.kernels_lib;
            l->info.hit = true;
            memcpy(l->info.key, hex, sizeof hex);
        } else if (l) {
            l->handle = tn__cc_load(src, strlen(src), &c->o, &l->info);
        }
        if (!l || !l->handle) {
            rc = tn_last_status();
        } else {
            l->src = src;
            src = NULL;
            li = c->nlibs++;
            c->st.cc_s += l->info.cc_s;
            c->st.entries++;
            if (l->info.hit)
                c->st.hits++;
            else
                c->st.compiles++;
        }
    }
    free(src);
    if (rc == TN_OK)
        rc = tn__exec_bind(P, c->libs[li].handle, &e->fns);
    if (rc < 0) {
        tn__cprog_free(P);
        return rc;
    }
    e->P = P;
    e->lib = li;
    c->st.compile_s += now() - t0;
    return TN_OK;
}

/* The entry for these inputs: found, or built; NULL with *fallback when
 * they run in the interpreter; NULL without it on an error. */
static struct entry *entry_for(struct tn_compiled *c, struct tn_tensor *const *in, bool *fallback)
{
    const struct tn_graph *g = c->g;
    *fallback = false;
    for (int i = 0; i < c->n; i++)
        if (matches(g, &c->e[i], in)) {
            c->last = i;
            *fallback = !c->e[i].P;
            return c->e[i].P ? &c->e[i] : NULL;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 4;
        struct entry *p = realloc(c->e, (size_t)cap * sizeof *p);
        if (!p) {
            tn_set_error(TN_ENOMEM, "out of memory");
            return NULL;
        }
        c->e = p;
        c->cap = cap;
    }
    struct entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    if (!(e->m = calloc((size_t)g->ninputs + 1, sizeof *e->m))) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < g->ninputs; i++) {
        e->m[i].dt = in[i]->dtype;
        e->m[i].nd = in[i]->ndim;
        memcpy(e->m[i].sizes, in[i]->sizes, sizeof e->m[i].sizes);
        memcpy(e->m[i].strides, in[i]->strides, sizeof e->m[i].strides);
    }
    c->last = c->n++;
    bool limit;
    if (build(c, e, in, &limit) == TN_OK)
        return e;
    if (c->o.strict || tn_last_status() == TN_ENOMEM)
        return NULL;
    if (limit) {
        if (!c->warned_limit)
            warn(c, "%s: the recompile limit (%d) is reached: new input shapes run in the "
                 "interpreter", g->label, c->o.recompile_limit);
        c->warned_limit = true;
        tn_clear_error();
        *fallback = true;
        return NULL;
    }
    /* the interpreter runs these inputs from now on, said once */
    warn(c, "%s: not compiled, running in the interpreter: %s", g->label, tn_last_error());
    tn_clear_error();
    *fallback = true;
    return NULL;
}

static int with_inputs(struct tn_compiled *c, const struct tn_value *weights,
                       const struct tn_value *inputs, struct tn_tensor ***in)
{
    *in = calloc((size_t)c->g->ninputs + 1, sizeof **in);
    if (!*in)
        return tn_set_error(TN_ENOMEM, "out of memory");
    int rc = tn__graph_bind(c->g, weights, inputs, *in);
    if (rc < 0) {
        free(*in);
        *in = NULL;
    }
    return rc;
}

/* tn_graph_run's node_done over the options' step_done */
static void node_step(void *ctx, int node, double seconds)
{
    const struct tn_compiled *c = ctx;
    const struct tn_graph_node *n = &c->g->nodes[node];
    c->o.step_done(c->o.step_ctx, node, n->name, n->target, seconds);
}

/* the interpreter, profiled when the options ask */
static int interpret(struct tn_compiled *c, const struct tn_value *weights,
                     const struct tn_value *inputs, struct tn_value **outputs)
{
    struct tn_graph_run_options ro = {.node_done = c->o.step_done ? node_step : NULL,
                                      .node_ctx = c};
    c->st.fallbacks++;
    return tn_graph_run(c->g, weights, inputs, outputs, &ro);
}

int tn_compile_run(struct tn_compiled *c, const struct tn_value *weights,
                   const struct tn_value *inputs, struct tn_value **outputs)
{
    *outputs = NULL;
    if (c->o.interpret)
        return interpret(c, weights, inputs, outputs);
    struct tn_tensor **in;
    int rc = with_inputs(c, weights, inputs, &in);
    if (rc < 0)
        return rc;
    bool fallback;
    struct entry *e = entry_for(c, in, &fallback);
    if (e)
        rc = tn__exec(e->P, e->fns, in, outputs, &c->o);
    else if (fallback)
        rc = interpret(c, weights, inputs, outputs);
    else
        rc = tn_last_status();
    free(in);
    return rc;
}

int tn_compile_build(struct tn_compiled *c, const struct tn_value *weights,
                     const struct tn_value *inputs, const char *dir)
{
    struct tn_tensor **in;
    int rc = with_inputs(c, weights, inputs, &in);
    if (rc < 0)
        return rc;
    bool fallback;
    struct entry *e = entry_for(c, in, &fallback);
    free(in);
    if (!e)
        return fallback ? tn_set_error(TN_EINVAL, "%s: not compiled (see the warning)",
                                       c->g->label)
                        : tn_last_status();
    return dir ? tn__cc_export(&c->libs[e->lib].info, dir) : TN_OK;
}

const char *tn__compile_source(const struct tn_compiled *c)
{
    if (c->last < 0 || !c->e[c->last].P)
        return NULL;
    return c->libs[c->e[c->last].lib].src;
}

const struct tn_graph *tn__compile_graph(const struct tn_compiled *c) { return c->g; }

struct tn_compile_options tn__compile_options(const struct tn_compiled *c) { return c->o; }

void tn_compile_get_stats(const struct tn_compiled *c, struct tn_compile_stats *s)
{
    *s = c->st;
}

char *tn_compile_explain(const struct tn_compiled *c)
{
    if (c->last < 0 || !c->e[c->last].P)
        return NULL;
    return tn__explain(c->e[c->last].P, &c->libs[c->e[c->last].lib].info);
}
