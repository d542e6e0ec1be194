/*
 * io/dcp.c: reading distributed checkpoints (torch.distributed.checkpoint
 * folders).  `.metadata` goes through the restricted pickle machine in its
 * DCP mode (unpickle.c), is rebuilt as C structures and checked whole
 * against the files before any item is read; items are torch.save zips
 * read through tn_ckpt_load_zip over the mapped bytes.
 */
#include "io/internal.h"

#include <tensor/dcp.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_METADATA (1ull << 30)

struct dcp_file {
    char *name;
    struct tn_io_map *map;
};

struct tn_dcp {
    char *dir;
    struct tn_value *meta;   /* the unpickled Metadata (keeps paths alive) */
    struct tn_dcp_item *items;
    size_t n;
    struct tn_value *index;  /* DICT fqn -> INT item index */
    struct dcp_file *files;
    size_t nfiles;
    char *version;
};

/* True when `path` is a directory holding a regular file .metadata (the
 * mark of a torch.distributed.checkpoint save).  Only stats; false on any
 * error, and leaves no error set. */
bool tn_dcp_is_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return false;
    size_t n = strlen(path);
    char *p = malloc(n + 11);
    if (!p)
        return false;
    memcpy(p, path, n);
    strcpy(p + n, "/.metadata");
    bool ok = stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* The class name of a DCP instance ("Metadata"), or "" for any other value. */
static const char *cls(const struct tn_value *v)
{
    if (!v || v->kind != TN_VALUE_ODICT || !v->v.dict.attrs)
        return "";
    const struct tn_value *c = tn_value_get(v->v.dict.attrs, "__class__");
    if (!c || c->kind != TN_VALUE_STR)
        return "";
    const char *dot = strrchr(c->v.str.s, '.');
    return dot ? dot + 1 : c->v.str.s;
}

/* A tuple of ints as dims (each >= 0, at most TN_MAX_DIMS). */
static int dims(const struct tn_dcp *d, const char *fqn, const char *what,
                const struct tn_value *t, int64_t *out, int *n)
{
    if (!t || t->kind != TN_VALUE_TUPLE || t->v.seq.n > TN_MAX_DIMS)
        return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: %s is not a tuple of at most %d ints",
                            d->dir, fqn, what, TN_MAX_DIMS);
    for (size_t i = 0; i < t->v.seq.n; i++) {
        const struct tn_value *x = t->v.seq.items[i];
        if (x->kind != TN_VALUE_INT || x->v.i < 0 || x->v.i > (INT64_C(1) << 48))
            return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: %s[%zu] is not a size", d->dir,
                                fqn, what, i);
        out[i] = x->v.i;
    }
    *n = (int)t->v.seq.n;
    return 0;
}

/* The element count of a chunk of sizes s[0..n): the caller has bounded each
 * size and checked the product against overflow (tensor_item). */
static uint64_t volume(const int64_t *s, int n)
{
    uint64_t v = 1;
    for (int i = 0; i < n; i++)
        v *= (uint64_t)s[i]; /* each below 2^48; checked against overflow by the caller */
    return v;
}

