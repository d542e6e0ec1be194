/*
 * bin/tcompile/aoti.c: tcompile run PACKAGE.pt2 for a package made by
 * torch._inductor.aoti_compile_and_package: the model's compiled library
 * (data/aotinductor/<model>/<lib>.so) and the files beside it are extracted to
 * a private temporary folder, the library's needs are checked against
 * libtensor-aoti (every aoti_torch_* function it calls must be there:
 * otherwise it is refused, naming them, before any of its code runs), and
 * it is loaded beside tensorkit's stand-ins for libtorch.so and run through
 * its AOTInductorModelContainer* entry points: no Python, no libtorch.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tensor/core.h>
#include <tensor/io.h>

#include "aoti.h"
#include "tcompile.h"

#define AOTI_DIR "data/aotinductor/"

/* AOTInductor's C ABI (torch/csrc/inductor/aoti_runtime/interface.h) */
typedef struct tn_tensor *AtenTensorHandle;
typedef void *AOTIHandle;
typedef int32_t (*create_fn)(AOTIHandle *, size_t, const char *, const char *);
typedef int32_t (*delete_fn)(AOTIHandle);
typedef int32_t (*run_fn)(AOTIHandle, AtenTensorHandle *, size_t, AtenTensorHandle *, size_t,
                          void *, void *);
typedef int32_t (*count_fn)(AOTIHandle, size_t *);
typedef int32_t (*name_fn)(AOTIHandle, size_t, const char **);

/* The libraries a package's model asks for that tensorkit stands in for
 * (each a link to libtensor-aoti in its library folder). */
static const char *const standins[] = {"libtorch.so", "libtorch_cpu.so", "libc10.so"};

/* The index of the package's model library "<prefix>data/aotinductor/
 * <model>/<lib>.so" (the first, in archive order), or -1. */
static long model_library(const struct tn_zip *z)
{
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const char *n = tn_zip_entry_at(z, i)->name, *d = strstr(n, AOTI_DIR);
        size_t len = strlen(n);
        if (d && (d == n || d[-1] == '/') && len > 3 && !strcmp(n + len - 3, ".so") &&
            strchr(d + strlen(AOTI_DIR), '/'))
            return (long)i;
    }
    return -1;
}

bool tc_aoti_is_package(const char *path)
{
    /* a regular file only: reading a pipe's first bytes would take them
     * from the graph reader */
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    FILE *f = fopen(path, "rb");
    char magic[4] = "";
    bool zip = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "PK\3\4", 4);
    if (f)
        fclose(f);
    if (!zip)
        return false;
    struct tn_zip *z = tn_zip_open(path);
    bool yes = z && model_library(z) >= 0;
    tn_zip_close(z);
    return yes;
}

/* ------------------------------------------------------------ extraction */

/* The private folder the model's files go to, and what was written there. */
struct scratch {
    char dir[4096];
    struct tc_strs files;
};

static void scratch_remove(struct scratch *s)
{
    for (int i = 0; i < s->files.n; i++)
        unlink(s->files.v[i]);
    if (s->dir[0])
        rmdir(s->dir);
    tc_strs_free(&s->files);
    s->dir[0] = '\0';
}

/* Extracts the files of the model library's folder (entry `lib`) into a new
 * private folder; *so gets the library's path there. */
