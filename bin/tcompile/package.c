/*
 * bin/tcompile/package.c: tcompile run LIB.so: a library tcompile build
 * made is loaded (dlopen) and run through libtensor's package runtime
 * (tn_model_open), with inputs and outputs as tcompile run takes and
 * writes them for a graph.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <tensor/compile.h>
#include <tensor/core.h>

#include "tcompile.h"

/* An ELF shared object by its first bytes; only a regular file is read
 * ("-" and pipes are graphs, whose bytes must not be consumed). */
bool tc_is_package(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    FILE *f = fopen(path, "rb");
    unsigned char m[4] = {0};
    bool elf = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "\x7f" "ELF", 4);
    if (f)
        fclose(f);
    return elf;
}

int tc_run_package(const char *path)
{
    if (tc.grads || tc.explain)
        tc_usage_error("%s", "a built library runs forward only: --grads and --explain do not "
                       "apply");
    /* dlopen searches the library path for a name without a slash */
    char rel[4096];
    snprintf(rel, sizeof rel, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *h = dlopen(rel, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "tcompile: %s\n", dlerror());
        return 2;
    }
    void *self = dlsym(h, "tn_pkg_graph");
    if (!self) {
        fprintf(stderr, "tcompile: %s: not a library tcompile build made (no tn_pkg_graph)\n",
                path);
        dlclose(h);
        return 2;
    }
    struct tn_compile_options o = tc_compile_options();
    struct tn_model *m = tn_model_open(self, tc.weights, &o);
    struct tn_value *in = m ? tc_load_inputs(tn_model_graph(m)) : NULL, *out = NULL;
    int rc = in ? 0 : tc_fail();
    double best = 0;
    for (int r = 0; rc == 0 && r < tc.repeat; r++) {
        tn_value_release(out);
        out = NULL;
        double t0 = tc_now();
        if (tn_model_run(m, in, &out) < 0)
            rc = tc_fail();
        double dt = tc_now() - t0;
        if (r == 0 || dt < best)
            best = dt;
    }
    if (rc == 0 && tc.time)
        fprintf(stderr, "tcompile: %s: run took %.3f ms%s\n", path, best * 1e3,
                tc.repeat > 1 ? " (the fastest of --repeat)" : "");
    if (rc == 0 && tc_write_tensors(out, tc.output) < 0)
        rc = tc_fail();
    tn_value_release(out);
    tn_value_release(in);
    tn_model_free(m);
    dlclose(h);
    return rc;
}
