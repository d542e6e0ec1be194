/*
 * io/load.c: any input file, read once and loaded by its content: torch
 * zip checkpoints, safetensors, .npz, .npy, legacy (pre-1.6) checkpoints
 * and Hugging Face sharded indexes (model.safetensors.index.json), so
 * that a tool reads "-" and pipes as it reads files.
 */
#include "io/internal.h"

#include <tensor/dcp.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The names tn_io_file_format gives, by enum tn__io_format. */
static const char *const format_names[] = {
    [TN_IO_FMT_TORCH] = "torch",   [TN_IO_FMT_SAFETENSORS] = "safetensors",
    [TN_IO_FMT_NPZ] = "npz",       [TN_IO_FMT_NPY] = "npy",
    [TN_IO_FMT_LEGACY] = "legacy", [TN_IO_FMT_SHARDED] = "sharded",
    [TN_IO_FMT_DCP] = "dcp",
};

struct tn_io_file {
    char *path;
    enum tn__io_format format;
    struct tn_io_map *map;
    struct tn_zip *zip;    /* torch, npz */
    json_t *index;         /* sharded: the index object */
    char **shards;         /* sharded: paths, in order of first use */
    size_t nshards;
    struct tn_dcp *dcp;    /* dcp: the folder, checked */
};

/* Whether z (borrowed) is an .npz: at least one member, every name ending
 * in .npy. */
static bool zip_is_npz(const struct tn_zip *z)
{
    if (tn_zip_count(z) == 0)
        return false;
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const char *nm = tn_zip_entry_at(z, i)->name;
        size_t l = strlen(nm);
        if (l < 4 || strcmp(nm + l - 4, ".npy"))
            return false;
    }
    return true;
}

/* A JSON object with a "weight_map" of tensor name -> shard file name. */
static int open_index(struct tn_io_file *f)
{
    json_error_t err;
    f->index = json_loadb((const char *)f->map->addr, f->map->len, JSON_REJECT_DUPLICATES, &err);
    json_t *wm = f->index ? json_object_get(f->index, "weight_map") : NULL;
    if (!json_is_object(wm))
        return tn_set_error(TN_EFORMAT, "%s: not a checkpoint, safetensors, .npy or .npz file",
                            f->path);
    const char *slash = strrchr(f->path, '/');
    size_t dirlen = slash && strcmp(f->path, "-") ? (size_t)(slash - f->path) + 1 : 0;
    const char *key;
    json_t *val;
    f->shards = calloc(json_object_size(wm) + 1, sizeof *f->shards);
    if (!f->shards)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", f->path);
    json_object_foreach(wm, key, val) {
        const char *s = json_string_value(val);
        /* Shards live beside the index: a name with a folder in it, or "..",
         * would let an index read any file. */
        if (!s || !*s || strchr(s, '/') || !strcmp(s, "..") || !strcmp(s, "."))
            return tn_set_error(TN_EFORMAT, "%s: weight_map: %s: the shard must be a file name "
                                "beside the index", f->path, key);
        size_t i = 0;
        while (i < f->nshards && strcmp(f->shards[i] + dirlen, s))
            i++;
        if (i < f->nshards)
            continue;
        char *p = malloc(dirlen + strlen(s) + 1);
        if (!p)
            return tn_set_error(TN_ENOMEM, "%s: out of memory", f->path);
        memcpy(p, f->path, dirlen);
        strcpy(p + dirlen, s);
        f->shards[f->nshards++] = p;
    }
    if (!f->nshards)
        return tn_set_error(TN_EFORMAT, "%s: weight_map names no shard", f->path);
    f->format = TN_IO_FMT_SHARDED;
    return 0;
}

/* Opens any input (tensor/io.h) and finds its format from its first bytes,
 * once, for every reader (tckpt, tcompile, tn_load): a folder holding
 * .metadata is a DCP checkpoint, a zip is an .npz when every member is a .npy
 * and a torch checkpoint otherwise, then .npy's magic, safetensors' header
 * length followed by '{', pre-1.6 torch's PROTO 2 + LONG1, and a JSON object
 * is taken for a sharded index (its shard names confined to the index's
 * folder). Nothing but the zip's central directory and the index is parsed
 * here. The caller owns the handle (tn_io_file_close). NULL with an error
 * naming path. */
