/*
 * bin/tcompile/run.c: tcompile run and compile: reads the graph, its
 * weights and inputs (.npy, .npz, torch checkpoints, safetensors; '-' for
 * stdin), compiles it through lib/compile (or runs it in the interpreter),
 * and writes or prints the outputs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensor/compile.h>
#include <tensor/core.h>
#include <tensor/io.h>

#include "aoti.h"
#include "tcompile.h"

static int put(struct tn_value *d, const char *name, struct tn_value *t)
{
    return tn_value_set(d, tn_value_str(name), tn_value_retain(t));
}

/* The graph's user input called `name`, or the only one when `name` is NULL
 * (NULL when there are several or none). */
static const char *user_input(const struct tn_graph *g, const char *name)
{
    const char *only = NULL;
    int n = 0;
    for (int i = 0; i < g->ninputs; i++) {
        if (g->inputs[i].kind != TN_GIN_USER_INPUT)
            continue;
        const char *v = g->values[g->inputs[i].value].name;
        if (name && !strcmp(v, name))
            return v;
        only = v;
        n++;
    }
    return !name && n == 1 ? only : NULL;
}

/* The user inputs' names, comma-separated, for messages (a static buffer). */
static const char *user_inputs_list(const struct tn_graph *g)
{
    static char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->ninputs && len < sizeof buf; i++)
        if (g->inputs[i].kind == TN_GIN_USER_INPUT)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "",
                                    g->values[g->inputs[i].value].name);
    return buf[0] ? buf : "none";
}

/* Every --input into one dict of placeholder name -> tensor: NAME=FILE binds
 * FILE's only tensor (or its member NAME) to the input NAME; FILE alone
 * binds each tensor named as an input, or its only tensor to the only
 * input. */
struct tn_value *tc_load_inputs(const struct tn_graph *g)
{
    struct tn_value *d = tn_value_dict();
    for (int i = 0; d && i < tc.ninputs; i++) {
        const char *arg = tc.inputs[i], *eq = strchr(arg, '=');
        char name[1024] = "";
        if (eq && (size_t)(eq - arg) < sizeof name)
            snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
        const char *file = eq ? eq + 1 : arg;
        if (*name && !user_input(g, name)) {
            tn_set_error(TN_EINVAL, "--input %s: %s has no input '%s' (its inputs: %s)", arg,
                         g->label, name, user_inputs_list(g));
            tn_value_release(d);
            return NULL;
        }
        struct tn_value *f = tn_io_load_dict(file);
        int rc = f ? TN_OK : TN_EINVAL;
        if (f && *name) {
            /* one tensor: the file's only one, or its member NAME */
            struct tn_value *t = tn_value_get(f, name);
            if (!t && f->v.dict.n == 1)
                t = f->v.dict.vals[0];
            rc = t ? put(d, name, t)
                   : tn_set_error(TN_EINVAL, "%s: no tensor '%s' (and more than one)", file, name);
        } else if (f) {
            /* every tensor whose name is a user input */
            int bound = 0;
            for (size_t k = 0; k < f->v.dict.n && rc == TN_OK; k++)
                if (f->v.dict.keys[k]->kind == TN_VALUE_STR &&
                    user_input(g, f->v.dict.keys[k]->v.str.s)) {
                    rc = put(d, f->v.dict.keys[k]->v.str.s, f->v.dict.vals[k]);
                    bound++;
                }
            const char *only = user_input(g, NULL);
            if (rc == TN_OK && !bound && f->v.dict.n == 1 && only)
                rc = put(d, only, f->v.dict.vals[0]);
            else if (rc == TN_OK && !bound)
                rc = tn_set_error(TN_EINVAL, "--input %s: no tensor in it is named as an input of "
                                  "%s (its inputs: %s); give NAME=FILE", arg, g->label,
                                  user_inputs_list(g));
        }
        tn_value_release(f);
        if (rc < 0) {
            tn_value_release(d);
            return NULL;
        }
    }
    return d;
}

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool has_ext(const char *p, const char *ext)
{
    size_t a = strlen(p), b = strlen(ext);
    return a >= b && !strcmp(p + a - b, ext);
}

/* Writes a dict of tensors to path o (or prints it when o is NULL).
 * .npy and .pt are written atomically (a temporary renamed into place) but
 * not synced, as numpy.save and torch.save write: the two syncs (file and
 * folder) took 35-90 ms of a 32 MiB output's `tcompile run` (issue 27). */
int tc_write_tensors(const struct tn_value *out, const char *o)
{
    if (!o) {
        for (size_t i = 0; i < out->v.dict.n; i++) {
            printf("%s:\n", out->v.dict.keys[i]->v.str.s);
            if (tn_print(stdout, out->v.dict.vals[i]->v.tensor) < 0)
                return tn_last_status();
            putchar('\n');
        }
        return tn_stdout_flush();
    }
    if (has_ext(o, ".npy")) {
        if (out->v.dict.n != 1)
            return tn_set_error(TN_EINVAL, "%s: the graph has %zu outputs; .npy holds one "
                                "(write .npz)", o, out->v.dict.n);
        return tn_npy_write(o, out->v.dict.vals[0]->v.tensor, false);
    }
    if (has_ext(o, ".pt") || has_ext(o, ".pth"))
        return tn_save(o, out, &(struct tn_save_options){.no_fsync = true});
    if (has_ext(o, ".safetensors"))
        return tn_st_save(o, out, NULL);
    return tn_npz_save(o, out);
}

