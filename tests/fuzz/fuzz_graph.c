/*
 * tests/fuzz/fuzz_graph.c: libFuzzer target for lib/graph's reader: the
 * input is read as a JSON graph (tn_graph_parse, small limits), checked
 * (targets, arguments, uses, the Meta pass over symbolic sizes), written
 * back and read again, which must succeed. Before that, the JSON parser
 * under the reader (lib/graph/json.c) and jansson's json_loadb read the
 * input, with and without JSON_REJECT_DUPLICATES: both must refuse it, or
 * both read it into equal trees.
 * Build and run: tests/fuzz/graph.sh [SECONDS [OUTDIR [BUILDDIR]]].
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/tensor.h>

#include "graph/internal.h"

static void ignore(const char *node, const char *msg, void *ctx)
{
    (void)node, (void)msg, (void)ctx;
}

static void same_as_jansson(const unsigned char *data, size_t size, size_t flags)
{
    bool deep;
    json_error_t err;
    json_t *ours = tn__graph_json_parse((const char *)data, size, flags, INT_MAX, &deep);
    json_t *theirs = json_loadb((const char *)data, size, flags, &err);
    if (!ours != !theirs || deep || (ours && !json_equal(ours, theirs)))
        abort();
    json_decref(ours);
    json_decref(theirs);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static const struct tn_graph_limits lim = {
        .max_bytes = 1 << 20, .max_nodes = 512, .max_values = 2048, .max_args = 64,
        .max_depth = 32, .max_numel = 1 << 16};
    same_as_jansson(data, size, 0);
    same_as_jansson(data, size, JSON_REJECT_DUPLICATES);
    struct tn_graph *g = tn_graph_parse((const char *)data, size, "fuzz.json", &lim);
    if (!g)
        return 0;
    if (tn_graph_check(g, ignore, NULL) >= 0) {
        char *text = tn_graph_to_json(g);
        if (text) {
            /* what we write we read (the limits grow with what we add) */
            struct tn_graph *h = tn_graph_parse(text, strlen(text), "again.json", NULL);
            if (!h)
                abort();
            tn_graph_free(h);
            free(text);
        }
    }
    tn_graph_free(g);
    return 0;
}
