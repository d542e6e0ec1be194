/*
 * bin/tcompile/missing.c: tcompile check --missing GRAPH...: the targets a
 * set of graphs names that tensorkit cannot run (no operator, or for an
 * in-place or out= op no functional form: tn_graph_functional_op), with
 * how many graphs need each and how many nodes use it, most needed first.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/core.h>
#include <tensor/graph.h>

#include "tcompile.h"

struct need {
    char *target;
    int graphs, uses;
    int last;        /* the last graph (index) that used it */
    json_t *in;      /* the labels of the graphs */
};

struct needs {
    struct need *v;
    int n, cap;
};

static struct need *find(struct needs *s, const char *target)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].target, target))
            return &s->v[i];
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        struct need *p = realloc(s->v, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        s->v = p;
        s->cap = cap;
    }
    struct need *e = &s->v[s->n];
    if (!(e->target = strdup(target)) || !(e->in = json_array())) {
        free(e->target);
        return NULL;
    }
    e->graphs = e->uses = 0;
    e->last = -1;
    s->n++;
    return e;
}

static int by_count(const void *a, const void *b)
{
    const struct need *x = a, *y = b;
    if (x->graphs != y->graphs)
        return y->graphs - x->graphs;
    if (x->uses != y->uses)
        return y->uses - x->uses;
    return strcmp(x->target, y->target);
}

/* Adds graph gi's targets that tensorkit lacks to s. Returns 0, or 2 with
 * the error printed. */
static int scan(struct needs *s, const char *path, int gi)
{
    struct tn_graph *g = tn_graph_load(path, NULL, NULL);
    if (!g)
        return tc_fail();
    for (int i = 0; i < g->nnodes; i++) {
        const char *t = g->nodes[i].target;
        if (tn_graph_functional_op(t))
            continue;
        struct need *e = find(s, t);
        if (!e) {
            tn_graph_free(g);
            tn_set_error(TN_ENOMEM, "out of memory");
            return tc_fail();
        }
        e->uses++;
        if (e->last != gi) {
            e->last = gi;
            e->graphs++;
            json_array_append_new(e->in, json_string(g->label));
        }
    }
    tn_clear_error();
    tn_graph_free(g);
    return 0;
}

static void print(const struct needs *s, int ngraphs)
{
    if (tc.json) {
        json_t *o = json_object(), *l = json_array();
        for (int i = 0; i < s->n; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "target", json_string(s->v[i].target));
            json_object_set_new(e, "graphs", json_integer(s->v[i].graphs));
            json_object_set_new(e, "uses", json_integer(s->v[i].uses));
            json_object_set(e, "in", s->v[i].in);
            json_array_append_new(l, e);
        }
        json_object_set_new(o, "graphs", json_integer(ngraphs));
        json_object_set_new(o, "missing", l);
        tc_json_print(o);
        return;
    }
    for (int i = 0; i < s->n; i++)
        printf("%s: %d graph%s, %d use%s\n", s->v[i].target, s->v[i].graphs,
               s->v[i].graphs == 1 ? "" : "s", s->v[i].uses, s->v[i].uses == 1 ? "" : "s");
    if (!s->n)
        printf("nothing missing (%d graph%s)\n", ngraphs, ngraphs == 1 ? "" : "s");
}

int tc_missing(char *const *paths, int n)
{
    struct needs s = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = scan(&s, paths[i], i);
    if (!rc) {
        qsort(s.v, (size_t)s.n, sizeof *s.v, by_count);
        print(&s, n);
        rc = tn_stdout_flush() < 0 ? tc_fail() : s.n ? 1 : 0;
    }
    for (int i = 0; i < s.n; i++) {
        free(s.v[i].target);
        json_decref(s.v[i].in);
    }
    free(s.v);
    return rc;
}