struct tn_io_file *tn_io_file_open(const char *path)
{
    struct tn_io_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        tn_set_error(TN_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    const char *label = strcmp(path, "-") ? path : "<stdin>";
    if (strcmp(path, "-") && tn_dcp_is_dir(path)) {
        if (!(f->dcp = tn_dcp_open(path)))
            goto fail;
        f->format = TN_IO_FMT_DCP;
        return f;
    }
    f->map = tn__io_map_open(path);
    if (!f->map)
        goto fail;
    const unsigned char *h = f->map->addr;
    size_t n = f->map->len;
    if (n >= 4 && !memcmp(h, "PK\3\4", 4)) {
        if (!(f->zip = tn__zip_open_map(f->map, label)))
            goto fail;
        f->format = zip_is_npz(f->zip) ? TN_IO_FMT_NPZ : TN_IO_FMT_TORCH;
    } else if (n >= 6 && !memcmp(h, "\x93NUMPY", 6)) {
        f->format = TN_IO_FMT_NPY;
    } else if (n >= 10 && h[8] == '{' &&
               (((uint64_t)h[7] << 56 | (uint64_t)h[6] << 48 | (uint64_t)h[5] << 40 |
                 (uint64_t)h[4] << 32 | (uint64_t)h[3] << 24 | (uint64_t)h[2] << 16 |
                 (uint64_t)h[1] << 8 | h[0]) - 2) <= 100000000ull - 2) {
        f->format = TN_IO_FMT_SAFETENSORS;
    } else if (n >= 3 && h[0] == 0x80 && h[2] == 0x8a) {
        f->format = TN_IO_FMT_LEGACY;
    } else {
        size_t i = 0;
        while (i < n && (h[i] == ' ' || h[i] == '\n' || h[i] == '\r' || h[i] == '\t'))
            i++;
        if (i < n && h[i] == '{') {
            if (open_index(f) < 0)
                goto fail;
        } else {
            tn_set_error(TN_EFORMAT, "%s: not a checkpoint, safetensors, .npy or .npz file", label);
            goto fail;
        }
    }
    return f;
fail:
    tn_io_file_close(f);
    return NULL;
}

/* The format's name (a static string, tensor/io.h). */
const char *tn_io_file_format(const struct tn_io_file *f) { return format_names[f->format]; }
/* The format as enum tn__io_format (io/internal.h). */
enum tn__io_format tn__io_file_kind(const struct tn_io_file *f) { return f->format; }
/* The DCP folder of a dcp input (borrowed from f), else NULL. */
struct tn_dcp *tn_io_file_dcp(const struct tn_io_file *f) { return f->dcp; }
/* The archive of a torch or npz input (borrowed from f), else NULL. */
struct tn_zip *tn_io_file_zip(const struct tn_io_file *f) { return f->zip; }
/* The number of shards of a sharded input (0 for others). */
size_t tn_io_file_shards(const struct tn_io_file *f) { return f->nshards; }
/* The i-th shard's path (i < tn_io_file_shards; borrowed from f). */
const char *tn_io_file_shard(const struct tn_io_file *f, size_t i)
{
    return i < f->nshards ? f->shards[i] : NULL;
}

/* A JSON scalar as a value (the index's metadata: total_size and such). */
static struct tn_value *json_scalar(json_t *j)
{
    if (json_is_string(j))
        return tn_value_str(json_string_value(j));
    if (json_is_integer(j))
        return tn_value_int(json_integer_value(j));
    if (json_is_real(j))
        return tn_value_float(json_real_value(j));
    if (json_is_boolean(j))
        return tn_value_bool(json_is_true(j));
    return tn_value_none();
}

/* Every tensor of the shards, in the index's order; a name the index puts
 * in a shard that lacks it is an error, names it does not list are kept
 * after the listed ones. */
static struct tn_value *load_sharded(struct tn_io_file *f, const struct tn_load_options *opts,
                                     struct tn_value **metadata)
{
    struct tn_value **parts = calloc(f->nshards, sizeof *parts);
    struct tn_value *out = tn_value_odict();
    if (!parts || !out) {
        tn_set_error(TN_ENOMEM, "%s: out of memory", f->path);
        goto fail;
    }
    for (size_t i = 0; i < f->nshards; i++) {
        struct tn_io_file *s = tn_io_file_open(f->shards[i]);
        if (s && s->format == TN_IO_FMT_SHARDED) {
            tn_set_error(TN_EFORMAT, "%s: shard %s is itself an index", f->path, f->shards[i]);
            tn_io_file_close(s);
            goto fail;
        }
        parts[i] = s ? tn_io_file_load(s, opts, NULL) : NULL;
        tn_io_file_close(s);
        if (!parts[i])
            goto fail;
        if (parts[i]->kind != TN_VALUE_DICT && parts[i]->kind != TN_VALUE_ODICT) {
            tn_set_error(TN_EFORMAT, "%s: shard %s does not hold a dict of tensors", f->path,
                         f->shards[i]);
            goto fail;
        }
    }
    const char *slash = strrchr(f->path, '/');
    size_t dirlen = slash && strcmp(f->path, "-") ? (size_t)(slash - f->path) + 1 : 0;
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(f->index, "weight_map"), key, val) {
        size_t i = 0;
        while (strcmp(f->shards[i] + dirlen, json_string_value(val)))
            i++;
        struct tn_value *t = tn_value_get(parts[i], key);
        if (!t) {
            tn_set_error(TN_EFORMAT, "%s: weight_map puts %s in %s, which does not hold it",
                         f->path, key, f->shards[i]);
            goto fail;
        }
        if (tn_value_set(out, tn_value_str(key), tn_value_retain(t)) < 0)
            goto fail;
    }
    for (size_t i = 0; i < f->nshards; i++)
        for (size_t k = 0; k < parts[i]->v.dict.n; k++) {
            struct tn_value *kv = parts[i]->v.dict.keys[k];
            if (kv->kind != TN_VALUE_STR || !tn_value_get(out, kv->v.str.s))
                if (tn_value_set(out, tn_value_retain(kv), tn_value_retain(parts[i]->v.dict.vals[k])) < 0)
                    goto fail;
        }
    json_t *meta = json_object_get(f->index, "metadata");
    if (metadata && json_is_object(meta)) {
        *metadata = tn_value_dict();
        json_object_foreach(meta, key, val)
            if (!*metadata || tn_value_set(*metadata, tn_value_str(key), json_scalar(val)) < 0)
                goto fail;
    }
    for (size_t i = 0; i < f->nshards; i++)
        tn_value_release(parts[i]);
    free(parts);
    return out;
fail:
    for (size_t i = 0; parts && i < f->nshards; i++)
        tn_value_release(parts[i]);
    free(parts);
    tn_value_release(out);
    if (metadata) {
        tn_value_release(*metadata);
        *metadata = NULL;
    }
    return NULL;
}