/* A tensor item's dtype, sizes and chunks (their storage comes later). */
static int tensor_item(struct tn_dcp *d, struct tn_dcp_item *it, const struct tn_value *md)
{
    const struct tn_value *props = tn_value_get(md, "properties");
    const struct tn_value *dt = NULL, *layout = NULL;
    if (props && !strcmp(cls(props), "TensorProperties")) {
        const struct tn_value *st = tn_value_get(props->v.dict.attrs, "__state__");
        if (st && st->kind == TN_VALUE_TUPLE && st->v.seq.n >= 2) {
            dt = st->v.seq.items[0];
            layout = st->v.seq.items[1];
        } else {
            dt = tn_value_get(props, "dtype");
            layout = tn_value_get(props, "layout");
        }
    }
    if (!dt || dt->kind != TN_VALUE_GLOBAL || strncmp(dt->v.str.s, "torch.", 6))
        return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: no dtype in its properties", d->dir,
                            it->fqn);
    it->dtype = tn_dtype_from_name(dt->v.str.s + 6);
    if (it->dtype == TN_DTYPE_UNSET)
        return tn_set_error(TN_EDTYPE, "%s: %s: dtype %s is not supported by tensorkit", d->dir,
                            it->fqn, dt->v.str.s);
    if (layout && (layout->kind != TN_VALUE_STR || strcmp(layout->v.str.s, "torch.strided")))
        return tn_set_error(TN_EFORMAT, "%s: %s: only strided tensors are supported", d->dir,
                            it->fqn);
    if (dims(d, it->fqn, "size", tn_value_get(md, "size"), it->sizes, &it->ndim) < 0)
        return tn_last_status();
    uint64_t total = 1;
    for (int i = 0; i < it->ndim; i++) {
        if (it->sizes[i] && total > (UINT64_C(1) << 60) / (uint64_t)it->sizes[i])
            return tn_set_error(TN_EFORMAT, "%s: %s: the tensor is too large", d->dir, it->fqn);
        total *= (uint64_t)it->sizes[i];
    }
    const struct tn_value *chunks = tn_value_get(md, "chunks");
    if (!chunks || chunks->kind != TN_VALUE_LIST)
        return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: chunks is not a list", d->dir,
                            it->fqn);
    it->nchunks = chunks->v.seq.n;
    it->chunks = calloc(it->nchunks ? it->nchunks : 1, sizeof *it->chunks);
    if (!it->chunks)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", d->dir);
    uint64_t covered = 0;
    for (size_t c = 0; c < it->nchunks; c++) {
        const struct tn_value *ch = chunks->v.seq.items[c];
        struct tn_dcp_chunk *k = &it->chunks[c];
        int no, ns;
        if (strcmp(cls(ch), "ChunkStorageMetadata"))
            return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: chunk %zu is not a "
                                "ChunkStorageMetadata", d->dir, it->fqn, c);
        if (dims(d, it->fqn, "chunk offsets", tn_value_get(ch, "offsets"), k->offsets, &no) < 0 ||
            dims(d, it->fqn, "chunk sizes", tn_value_get(ch, "sizes"), k->sizes, &ns) < 0)
            return tn_last_status();
        if (no != it->ndim || ns != it->ndim)
            return tn_set_error(TN_EFORMAT, "%s: %s: chunk %zu has %d dimensions, the tensor %d",
                                d->dir, it->fqn, c, no != it->ndim ? no : ns, it->ndim);
        for (int i = 0; i < it->ndim; i++)
            if (k->offsets[i] + k->sizes[i] > it->sizes[i])
                return tn_set_error(TN_EFORMAT, "%s: %s: chunk %zu reaches past the tensor in "
                                    "dimension %d (%lld + %lld > %lld)", d->dir, it->fqn, c, i,
                                    (long long)k->offsets[i], (long long)k->sizes[i],
                                    (long long)it->sizes[i]);
        for (size_t p = 0; p < c; p++) {
            const struct tn_dcp_chunk *q = &it->chunks[p];
            bool meet = volume(k->sizes, it->ndim) && volume(q->sizes, it->ndim);
            for (int i = 0; meet && i < it->ndim; i++)
                meet = k->offsets[i] < q->offsets[i] + q->sizes[i] &&
                       q->offsets[i] < k->offsets[i] + k->sizes[i];
            if (meet)
                return tn_set_error(TN_EFORMAT, "%s: %s: chunks %zu and %zu overlap", d->dir,
                                    it->fqn, p, c);
        }
        covered += volume(k->sizes, it->ndim);
        k->file = SIZE_MAX;
    }
    if (covered != total)
        return tn_set_error(TN_EFORMAT, "%s: %s: the chunks cover %llu of the tensor's %llu "
                            "elements (missing chunks)", d->dir, it->fqn,
                            (unsigned long long)covered, (unsigned long long)total);
    return 0;
}

/* The index of file `name` in the folder, added (and mapped) on first use. */
static int file_index(struct tn_dcp *d, const struct tn_value *name, const char *fqn, size_t *out)
{
    if (!name || name->kind != TN_VALUE_STR || !name->v.str.len ||
        memchr(name->v.str.s, '/', name->v.str.len) || memchr(name->v.str.s, 0, name->v.str.len) ||
        !strcmp(name->v.str.s, ".") || !strcmp(name->v.str.s, "..") ||
        !strcmp(name->v.str.s, ".metadata"))
        return tn_set_error(TN_EFORMAT, "%s: %s: the storage's relative_path must name a file "
                            "of the folder", d->dir, fqn);
    for (size_t i = 0; i < d->nfiles; i++)
        if (!strcmp(d->files[i].name, name->v.str.s)) {
            *out = i;
            return 0;
        }
    struct dcp_file *f = realloc(d->files, (d->nfiles + 1) * sizeof *f);
    if (!f)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", d->dir);
    d->files = f;
    struct dcp_file *nf = &f[d->nfiles];
    nf->name = strdup(name->v.str.s);
    char *path = malloc(strlen(d->dir) + name->v.str.len + 2);
    if (!nf->name || !path) {
        free(nf->name);
        free(path);
        return tn_set_error(TN_ENOMEM, "%s: out of memory", d->dir);
    }
    sprintf(path, "%s/%s", d->dir, nf->name);
    struct stat st;
    int lr = lstat(path, &st), e = errno;
    if (lr != 0 || !S_ISREG(st.st_mode)) {
        free(nf->name);
        int rc = tn_set_error(TN_EIO, "%s: %s: %s: %s", d->dir, fqn, path,
                              lr ? strerror(e) : "not a regular file of the folder");
        free(path);
        return rc;
    }
    nf->map = tn__io_map_open(path);
    free(path);
    if (!nf->map) {
        free(nf->name);
        return tn_last_status();
    }
    *out = d->nfiles++;
    return 0;
}

