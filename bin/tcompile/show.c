/*
 * bin/tcompile/show.c: check's report and show's listings (text, JSON,
 * Graphviz).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <tensor/core.h>

#include "tcompile.h"

void tc_problems_add(struct tc_problems *p, const char *node, const char *msg)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        char **a = realloc(p->node, (size_t)cap * sizeof *a);
        if (a)
            p->node = a;
        char **b = realloc(p->msg, (size_t)cap * sizeof *b);
        if (b)
            p->msg = b;
        if (!a || !b)
            return; /* the count still says there were problems */
        p->cap = cap;
    }
    p->node[p->n] = strdup(node);
    p->msg[p->n] = strdup(msg);
    p->n++;
}

void tc_problems_add_cb(const char *node, const char *msg, void *ctx)
{
    tc_problems_add(ctx, node, msg);
}

void tc_json_print(json_t *o)
{
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    if (s)
        puts(s);
    free(s);
    json_decref(o);
}

void tc_problems_print(const struct tc_problems *p, const struct tn_graph *g, bool json)
{
    if (json) {
        json_t *o = json_object(), *l = json_array();
        for (int i = 0; i < p->n; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "node", json_string(p->node[i] ? p->node[i] : ""));
            json_object_set_new(e, "message", json_string(p->msg[i] ? p->msg[i] : ""));
            json_array_append_new(l, e);
        }
        json_object_set_new(o, "graph", json_string(g->label));
        json_object_set_new(o, "ok", json_boolean(p->n == 0));
        json_object_set_new(o, "nodes", json_integer(g->nnodes));
        json_object_set_new(o, "problems", l);
        tc_json_print(o);
        return;
    }
    for (int i = 0; i < p->n; i++) {
        if (p->node[i] && *p->node[i])
            printf("%s: node '%s': %s\n", g->label, p->node[i], p->msg[i] ? p->msg[i] : "");
        else
            printf("%s: %s\n", g->label, p->msg[i] ? p->msg[i] : "");
    }
    if (!p->n)
        printf("%s: ok (%d node%s, %d input%s, %d output%s)\n", g->label, g->nnodes,
               g->nnodes == 1 ? "" : "s", g->ninputs, g->ninputs == 1 ? "" : "s", g->noutputs,
               g->noutputs == 1 ? "" : "s");
}

void tc_problems_free(struct tc_problems *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->node[i]);
        free(p->msg[i]);
    }
    free(p->node);
    free(p->msg);
}

/* "float32[s0, 128]" for a value, "?" when nothing is known. */
static void value_type(const struct tn_graph_value *v, char *buf, size_t len)
{
    if (v->is_sym) {
        static const char *const types[] = {"SymInt", "SymFloat", "SymBool"};
        snprintf(buf, len, "%s", types[v->sym_type]);
        return;
    }
    if (v->dtype == TN_DTYPE_UNSET) {
        snprintf(buf, len, "?");
        return;
    }
    size_t k = (size_t)snprintf(buf, len, "%s[", tn_dtype_name(v->dtype));
    for (int d = 0; d < v->ndim && k < len; d++) {
        if (v->exprs[d])
            k += (size_t)snprintf(buf + k, len - k, "%s%s", d ? ", " : "", v->exprs[d]);
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? ", " : "", v->sizes[d]);
    }
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* One argument as text: a value's name, a number, a list. */
static void arg_text(const struct tn_graph *g, const struct tn_graph_arg *a, char *buf,
                     size_t len)
{
    size_t k = 0;
    bool list = a->kind == TN_GARG_TENSORS || a->kind == TN_GARG_INTS ||
                a->kind == TN_GARG_FLOATS || a->kind == TN_GARG_BOOLS;
    switch (a->kind) {
    case TN_GARG_NONE: snprintf(buf, len, "None"); return;
    case TN_GARG_STRING: snprintf(buf, len, "'%s'", a->s); return;
    case TN_GARG_DEVICE: snprintf(buf, len, "%s", a->s); return;
    case TN_GARG_DTYPE: snprintf(buf, len, "torch.%s", tn_dtype_name((enum tn_dtype)a->items[0].i));
        return;
    default: break;
    }
    if (list)
        k += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < a->n && k + 16 < len; i++) {
        const struct tn_graph_item *it = &a->items[i];
        const char *sep = i ? ", " : "";
        if (it->value >= 0)
            k += (size_t)snprintf(buf + k, len - k, "%s%%%s", sep, g->values[it->value].name);
        else if (a->kind == TN_GARG_FLOAT || a->kind == TN_GARG_FLOATS)
            k += (size_t)snprintf(buf + k, len - k, "%s%g", sep, it->f);
        else if (a->kind == TN_GARG_BOOL || a->kind == TN_GARG_BOOLS)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", sep, it->i ? "True" : "False");
        else if (a->kind == TN_GARG_TENSORS)
            k += (size_t)snprintf(buf + k, len - k, "%sNone", sep);
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, sep, it->i);
    }
    if (list && k + 1 < len)
        snprintf(buf + k, len - k, "]");
}