static int extract(const struct tn_zip *z, long lib, struct scratch *s, char *so, size_t so_len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/tcompile-aoti-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        int rc = tn_set_error(TN_EIO, "%s: cannot make a temporary folder: %s", s->dir,
                              strerror(errno));
        s->dir[0] = '\0';
        return rc;
    }
    const char *libname = tn_zip_entry_at(z, (size_t)lib)->name;
    size_t folder = (size_t)(strrchr(libname, '/') - libname) + 1;
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const char *n = tn_zip_entry_at(z, i)->name;
        if (strncmp(n, libname, folder) || strchr(n + folder, '/') || !n[folder])
            continue;
        char path[4352];
        snprintf(path, sizeof path, "%s/%s", s->dir, n + folder);
        void *data = NULL;
        size_t len = 0;
        int rc = tn_zip_read(z, i, 0, &data, &len);
        if (rc == 0 && (rc = tn_write_file(path, data, len, false)) == 0) {
            struct tc_strs *f = &s->files;
            char **v = f->n == f->cap ? realloc(f->v, (size_t)(f->cap = f->cap ? 2 * f->cap : 16) *
                                                          sizeof *v)
                                      : f->v;
            if (!v || !(v[f->n] = strdup(path))) {
                unlink(path);
                rc = tn_set_error(TN_ENOMEM, "out of memory");
            } else {
                f->v = v;
                f->n++;
            }
        }
        free(data);
        if (rc < 0)
            return rc;
        if (i == (size_t)lib)
            snprintf(so, so_len, "%s", path);
    }
    return 0;
}

/* --------------------------------------------------------------- loading */

/* The loaded libraries: libtensor-aoti, the stand-ins, the others the
 * model needs, and the model. */
struct loaded {
    void *handles[64];
    int n;
    void *model;
};

static void unload(struct loaded *l)
{
    if (l->model)
        dlclose(l->model);
    while (l->n > 0)
        dlclose(l->handles[--l->n]);
    l->model = NULL;
}

static const char *aoti_libdir(void)
{
    const char *env = getenv("TN_AOTI_LIBDIR");
    return env && *env ? env : TN_PKGLIBDIR;
}

static int load_lib(struct loaded *l, const char *path, int flags, const char *pkg)
{
    void *h = l->n < (int)(sizeof l->handles / sizeof *l->handles) ? dlopen(path, flags) : NULL;
    if (!h)
        return tn_set_error(TN_EIO, "%s: cannot load %s: %s", pkg, path,
                            l->n < 64 ? dlerror() : "too many libraries");
    l->handles[l->n++] = h;
    return 0;
}

static bool is_standin(const char *name)
{
    for (size_t i = 0; i < sizeof standins / sizeof *standins; i++)
        if (!strcmp(name, standins[i]))
            return true;
    return false;
}

static bool defined_somewhere(const struct loaded *l, const char *sym)
{
    for (int i = 0; i < l->n; i++)
        if (dlsym(l->handles[i], sym))
            return true;
    return false;
}

/* What a model library needs that tensorkit lacks: libtorch libraries it
 * does not stand in for, and undefined symbols none of the loaded
 * libraries define; and how many aoti_torch_* functions it calls. */
struct lacks {
    struct tc_strs libs, syms;
    int nshim;
};

static void lacks_free(struct lacks *k)
{
    tc_strs_free(&k->libs);
    tc_strs_free(&k->syms);
}

/* Loads libtensor-aoti, the stand-ins the model names and its other
 * libraries (not the model), and fills *k with what none of them
 * provides. 0, or an error for a library that does not load. */
static int resolve(const char *pkg, const char *so, struct loaded *l, struct lacks *k)
{
    struct tc_strs needed = {0}, undef = {0};
    if (tc_elf_needs(so, &needed, &undef) < 0)
        return tn_last_status();
    char path[4352];
    snprintf(path, sizeof path, "%s/libtensor-aoti.so", aoti_libdir());
    int rc = load_lib(l, path, RTLD_NOW | RTLD_LOCAL, pkg);
    for (int i = 0; rc == 0 && i < needed.n; i++) {
        const char *n = needed.v[i];
        snprintf(path, sizeof path, "%s/%s", aoti_libdir(), n);
        if (is_standin(n))
            rc = load_lib(l, path, RTLD_NOW | RTLD_LOCAL, pkg);
        else if (!strncmp(n, "libtorch", 8) || !strncmp(n, "libc10", 6))
            rc = tc_strs_push(&k->libs, n);
        else
            rc = load_lib(l, n, RTLD_LAZY | RTLD_LOCAL, pkg);
    }
    for (int i = 0; rc == 0 && i < undef.n; i++) {
        k->nshim += !strncmp(undef.v[i], "aoti_torch_", 11);
        if (!defined_somewhere(l, undef.v[i]))
            rc = tc_strs_push(&k->syms, undef.v[i]);
    }
    tc_strs_free(&needed);
    tc_strs_free(&undef);
    return rc;
}

