/*
 * graph/archive.c: where graphs come from: a JSON file, standard input, or
 * the .pt2 archive torch.export.save writes (PyTorch >= 2.8: a zip with
 * <archive>/models/<model>.json and raw weight records under
 * <archive>/data/weights/ described by model_weights_config.json; older
 * archives hold serialized_exported_program.json and pickled weights,
 * whose graph we read and whose weights we leave to --weights).
 */
#include "graph/internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CONFIG (64u << 20)

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The first member whose name ends with `suffix` and whose folder part
 * (before the suffix) ends with `folder` ("" for any). */
static long find_member(const struct tn_zip *z, const char *folder, const char *suffix)
{
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const char *n = tn_zip_entry_at(z, i)->name;
        if (ends_with(n, suffix) && (!*folder || strstr(n, folder)))
            return (long)i;
    }
    return -1;
}

/* A weight record's tensor from its TensorMeta; NULL with an error. */
static struct tn_tensor *weight_tensor(struct tn_zip *z, const char *label, const char *name,
                                       const char *member, json_t *meta, bool copy)
{
    long at = tn_zip_find(z, member);
    json_t *sizes = json_object_get(meta, "sizes"), *strides = json_object_get(meta, "strides");
    int64_t sz[TN_MAX_DIMS], str[TN_MAX_DIMS];
    enum tn_dtype dt = tn_graph_dtype((int)json_integer_value(json_object_get(meta, "dtype")));
    if (at < 0) {
        tn_set_error(TN_EFORMAT, "%s: weight '%s': no member %s", label, name, member);
        return NULL;
    }
    if (dt == TN_DTYPE_UNSET || !json_is_array(sizes) || !json_is_array(strides) ||
        json_array_size(sizes) > TN_MAX_DIMS || json_array_size(strides) != json_array_size(sizes)) {
        tn_set_error(TN_EFORMAT, "%s: weight '%s': a tensor_meta we do not read", label, name);
        return NULL;
    }
    int nd = (int)json_array_size(sizes);
    int64_t span = 1; /* elements the geometry reaches */
    for (int d = 0; d < nd; d++) {
        json_t *a = json_object_get(json_array_get(sizes, (size_t)d), "as_int");
        json_t *b = json_object_get(json_array_get(strides, (size_t)d), "as_int");
        if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
            json_integer_value(b) < 0 || json_integer_value(a) > ((int64_t)1 << 40) ||
            json_integer_value(b) > ((int64_t)1 << 40)) {
            tn_set_error(TN_EFORMAT, "%s: weight '%s': sizes and strides must be small "
                         "non-negative integers", label, name);
            return NULL;
        }
        sz[d] = json_integer_value(a);
        str[d] = json_integer_value(b);
        if (sz[d] == 0)
            span = 0;
        else if (span)
            span += (sz[d] - 1) * str[d];
    }
    json_t *off = json_object_get(json_object_get(meta, "storage_offset"), "as_int");
    int64_t offset = json_is_integer(off) ? json_integer_value(off) : 0;
    if (offset < 0 || offset > ((int64_t)1 << 40)) {
        tn_set_error(TN_EFORMAT, "%s: weight '%s': a bad storage_offset", label, name);
        return NULL;
    }
    const struct tn_zip_entry *e = tn_zip_entry_at(z, (size_t)at);
    size_t need = (size_t)(span ? offset + span : 0) * tn_dtype_size(dt);
    if (need > e->size) {
        tn_set_error(TN_EFORMAT, "%s: weight '%s': %s holds %llu bytes but the tensor needs "
                     "%zu", label, name, member, (unsigned long long)e->size, need);
        return NULL;
    }
    struct tn_storage *s = NULL;
    const void *data = e->method == 0 && !copy ? tn_zip_data(z, (size_t)at) : NULL;
    if (data && (uintptr_t)data % tn_dtype_size(dt) == 0) {
        s = tn_zip_storage(z, (size_t)at, e->size);
    } else { /* deflated or misaligned: a copy */
        void *buf;
        size_t len;
        if (tn_zip_read(z, (size_t)at, 0, &buf, &len) < 0)
            return NULL;
        if ((s = tn_storage_new(len, TN_CPU)))
            memcpy(s->data, buf, len);
        free(buf);
    }
    if (!s)
        return NULL;
    struct tn_tensor *t = tn_tensor_from_storage(s, offset, sz, nd, str, dt);
    tn_storage_release(s);
    return t;
}

