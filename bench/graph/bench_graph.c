/*
 * bench/graph/bench_graph.c: issue 10's start-up figure: reading and
 * checking a graph (tn_graph_parse + tn_graph_check, the Meta pass
 * included), against jansson parsing the same text the plain way
 * (json_loadb and json_decref, every value malloc'd and freed; our reader
 * parses with lib/graph/json.c into jansson's tree, kept in an arena). Prints
 * milliseconds and the ratio; graph.sh compares with PyTorch's own
 * deserializer.
 *
 *   bench_graph FILE [REPS]     (REPS default 10; the best run counts)
 *   bench_graph --ms FILE       our milliseconds alone, for scripts
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/graph.h>

#include "bench/bench.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int problems;

static void count(const char *node, const char *msg, void *ctx)
{
    (void)node, (void)ctx;
    if (problems++ == 0)
        fprintf(stderr, "bench_graph: %s: %s\n", node, msg);
}

/* One read and check; returns the node count, or -1. */
static int read_check(const char *text, size_t len)
{
    struct tn_graph *g = tn_graph_parse(text, len, "bench", NULL);
    if (!g) {
        fprintf(stderr, "bench_graph: %s\n", tn_last_error());
        return -1;
    }
    int rc = tn_graph_check(g, count, NULL);
    int n = g->nnodes;
    tn_graph_free(g);
    return rc == 0 ? n : -1;
}

int main(int argc, char **argv)
{
    bool ms_only = argc > 1 && !strcmp(argv[1], "--ms");
    int a = ms_only ? 2 : 1;
    if (argc <= a) {
        fprintf(stderr, "usage: bench_graph [--ms] FILE [REPS]\n");
        return 2;
    }
    int reps = argc > a + 1 ? atoi(argv[a + 1]) : 10;
    size_t len;
    char *text = slurp(argv[a], &len);
    if (!text) {
        perror(argv[a]);
        return 2;
    }
    int nodes = read_check(text, len);
    if (nodes < 0)
        return 1;
    double ours, json;
    TN_BENCH_BEST(reps, ours, read_check(text, len));
    if (ms_only) {
        printf("%.3f\n", ours * 1e3);
        free(text);
        return 0;
    }
    TN_BENCH_BEST(reps, json, json_decref(json_loadb(text, len, 0, NULL)));
    printf("read+check %d nodes (%zu bytes): %.2f ms; plain jansson parse %.2f ms; "
           "ratio %.2f\n", nodes, len, ours * 1e3, json * 1e3, ours / json);
    free(text);
    return 0;
}
