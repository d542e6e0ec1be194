/*
 * bin/tcompile/profile.c: tcompile run --profile: the time of every step
 * of the run (through tn_compile_options' step_done hook: a node in the
 * interpreter, a fused kernel or a node left to libtensor when compiled)
 * and of every op kind (the nodes' targets, "kernel", "matmul"), sorted,
 * as a table or as one JSON object on stderr.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcompile.h"

int tc_profile_init(struct tc_profile *p, const struct tn_graph *g)
{
    *p = (struct tc_profile){.g = g};
    return 0;
}

void tc_profile_free(struct tc_profile *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->name[i]);
        free(p->kind[i]);
    }
    free(p->name);
    free(p->kind);
    free(p->cur);
    free(p->best);
}

/* Room for step i (its name and kind kept from its first call); false
 * when out of memory. */
static bool grow(struct tc_profile *p, int i)
{
    if (i < p->n)
        return true;
    if (i >= p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        while (cap <= i)
            cap *= 2;
        char **nm = realloc(p->name, (size_t)cap * sizeof *nm);
        if (nm)
            p->name = nm;
        char **kd = realloc(p->kind, (size_t)cap * sizeof *kd);
        if (kd)
            p->kind = kd;
        double *c = realloc(p->cur, (size_t)cap * sizeof *c);
        if (c)
            p->cur = c;
        double *b = realloc(p->best, (size_t)cap * sizeof *b);
        if (b)
            p->best = b;
        if (!nm || !kd || !c || !b)
            return false;
        p->cap = cap;
    }
    for (; p->n <= i; p->n++) {
        p->name[p->n] = p->kind[p->n] = NULL;
        p->cur[p->n] = p->best[p->n] = 0;
    }
    return true;
}

void tc_profile_step_done(void *ctx, int step, const char *name, const char *kind,
                          double seconds)
{
    struct tc_profile *p = ctx;
    if (step < 0 || !grow(p, step)) {
        p->oom = true;
        return;
    }
    if (!p->name[step]) {
        p->name[step] = strdup(name ? name : "?");
        p->kind[step] = strdup(kind ? kind : "?");
        p->oom |= !p->name[step] || !p->kind[step];
    }
    p->cur[step] += seconds;
}

void tc_profile_start(struct tc_profile *p)
{
    for (int i = 0; i < p->n; i++)
        p->cur[i] = 0;
}

void tc_profile_stop(struct tc_profile *p, double wall_s)
{
    if (p->runs++ == 0 || wall_s < p->wall_s) {
        p->wall_s = wall_s;
        for (int i = 0; i < p->n; i++)
            p->best[i] = p->cur[i];
    }
}

/* One op kind: every node with this target. */
struct kind {
    const char *target;
    int count;
    double s;
};