/* Where an item's (fqn, offsets) bytes lie: a _StorageInfo, checked
 * against its file. */
static int place(struct tn_dcp *d, const char *fqn, const struct tn_value *info,
                 struct tn_dcp_chunk *k)
{
    if (strcmp(cls(info), "_StorageInfo"))
        return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: storage_data holds a %s, not a "
                            "_StorageInfo", d->dir, fqn, *cls(info) ? cls(info) : "value");
    const struct tn_value *off = tn_value_get(info, "offset"), *len = tn_value_get(info, "length");
    const struct tn_value *tr = tn_value_get(info, "transform_descriptors");
    if (tr && tr->kind != TN_VALUE_NONE && !(tr->kind == TN_VALUE_LIST && !tr->v.seq.n))
        return tn_set_error(TN_EFORMAT, "%s: %s: transformed (compressed) items are not supported",
                            d->dir, fqn);
    if (!off || !len || off->kind != TN_VALUE_INT || len->kind != TN_VALUE_INT || off->v.i < 0 ||
        len->v.i < 0)
        return tn_set_error(TN_EFORMAT, "%s: .metadata: %s: the storage's offset and length must "
                            "be non-negative ints", d->dir, fqn);
    size_t fi = 0;
    if (file_index(d, tn_value_get(info, "relative_path"), fqn, &fi) < 0)
        return tn_last_status();
    uint64_t size = d->files[fi].map->len;
    if ((uint64_t)off->v.i > size || (uint64_t)len->v.i > size - (uint64_t)off->v.i)
        return tn_set_error(TN_EFORMAT, "%s: %s: bytes %lld..%lld lie past the end of %s (%llu "
                            "bytes)", d->dir, fqn, (long long)off->v.i,
                            (long long)off->v.i + (long long)len->v.i, d->files[fi].name,
                            (unsigned long long)size);
    k->file = fi;
    k->offset = (uint64_t)off->v.i;
    k->length = (uint64_t)len->v.i;
    return 0;
}

/* True when t is a tuple of exactly n ints equal to o[0..n) (a chunk's
 * offsets or sizes as the untrusted pickle spelled them). */
static bool same_dims(const struct tn_value *t, const int64_t *o, int n)
{
    if (t->kind != TN_VALUE_TUPLE || t->v.seq.n != (size_t)n)
        return false;
    for (int i = 0; i < n; i++)
        if (t->v.seq.items[i]->kind != TN_VALUE_INT || t->v.seq.items[i]->v.i != o[i])
            return false;
    return true;
}

/* storage_data: each MetadataIndex(fqn, offset, index) -> _StorageInfo,
 * matched to its item's chunk; every chunk must get exactly one. */
static int storages(struct tn_dcp *d, const struct tn_value *sd)
{
    if (!sd || sd->kind != TN_VALUE_DICT)
        return tn_set_error(TN_EFORMAT, "%s: .metadata: storage_data is not a dict", d->dir);
    for (size_t e = 0; e < sd->v.dict.n; e++) {
        const struct tn_value *key = sd->v.dict.keys[e];
        const struct tn_value *fqn = tn_value_get(key, "fqn");
        if (strcmp(cls(key), "MetadataIndex") || !fqn || fqn->kind != TN_VALUE_STR)
            return tn_set_error(TN_EFORMAT, "%s: .metadata: storage_data key %zu is not a "
                                "MetadataIndex", d->dir, e);
        const struct tn_value *ix = tn_value_get(d->index, fqn->v.str.s);
        if (!ix)
            return tn_set_error(TN_EFORMAT, "%s: .metadata: storage_data names %s, which "
                                "state_dict_metadata lacks", d->dir, fqn->v.str.s);
        struct tn_dcp_item *it = &d->items[ix->v.i];
        const struct tn_value *off = tn_value_get(key, "offset");
        struct tn_dcp_chunk *k = NULL;
        for (size_t c = 0; it->tensor && off && c < it->nchunks; c++)
            if (same_dims(off, it->chunks[c].offsets, it->ndim))
                k = &it->chunks[c];
        if (!it->tensor)
            k = &it->chunks[0];
        if (!k)
            return tn_set_error(TN_EFORMAT, "%s: %s: storage_data holds a chunk .metadata does "
                                "not list", d->dir, it->fqn);
        if (k->file != SIZE_MAX)
            return tn_set_error(TN_EFORMAT, "%s: %s: storage_data holds a chunk twice", d->dir,
                                it->fqn);
        if (place(d, it->fqn, sd->v.dict.vals[e], k) < 0)
            return tn_last_status();
    }
    for (size_t i = 0; i < d->n; i++)
        for (size_t c = 0; c < d->items[i].nchunks; c++)
            if (d->items[i].chunks[c].file == SIZE_MAX)
                return tn_set_error(TN_EFORMAT, "%s: %s: %s %zu has no storage entry (missing "
                                    "chunk)", d->dir, d->items[i].fqn,
                                    d->items[i].tensor ? "chunk" : "value", c);
    return 0;
}