/* A bare .npy (f's mapping, untrusted, parsed by tn_npy_parse) as a new
 * ODICT {"<stem>": t}, stem the file name without .npy ("<stdin>" for -).
 * NULL with an error naming the file. */
static struct tn_value *load_npy(struct tn_io_file *f)
{
    const char *label = strcmp(f->path, "-") ? f->path : "<stdin>";
    struct tn_tensor *t = tn_npy_parse(f->map->addr, f->map->len, label);
    if (!t)
        return NULL;
    const char *base = strrchr(label, '/');
    base = base ? base + 1 : label;
    size_t n = strlen(base);
    if (n > 4 && !strcmp(base + n - 4, ".npy"))
        n -= 4;
    struct tn_value *d = tn_value_odict();
    if (!d || tn_value_set(d, tn_value_str_n(base, n), tn_value_tensor(t)) < 0) {
        tn_value_release(d);
        d = NULL;
    }
    tn_release(t);
    return d;
}

/* The content as a new value by the format tn_io_file_open found
 * (tensor/io.h); every byte is checked by that format's reader. opts NULL
 * means the defaults (2.x's weights_only allowlist). *metadata (may be NULL)
 * receives safetensors' or the index's metadata, or NULL. NULL with an error
 * naming the file. */
struct tn_value *tn_io_file_load(struct tn_io_file *f, const struct tn_load_options *opts,
                                 struct tn_value **metadata)
{
    if (metadata)
        *metadata = NULL;
    const char *label = strcmp(f->path, "-") ? f->path : "<stdin>";
    switch (f->format) {
    case TN_IO_FMT_TORCH: return tn_ckpt_load_zip(f->zip, opts);
    case TN_IO_FMT_NPZ: return tn_npz_load_zip(f->zip);
    case TN_IO_FMT_SAFETENSORS: return tn__st_load_map(f->map, label, metadata);
    case TN_IO_FMT_NPY: return load_npy(f);
    case TN_IO_FMT_SHARDED: return load_sharded(f, opts, metadata);
    case TN_IO_FMT_DCP: return tn_dcp_load_all(f->dcp, false);
    case TN_IO_FMT_LEGACY: break;
    }
    return tn__legacy_load(f->map, label, opts);
}

/* Releases f and what it holds (values loaded from it keep their own
 * references to the mapping). NULL is fine. */
void tn_io_file_close(struct tn_io_file *f)
{
    if (!f)
        return;
    tn_zip_close(f->zip);
    tn_dcp_close(f->dcp);
    tn__io_map_release(f->map);
    json_decref(f->index);
    for (size_t i = 0; i < f->nshards; i++)
        free(f->shards[i]);
    free(f->shards);
    free(f->path);
    free(f);
}

/* The format's name for path (a static string), or NULL with an error:
 * tn_io_file_open then close. */
const char *tn_io_detect(const char *path)
{
    struct tn_io_file *f = tn_io_file_open(path);
    const char *fmt = f ? tn_io_file_format(f) : NULL; /* a static string */
    tn_io_file_close(f);
    return fmt;
}

/* Opens, loads with the defaults and closes: a new DICT/ODICT (name ->
 * tensor, as weights and inputs are), or NULL with an error naming path, also
 * when the file holds something else. */
struct tn_value *tn_io_load_dict(const char *path)
{
    struct tn_io_file *f = tn_io_file_open(path);
    struct tn_value *v = f ? tn_io_file_load(f, NULL, NULL) : NULL;
    tn_io_file_close(f);
    if (v && v->kind != TN_VALUE_DICT && v->kind != TN_VALUE_ODICT) {
        tn_set_error(TN_EFORMAT, "%s: holds a %s, not a dict of tensors", path,
                     tn_value_kind_name(v->kind));
        tn_value_release(v);
        v = NULL;
    }
    return v;
}