/* resolve(), then: a package needing a libtorch we do not stand in for,
 * or calling a function none of the libraries provides, is refused here,
 * naming them, before any of its code runs; else the model is loaded. */
static int load(const char *pkg, const char *so, struct loaded *l)
{
    struct lacks k = {0};
    int rc = resolve(pkg, so, l, &k);
    char missing[1024] = "";
    size_t len = 0;
    for (int i = 0; i < k.syms.n && len < sizeof missing; i++)
        len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s", i ? ", " : "",
                                k.syms.v[i]);
    if (rc == 0 && k.libs.n)
        rc = tn_set_error(TN_ERUNTIME, "%s: its model needs %s, which tensorkit does not "
                          "stand in for (libtensor-aoti runs CPU packages; it stands in for "
                          "libtorch.so, libtorch_cpu.so and libc10.so)", pkg, k.libs.v[0]);
    else if (rc == 0 && k.syms.n)
        rc = tn_set_error(TN_ERUNTIME, "%s: its model calls %d function%s that "
                          "libtensor-aoti does not provide: %s", pkg, k.syms.n,
                          k.syms.n > 1 ? "s" : "", missing);
    lacks_free(&k);
    /* the model checks each input's dtype, sizes and strides against
     * those it was compiled for (AOTInductor's own checks, off by default:
     * without them a wrong shape reads out of bounds) */
    if (rc == 0 && setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", 0) < 0)
        rc = tn_set_error(TN_ENOMEM, "out of memory");
    if (rc == 0 && !(l->model = dlopen(so, RTLD_NOW | RTLD_LOCAL)))
        rc = tn_set_error(TN_EIO, "%s: cannot load its model: %s", pkg, dlerror());
    return rc;
}

/* Extracts the package's model library into a private folder (removed
 * before returning) and passes it to fn. */
static int with_library(const char *pkg, struct loaded *l,
                        int (*fn)(const char *pkg, const char *so, struct loaded *l, void *ctx),
                        void *ctx)
{
    struct scratch s = {0};
    char so[4352] = "";
    struct tn_zip *z = tn_zip_open(pkg);
    long lib = z ? model_library(z) : -1;
    int rc = !z || extract(z, lib, &s, so, sizeof so) < 0 ? -1 : fn(pkg, so, l, ctx);
    tn_zip_close(z);
    scratch_remove(&s); /* loaded or not: the files are no longer needed */
    return rc;
}

static int load_cb(const char *pkg, const char *so, struct loaded *l, void *ctx)
{
    (void)ctx;
    return load(pkg, so, l);
}

static int resolve_cb(const char *pkg, const char *so, struct loaded *l, void *ctx)
{
    return resolve(pkg, so, l, ctx);
}

