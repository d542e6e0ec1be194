/*
 * bin/tcompile/grad.c: tcompile grad GRAPH -o DIR: the forward and
 * backward graphs of AOT autograd (tn_compile_joint), written as
 * DIR/forward.json and DIR/backward.json.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tensor/core.h>

#include "tcompile.h"

int tc_grad(const char *path)
{
    if (!tc.output)
        tc_usage_error("%s", "grad: needs -o DIR for forward.json and backward.json");
    struct tn_graph *g = tn_graph_load(path, NULL, NULL);
    if (!g)
        return tc_fail();
    struct tc_problems p = {0};
    int rc = tn_graph_check(g, tc_problems_add_cb, &p);
    if (rc != 0) {
        if (rc > 0)
            tc_problems_print(&p, g, false);
        tc_problems_free(&p);
        tn_graph_free(g);
        return rc < 0 ? tc_fail() : 2;
    }
    tc_problems_free(&p);
    char *fwd, *bwd;
    rc = tn_compile_joint(g, &fwd, &bwd);
    tn_graph_free(g);
    if (rc < 0)
        return tc_fail();
    if (mkdir(tc.output, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "tcompile: %s: cannot create the folder: %s\n", tc.output,
                strerror(errno));
        free(fwd);
        free(bwd);
        return 2;
    }
    size_t n = strlen(tc.output) + 32;
    char *f = malloc(n), *b = malloc(n);
    rc = f && b ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    if (rc == 0) {
        snprintf(f, n, "%s/forward.json", tc.output);
        snprintf(b, n, "%s/backward.json", tc.output);
        rc = tn_write_file(f, fwd, strlen(fwd), false);
        if (rc == 0)
            rc = tn_write_file(b, bwd, strlen(bwd), false);
    }
    free(f);
    free(b);
    free(fwd);
    free(bwd);
    return rc < 0 ? tc_fail() : 0;
}
