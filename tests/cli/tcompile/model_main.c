/*
 * model_main: runs a library tcompile build made through its C API, as a
 * user's program would, with dlopen: model_main LIB.so NAME INPUTS OUT.npz
 * [WEIGHTS]. Prints each input and output (name, dtype, sizes; -1 for a
 * symbolic size), binds the inputs by name from INPUTS (any tensor file),
 * runs, writes the outputs to OUT.npz. An error of the API is printed with
 * NAME_error() and exits 2.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/core.h>
#include <tensor/io.h>

static void *fn(void *h, const char *name, const char *what)
{
    char s[256];
    snprintf(s, sizeof s, "%s_%s", name, what);
    void *p = dlsym(h, s);
    if (!p) {
        fprintf(stderr, "model_main: no %s\n", s);
        exit(2);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: model_main LIB.so NAME INPUTS OUT.npz [WEIGHTS]\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "model_main: %s\n", dlerror());
        return 2;
    }
    const char *n = argv[2];
    void *(*create)(const char *) = fn(h, n, "create");
    int (*run)(void *, struct tn_tensor *const *, struct tn_tensor **) = fn(h, n, "run");
    void (*destroy)(void *) = fn(h, n, "destroy");
    int (*nin)(const void *) = fn(h, n, "num_inputs");
    int (*nout)(const void *) = fn(h, n, "num_outputs");
    const char *(*iname)(const void *, int) = fn(h, n, "input_name");
    const char *(*oname)(const void *, int) = fn(h, n, "output_name");
    int (*idt)(const void *, int) = fn(h, n, "input_dtype");
    int (*ind)(const void *, int) = fn(h, n, "input_ndim");
    int64_t (*isz)(const void *, int, int) = fn(h, n, "input_size");
    int (*odt)(const void *, int) = fn(h, n, "output_dtype");
    int (*ond)(const void *, int) = fn(h, n, "output_ndim");
    int64_t (*osz)(const void *, int, int) = fn(h, n, "output_size");
    const char *(*error)(void) = fn(h, n, "error");
    void *m = create(argc > 5 ? argv[5] : NULL);
    if (!m) {
        fprintf(stderr, "model_main: create: %s\n", error());
        return 2;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? nout(m) : nin(m)); i++) {
            printf("%s %d: %s %s [", pass ? "output" : "input", i, (pass ? oname : iname)(m, i),
                   tn_dtype_name((enum tn_dtype)(pass ? odt : idt)(m, i)));
            for (int d = 0; d < (pass ? ond : ind)(m, i); d++)
                printf("%s%lld", d ? ", " : "", (long long)(pass ? osz : isz)(m, i, d));
            printf("]\n");
        }
    struct tn_value *in = tn_load(argv[3], NULL);
    if (!in) {
        fprintf(stderr, "model_main: %s\n", tn_last_error());
        return 2;
    }
    struct tn_tensor *ins[64] = {0}, *outs[64] = {0};
    for (int i = 0; i < nin(m) && i < 64; i++) {
        struct tn_value *v = tn_value_get(in, iname(m, i));
        ins[i] = v && v->kind == TN_VALUE_TENSOR ? v->v.tensor : NULL;
    }
    int rc = run(m, ins, outs);
    if (rc != 0) {
        fprintf(stderr, "model_main: run returned %d: %s\n", rc, error());
        return 2;
    }
    struct tn_value *o = tn_value_dict();
    for (int i = 0; i < nout(m) && i < 64; i++) {
        tn_value_set(o, tn_value_str(oname(m, i)), tn_value_tensor(outs[i]));
        tn_release(outs[i]);
    }
    if (tn_npz_save(argv[4], o) < 0) {
        fprintf(stderr, "model_main: %s\n", tn_last_error());
        return 2;
    }
    tn_value_release(o);
    tn_value_release(in);
    destroy(m);
    return 0;
}