/* Reads <prefix>data/<kind>/<config> into dict d (name -> tensor). */
static int read_weights(struct tn_zip *z, const char *label, const char *prefix,
                        const char *kind, const char *config, struct tn_value *d, bool copy)
{
    char path[1024];
    snprintf(path, sizeof path, "%sdata/%s/%s", prefix, kind, config);
    long at = tn_zip_find(z, path);
    if (at < 0)
        return TN_OK;
    void *buf;
    size_t len;
    if (tn_zip_read(z, (size_t)at, MAX_CONFIG, &buf, &len) < 0)
        return tn_last_status();
    json_error_t err;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    free(buf);
    json_t *cfg = json_object_get(root, "config");
    int rc = TN_OK;
    if (!json_is_object(cfg)) {
        json_decref(root);
        return tn_set_error(TN_EFORMAT, "%s: %s is not a weights config", label, path);
    }
    const char *name;
    json_t *w;
    json_object_foreach(cfg, name, w) {
        const char *pn = json_string_value(json_object_get(w, "path_name"));
        if (!pn || strchr(pn, '/') || strlen(pn) > 256) {
            rc = tn_set_error(TN_EFORMAT, "%s: weight '%s': a bad path_name", label, name);
            break;
        }
        if (json_is_true(json_object_get(w, "use_pickle"))) {
            rc = tn_set_error(TN_EFORMAT, "%s: weight '%s' is pickled (a tensor subclass or "
                              "custom object), which we do not read", label, name);
            break;
        }
        snprintf(path, sizeof path, "%sdata/%s/%s", prefix, kind, pn);
        struct tn_tensor *t = weight_tensor(z, label, name, path, json_object_get(w, "tensor_meta"),
                                            copy);
        if (!t) {
            rc = tn_last_status();
            break;
        }
        struct tn_value *k = tn_value_str(name), *v = tn_value_tensor(t);
        tn_release(t);
        if (!k || !v) {
            tn_value_release(k);
            tn_value_release(v);
            rc = tn_set_error(TN_ENOMEM, "%s: out of memory", label);
            break;
        }
        if ((rc = tn_value_set(d, k, v)) < 0)
            break;
    }
    json_decref(root);
    return rc;
}

static struct tn_graph *load_pt2(struct tn_zip *z, const char *label,
                                 const struct tn_graph_limits *lim, struct tn_value **weights,
                                 bool copy)
{
    long at = find_member(z, "/models/", ".json");
    if (at < 0)
        at = find_member(z, "", "serialized_exported_program.json");
    if (at < 0) {
        tn_set_error(TN_EFORMAT, "%s: a zip without models/<name>.json (not a .pt2 archive)",
                     label);
        return NULL;
    }
    const char *member = tn_zip_entry_at(z, (size_t)at)->name;
    size_t limit = lim && lim->max_bytes ? lim->max_bytes : 256u << 20;
    void *buf;
    size_t len;
    if (tn_zip_read(z, (size_t)at, limit, &buf, &len) < 0)
        return NULL;
    char where[1024];
    snprintf(where, sizeof where, "%s!%s", label, member);
    struct tn_graph *g = tn_graph_parse(buf, len, where, lim);
    free(buf);
    if (!g || !weights)
        return g;
    /* the archive folder: what precedes "models/" */
    char prefix[512] = "";
    const char *m = strstr(member, "models/");
    if (m && (size_t)(m - member) < sizeof prefix)
        snprintf(prefix, sizeof prefix, "%.*s", (int)(m - member), member);
    struct tn_value *d = tn_value_dict();
    if (!d || read_weights(z, label, prefix, "weights", "model_weights_config.json", d, copy) < 0 ||
        read_weights(z, label, prefix, "constants", "model_constants_config.json", d, copy) < 0) {
        tn_value_release(d);
        tn_graph_free(g);
        return NULL;
    }
    if (d->v.dict.n == 0) {
        tn_value_release(d);
        d = NULL;
    }
    *weights = d;
    return g;
}

/* All of a stream, at most `limit` bytes. */
static char *slurp(FILE *f, const char *label, size_t limit, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap > limit) {
                free(buf);
                tn_set_error(TN_EFORMAT, "%s: more than %zu bytes", label, limit);
                return NULL;
            }
            char *p = realloc(buf, cap * 2);
            if (!p)
                break;
            buf = p;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                free(buf);
                tn_set_error(TN_EIO, "%s: %s", label, strerror(errno));
                return NULL;
            }
            *len = n;
            return buf;
        }
    }
    free(buf);
    tn_set_error(TN_ENOMEM, "%s: out of memory", label);
    return NULL;
}

struct tn_graph *tn_graph_load(const char *path, const struct tn_graph_limits *lim,
                               struct tn_value **weights)
{
    size_t limit = lim && lim->max_bytes ? lim->max_bytes : 256u << 20;
    bool std = !strcmp(path, "-");
    const char *label = std ? "<stdin>" : path;
    if (weights)
        *weights = NULL;
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f) {
        tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        tn_set_error(TN_EIO, "%s: %s", path, strerror(EISDIR));
        if (!std)
            fclose(f);
        return NULL;
    }
    bool regular = !std && S_ISREG(st.st_mode);
    if (regular) { /* a file's archive is mapped, and its weights map into it */
        char magic[4] = {0};
        size_t k = fread(magic, 1, 4, f);
        if (k == 4 && !memcmp(magic, "PK\3\4", 4)) {
            fclose(f);
            struct tn_zip *z = tn_zip_open(path);
            struct tn_graph *g = z ? load_pt2(z, label, lim, weights, false) : NULL;
            tn_zip_close(z); /* the weights keep the mapping alive */
            return g;
        }
        rewind(f);
    }
    size_t len;
    char *text = slurp(f, label, limit, &len);
    if (!std)
        fclose(f);
    if (!text)
        return NULL;
    struct tn_graph *g;
    if (len >= 4 && !memcmp(text, "PK\3\4", 4)) {
        struct tn_zip *z = tn_zip_open_memory(text, len, label);
        g = z ? load_pt2(z, label, lim, weights, true) : NULL; /* copies: text goes */
        tn_zip_close(z);
    } else {
        g = tn_graph_parse(text, len, label, lim);
    }
    free(text);
    return g;
}