/* Turns the unpickled .metadata (d->meta, untrusted) into d->items and the
 * fqn index: checks every class name, key type, chunk bound and storage
 * reference, so later reads trust d->items.  Items point into d->meta's
 * strings (d owns both).  0, or TN_EFORMAT/TN_ENOMEM naming d->dir. */
static int build(struct tn_dcp *d)
{
    const struct tn_value *m = d->meta;
    if (strcmp(cls(m), "Metadata"))
        return tn_set_error(TN_EFORMAT, "%s: .metadata does not hold a Metadata", d->dir);
    const struct tn_value *sdm = tn_value_get(m, "state_dict_metadata");
    const struct tn_value *pd = tn_value_get(m, "planner_data");
    const struct tn_value *ver = tn_value_get(m, "version");
    if (!sdm || sdm->kind != TN_VALUE_DICT)
        return tn_set_error(TN_EFORMAT, "%s: .metadata: state_dict_metadata is not a dict", d->dir);
    d->version = strdup(ver && ver->kind == TN_VALUE_STR ? ver->v.str.s : "");
    d->items = calloc(sdm->v.dict.n ? sdm->v.dict.n : 1, sizeof *d->items);
    d->index = tn_value_dict();
    if (!d->items || !d->index || !d->version)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", d->dir);
    for (size_t i = 0; i < sdm->v.dict.n; i++) {
        const struct tn_value *k = sdm->v.dict.keys[i], *md = sdm->v.dict.vals[i];
        if (k->kind != TN_VALUE_STR)
            return tn_set_error(TN_EFORMAT, "%s: .metadata: a key of state_dict_metadata is a %s",
                                d->dir, tn_value_kind_name(k->kind));
        struct tn_dcp_item *it = &d->items[d->n++];
        it->fqn = k->v.str.s;
        if (tn_value_set(d->index, tn_value_str(it->fqn), tn_value_int((int64_t)i)) < 0)
            return tn_last_status();
        const char *c = cls(md);
        if (!strcmp(c, "TensorStorageMetadata")) {
            it->tensor = true;
            if (tensor_item(d, it, md) < 0)
                return tn_last_status();
        } else if (!strcmp(c, "BytesStorageMetadata")) {
            it->nchunks = 1;
            if (!(it->chunks = calloc(1, sizeof *it->chunks)))
                return tn_set_error(TN_ENOMEM, "%s: out of memory", d->dir);
            it->chunks[0].file = SIZE_MAX;
        } else {
            return tn_set_error(TN_EFORMAT, "%s: .metadata: %s is described by a %s", d->dir,
                                it->fqn, *c ? c : tn_value_kind_name(md->kind));
        }
        const struct tn_value *p = pd && pd->kind == TN_VALUE_DICT ? tn_value_get(pd, it->fqn) : NULL;
        if (p) {
            bool ok = p->kind == TN_VALUE_TUPLE && p->v.seq.n > 0;
            for (size_t j = 0; ok && j < p->v.seq.n; j++) {
                const struct tn_value *x = p->v.seq.items[j];
                ok = x->kind == TN_VALUE_STR ||
                     (x->kind == TN_VALUE_INT && x->v.i >= 0 && (uint64_t)x->v.i <= sdm->v.dict.n);
            }
            if (!ok)
                return tn_set_error(TN_EFORMAT, "%s: .metadata: planner_data of %s is not a path "
                                    "of keys and list indices", d->dir, it->fqn);
            it->path = p;
        }
    }
    return storages(d, tn_value_get(m, "storage_data"));
}

/* A handle for `dir` with nothing read yet; NULL with an error. */
static struct tn_dcp *dcp_new(const char *dir)
{
    struct tn_dcp *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        tn_set_error(TN_ENOMEM, "%s: out of memory", dir);
        return NULL;
    }
    size_t dl = strlen(d->dir);
    while (dl > 1 && d->dir[dl - 1] == '/')
        d->dir[--dl] = 0;
    return d;
}

