/*
 * io/scan_graph.c: the object graph a pickle builds, as the auditor's
 * model of the pickle machine sees it: every container or object made
 * (lists, dicts, sets, tuples, call results) is a node, every item put in
 * one an edge (a scalar item is only counted), so references through the
 * memo and DUP share nodes as CPython's objects share them.  From it, the
 * number of values a walk of the result meets (what repr, a JSON dump or
 * a copy that does not keep the sharing materialise), saturating, and
 * whether containers hold themselves.  Expansion bombs (nested memo GETs,
 * nested DUPs) are small pickles whose walk is astronomically long.
 */
#include "io/scan_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_NODES (1u << 22)
#define MAX_EDGES (1u << 24)
#define BUILD_BIT 0x80000000u /* an edge from BUILD: an object's state */

struct node {
    uint64_t leaves; /* scalar items */
    uint32_t head;   /* first edge (index + 1), 0 none */
};

struct edge {
    uint32_t child; /* node id, BUILD_BIT for BUILD's state */
    uint32_t next;
};

/* a + b, saturating at UINT64_MAX (sizes of a hostile graph). */
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* A new node's id (from 1), or 0 when the graph is off: past MAX_NODES
 * (g->limit) or out of memory (g->oom), after which every call is a no-op and
 * the scanner reports the size check as not done. */
uint32_t tn__graph_node(struct tn__scan_graph *g)
{
    if (g->off)
        return 0;
    if (g->n + 1 >= MAX_NODES) {
        g->off = g->limit = true;
        return 0;
    }
    if (g->n + 1 >= g->capn) {
        size_t cap = g->capn ? g->capn * 2 : 256;
        struct node *p = realloc(g->nodes, cap * sizeof *p);
        if (!p) {
            g->off = g->oom = true;
            return 0;
        }
        g->nodes = p;
        g->capn = cap;
    }
    uint32_t id = (uint32_t)++g->n; /* ids from 1 */
    g->nodes[id] = (struct node){0, 0};
    return id;
}

/* Records child under parent (build: as BUILD's state); ignored for node 0,
 * an unknown parent, or a graph that is off. Out of memory turns the graph
 * off. */
void tn__graph_child(struct tn__scan_graph *g, uint32_t parent, uint32_t child, bool build)
{
    if (g->off || !parent || parent > g->n)
        return;
    struct node *p = &g->nodes[parent];
    if (!child || child > g->n) {
        p->leaves = sat_add(p->leaves, 1);
        return;
    }
    if (g->ne >= MAX_EDGES) {
        g->off = g->limit = true;
        return;
    }
    if (g->ne == g->cape) {
        size_t cap = g->cape ? g->cape * 2 : 1024;
        struct edge *e = realloc(g->edges, cap * sizeof *e);
        if (!e) {
            g->off = g->oom = true;
            return;
        }
        g->edges = e;
        g->cape = cap;
    }
    g->edges[g->ne] = (struct edge){child | (build ? BUILD_BIT : 0), p->head};
    p->head = (uint32_t)++g->ne;
}

/* Depth-first from root, iteratively (nesting may be a million deep).
 * A node is white (0), grey (on the path: val holds its depth) or black
 * (val holds its walk length).  A back edge closes a cycle; when no edge
 * of the cycle is a BUILD state (objects that point back at their owner
 * are ordinary), containers hold themselves. */
int tn__graph_walk(struct tn__scan_graph *g, uint32_t root, uint64_t *len, bool *cycle)
{
    *len = 1;
    *cycle = false;
    if (g->off || !root || root > g->n)
        return 0;
    uint8_t *color = calloc(g->n + 1, 1);
    uint64_t *val = malloc((g->n + 1) * sizeof *val);
    struct frame {
        uint32_t node, edge; /* the next edge to follow (index + 1) */
        uint64_t sum;
        uint32_t builds; /* BUILD edges on the path down to here */
    } *st = malloc((g->n + 1) * sizeof *st);
    if (!color || !val || !st) {
        free(color);
        free(val);
        free(st);
        g->oom = true;
        return -1;
    }
    size_t sp = 0;
    st[sp++] = (struct frame){root, g->nodes[root].head, sat_add(1, g->nodes[root].leaves), 0};
    color[root] = 1;
    val[root] = 0;
    while (sp) {
        struct frame *f = &st[sp - 1];
        if (!f->edge) { /* done: black */
            color[f->node] = 2;
            val[f->node] = f->sum;
            uint64_t s = f->sum;
            sp--;
            if (sp)
                st[sp - 1].sum = sat_add(st[sp - 1].sum, s);
            continue;
        }
        const struct edge *e = &g->edges[f->edge - 1];
        f->edge = e->next;
        uint32_t c = e->child & ~BUILD_BIT;
        uint32_t builds = f->builds + !!(e->child & BUILD_BIT);
        if (color[c] == 2) {
            f->sum = sat_add(f->sum, val[c]);
        } else if (color[c] == 1) {
            if (builds == st[val[c]].builds)
                *cycle = true; /* no BUILD edge from c down to here and back */
        } else {
            color[c] = 1;
            val[c] = sp;
            st[sp++] = (struct frame){c, g->nodes[c].head, sat_add(1, g->nodes[c].leaves), builds};
        }
    }
    *len = val[root];
    free(color);
    free(val);
    free(st);
    return 0;
}

/* Frees the graph's arrays and zeroes it (the struct stays the caller's). */
void tn__graph_free(struct tn__scan_graph *g)
{
    free(g->nodes);
    free(g->edges);
    memset(g, 0, sizeof *g);
}