int tc_aoti_check(const char *pkg, bool json)
{
    struct loaded l = {0};
    struct lacks k = {0};
    int rc = with_library(pkg, &l, resolve_cb, &k);
    unload(&l);
    if (rc < 0) {
        lacks_free(&k);
        return tc_fail();
    }
    int problems = k.libs.n + k.syms.n;
    if (json) {
        json_t *o = json_object(), *list = json_array();
        for (int i = 0; i < k.libs.n; i++)
            json_array_append_new(list, json_pack("{s:s}", "library", k.libs.v[i]));
        for (int i = 0; i < k.syms.n; i++)
            json_array_append_new(list, json_pack("{s:s}", "function", k.syms.v[i]));
        json_object_set_new(o, "package", json_string(pkg));
        json_object_set_new(o, "ok", json_boolean(problems == 0));
        json_object_set_new(o, "shim_functions", json_integer(k.nshim));
        json_object_set_new(o, "problems", list);
        tc_json_print(o);
    } else {
        for (int i = 0; i < k.libs.n; i++)
            printf("%s: needs %s, which tensorkit does not stand in for\n", pkg, k.libs.v[i]);
        for (int i = 0; i < k.syms.n; i++)
            printf("%s: calls %s, which libtensor-aoti does not provide\n", pkg, k.syms.v[i]);
        if (!problems)
            printf("%s: ok (an AOTInductor package; its model calls %d aoti_torch_* functions, "
                   "all in libtensor-aoti)\n", pkg, k.nshim);
    }
    lacks_free(&k);
    if (tn_stdout_flush() < 0)
        return tc_fail();
    return problems ? 1 : 0;
}

/* ------------------------------------------------------------------ run */

struct model {
    AOTIHandle h;
    delete_fn del;
    run_fn run;
    size_t nin, nout;
    const char **in_names, **out_names;
};

static void *entry(void *lib, const char *name, const char *pkg, int *rc)
{
    void *f = *rc ? NULL : dlsym(lib, name);
    if (!f && !*rc)
        *rc = tn_set_error(TN_EFORMAT, "%s: its model library has no %s", pkg, name);
    return f;
}

static int names(AOTIHandle h, count_fn count, name_fn name, size_t *n, const char ***out,
                 const char *pkg)
{
    if (count(h, n))
        return tn_set_error(TN_EFORMAT, "%s: its model does not say how many tensors it takes",
                            pkg);
    *out = calloc(*n ? *n : 1, sizeof **out);
    if (!*out)
        return tn_set_error(TN_ENOMEM, "out of memory");
    for (size_t i = 0; i < *n; i++)
        if (name(h, i, &(*out)[i]) || !(*out)[i])
            (*out)[i] = "";
    return 0;
}

static int model_open(void *lib, const char *pkg, struct model *m)
{
    int rc = 0;
    create_fn create = (create_fn)entry(lib, "AOTInductorModelContainerCreateWithDevice", pkg, &rc);
    m->del = (delete_fn)entry(lib, "AOTInductorModelContainerDelete", pkg, &rc);
    m->run = (run_fn)entry(lib, "AOTInductorModelContainerRun", pkg, &rc);
    count_fn nin = (count_fn)entry(lib, "AOTInductorModelContainerGetNumInputs", pkg, &rc);
    name_fn in = (name_fn)entry(lib, "AOTInductorModelContainerGetInputName", pkg, &rc);
    count_fn nout = (count_fn)entry(lib, "AOTInductorModelContainerGetNumOutputs", pkg, &rc);
    name_fn out = (name_fn)entry(lib, "AOTInductorModelContainerGetOutputName", pkg, &rc);
    if (rc)
        return rc;
    fflush(stderr); /* the model's runtime writes its own errors there */
    tn_clear_error();
    if (create(&m->h, 1, "cpu", NULL) || !m->h) {
        m->h = NULL;
        return tn_set_error(TN_EINVAL, "%s: its model failed to start (%s)", pkg,
                            tn_last_error()[0] ? tn_last_error() : "see above");
    }
    if ((rc = names(m->h, nin, in, &m->nin, &m->in_names, pkg)) < 0)
        return rc;
    return names(m->h, nout, out, &m->nout, &m->out_names, pkg);
}

static void model_close(struct model *m)
{
    if (m->h)
        m->del(m->h);
    free(m->in_names);
    free(m->out_names);
    memset(m, 0, sizeof *m);
}

static long input_index(const struct model *m, const char *name)
{
    for (size_t i = 0; i < m->nin; i++)
        if (!strcmp(m->in_names[i], name))
            return (long)i;
    return -1;
}

static const char *input_list(const struct model *m)
{
    static char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < m->nin && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "",
                                m->in_names[i][0] ? m->in_names[i] : "?");
    return m->nin ? buf : "none";
}

