/*
 * bin/tcompile/run.c: tcompile run: reads the graph, its weights and
 * inputs (.npy, .npz, torch checkpoints, safetensors; '-' for stdin), runs
 * it in the interpreter, and writes or prints the outputs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensor/core.h>
#include <tensor/io.h>

#include "tcompile.h"

/* Any tensor file as a dict of name -> tensor (a .npy as {"<stem>": t}),
 * through lib/io's one loader, as tckpt reads them: '-', pipes and
 * sharded safetensors included. */
static struct tn_value *load_tensors(const char *path)
{
    struct tn_io_file *f = tn_io_file_open(path);
    struct tn_value *v = f ? tn_io_file_load(f, NULL, NULL) : NULL;
    tn_io_file_close(f);
    if (v && v->kind != TN_VALUE_DICT && v->kind != TN_VALUE_ODICT) {
        tn_set_error(TN_EFORMAT, "%s: holds a %s, not a dict of tensors", path,
                     tn_value_kind_name(v->kind));
        tn_value_release(v);
        v = NULL;
    }
    return v;
}

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
static struct tn_value *load_inputs(const struct tn_graph *g)
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
        struct tn_value *f = load_tensors(file);
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

static double now(void)
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

/* Writes a dict of tensors to path o (or prints it when o is NULL). */
static int write_tensors(const struct tn_value *out, const char *o)
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
        return tn_npy_save(o, out->v.dict.vals[0]->v.tensor);
    }
    if (has_ext(o, ".pt") || has_ext(o, ".pth"))
        return tn_save(o, out, NULL);
    if (has_ext(o, ".safetensors"))
        return tn_st_save(o, out, NULL);
    return tn_npz_save(o, out);
}

int tc_run(const char *path)
{
    struct tn_value *weights = NULL, *inputs = NULL, *out = NULL, *grads = NULL;
    struct tn_graph *g = tn_graph_load(path, NULL, &weights);
    int rc = 2;
    if (!g)
        return tc_fail();
    struct tc_problems p = {0};
    int np = tn_graph_check(g, tc_problems_add_cb, &p);
    if (np != 0) {
        if (np < 0)
            tc_fail();
        else
            for (int i = 0; i < p.n; i++)
                fprintf(stderr, "tcompile: %s: node '%s': %s\n", g->label, p.node[i], p.msg[i]);
        goto done;
    }
    if (tc.weights) {
        tn_value_release(weights);
        if (!(weights = load_tensors(tc.weights))) {
            tc_fail();
            goto done;
        }
    }
    if (!(inputs = load_inputs(g))) {
        tc_fail();
        goto done;
    }
    double best = 0;
    for (int r = 0; r < tc.repeat; r++) {
        tn_value_release(out);
        out = NULL;
        tn_value_release(grads);
        grads = NULL;
        double t0 = now();
        if ((tc.grads ? tn_graph_grad(g, weights, inputs, &out, &grads)
                      : tn_graph_run(g, weights, inputs, &out, NULL)) < 0) {
            tc_fail();
            goto done;
        }
        double dt = now() - t0;
        if (r == 0 || dt < best)
            best = dt;
    }
    if (tc.time)
        fprintf(stderr, "tcompile: %s: run took %.3f ms%s\n", g->label, best * 1e3,
                tc.repeat > 1 ? " (the fastest of --repeat)" : "");
    if ((tc.output || !tc.grads) && write_tensors(out, tc.output) < 0) {
        tc_fail();
        goto done;
    }
    if (tc.grads && write_tensors(grads, tc.grads) < 0) {
        tc_fail();
        goto done;
    }
    rc = 0;
done:
    tc_problems_free(&p);
    tn_value_release(out);
    tn_value_release(grads);
    tn_value_release(inputs);
    tn_value_release(weights);
    tn_graph_free(g);
    return rc;
}
