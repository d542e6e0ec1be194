/*
 * compile/package.c: tcompile build: one shared library holding a graph's
 * compiled kernels, the checked graph and its weights, with a C API of
 * its own (NAME_create, NAME_run, NAME_destroy and the functions that
 * describe the inputs and outputs) over libtensor's package runtime
 * (model.c). Built in a temporary folder beside the output, removed
 * whatever happens; the library is renamed into place at the end.
 */
#include "compile/internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool c_identifier(const char *s)
{
    if (!s || !*s || strlen(s) > 64 || (*s >= '0' && *s <= '9'))
        return false;
    for (const char *p = s; *p; p++)
        if (!(*p == '_' || (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z')))
            return false;
    return true;
}

/* The weights as one blob of 64-byte aligned, contiguous tensors and a
 * JSON table of name, dtype, sizes and offset. */
static int weights_blob(const struct tn_value *w, const char *dir, const char *label)
{
    char path[PATH_MAX];
    tn__path(path, sizeof path, "%s/weights.bin", dir);
    FILE *f = fopen(path, "wb");
    json_t *table = json_array();
    int rc = f && table ? TN_OK : tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
    uint64_t off = 0;
    static const char zeros[64];
    for (size_t i = 0; rc == TN_OK && w && i < w->v.dict.n; i++) {
        const struct tn_value *k = w->v.dict.keys[i], *v = w->v.dict.vals[i];
        if (k->kind != TN_VALUE_STR || v->kind != TN_VALUE_TENSOR) {
            rc = tn_set_error(TN_EINVAL, "%s: weight %zu is not a named tensor", label, i);
            break;
        }
        struct tn_tensor *t = tn_contiguous(v->v.tensor);
        if (!t) {
            rc = tn_last_status();
            break;
        }
        json_t *sz = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(sz, json_integer(t->sizes[d]));
        json_array_append_new(table, json_pack("{s:s, s:i, s:o, s:I}", "name", k->v.str.s, "dtype",
                                               (int)t->dtype, "sizes", sz, "offset",
                                               (json_int_t)off));
        size_t n = tn_nbytes(t), pad = (64 - n % 64) % 64;
        if ((n && fwrite(tn_data(t), 1, n, f) != n) || (pad && fwrite(zeros, 1, pad, f) != pad))
            rc = tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
        off += n + pad;
        tn_release(t);
    }
    if (f && fclose(f) != 0 && rc == TN_OK)
        rc = tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
    char *text = rc == TN_OK ? json_dumps(table, JSON_COMPACT) : NULL;
    json_decref(table);
    if (rc == TN_OK && !text)
        rc = tn_set_error(TN_ENOMEM, "out of memory");
    tn__path(path, sizeof path, "%s/weights.json", dir);
    if (rc == TN_OK)
        rc = tn__write_private(path, text, strlen(text), 0600);
    free(text);
    return rc;
}

/* An assembler .incbin of dir/file as the global object NAME, with
 * NAME_len (a C constant) its length; a NUL follows the bytes. */
static void incbin(struct tn__out *b, const char *dir, const char *file, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    tn__path(path, sizeof path, "%s/%s", dir, file);
    long long len = stat(path, &st) == 0 ? (long long)st.st_size : 0;
    tn__put(b,
        "__asm__(\".section .rodata\\n.balign 64\\n.globl %s\\n.type %s, @object\\n%s:\\n"
        ".incbin \\\"%s\\\"\\n.byte 0\\n.size %s, .-%s\\n.previous\");\n"
        "const unsigned long long %s_len = %lldULL;\n",
        name, name, name, path, name, name, name, len);
}

static const char *const api[][3] = {
    /* return type, name, parameters (after the prefix) */
    {"void *", "create", "(const char *weights)"},
    {"int ", "run", "(void *model, struct tn_tensor *const *inputs, struct tn_tensor **outputs)"},
    {"void ", "destroy", "(void *model)"},
    {"int ", "num_inputs", "(const void *model)"},
    {"int ", "num_outputs", "(const void *model)"},
    {"const char *", "input_name", "(const void *model, int i)"},
    {"int ", "input_dtype", "(const void *model, int i)"},
    {"int ", "input_ndim", "(const void *model, int i)"},
    {"int64_t ", "input_size", "(const void *model, int i, int d)"},
    {"const char *", "output_name", "(const void *model, int i)"},
    {"int ", "output_dtype", "(const void *model, int i)"},
    {"int ", "output_ndim", "(const void *model, int i)"},
    {"int64_t ", "output_size", "(const void *model, int i, int d)"},
    {"const char *", "error", "(void)"},
};

/* The body of each function of api[], calling the runtime. */
static const char *const body[] = {
    "return tn_model_open((const void *)&tn_pkg_graph, weights, (const void *)0);",
    "return tn_model_run_tensors(model, inputs, outputs);",
    "tn_model_free(model);",
    "return tn_model_num_inputs(model);",
    "return tn_model_num_outputs(model);",
    "return tn_model_input_name(model, i);",
    "return tn_model_input_dtype(model, i);",
    "return tn_model_input_ndim(model, i);",
    "return tn_model_input_size(model, i, d);",
    "return tn_model_output_name(model, i);",
    "return tn_model_output_dtype(model, i);",
    "return tn_model_output_ndim(model, i);",
    "return tn_model_output_size(model, i, d);",
    "return tn_last_error();",
};

static void declarations(struct tn__out *b, const char *name, bool runtime)
{
    tn__put(b, "#include <stdint.h>\nstruct tn_tensor;\n");
    if (runtime) {
        /* the runtime's functions (tensor/compile.h), by hand: the
         * package is compiled without tensorkit's headers */
        tn__put(b, "void *tn_model_open(const void *self, const char *weights, const void *opts);\n"
               "int tn_model_run_tensors(void *m, struct tn_tensor *const *in, struct tn_tensor **out);\n"
               "void tn_model_free(void *m);\nconst char *tn_last_error(void);\n");
        for (size_t i = 3; i + 1 < sizeof api / sizeof api[0]; i++)
            tn__put(b, "%stn_model_%s%s;\n", api[i][0], api[i][1], api[i][2]);
    }
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++)
        tn__put(b, "%s%s%s_%s%s;\n", runtime ? "__attribute__((visibility(\"default\"))) " : "",
            api[i][0], name, api[i][1], api[i][2]);
}

/* One line per input or output for the header's comment. */
static void describe(struct tn__out *b, const struct tn_graph *g)
{
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->noutputs : g->ninputs, k = 0;
        for (int i = 0; i < n; i++) {
            const struct tn_graph_spec *s = pass ? &g->outputs[i] : &g->inputs[i];
            if ((!pass && s->kind != TN_GIN_USER_INPUT) || s->value < 0)
                continue;
            const struct tn_graph_value *v = &g->values[s->value];
            tn__put(b, " *   %s %d: %s %s [", pass ? "output" : "input", k++, v->name,
                tn_dtype_name(v->dtype));
            for (int d = 0; d < v->ndim; d++)
                if (v->exprs[d])
                    tn__put(b, "%s%s", d ? ", " : "", v->exprs[d]);
                else
                    tn__put(b, "%s%lld", d ? ", " : "", (long long)v->sizes[d]);
            tn__put(b, "]\n");
        }
    }
}

static void header_text(struct tn__out *b, const char *name, const struct tn_graph *g)
{
    tn__put(b, "/*\n * %s.h: the C API of a model built by tcompile build from %s (man 3 tn_package).\n"
           " * Link the library (or dlopen it) and libtensor; inputs and outputs in\n"
           " * this order (a symbol is a symbolic size, -1 from %s_input_size):\n",
        name, g->label, name);
    describe(b, g);
    char guard[80];
    size_t k = 0;
    for (; name[k] && k < 70; k++)
        guard[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    guard[k] = '\0';
    tn__put(b, " */\n#ifndef TN_PACKAGE_%s_H\n#define TN_PACKAGE_%s_H\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n",
        guard, guard);
    declarations(b, name, false);
    tn__put(b, "#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

static int write_text(const char *dir, const char *file, const struct tn__out *b)
{
    if (b->oom)
        return tn_set_error(TN_ENOMEM, "out of memory");
    char path[PATH_MAX];
    tn__path(path, sizeof path, "%s/%s", dir, file);
    return tn__write_private(path, b->s, b->len, 0600);
}

static void remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            tn__path(path, sizeof path, "%s/%s", dir, e->d_name) == 0)
            unlink(path);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* The linker arguments for libtensor: the shared library this process
 * runs (its path) and an rpath to its folder. */
static int libtensor_args(char *lib, size_t n, char *rpath, size_t m)
{
    Dl_info di;
    if (!dladdr((void *)tn_version, &di) || !di.dli_fname || !strstr(di.dli_fname, "libtensor"))
        return tn_set_error(TN_EINVAL, "cannot find libtensor's shared library (this program "
                            "links it statically)");
    if (!realpath(di.dli_fname, lib) || strlen(lib) >= n)
        return tn_set_error(TN_EIO, "%s: %s", di.dli_fname, strerror(errno));
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", lib);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    return tn__path(rpath, m, "-Wl,-rpath,%s", dir);
}

static int build_in(struct tn_compiled *c, const struct tn_value *weights, const char *dir,
                    const char *tmp_so, const struct tn_package_options *o, const char *name)
{
    const struct tn_graph *g = tn__compile_graph(c);
    const char *src = tn__compile_source(c);
    if (!src)
        return tn_set_error(TN_EINVAL, "%s: not compiled", g->label);
    if (strpbrk(dir, "\"\\\n"))
        return tn_set_error(TN_EINVAL, "%s: a folder whose path holds a quote, a backslash or a "
                            "newline cannot take a package", dir);
    char *json = tn_graph_to_json(g);
    int rc = json ? TN_OK : tn_last_status();
    char path[PATH_MAX];
    tn__path(path, sizeof path, "%s/graph.json", dir);
    if (rc == TN_OK)
        rc = tn__write_private(path, json, strlen(json), 0600);
    free(json);
    bool embed = !o->weights_file;
    if (rc == TN_OK && embed)
        rc = weights_blob(weights, dir, g->label);
    if (rc < 0)
        return rc;
    char sha[65];
    tn__sha256_hex(src, strlen(src), sha);
    struct tn__out b = {0};
    tn__put(&b, "/* a tensorkit package of %s (tcompile build): its kernels, graph and weights */\n",
        g->label);
    tn__put(&b, "%s\n", src);
    tn__put(&b, "const char tn_pkg_kernels_sha[] = \"%s\";\n", sha);
    incbin(&b, dir, "graph.json", "tn_pkg_graph");
    if (embed) {
        incbin(&b, dir, "weights.json", "tn_pkg_weights");
        incbin(&b, dir, "weights.bin", "tn_pkg_wdata");
    }
    tn__put(&b, "extern const char tn_pkg_graph[];\n");
    declarations(&b, name, true);
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++)
        tn__put(&b, "%s%s_%s%s\n{\n    %s\n}\n", api[i][0], name, api[i][1], api[i][2], body[i]);
    rc = write_text(dir, "model.c", &b);
    free(b.s);
    char lib[PATH_MAX], rpath[PATH_MAX + 16];
    if (rc == TN_OK)
        rc = libtensor_args(lib, sizeof lib, rpath, sizeof rpath);
    if (rc < 0)
        return rc;
    tn__path(path, sizeof path, "%s/model.c", dir);
    const char *extra[] = {lib, rpath};
    double secs;
    struct tn_compile_options co = tn__compile_options(c);
    return tn__cc_build(&co, path, tmp_so, extra, 2, &secs);
}

int tn_compile_package(struct tn_compiled *c, const struct tn_value *weights,
                       const struct tn_value *inputs, const char *so_path,
                       const struct tn_package_options *opts)
{
    struct tn_package_options o = {0};
    if (opts)
        o = *opts;
    const char *name = o.name ? o.name : "model";
    if (!c_identifier(name))
        return tn_set_error(TN_EINVAL, "--name %s: not a C identifier", name);
    int rc = tn_compile_build(c, weights, inputs, NULL);
    if (rc < 0)
        return rc;
    char dir[PATH_MAX], tmp_so[PATH_MAX];
    const char *slash = strrchr(so_path, '/');
    const char *base = slash ? slash + 1 : so_path;
    rc = slash ? tn__path(dir, sizeof dir, "%.*s/.%s.build-XXXXXX", (int)(slash - so_path),
                          so_path, base)
               : tn__path(dir, sizeof dir, "./.%s.build-XXXXXX", base);
    if (rc < 0)
        return rc;
    if (!mkdtemp(dir))
        return tn_set_error(TN_EIO, "%s: cannot create a temporary folder beside it: %s", so_path,
                            strerror(errno));
    /* the kernels, graph and weights go in by absolute path */
    char abs[PATH_MAX];
    if (!realpath(dir, abs))
        rc = tn_set_error(TN_EIO, "%s: %s", dir, strerror(errno));
    if (rc == TN_OK)
        rc = tn__path(tmp_so, sizeof tmp_so, "%s/model.so", abs);
    if (rc == TN_OK)
        rc = build_in(c, weights, abs, tmp_so, &o, name);
    if (rc == TN_OK && o.header) {
        struct tn__out h = {0};
        header_text(&h, name, tn__compile_graph(c));
        rc = h.oom ? tn_set_error(TN_ENOMEM, "out of memory") : tn_write_file(o.header, h.s, h.len, false);
        free(h.s);
    }
    mode_t um = umask(0);
    umask(um);
    if (rc == TN_OK && chmod(tmp_so, 0777 & ~um) != 0)
        rc = tn_set_error(TN_EIO, "%s: %s", tmp_so, strerror(errno));
    if (rc == TN_OK && rename(tmp_so, so_path) != 0)
        rc = tn_set_error(TN_EIO, "%s: %s", so_path, strerror(errno));
    remove_folder(dir);
    return rc;
}