/* Unpickles and checks .metadata's bytes (files named relative to d->dir). */
static int parse(struct tn_dcp *d, const unsigned char *buf, size_t len)
{
    if (len > MAX_METADATA)
        return tn_set_error(TN_EFORMAT, "%s: .metadata holds more than 1 GiB", d->dir);
    char label[600];
    snprintf(label, sizeof label, "%s/.metadata", d->dir);
    struct tn_pickle_reader_hooks hooks = {NULL, NULL, false, true};
    d->meta = tn__pickle_load(buf, len, label, TN_ALLOW_CURRENT, &hooks);
    if (!d->meta)
        return tn_last_status();
    /* the key index's values are carved beside .metadata's (value.c) */
    struct tn__value_arena arena;
    tn__value_arena_begin(&arena);
    int rc = build(d);
    tn__value_arena_end(&arena);
    return rc;
}

/* A reader over .metadata bytes already in memory (the fuzzer's entry);
 * `dir` only names errors and the data files'
 * directory.  The bytes are untrusted and borrowed for the call only.
 * A new reader for tn_dcp_close, or NULL with the error set. */
struct tn_dcp *tn__dcp_open_memory(const void *metadata, size_t len, const char *dir)
{
    struct tn_dcp *d = dcp_new(dir);
    if (d && parse(d, metadata, len) < 0) {
        tn_dcp_close(d);
        d = NULL;
    }
    return d;
}

/* Contract in tensor/dcp.h: reads dir/.metadata, maps each data file it
 * names (bounded by the file's size), validates every chunk.  A new reader
 * the caller closes with tn_dcp_close; NULL with an error naming `dir`. */
struct tn_dcp *tn_dcp_open(const char *dir)
{
    struct tn_dcp *d = dcp_new(dir);
    if (!d)
        return NULL;
    char *mp = malloc(strlen(d->dir) + 11);
    if (!mp) {
        tn_set_error(TN_ENOMEM, "%s: out of memory", dir);
        goto fail;
    }
    sprintf(mp, "%s/.metadata", d->dir);
    struct tn_io_map *map = tn__io_map_open(mp);
    free(mp);
    if (!map) {
        tn_set_error(TN_EIO, "%s: not a distributed checkpoint (%s)", dir, tn_last_error());
        goto fail;
    }
    int rc = parse(d, map->addr, map->len);
    tn__io_map_release(map);
    if (rc < 0)
        goto fail;
    return d;
fail:
    tn_dcp_close(d);
    return NULL;
}

/* Frees the reader, its parsed metadata and unmaps its files; the items,
 * names and values borrowed from it die with it.  NULL is a no-op. */
void tn_dcp_close(struct tn_dcp *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->items[i].chunks);
    free(d->items);
    for (size_t i = 0; i < d->nfiles; i++) {
        free(d->files[i].name);
        tn__io_map_release(d->files[i].map);
    }
    free(d->files);
    tn_value_release(d->index);
    tn_value_release(d->meta);
    free(d->version);
    free(d->dir);
    free(d);
}

/* Accessors (tensor/dcp.h).  Items, names and the version are borrowed
 * from d and live until tn_dcp_close; an index out of range gives NULL
 * (or 0); none sets an error.  tn_dcp_count: the number of items. */
size_t tn_dcp_count(const struct tn_dcp *d) { return d ? d->n : 0; }
/* Item i, or NULL past the end. */
const struct tn_dcp_item *tn_dcp_item_at(const struct tn_dcp *d, size_t i)
{
    return d && i < d->n ? &d->items[i] : NULL;
}
/* The item keyed fqn, or NULL when the checkpoint has none. */
const struct tn_dcp_item *tn_dcp_find(const struct tn_dcp *d, const char *fqn)
{
    if (!d || !fqn)
        return NULL;
    const struct tn_value *ix = tn_value_get(d->index, fqn);
    return ix ? &d->items[ix->v.i] : NULL;
}
/* The number of data files .metadata names. */
size_t tn_dcp_files(const struct tn_dcp *d) { return d ? d->nfiles : 0; }
/* Data file i's name, or NULL past the end. */
const char *tn_dcp_file_name(const struct tn_dcp *d, size_t i)
{
    return d && i < d->nfiles ? d->files[i].name : NULL;
}
/* Data file i's size in bytes, or 0 past the end. */
uint64_t tn_dcp_file_size(const struct tn_dcp *d, size_t i)
{
    return d && i < d->nfiles ? d->files[i].map->len : 0;
}
/* .metadata's version string ("" when it has none). */
const char *tn_dcp_version(const struct tn_dcp *d) { return d ? d->version : ""; }

/* The mapping of data file i (i < tn_dcp_files(d), not checked): borrowed,
 * valid until tn_dcp_close; *len gets its size. */
const unsigned char *tn__dcp_file_bytes(const struct tn_dcp *d, size_t i, size_t *len)
{
    *len = d->files[i].map->len;
    return d->files[i].map->addr;
}

