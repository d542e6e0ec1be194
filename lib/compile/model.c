/*
 * compile/model.c: the runtime of a package (tcompile build): a shared
 * library holding a checked graph (tn_pkg_graph), the kernels compiled
 * for it, the hex SHA-256 of their generated source (tn_pkg_kernels_sha)
 * and, unless built with weights_file, its weights (tn_pkg_weights: a
 * JSON table of name, dtype, sizes and offset into tn_pkg_wdata). Opening
 * one parses and checks the graph, binds the weights (no copy: tensors
 * over the library's read-only data) and makes a compiler whose entries
 * use the package's kernels when they generate the same source (the
 * shapes built for, or a symbolic batch at any size), and compile or run
 * in the interpreter otherwise, as tn_compile_run does.
 */
#include "compile/internal.h"

#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/io.h>

struct tn_model {
    void *lib;                    /* our own dlopen reference to the package */
    struct tn_graph *g;
    struct tn_value *weights;
    struct tn_compiled *c;
    int nin, nout;
    int *in, *out;                /* value indices of user inputs, of outputs */
};

static void *sym(void *lib, const char *path, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        tn_set_error(TN_EFORMAT, "%s: not a tensorkit package (no %s)", path, name);
    return p;
}

/* The embedded weights' table (untrusted only as far as a corrupt file
 * goes: every offset and size is checked against the data's length). */
static struct tn_value *embedded_weights(void *lib, const char *path)
{
    const char *table = sym(lib, path, "tn_pkg_weights");
    const unsigned long long *tlen = sym(lib, path, "tn_pkg_weights_len");
    unsigned char *data = sym(lib, path, "tn_pkg_wdata");
    const unsigned long long *dlen = sym(lib, path, "tn_pkg_wdata_len");
    if (!table || !tlen || !data || !dlen)
        return NULL;
    json_error_t err;
    json_t *a = json_loadb(table, (size_t)*tlen, 0, &err);
    struct tn_value *d = tn_value_dict();
    int rc = a && json_is_array(a) && d
                 ? TN_OK
                 : tn_set_error(TN_EFORMAT, "%s: its weights' table is corrupt", path);
    for (size_t i = 0; rc == TN_OK && i < json_array_size(a); i++) {
        json_t *w = json_array_get(a, i), *sz = json_object_get(w, "sizes");
        const char *name = json_string_value(json_object_get(w, "name"));
        json_int_t dt = json_integer_value(json_object_get(w, "dtype"));
        json_int_t off = json_integer_value(json_object_get(w, "offset"));
        int64_t sizes[TN_MAX_DIMS], n = 1;
        int nd = (int)json_array_size(sz);
        bool ok = name && json_is_array(sz) && nd <= TN_MAX_DIMS && dt >= 0 &&
                  dt < TN_NUM_DTYPES && off >= 0;
        for (int k = 0; ok && k < nd; k++) {
            sizes[k] = json_integer_value(json_array_get(sz, (size_t)k));
            ok = sizes[k] >= 0 && sizes[k] < (INT64_C(1) << 40) &&
                 (sizes[k] == 0 || n <= INT64_MAX / sizes[k]);
            n *= ok ? sizes[k] : 1;
        }
        size_t es = ok ? tn_dtype_size((enum tn_dtype)dt) : 1;
        ok = ok && (unsigned long long)off <= *dlen &&
             (unsigned long long)n <= (*dlen - (unsigned long long)off) / es;
        if (!ok) {
            rc = tn_set_error(TN_EFORMAT, "%s: its weights' table is corrupt (entry %zu)", path, i);
            break;
        }
        struct tn_tensor *t = tn_from_blob(data + off, sizes, nd, NULL, (enum tn_dtype)dt, NULL, NULL);
        struct tn_value *tv = t ? tn_value_tensor(t) : NULL;
        tn_release(t);
        rc = tv ? tn_value_set(d, tn_value_str(name), tv) : tn_last_status();
    }
    json_decref(a);
    if (rc < 0) {
        tn_value_release(d);
        return NULL;
    }
    return d;
}


static void first_problem(const char *node, const char *msg, void *ctx)
{
    char *first = ctx;
    if (!*first)
        snprintf(first, 512, "node '%s': %s", node, msg);
}

static int check_graph(struct tn_graph *g)
{
    char first[512] = "";
    int np = tn_graph_check(g, first_problem, first);
    if (np > 0)
        return tn_set_error(TN_EFORMAT, "%s: the package's graph does not check: %s", g->label,
                            first);
    return np < 0 ? np : TN_OK;
}

static int index_values(struct tn_model *m)
{
    const struct tn_graph *g = m->g;
    m->in = calloc((size_t)g->ninputs + 1, sizeof *m->in);
    m->out = calloc((size_t)g->noutputs + 1, sizeof *m->out);
    if (!m->in || !m->out)
        return tn_set_error(TN_ENOMEM, "out of memory");
    for (int i = 0; i < g->ninputs; i++)
        if (g->inputs[i].kind == TN_GIN_USER_INPUT)
            m->in[m->nin++] = g->inputs[i].value;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value >= 0)
            m->out[m->nout++] = g->outputs[i].value;
    return TN_OK;
}