static void tc_print_warning(const char *msg, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "tcompile: warning: %s\n", msg);
}

struct tn_compile_options tc_compile_options(void)
{
    struct tn_compile_options o = {
        .cache_dir = tc.cache_dir,
        .recompile_limit = tc.recompile_limit,
        .strict = tc.strict,
        .interpret = tc.interpret,
        .warn = tc_print_warning,
    };
    return o;
}

/* a compiler for g; with prof, its steps are timed into it */
static struct tn_compiled *compiler(const struct tn_graph *g, struct tc_profile *prof)
{
    struct tn_compile_options o = tc_compile_options();
    if (prof) {
        o.step_done = tc_profile_step_done;
        o.step_ctx = prof;
    }
    return tn_compile_new(g, &o);
}

/* The graph, checked (problems printed), its weights (the .pt2's or
 * --weights) and its inputs; 0, or 2 after printing why. */
static int load_all(const char *path, struct tn_graph **g, struct tn_value **weights,
                    struct tn_value **inputs)
{
    *weights = *inputs = NULL;
    if (!(*g = tn_graph_load(path, NULL, weights)))
        return tc_fail();
    struct tc_problems p = {0};
    int np = tn_graph_check(*g, tc_problems_add_cb, &p);
    if (np != 0) {
        if (np < 0)
            tc_fail();
        else
            for (int i = 0; i < p.n; i++)
                fprintf(stderr, "tcompile: %s: node '%s': %s\n", (*g)->label, p.node[i],
                        p.msg[i]);
        tc_problems_free(&p);
        return 2;
    }
    tc_problems_free(&p);
    if (tc.weights) {
        tn_value_release(*weights);
        if (!(*weights = tn_io_load_dict(tc.weights)))
            return tc_fail();
    }
    if (!(*inputs = tc_load_inputs(*g)))
        return tc_fail();
    return 0;
}

static void print_explain(const struct tn_compiled *c)
{
    char *s = tn_compile_explain(c);
    if (s)
        fputs(s, stderr);
    free(s);
}

static void print_compile_time(const struct tn_graph *g, const struct tn_compiled *c)
{
    struct tn_compile_stats st;
    tn_compile_get_stats(c, &st);
    if (st.entries)
        fprintf(stderr, "tcompile: %s: compile took %.3f ms (%s)\n", g->label,
                st.compile_s * 1e3, st.compiles ? "the C compiler ran" : "from the cache");
}

int tc_run(const char *path)
{
    if (tc.profile && (tc_is_package(path) || tc_aoti_is_package(path))) {
        fprintf(stderr, "tcompile: %s: --profile times a graph's run; this is a package "
                "(profile the graph it was built from)\n", path);
        return 2;
    }
    if (tc.given_seed) /* torch.manual_seed(S) before the model runs */
        tn_manual_seed((uint64_t)tc.seed);
    if (tc_is_package(path))
        return tc_run_package(path);
    struct tn_value *weights = NULL, *inputs = NULL, *out = NULL, *grads = NULL;
    struct tn_graph *g = NULL;
    struct tn_compiled *c = NULL;
    struct tc_profile prof = {0};
    if (tc_aoti_is_package(path))
        return tc_aoti_run(path);
    int rc = load_all(path, &g, &weights, &inputs);
    if (rc)
        goto done;
    rc = 2;
    if ((tc.profile && tc_profile_init(&prof, g) < 0) ||
        (!tc.grads && !(c = compiler(g, tc.profile ? &prof : NULL)))) {
        tc_fail();
        goto done;
    }
    double best = 0, compile_s = 0;
    for (int r = 0; r < tc.repeat; r++) {
        if (tc.given_seed && r > 0) /* each repetition draws what the first did */
            tn_manual_seed((uint64_t)tc.seed);
        tn_value_release(out);
        out = NULL;
        tn_value_release(grads);
        grads = NULL;
        if (tc.profile)
            tc_profile_start(&prof);
        double t0 = tc_now();
        /* --grads: autograd through the interpreter (the compiler does
         * forward graphs) */
        if ((tc.grads ? tn_graph_grad(g, weights, inputs, &out, &grads)
                      : tn_compile_run(c, weights, inputs, &out)) < 0) {
            tc_fail();
            goto done;
        }
        double dt = tc_now() - t0;
        if (tc.profile)
            tc_profile_stop(&prof, dt);
        if (c && r == 0) {
            struct tn_compile_stats st;
            tn_compile_get_stats(c, &st);
            compile_s = st.compile_s;
            dt -= compile_s;
        }
        if (r == 0 || dt < best)
            best = dt;
    }
    if (tc.explain)
        print_explain(c);
    if (tc.time && c)
        print_compile_time(g, c);
    (void)compile_s;
    if (tc.profile && tc_profile_print(&prof) < 0) {
        tc_fail();
        goto done;
    }
    if (tc.time)
        fprintf(stderr, "tcompile: %s: run took %.3f ms%s%s\n", g->label, best * 1e3,
                tc.repeat > 1 ? " (the fastest of --repeat)" : "",
                tc.interpret || tc.grads ? " in the interpreter" : "");
    if ((tc.output || !tc.grads) && tc_write_tensors(out, tc.output) < 0) {
        tc_fail();
        goto done;
    }
    if (tc.grads && tc_write_tensors(grads, tc.grads) < 0) {
        tc_fail();
        goto done;
    }
    rc = 0;
done:
    tc_profile_free(&prof);
    tn_compile_free(c);
    tn_value_release(out);
    tn_value_release(grads);
    tn_value_release(inputs);
    tn_value_release(weights);
    tn_graph_free(g);
    return rc;
}