/* Sets input k to t, once. */
static int bind(const struct model *m, const char *pkg, struct tn_tensor **in, long k,
                struct tn_value *t, const char *arg)
{
    if (t->kind != TN_VALUE_TENSOR)
        return tn_set_error(TN_EINVAL, "--input %s: not a tensor", arg);
    if (in[k])
        return tn_set_error(TN_EINVAL, "--input %s: %s's input '%s' is given twice", arg, pkg,
                            m->in_names[k]);
    in[k] = tn_retain(t->v.tensor);
    return 0;
}

/* Binds the --input tensors to the model's inputs: first by name (NAME=FILE
 * binds FILE's member NAME or its only tensor; a tensor of FILE named as an
 * input binds to it), then the other tensors of the FILEs, in order, to the
 * inputs left. */
static int bind_inputs(const struct model *m, const char *pkg, struct tn_tensor **in)
{
    struct tn_value **files = calloc((size_t)tc.ninputs + 1, sizeof *files);
    int rc = files ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        size_t next = 0;
        for (int a = 0; rc == 0 && a < tc.ninputs; a++) {
            const char *arg = tc.inputs[a], *eq = strchr(arg, '=');
            char name[1024] = "";
            if (eq && (size_t)(eq - arg) < sizeof name)
                snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
            struct tn_value *f = files[a];
            if (!f && !(f = files[a] = tn_io_load_dict(eq ? eq + 1 : arg)))
                rc = tn_last_status();
            else if (*name && pass == 0) {
                long k = input_index(m, name);
                struct tn_value *t = tn_value_get(f, name);
                if (!t && f->v.dict.n == 1)
                    t = f->v.dict.vals[0];
                rc = k < 0 ? tn_set_error(TN_EINVAL, "--input %s: %s has no input '%s' (its "
                                          "inputs: %s)", arg, pkg, name, input_list(m))
                     : !t ? tn_set_error(TN_EINVAL, "%s: no tensor '%s' (and more than one)",
                                         eq + 1, name)
                          : bind(m, pkg, in, k, t, arg);
            }
            for (size_t i = 0; !*name && rc == 0 && i < f->v.dict.n; i++) {
                struct tn_value *key = f->v.dict.keys[i];
                long k = key->kind == TN_VALUE_STR ? input_index(m, key->v.str.s) : -1;
                if ((k >= 0) != (pass == 0))
                    continue;
                while (k < 0 && next < m->nin && in[next])
                    next++;
                if (k < 0 && next == m->nin)
                    rc = tn_set_error(TN_EINVAL, "--input %s: more tensors than %s's %zu "
                                      "inputs (%s)", arg, pkg, m->nin, input_list(m));
                else
                    rc = bind(m, pkg, in, k < 0 ? (long)next : k, f->v.dict.vals[i], arg);
            }
        }
    }
    for (int a = 0; files && a < tc.ninputs; a++)
        tn_value_release(files[a]);
    free(files);
    for (size_t i = 0; rc == 0 && i < m->nin; i++)
        if (!in[i])
            rc = tn_set_error(TN_EINVAL, "%s: no value for its input %zu ('%s'; its inputs: %s); "
                              "give --input", pkg, i, m->in_names[i], input_list(m));
    return rc;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs the model once: the inputs (contiguous: the model's code assumes the
 * layout it was compiled for) are given as new handles, which it takes;
 * the outputs come back as handles we own, into the dict *out. */