struct tn_model *tn_model_open(const void *self, const char *weights,
                               const struct tn_compile_options *opts)
{
    Dl_info di;
    if (!self || !dladdr(self, &di) || !di.dli_fname) {
        tn_set_error(TN_EINVAL, "tn_model_open: the address is in no loaded library");
        return NULL;
    }
    struct tn_model *m = calloc(1, sizeof *m);
    if (!m) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    const char *path = di.dli_fname;
    int rc = TN_OK;
    if (!(m->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)))
        rc = tn_set_error(TN_EINVAL, "%s: %s", path, dlerror());
    const char *graph = rc == TN_OK ? sym(m->lib, path, "tn_pkg_graph") : NULL;
    const unsigned long long *glen = graph ? sym(m->lib, path, "tn_pkg_graph_len") : NULL;
    const char *sha = glen ? sym(m->lib, path, "tn_pkg_kernels_sha") : NULL;
    if (rc == TN_OK && !sha)
        rc = tn_last_status();
    if (rc == TN_OK && !(m->g = tn_graph_parse(graph, (size_t)*glen, path, NULL)))
        rc = tn_last_status();
    if (rc == TN_OK)
        rc = check_graph(m->g);
    if (rc == TN_OK) {
        if (weights)
            m->weights = tn_io_load_dict(weights);
        else if (dlsym(m->lib, "tn_pkg_wdata"))
            m->weights = embedded_weights(m->lib, path);
        else
            tn_set_error(TN_EINVAL, "%s: built with its weights in a file: give the file", path);
        if (!m->weights)
            rc = tn_last_status();
    }
    if (rc == TN_OK)
        rc = index_values(m);
    if (rc == TN_OK) {
        struct tn_compile_options o = {0};
        if (opts)
            o = *opts;
        o.kernels_lib = m->lib;
        o.kernels_sha = sha;
        if (!(m->c = tn_compile_new(m->g, &o)))
            rc = tn_last_status();
    }
    if (rc < 0) {
        tn_model_free(m);
        return NULL;
    }
    return m;
}

void tn_model_free(struct tn_model *m)
{
    if (!m)
        return;
    tn_compile_free(m->c);
    tn_value_release(m->weights);
    tn_graph_free(m->g);
    free(m->in);
    free(m->out);
    /* the library stays mapped: the weights' tensors and the kernels
     * pointed into it, and the caller holds its own reference */
    if (m->lib)
        dlclose(m->lib);
    free(m);
}

const struct tn_graph *tn_model_graph(const struct tn_model *m) { return m->g; }

const struct tn_value *tn_model_weights(const struct tn_model *m) { return m->weights; }

int tn_model_run(struct tn_model *m, const struct tn_value *inputs, struct tn_value **outputs)
{
    return tn_compile_run(m->c, m->weights, inputs, outputs);
}

int tn_model_run_tensors(struct tn_model *m, struct tn_tensor *const *inputs,
                         struct tn_tensor **outputs)
{
    struct tn_value *d = tn_value_dict(), *out = NULL;
    int rc = d ? TN_OK : tn_last_status();
    for (int i = 0; rc == TN_OK && i < m->nin; i++) {
        if (!inputs[i]) {
            rc = tn_set_error(TN_EINVAL, "%s: input %d (%s) is NULL", m->g->label, i,
                              m->g->values[m->in[i]].name);
            break;
        }
        struct tn_value *t = tn_value_tensor(inputs[i]);
        rc = t ? tn_value_set(d, tn_value_str(m->g->values[m->in[i]].name), t) : tn_last_status();
    }
    if (rc == TN_OK)
        rc = tn_model_run(m, d, &out);
    for (int i = 0; rc == TN_OK && i < m->nout; i++) {
        struct tn_value *v = tn_value_get(out, m->g->values[m->out[i]].name);
        if (!v || v->kind != TN_VALUE_TENSOR) {
            for (int j = 0; j < i; j++)
                tn_release(outputs[j]);
            rc = tn_set_error(TN_EINVAL, "%s: output %s is not a tensor", m->g->label,
                              m->g->values[m->out[i]].name);
            break;
        }
        outputs[i] = tn_retain(v->v.tensor);
    }
    tn_value_release(out);
    tn_value_release(d);
    return rc;
}

int tn_model_num_inputs(const struct tn_model *m) { return m->nin; }
int tn_model_num_outputs(const struct tn_model *m) { return m->nout; }

static const struct tn_graph_value *value_of(const struct tn_model *m, bool in, int i)
{
    if (i < 0 || i >= (in ? m->nin : m->nout))
        return NULL;
    return &m->g->values[in ? m->in[i] : m->out[i]];
}

static int64_t size_of(const struct tn_graph_value *v, int d)
{
    if (!v || d < 0 || d >= v->ndim)
        return -1;
    return v->exprs[d] ? -1 : v->sizes[d];
}

const char *tn_model_input_name(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, true, i);
    return v ? v->name : NULL;
}
int tn_model_input_dtype(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, true, i);
    return v ? (int)v->dtype : -1;
}
int tn_model_input_ndim(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, true, i);
    return v ? v->ndim : -1;
}
int64_t tn_model_input_size(const struct tn_model *m, int i, int d)
{
    return size_of(value_of(m, true, i), d);
}
const char *tn_model_output_name(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, false, i);
    return v ? v->name : NULL;
}
int tn_model_output_dtype(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, false, i);
    return v ? (int)v->dtype : -1;
}
int tn_model_output_ndim(const struct tn_model *m, int i)
{
    const struct tn_graph_value *v = value_of(m, false, i);
    return v ? v->ndim : -1;
}
int64_t tn_model_output_size(const struct tn_model *m, int i, int d)
{
    return size_of(value_of(m, false, i), d);
}