static const double *sort_key;
static int by_node_time(const void *a, const void *b)
{
    double x = sort_key[*(const int *)a], y = sort_key[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static int by_kind_time(const void *a, const void *b)
{
    const struct kind *x = a, *y = b;
    return x->s < y->s ? 1 : x->s > y->s ? -1 : strcmp(x->target, y->target);
}

/* The op kinds of p's steps, summed from the fastest run's times,
 * sorted; *n of them. */
static struct kind *kinds_of(const struct tc_profile *p, int *n)
{
    struct kind *k = calloc((size_t)p->n + 1, sizeof *k);
    *n = 0;
    for (int i = 0; k && i < p->n; i++) {
        int j = 0;
        if (!p->name[i])
            continue;
        while (j < *n && strcmp(k[j].target, p->kind[i]))
            j++;
        if (j == *n)
            k[(*n)++].target = p->kind[i];
        k[j].count++;
        k[j].s += p->best[i];
    }
    if (k)
        qsort(k, (size_t)*n, sizeof *k, by_kind_time);
    return k;
}

/* "torch.ops.aten.addmm.default" -> "aten.addmm.default" for the table */
static const char *short_target(const char *t)
{
    return strncmp(t, "torch.ops.", 10) ? t : t + 10;
}

static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

/* how the run went, for the heading and the JSON's "mode" */
static const char *mode(void) { return tc.interpret ? "interpreter" : "compiled"; }

static void print_table(const struct tc_profile *p, const struct kind *k, int nk,
                        const int *order, int n, double steps_s)
{
    double wall = p->wall_s;
    fprintf(stderr, "tcompile: profile of %s (%d nodes): %d steps took %.3f ms of the run's "
            "%.3f ms (%.1f%%)%s; %s: %s\n", p->g->label, p->g->nnodes, n, steps_s * 1e3,
            wall * 1e3, pct(steps_s, wall), p->runs > 1 ? ", the fastest of --repeat" : "",
            mode(), tc.interpret ? "each node a step"
                                 : "each fused kernel or matmul a step, the nodes left to "
                                   "libtensor one each");
    fprintf(stderr, "\n%-44s %7s %12s %8s %12s\n", "Op kind", "Count", "Total ms", "% run",
            "Mean ms");
    for (int i = 0; i < nk; i++)
        fprintf(stderr, "%-44s %7d %12.3f %7.1f%% %12.4f\n", short_target(k[i].target),
                k[i].count, k[i].s * 1e3, pct(k[i].s, wall), k[i].s * 1e3 / k[i].count);
    /* the node last: a fused kernel's names the nodes it stands for */
    fprintf(stderr, "\n%-44s %12s %8s  %s\n", "Op kind", "ms", "% run", "Node");
    for (int i = 0; i < n; i++) {
        int j = order[i];
        fprintf(stderr, "%-44s %12.4f %7.1f%%  %s\n", short_target(p->kind[j]),
                p->best[j] * 1e3, pct(p->best[j], wall), p->name[j]);
    }
}

static void print_json(const struct tc_profile *p, const struct kind *k, int nk,
                       const int *order, int n, double steps_s)
{
    double wall = p->wall_s;
    json_t *o = json_object(), *ops = json_array(), *nodes = json_array();
    json_object_set_new(o, "graph", json_string(p->g->label));
    json_object_set_new(o, "mode", json_string(mode()));
    json_object_set_new(o, "runs", json_integer(p->runs));
    json_object_set_new(o, "wall_ms", json_real(wall * 1e3));
    json_object_set_new(o, "nodes_ms", json_real(steps_s * 1e3));
    for (int i = 0; i < nk; i++)
        json_array_append_new(ops, json_pack("{s:s, s:i, s:f, s:f, s:f}", "target",
                                             k[i].target, "count", k[i].count, "total_ms",
                                             k[i].s * 1e3, "percent", pct(k[i].s, wall),
                                             "mean_ms", k[i].s * 1e3 / k[i].count));
    for (int i = 0; i < n; i++) {
        int j = order[i];
        json_array_append_new(nodes, json_pack("{s:s, s:s, s:f, s:f}", "name", p->name[j],
                                               "target", p->kind[j], "ms", p->best[j] * 1e3,
                                               "percent", pct(p->best[j], wall)));
    }
    json_object_set_new(o, "ops", ops);
    json_object_set_new(o, "nodes", nodes);
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    if (s)
        fprintf(stderr, "%s\n", s);
    free(s);
    json_decref(o);
}

int tc_profile_print(const struct tc_profile *p)
{
    int nk, n = 0, *order = malloc(((size_t)p->n + 1) * sizeof *order);
    struct kind *k = kinds_of(p, &nk);
    if (!order || !k || p->oom) {
        free(order);
        free(k);
        return tn_set_error(TN_ENOMEM, "--profile: out of memory");
    }
    double steps_s = 0;
    for (int i = 0; i < p->n; i++)
        if (p->name[i]) {
            order[n++] = i;
            steps_s += p->best[i];
        }
    sort_key = p->best;
    qsort(order, (size_t)n, sizeof *order, by_node_time);
    if (tc.profile == TC_PROFILE_TABLE || (tc.profile == TC_PROFILE_AUTO && isatty(2)))
        print_table(p, k, nk, order, n, steps_s);
    else
        print_json(p, k, nk, order, n, steps_s);
    free(order);
    free(k);
    return 0;
}