static int run_once(const struct model *m, const char *pkg, struct tn_tensor **in,
                    struct tn_value **out)
{
    AtenTensorHandle *ih = calloc(m->nin + 1, sizeof *ih), *oh = calloc(m->nout + 1, sizeof *oh);
    int rc = ih && oh ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < m->nin; i++)
        if (!(ih[i] = tn_contiguous(in[i])))
            rc = tn_last_status();
    if (rc == 0) {
        fflush(stderr);
        tn_clear_error();
        int32_t err = m->run(m->h, ih, m->nin, oh, m->nout, NULL, NULL);
        memset(ih, 0, (m->nin + 1) * sizeof *ih); /* taken by the model, even on failure */
        if (err)
            rc = tn_set_error(TN_EINVAL, "%s: its model's run failed (%s)", pkg,
                              tn_last_error()[0] ? tn_last_error() : "see above");
    }
    *out = rc == 0 ? tn_value_dict() : NULL;
    for (size_t i = 0; rc == 0 && i < m->nout; i++) {
        char name[64];
        snprintf(name, sizeof name, "output%zu", i);
        struct tn_value *t = oh[i] ? tn_value_tensor(oh[i]) : NULL;
        if (!t || tn_value_set(*out, tn_value_str(m->out_names[i][0] ? m->out_names[i] : name),
                               t) < 0)
            rc = tn_last_status();
    }
    for (size_t i = 0; ih && i < m->nin; i++)
        tn_release(ih[i]);
    for (size_t i = 0; oh && i < m->nout; i++)
        tn_release(oh[i]);
    free(ih);
    free(oh);
    if (rc < 0) {
        tn_value_release(*out);
        *out = NULL;
    }
    return rc;
}

static int refuse_options(void)
{
    const struct {
        bool given;
        const char *name;
    } o[] = {
        {tc.weights != NULL, "--weights (the package holds its weights)"},
        {tc.grads != NULL, "--grads"},
        {tc.interpret, "--interpret"},
        {tc.explain, "--explain"},
        {tc.strict, "--strict"},
        {tc.recompile_limit > 0, "--recompile-limit"},
        {tc.cache_dir != NULL, "--cache-dir"},
    };
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        if (o[i].given) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s does not apply to an AOTInductor package", o[i].name);
            tc_usage_error("%s", msg);
        }
    return 0;
}

int tc_aoti_run(const char *pkg)
{
    refuse_options();
    /* The package's kernels run on OpenMP's threads (OMP_NUM_THREADS),
     * whose workers spin between regions: libtensor's own pool on the same
     * cores fought them (3.9 ms instead of 27 us for the transformer
     * block's run at 2 threads), so the fallback ops run on the calling
     * thread unless TN_NUM_THREADS asks otherwise. */
    if (!getenv("TN_NUM_THREADS"))
        tn_set_num_threads(1);
    struct loaded l = {0};
    struct model m = {0};
    struct tn_tensor **in = NULL;
    struct tn_value *out = NULL;
    double t0 = now();
    int rc = with_library(pkg, &l, load_cb, NULL);
    if (rc == 0 && (rc = model_open(l.model, pkg, &m)) == 0 &&
        !(in = calloc(m.nin + 1, sizeof *in)))
        rc = tn_set_error(TN_ENOMEM, "out of memory");
    if (rc == 0)
        rc = bind_inputs(&m, pkg, in);
    double load_s = now() - t0, best = 0;
    for (int r = 0; rc == 0 && r < tc.repeat; r++) {
        tn_value_release(out);
        out = NULL;
        double t = now();
        rc = run_once(&m, pkg, in, &out);
        t = now() - t;
        if (r == 0 || t < best)
            best = t;
    }
    if (rc == 0 && tc.time) {
        fprintf(stderr, "tcompile: %s: load took %.3f ms\n", pkg, load_s * 1e3);
        fprintf(stderr, "tcompile: %s: run took %.4f ms%s\n", pkg, best * 1e3,
                tc.repeat > 1 ? " (the fastest of --repeat)" : "");
    }
    if (rc == 0)
        rc = tc_write_tensors(out, tc.output);
    tn_value_release(out);
    for (size_t i = 0; in && i < m.nin; i++)
        tn_release(in[i]);
    free(in);
    model_close(&m);
    unload(&l);
    return rc < 0 ? tc_fail() : 0;
}