static void show_text(const struct tn_graph *g)
{
    static const char *const in_kinds[] = {"input", "parameter", "buffer", "constant"};
    char t[512], a[1024];
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_graph_spec *s = &g->inputs[i];
        value_type(&g->values[s->value], t, sizeof t);
        printf("%%%s: %s = %s%s%s\n", g->values[s->value].name, t, in_kinds[s->kind],
               s->target ? " " : "", s->target ? s->target : "");
    }
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        /* outputs with their types, then the call */
        size_t k = 0;
        char outs[1024] = "";
        for (int o = 0; o < n->nout && k + 32 < sizeof outs; o++) {
            if (n->outs[o] < 0) {
                k += (size_t)snprintf(outs + k, sizeof outs - k, "%s_", o ? ", " : "");
                continue;
            }
            value_type(&g->values[n->outs[o]], t, sizeof t);
            k += (size_t)snprintf(outs + k, sizeof outs - k, "%s%%%s: %s", o ? ", " : "",
                                  g->values[n->outs[o]].name, t);
        }
        printf("%s = %s(", n->nout ? outs : "_",
               n->op ? n->op->qualname : n->target);
        for (int j = 0; j < n->nin; j++) {
            arg_text(g, &n->in[j].arg, a, sizeof a);
            printf("%s%s=%s", j ? ", " : "", n->in[j].name, a);
        }
        printf(")\n");
    }
    printf("return (");
    for (int i = 0; i < g->noutputs; i++)
        printf("%s%%%s", i ? ", " : "", g->values[g->outputs[i].value].name);
    printf(")\n");
}

/* Graphviz: one box per node, one ellipse per input, edges labelled with
 * the value's type. Names are quoted; JSON names may hold anything, so
 * quotes and backslashes are escaped, a line break becomes dot's \\n and
 * other control characters are dropped. */
static void dot_name(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '\n') {
            fputs("\\n", stdout);
            continue;
        }
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 32)
            putchar(*s);
    }
    putchar('"');
}

static void show_dot(const struct tn_graph *g)
{
    char t[512];
    printf("digraph graph_module {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n");
    for (int i = 0; i < g->ninputs; i++) {
        printf("  ");
        dot_name(g->values[g->inputs[i].value].name);
        printf(" [shape=ellipse];\n");
    }
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        printf("  ");
        dot_name(n->name);
        printf(" [shape=box, label=");
        char label[2048];
        snprintf(label, sizeof label, "%s\n%s", n->name, n->op ? n->op->qualname : n->target);
        dot_name(label);
        printf("];\n");
    }
    printf("  output [shape=doublecircle];\n");
    /* edges: from a value's producer (or the input itself) to each reader */
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        for (int j = 0; j < n->nin; j++)
            for (int k = 0; k < n->in[j].arg.n; k++) {
                int v = n->in[j].arg.items[k].value;
                if (v < 0)
                    continue;
                const struct tn_graph_value *val = &g->values[v];
                printf("  ");
                dot_name(val->def >= 0 ? g->nodes[val->def].name : val->name);
                printf(" -> ");
                dot_name(n->name);
                value_type(val, t, sizeof t);
                printf(" [label=");
                dot_name(t);
                printf("];\n");
            }
    }
    for (int i = 0; i < g->noutputs; i++) {
        const struct tn_graph_value *val = &g->values[g->outputs[i].value];
        printf("  ");
        dot_name(val->def >= 0 ? g->nodes[val->def].name : val->name);
        printf(" -> output;\n");
    }
    printf("}\n");
}

static void ignore_problem(const char *node, const char *msg, void *ctx)
{
    (void)node, (void)msg;
    ++*(int *)ctx;
}

int tc_show(const char *path)
{
    struct tn_graph *g = tn_graph_load(path, NULL, NULL);
    if (!g)
        return tc_fail();
    int nproblems = 0;
    /* checking fills the shapes that tensor_values leaves out */
    if (tn_graph_check(g, ignore_problem, &nproblems) < 0) {
        tn_graph_free(g);
        return tc_fail();
    }
    if (tc.json) {
        if (tn_graph_write(g, "-") < 0) {
            tn_graph_free(g);
            return tc_fail();
        }
    } else if (tc.dot) {
        show_dot(g);
    } else {
        show_text(g);
    }
    if (nproblems)
        fprintf(stderr, "tcompile: %s: %d problem%s (see tcompile check)\n", g->label, nproblems,
                nproblems == 1 ? "" : "s");
    tn_graph_free(g);
    return tn_stdout_flush() < 0 ? tc_fail() : 0;
}