/* The value a chunk's torch.save zip holds (storages over the mapping). */
static struct tn_value *chunk_value(struct tn_dcp *d, const struct tn_dcp_item *it,
                                    const struct tn_dcp_chunk *k)
{
    char label[700];
    snprintf(label, sizeof label, "%s/%s@%llu (%s)", d->dir, d->files[k->file].name,
             (unsigned long long)k->offset, it->fqn);
    struct tn_zip *z = tn_zip_open_memory(d->files[k->file].map->addr + k->offset,
                                          (size_t)k->length, label);
    if (!z)
        return NULL;
    struct tn_value *v = tn_ckpt_load_zip(z, NULL);
    tn_zip_close(z);
    return v;
}

/* The chunk's tensor, checked against what .metadata says of it. */
static struct tn_tensor *chunk_tensor(struct tn_dcp *d, const struct tn_dcp_item *it,
                                      const struct tn_dcp_chunk *k)
{
    struct tn_value *v = chunk_value(d, it, k);
    if (!v)
        return NULL;
    struct tn_tensor *t = v->kind == TN_VALUE_TENSOR ? tn_retain(v->v.tensor) : NULL;
    tn_value_release(v);
    if (!t) {
        tn_set_error(TN_EFORMAT, "%s: %s: a chunk's bytes hold no tensor", d->dir, it->fqn);
        return NULL;
    }
    bool ok = t->dtype == it->dtype && t->ndim == it->ndim;
    for (int i = 0; ok && i < t->ndim; i++)
        ok = t->sizes[i] == k->sizes[i];
    if (!ok) {
        char a[128], b[128];
        tn_set_error(TN_EFORMAT, "%s: %s: a chunk's bytes hold a %s %s tensor, .metadata says "
                     "%s %s", d->dir, it->fqn, tn_dtype_name(t->dtype),
                     tn_shape_format(t->sizes, t->ndim, a, sizeof a), tn_dtype_name(it->dtype),
                     tn_shape_format(k->sizes, it->ndim, b, sizeof b));
        tn_release(t);
        return NULL;
    }
    return t;
}

/* dst[lo..hi) <- src over the region both cover, views narrowed per dim. */
static int copy_overlap(struct tn_tensor *dst, const int64_t *doff, const struct tn_tensor *src,
                        const int64_t *soff, int nd)
{
    struct tn_tensor *a = tn_retain(dst), *b = tn_retain((struct tn_tensor *)src);
    int rc = 0;
    for (int i = 0; i < nd && a && b; i++) {
        int64_t lo = doff[i] > soff[i] ? doff[i] : soff[i];
        int64_t dh = doff[i] + dst->sizes[i], sh = soff[i] + src->sizes[i];
        int64_t hi = dh < sh ? dh : sh;
        if (hi <= lo) {
            tn_release(a);
            tn_release(b);
            return 0;
        }
        struct tn_tensor *na = tn_narrow(a, i, lo - doff[i], hi - lo);
        struct tn_tensor *nb = tn_narrow(b, i, lo - soff[i], hi - lo);
        tn_release(a);
        tn_release(b);
        a = na;
        b = nb;
    }
    if (!a || !b)
        rc = tn_last_status();
    else
        rc = tn_copy_(a, b);
    tn_release(a);
    tn_release(b);
    return rc;
}

/* Copies the region of item `it` starting at offsets[] with dst's sizes out
 * of every chunk that overlaps it.  dst (borrowed) must match the item's
 * dtype and rank and fit inside it; the chunk bounds were checked by build.
 * 0, or an error naming d->dir and the key. */