/* Zeros for every graph input that weights and inputs leave out, of its
 * declared dtype and sizes (a symbol at its hint), for compiling without
 * values. */
static int declared(const struct tn_graph *g, struct tn_value *weights, struct tn_value *inputs)
{
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_graph_spec *s = &g->inputs[i];
        const struct tn_graph_value *v = &g->values[s->value];
        struct tn_value *d = s->kind == TN_GIN_USER_INPUT ? inputs : weights;
        const char *key = s->kind == TN_GIN_USER_INPUT || !s->target ? v->name : s->target;
        if (tn_value_get(d, key) || (s->target && tn_value_get(d, v->name)))
            continue;
        int64_t sz[TN_MAX_DIMS];
        for (int k = 0; k < v->ndim; k++)
            sz[k] = v->sizes[k];
        struct tn_tensor *t = tn_zeros(sz, v->ndim, v->dtype);
        struct tn_value *tv = t ? tn_value_tensor(t) : NULL;
        tn_release(t);
        if (!tv || tn_value_set(d, tn_value_str(key), tv) < 0)
            return tn_last_status();
    }
    return 0;
}

/* True, with an error, when a parameter, buffer or constant of g has no
 * tensor in weights. */
static bool missing_weight(const struct tn_graph *g, const struct tn_value *weights)
{
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_graph_spec *s = &g->inputs[i];
        const char *name = g->values[s->value].name;
        if (s->kind == TN_GIN_USER_INPUT || (s->target && tn_value_get(weights, s->target)) ||
            tn_value_get(weights, name))
            continue;
        tn_set_error(TN_EINVAL, "%s: no weight '%s' to embed (give --weights, or build with "
                     "--weights-file)", g->label, s->target ? s->target : name);
        return true;
    }
    return false;
}

/* compile (so NULL: into the cache, and -o DIR) or build (a package at so) */
static int compile_or_build(const char *path, const char *so)
{
    struct tn_value *weights = NULL, *inputs = NULL;
    struct tn_graph *g = NULL;
    struct tn_compiled *c = NULL;
    int rc = load_all(path, &g, &weights, &inputs);
    if (rc)
        goto done;
    rc = 2;
    if (!weights && !(weights = tn_value_dict())) {
        tc_fail();
        goto done;
    }
    tc.strict = true; /* compile says whether it compiled */
    /* compile zero-fills what is not given; a package embeds only what
     * was given, so builds from a copy */
    struct tn_value *w = so ? tn_value_dict() : tn_value_retain(weights);
    for (size_t i = 0; so && w && i < weights->v.dict.n; i++)
        tn_value_set(w, tn_value_retain(weights->v.dict.keys[i]),
                     tn_value_retain(weights->v.dict.vals[i]));
    if (so && !tc.weights_file && missing_weight(g, weights)) {
        tn_value_release(w);
        w = NULL;
    }
    if (w && declared(g, w, inputs) < 0) {
        tn_value_release(w);
        w = NULL;
    }
    struct tn_package_options po = {.name = tc.name, .weights_file = tc.weights_file,
                                    .header = tc.header};
    int brc = w && (c = compiler(g, NULL)) ? so ? tn_compile_package(c, w, inputs, so, &po)
                                          : tn_compile_build(c, w, inputs, tc.output)
                                     : -1;
    tn_value_release(w);
    if (brc < 0) {
        tc_fail();
        goto done;
    }
    if (tc.explain)
        print_explain(c);
    if (tc.time)
        print_compile_time(g, c);
    rc = 0;
done:
    tn_compile_free(c);
    tn_value_release(inputs);
    tn_value_release(weights);
    tn_graph_free(g);
    return rc;
}

int tc_compile(const char *path) { return compile_or_build(path, NULL); }

int tc_build(const char *path)
{
    if (!tc.output)
        tc_usage_error("%s", "build: needs -o LIB.so");
    return compile_or_build(path, tc.output);
}
