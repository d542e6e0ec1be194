/*
 * tests/fuzz/fuzz_compile.c: libFuzzer target for lib/compile: the input's
 * bytes drive every choice of the random graph generator
 * (tests/unit/randgraph.c: ops, dtypes, shapes, layouts, arguments, the
 * input values' seed; a choice past the end is 0, which ends the graph),
 * and the graph runs compiled and in the interpreter; the target aborts
 * when they differ (as test_compile_random compares them), printing why
 * and the graph. One small chain per input: each runs the C compiler, so
 * an input takes a tenth of a second or more, not microseconds.
 * Build and run: tests/fuzz/compile.sh [SECONDS [OUTDIR [BUILDDIR]]].
 */
#include <stdio.h>
#include <stdlib.h>

#include "randgraph.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct rg_src src;
    rg_src_bytes(&src, data, size);
    struct rg_options o = {.chains = 1, .max_ops = 6};
    struct rg_graph rg;
    if (rg_generate(&src, &o, &rg) < 0)
        return 0;
    char *why = NULL;
    /* the cache: $TN_COMPILE_CACHE, which compile.sh sets */
    if (rg_compare(&rg, NULL, &why)) {
        fprintf(stderr, "fuzz_compile: %s\n%s", why, rg.json);
        abort();
    }
    rg_graph_free(&rg);
    return 0;
}