static int read_region(struct tn_dcp *d, const struct tn_dcp_item *it, const int64_t *offsets,
                       struct tn_tensor *dst)
{
    if (!it->tensor)
        return tn_set_error(TN_EINVAL, "%s: %s is not a tensor", d->dir, it->fqn);
    if (dst->ndim != it->ndim || dst->dtype != it->dtype)
        return tn_set_error(TN_EINVAL, "%s: %s is a %s tensor of %d dimensions, not %s of %d",
                            d->dir, it->fqn, tn_dtype_name(it->dtype), it->ndim,
                            tn_dtype_name(dst->dtype), dst->ndim);
    for (int i = 0; i < it->ndim; i++)
        if (offsets[i] < 0 || offsets[i] + dst->sizes[i] > it->sizes[i])
            return tn_set_error(TN_EINVAL, "%s: %s: the region asked for lies outside the "
                                "tensor in dimension %d", d->dir, it->fqn, i);
    for (size_t c = 0; c < it->nchunks; c++) {
        const struct tn_dcp_chunk *k = &it->chunks[c];
        bool meet = volume(k->sizes, it->ndim) && tn_numel(dst);
        for (int i = 0; meet && i < it->ndim; i++)
            meet = k->offsets[i] < offsets[i] + dst->sizes[i] &&
                   offsets[i] < k->offsets[i] + k->sizes[i];
        if (!meet)
            continue;
        struct tn_tensor *t = chunk_tensor(d, it, k);
        if (!t)
            return tn_last_status();
        int rc = copy_overlap(dst, offsets, t, k->offsets, it->ndim);
        tn_release(t);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Contract in tensor/dcp.h: the region of key `fqn` at offsets[] (one per
 * dimension) into the caller's dst.  0 or TN_EINVAL naming the key. */
int tn_dcp_read(struct tn_dcp *d, const char *fqn, const int64_t *offsets, struct tn_tensor *dst)
{
    if (!d || !fqn || !dst)
        return tn_set_error(TN_EINVAL, "tn_dcp_read: the %s is NULL",
                            !d ? "checkpoint" : !fqn ? "key" : "destination tensor");
    const struct tn_dcp_item *it = tn_dcp_find(d, fqn);
    if (!it)
        return tn_set_error(TN_EINVAL, "%s: no key %s", d->dir, fqn);
    return read_region(d, it, offsets, dst);
}

/* A tensor of the item's sizes and dtype on the meta device, over a
 * storage of its own that owns no bytes (made here: the meta allocator
 * of lib/dispatch is not linked into every program).  NULL with an error. */
static struct tn_tensor *meta_tensor(const struct tn_dcp_item *it)
{
    size_t nbytes = tn_dtype_size(it->dtype);
    for (int i = 0; i < it->ndim; i++)
        nbytes *= (size_t)it->sizes[i]; /* checked below 2^60 elements by tensor_item */
    struct tn_storage *s = tn_storage_from_external((void *)(uintptr_t)TN_ALIGNMENT, nbytes,
                                                    (struct tn_device){TN_DEVICE_META, -1},
                                                    NULL, NULL);
    if (!s)
        return NULL;
    struct tn_tensor *t = tn_tensor_from_storage(s, 0, it->sizes, it->ndim, NULL, it->dtype);
    tn_storage_release(s);
    return t;
}

/* The i-th item's value (tn_dcp_get); with `meta`, a tensor item is a
 * tensor on the meta device (its sizes and dtype, none of its bytes read). */
static struct tn_value *item_value(struct tn_dcp *d, size_t i, bool meta)
{
    if (!d) {
        tn_set_error(TN_EINVAL, "tn_dcp_get: the checkpoint is NULL");
        return NULL;
    }
    if (i >= d->n) {
        tn_set_error(TN_EINVAL, "%s: no item %zu", d->dir, i);
        return NULL;
    }
    const struct tn_dcp_item *it = &d->items[i];
    if (!it->tensor)
        return chunk_value(d, it, &it->chunks[0]);
    static const int64_t zero[TN_MAX_DIMS];
    struct tn_tensor *t = meta ? meta_tensor(it) : tn_empty(it->sizes, it->ndim, it->dtype);
    if (!t || (!meta && read_region(d, it, zero, t) < 0)) {
        tn_release(t);
        return NULL;
    }
    struct tn_value *v = tn_value_tensor(t);
    tn_release(t);
    return v;
}

/* Contract in tensor/dcp.h: item i's whole value (a new contiguous tensor
 * assembled from its chunks, or the bytes item unpickled under the
 * allowlist).  A new value for tn_value_release; NULL with an error. */
struct tn_value *tn_dcp_get(struct tn_dcp *d, size_t i) { return item_value(d, i, false); }

/* Puts v at `path` under root as torch.distributed.checkpoint's
 * set_element does: a str key makes a dict, an int one a list padded with
 * None.  Takes over v. */
static int set_path(struct tn_dcp *d, struct tn_value *root, const struct tn_dcp_item *it,
                    struct tn_value *v)
{
    const struct tn_value *p = it->path;
    struct tn_value *cur = root;
    for (size_t j = 0; j < p->v.seq.n; j++) {
        const struct tn_value *key = p->v.seq.items[j];
        bool last = j + 1 == p->v.seq.n;
        struct tn_value *next = NULL;
        if (cur->kind == TN_VALUE_DICT) {
            next = key->kind == TN_VALUE_STR ? tn_value_get(cur, key->v.str.s) : NULL;
            if (key->kind != TN_VALUE_STR) {
                tn_value_release(v);
                return tn_set_error(TN_EFORMAT, "%s: planner_data of %s indexes a dict with an "
                                    "int", d->dir, it->fqn);
            }
            if (last)
                return tn_value_set(cur, tn_value_str(key->v.str.s), v);
            if (!next) {
                next = p->v.seq.items[j + 1]->kind == TN_VALUE_STR ? tn_value_dict()
                                                                    : tn_value_list();
                if (tn_value_set(cur, tn_value_str(key->v.str.s), next) < 0) {
                    tn_value_release(v);
                    return tn_last_status();
                }
            }
        } else if (cur->kind == TN_VALUE_LIST && key->kind == TN_VALUE_INT) {
            while (cur->v.seq.n <= (size_t)key->v.i)
                if (tn_value_append(cur, tn_value_none()) < 0) {
                    tn_value_release(v);
                    return tn_last_status();
                }
            struct tn_value **slot = &cur->v.seq.items[key->v.i];
            if (last) {
                tn_value_release(*slot);
                *slot = v;
                return 0;
            }
            if ((*slot)->kind == TN_VALUE_NONE) {
                tn_value_release(*slot);
                *slot = p->v.seq.items[j + 1]->kind == TN_VALUE_STR ? tn_value_dict()
                                                                     : tn_value_list();
                if (!*slot) {
                    *slot = tn_value_none();
                    tn_value_release(v);
                    return tn_last_status();
                }
            }
            next = *slot;
        } else {
            tn_value_release(v);
            return tn_set_error(TN_EFORMAT, "%s: planner_data of %s goes through a %s", d->dir,
                                it->fqn, tn_value_kind_name(cur->kind));
        }
        if (next->kind != TN_VALUE_DICT && next->kind != TN_VALUE_LIST) {
            tn_value_release(v);
            return tn_set_error(TN_EFORMAT, "%s: planner_data of %s goes through a value", d->dir,
                                it->fqn);
        }
        cur = next;
    }
    tn_value_release(v);
    return tn_set_error(TN_EFORMAT, "%s: planner_data of %s is empty", d->dir, it->fqn);
}

static struct tn_value *load_tree(struct tn_dcp *d, bool flat, bool meta);

/* tn_dcp_load_all, or with `meta` tn_dcp_load_meta. */
static struct tn_value *load_all(struct tn_dcp *d, bool flat, bool meta)
{
    if (!d) {
        tn_set_error(TN_EINVAL, "%s: the checkpoint is NULL",
                     meta ? "tn_dcp_load_meta" : "tn_dcp_load_all");
        return NULL;
    }
    /* the tree's many small values from an arena (value.c) */
    struct tn__value_arena arena;
    tn__value_arena_begin(&arena);
    struct tn_value *v = load_tree(d, flat, meta);
    tn__value_arena_end(&arena);
    return v;
}

/* The tree of every item (load_all's work, inside its arena). */
static struct tn_value *load_tree(struct tn_dcp *d, bool flat, bool meta)
{
    struct tn_value *root = flat ? tn_value_odict() : tn_value_dict();
    if (!root)
        return NULL;
    for (size_t i = 0; i < d->n; i++) {
        struct tn_value *v = item_value(d, i, meta);
        int rc = !v ? -1
                 : flat || !d->items[i].path
                     ? tn_value_set(root, tn_value_str(d->items[i].fqn), v)
                     : set_path(d, root, &d->items[i], v);
        if (rc < 0) {
            tn_value_release(root);
            return NULL;
        }
    }
    return root;
}

/* The whole checkpoint as one value (tensor/dcp.h): nested as planner_data
 * says, or with `flat` an ODICT of fqn -> value; _meta gives meta-device
 * tensors and reads no tensor bytes.  A new value for tn_value_release;
 * NULL with an error. */
struct tn_value *tn_dcp_load_all(struct tn_dcp *d, bool flat) { return load_all(d, flat, false); }
/* The same tree with meta-device tensors (no tensor bytes read). */
struct tn_value *tn_dcp_load_meta(struct tn_dcp *d, bool flat) { return load_all(d, flat, true); }

/* Contract in tensor/dcp.h: fills each shard's tensor (borrowed) with its
 * region of `fqn`, checking the saved global size against the one asked
 * for; shards with no tensor are skipped.  0 or an error naming dir. */
int tn_dcp_load(const char *dir, struct tn_dcp_shard *shards, size_t n)
{
    struct tn_dcp *d = tn_dcp_open(dir);
    if (!d)
        return tn_last_status();
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        struct tn_dcp_shard *s = &shards[i];
        if (!s->tensor)
            continue;
        const struct tn_dcp_item *it = tn_dcp_find(d, s->fqn);
        if (!it) {
            rc = tn_set_error(TN_EINVAL, "%s: the checkpoint has no key %s", dir, s->fqn);
            break;
        }
        for (int k = 0; k < it->ndim && !rc; k++)
            if (s->global_sizes[k] != it->sizes[k] || s->tensor->ndim != it->ndim)
                rc = tn_set_error(TN_EINVAL, "%s: %s: the saved tensor's size differs from the "
                                  "one asked for", dir, s->fqn);
        if (!rc)
            rc = read_region(d, it, s->offsets, s->tensor);
    }
    tn_dcp_close(d);
    return rc;
}
