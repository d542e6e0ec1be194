/*
 * bin/tcompile/profile.c: tcompile run --profile: the time of every node
 * (through tn_graph_run's node_done hook) and of every op kind (the nodes'
 * targets), sorted, as a table or as one JSON object on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcompile.h"

int tc_profile_init(struct tc_profile *p, const struct tn_graph *g)
{
    *p = (struct tc_profile){.g = g};
    p->cur = calloc((size_t)g->nnodes + 1, sizeof *p->cur);
    p->best = calloc((size_t)g->nnodes + 1, sizeof *p->best);
    if (!p->cur || !p->best)
        return tn_set_error(TN_ENOMEM, "--profile: out of memory");
    return 0;
}

void tc_profile_free(struct tc_profile *p)
{
    free(p->cur);
    free(p->best);
}

void tc_profile_node_done(void *ctx, int node, double seconds)
{
    ((struct tc_profile *)ctx)->cur[node] += seconds;
}

void tc_profile_start(struct tc_profile *p)
{
    memset(p->cur, 0, (size_t)p->g->nnodes * sizeof *p->cur);
}

void tc_profile_stop(struct tc_profile *p, double wall_s)
{
    if (p->runs++ == 0 || wall_s < p->wall_s) {
        p->wall_s = wall_s;
        memcpy(p->best, p->cur, (size_t)p->g->nnodes * sizeof *p->cur);
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

/* The op kinds of g, summed from per-node times t, sorted; *n of them. */
static struct kind *kinds_of(const struct tn_graph *g, const double *t, int *n)
{
    struct kind *k = calloc((size_t)g->nnodes + 1, sizeof *k);
    *n = 0;
    for (int i = 0; k && i < g->nnodes; i++) {
        int j = 0;
        while (j < *n && strcmp(k[j].target, g->nodes[i].target))
            j++;
        if (j == *n)
            k[(*n)++].target = g->nodes[i].target;
        k[j].count++;
        k[j].s += t[i];
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

static void print_table(const struct tc_profile *p, const struct kind *k, int nk,
                        const int *order, double nodes_s)
{
    const struct tn_graph *g = p->g;
    double wall = p->wall_s;
    fprintf(stderr, "tcompile: profile of %s: %d nodes took %.3f ms of the run's %.3f ms "
            "(%.1f%%)%s; in the interpreter, node by node (compiled kernels are not timed)\n",
            g->label, g->nnodes, nodes_s * 1e3, wall * 1e3, pct(nodes_s, wall),
            p->runs > 1 ? ", the fastest of --repeat" : "");
    fprintf(stderr, "\n%-44s %7s %12s %8s %12s\n", "Op kind", "Count", "Total ms", "% run",
            "Mean ms");
    for (int i = 0; i < nk; i++)
        fprintf(stderr, "%-44s %7d %12.3f %7.1f%% %12.4f\n", short_target(k[i].target),
                k[i].count, k[i].s * 1e3, pct(k[i].s, wall), k[i].s * 1e3 / k[i].count);
    fprintf(stderr, "\n%-32s %-36s %12s %8s\n", "Node", "Op kind", "ms", "% run");
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[order[i]];
        fprintf(stderr, "%-32s %-36s %12.4f %7.1f%%\n", n->name, short_target(n->target),
                p->best[order[i]] * 1e3, pct(p->best[order[i]], wall));
    }
}

static void print_json(const struct tc_profile *p, const struct kind *k, int nk,
                       const int *order, double nodes_s)
{
    const struct tn_graph *g = p->g;
    double wall = p->wall_s;
    json_t *o = json_object(), *ops = json_array(), *nodes = json_array();
    json_object_set_new(o, "graph", json_string(g->label));
    json_object_set_new(o, "mode", json_string("interpreter"));
    json_object_set_new(o, "runs", json_integer(p->runs));
    json_object_set_new(o, "wall_ms", json_real(wall * 1e3));
    json_object_set_new(o, "nodes_ms", json_real(nodes_s * 1e3));
    for (int i = 0; i < nk; i++)
        json_array_append_new(ops, json_pack("{s:s, s:i, s:f, s:f, s:f}", "target",
                                             k[i].target, "count", k[i].count, "total_ms",
                                             k[i].s * 1e3, "percent", pct(k[i].s, wall),
                                             "mean_ms", k[i].s * 1e3 / k[i].count));
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[order[i]];
        double s = p->best[order[i]];
        json_array_append_new(nodes, json_pack("{s:s, s:s, s:f, s:f}", "name", n->name,
                                               "target", n->target, "ms", s * 1e3, "percent",
                                               pct(s, wall)));
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
    const struct tn_graph *g = p->g;
    int nk, *order = malloc(((size_t)g->nnodes + 1) * sizeof *order);
    struct kind *k = kinds_of(g, p->best, &nk);
    if (!order || !k) {
        free(order);
        free(k);
        return tn_set_error(TN_ENOMEM, "--profile: out of memory");
    }
    double nodes_s = 0;
    for (int i = 0; i < g->nnodes; i++) {
        order[i] = i;
        nodes_s += p->best[i];
    }
    sort_key = p->best;
    qsort(order, (size_t)g->nnodes, sizeof *order, by_node_time);
    if (tc.profile == TC_PROFILE_TABLE || (tc.profile == TC_PROFILE_AUTO && isatty(2)))
        print_table(p, k, nk, order, nodes_s);
    else
        print_json(p, k, nk, order, nodes_s);
    free(order);
    free(k);
    return 0;
}
