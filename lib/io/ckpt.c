/*
 * io/ckpt.c: torch.save / torch.load(weights_only=True) over the zip
 * format, in PyTorch 1.13's and the current (2.x) layouts.
 */
#include "io/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define DEFAULT_MAX_PICKLE ((size_t)1 << 30)

/* torch.save's archive folder: the file name less its last extension
 * (os.path.splitext), or "archive" for a non-ASCII name as 2.x does. */
static char *archive_name(const char *path, const struct tn_save_options *o)
{
    if (o && o->archive_name)
        return strdup(o->archive_name);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const unsigned char *p = (const unsigned char *)base; *p; p++)
        if (*p >= 0x80)
            return strdup("archive");
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot) {
        /* splitext ignores leading dots. */
        const char *p = base;
        while (p < dot && *p == '.')
            p++;
        if (p < dot)
            n = (size_t)(dot - base);
    }
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, base, n);
        r[n] = 0;
    }
    return r;
}

/* qsort order of storage keys (size_t) by their decimal text, as torch
 * 1.13 writes data/<key> records: sorted(str keys), so "10" before "2". */
static int key_cmp_lex(const void *a, const void *b)
{
    char x[24], y[24];
    snprintf(x, sizeof x, "%zu", *(const size_t *)a);
    snprintf(y, sizeof y, "%zu", *(const size_t *)b);
    return strcmp(x, y);
}

/* Adds member prefix/name holding data[0..len) (borrowed) to w.
 * 0 or an error (w then only aborts). */
static int add_record(struct tn_zip_writer *w, const char *prefix, const char *name,
                      const void *data, uint64_t len)
{
    size_t n = strlen(prefix) + strlen(name) + 2;
    char *full = malloc(n);
    if (!full)
        return tn_set_error(TN_ENOMEM, "out of memory");
    snprintf(full, n, "%s/%s", prefix, name);
    int rc = tn_zip_writer_add(w, full, data, len);
    free(full);
    return rc;
}

/* Writes `value` as torch.save's archive `prefix` into the writer `w`,
 * which it finishes (or aborts on failure).  `label` names the output. */
static int write_archive(struct tn_zip_writer *w, const char *label, const char *prefix,
                         const struct tn_value *value, enum tn_ckpt_layout layout)
{
    struct tn__bytes pkl = {0};
    struct tn_pickle_storages st = {0};
    size_t *order = NULL;
    int rc = tn__pickle_dump(value, &pkl, &st);
    if (rc < 0) {
        tn_error_prefix("%s", label);
        goto out;
    }
    /* 1.13 has no float8 or uint16..64: it could not load such a file */
    for (size_t i = 0; layout == TN_CKPT_TORCH1 && i < st.n; i++)
        if (!tn_dtype_info(st.dtype[i])->storage_class) {
            rc = tn_set_error(TN_EDTYPE, "%s: %s tensors cannot be saved in PyTorch 1.13's layout "
                              "(1.13 has no such dtype)", label, tn_dtype_name(st.dtype[i]));
            goto out;
        }
    order = malloc((st.n ? st.n : 1) * sizeof *order);
    if (!order) {
        rc = tn_set_error(TN_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < st.n; i++)
        order[i] = i;
    if (layout == TN_CKPT_TORCH1)
        qsort(order, st.n, sizeof *order, key_cmp_lex); /* 1.13: sorted(str keys) */
    if ((rc = add_record(w, prefix, "data.pkl", pkl.data, pkl.len)) < 0)
        goto out;
    if (layout == TN_CKPT_TORCH2) {
        if ((rc = add_record(w, prefix, ".format_version", "1", 1)) < 0 ||
            (rc = add_record(w, prefix, ".storage_alignment", "64", 2)) < 0 ||
            (rc = add_record(w, prefix, "byteorder", "little", 6)) < 0)
            goto out;
    }
    uint64_t names_hash = 1469598103934665603ull, crcs = 0;
    for (size_t i = 0; i < st.n; i++) {
        char name[32];
        snprintf(name, sizeof name, "data/%zu", order[i]);
        const char *data = st.s[order[i]]->data;
        if ((rc = add_record(w, prefix, name, data + st.off[order[i]], st.len[order[i]])) < 0)
            goto out;
        for (const char *p = name; *p; p++)
            names_hash = (names_hash ^ (unsigned char)*p) * 1099511628211ull;
        crcs = crcs * 31 + tn__zip_writer_last_crc(w);
    }
    if ((rc = add_record(w, prefix, "version", "3\n", 2)) < 0)
        goto out;
    if (layout == TN_CKPT_TORCH2) {
        /* Informational only (PyTorch hashes with std::hash): any 40 digits. */
        char id[41];
        snprintf(id, sizeof id, "%020llu%020llu",
                 (unsigned long long)(names_hash % 10000000000000000000ull),
                 (unsigned long long)(crcs % 10000000000000000000ull));
        if ((rc = add_record(w, prefix, ".data/serialization_id", id, 40)) < 0)
            goto out;
    }
    rc = tn_zip_writer_finish(w);
    w = NULL;
out:
    tn_zip_writer_abort(w);
    free(pkl.data);
    free(st.s);
    free(st.dtype);
    free(st.off);
    free(st.len);
    free(order);
    return rc;
}

/* Contract in tensor/io.h: `value` (borrowed) as torch.save writes it, in
 * the layout opts asks for, through a temporary file renamed over path.
 * 0 or an error naming path (the target then untouched). */
int tn_save(const char *path, const struct tn_value *value, const struct tn_save_options *opts)
{
    enum tn_ckpt_layout layout = opts ? opts->layout : TN_CKPT_TORCH2;
    char *prefix = archive_name(path, opts);
    if (!prefix)
        return tn_set_error(TN_ENOMEM, "out of memory");
    if (!*prefix) {
        free(prefix);
        return tn_set_error(TN_EINVAL, "%s: the file name gives an empty archive name", path);
    }
    struct tn_zip_writer *w = tn_zip_writer_open(path, 64);
    int rc = w ? 0 : tn_last_status();
    if (w && opts && opts->no_fsync)
        tn__zip_writer_no_fsync(w);
    if (w)
        rc = write_archive(w, path, prefix, value, layout);
    free(prefix);
    return rc;
}

/* Contract in internal.h: torch.save(value) as archive "archive" appended
 * to the caller's stream f (a DCP chunk).  0 or an error naming label. */
int tn__ckpt_write_stream(FILE *f, const char *label, const struct tn_value *value,
                          uint64_t *writeback)
{
    struct tn_zip_writer *w = tn__zip_writer_on(f, label, 64, writeback);
    return w ? write_archive(w, label, "archive", value, TN_CKPT_TORCH2) : tn_last_status();
}

/* ------------------------------------------------------------------ load */

struct load_ctx {
    struct tn_zip *z;
    const char *prefix;
    const struct tn_load_options *opts;
    /* Storages already made, by zip entry index (a view's second use). */
    struct tn_storage **by_entry;
    enum tn_dtype *dtype_by_entry;
};

/* The restricted machine's persistent-id hook: the storage of record
 * <prefix>/data/<key> for numel elements of dtype, checked against the
 * record's size (and, for a record met before, its dtype and size), mapped
 * without a copy when stored and aligned, read otherwise. A new reference, or
 * NULL with an error naming the record. */
static struct tn_storage *load_storage(const char *key, enum tn_dtype dtype, int64_t numel,
                                       void *vctx)
{
    struct load_ctx *c = vctx;
    const char *L = tn_zip_label(c->z);
    size_t esz = tn_dtype_size(dtype);
    if ((uint64_t)numel > UINT64_MAX / esz || (uint64_t)numel * esz > SIZE_MAX) {
        tn_set_error(TN_EFORMAT, "%s: data/%s: %lld elements overflow", L, key, (long long)numel);
        return NULL;
    }
    size_t nbytes = (size_t)numel * esz;
    /* "prefix/data/key" on the stack, without snprintf: this runs once per
     * storage, 20,000 times for a large model's state_dict. */
    size_t pl = strlen(c->prefix), kl = strlen(key);
    char small[512], *name = pl + kl + 7 <= sizeof small ? small : malloc(pl + kl + 7);
    if (!name) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(name, c->prefix, pl);
    memcpy(name + pl, "/data/", 6);
    memcpy(name + pl + 6, key, kl + 1);
    long idx = tn_zip_find(c->z, name);
    if (name != small)
        free(name);
    if (idx < 0) {
        tn_set_error(TN_EFORMAT, "%s: missing record data/%s", L, key);
        return NULL;
    }
    if (c->by_entry[idx]) {
        if (c->dtype_by_entry[idx] != dtype) {
            tn_set_error(TN_EFORMAT, "%s: data/%s is used as both %s and %s", L, key,
                         tn_dtype_name(c->dtype_by_entry[idx]), tn_dtype_name(dtype));
            return NULL;
        }
        if (c->by_entry[idx]->nbytes < nbytes) {
            tn_set_error(TN_EFORMAT, "%s: data/%s is used with %zu and then %zu bytes", L, key,
                         c->by_entry[idx]->nbytes, nbytes);
            return NULL;
        }
        return tn_storage_retain(c->by_entry[idx]);
    }
    const struct tn_zip_entry *e = tn_zip_entry_at(c->z, (size_t)idx);
    if (e->size < nbytes) {
        tn_set_error(TN_EFORMAT, "%s: data/%s holds %llu bytes but the storage needs %zu", L, key,
                     (unsigned long long)e->size, nbytes);
        return NULL;
    }
    struct tn_storage *s = NULL;
    /* The address, not the offset, decides: an archive inside a larger
     * file (a DCP item) may start anywhere. */
    size_t zlen;
    uintptr_t at = (uintptr_t)tn_zip_bytes(c->z, &zlen) + (uintptr_t)e->data_offset;
    if (e->method == 0 && nbytes && at % TN_ALIGNMENT == 0 && !c->opts->no_mmap) {
        s = tn_zip_storage(c->z, (size_t)idx, nbytes);
    } else {
        s = tn_storage_new(nbytes, TN_CPU);
        if (s && nbytes) {
            if (e->method == 0) {
                /* Ask for the pages up front: one read-ahead instead of a
                 * page fault per 4 KiB. */
                const char *src = tn_zip_data(c->z, (size_t)idx);
                uintptr_t page = (uintptr_t)src & ~(uintptr_t)4095;
                madvise((void *)page, nbytes + ((uintptr_t)src - page), MADV_WILLNEED);
                memcpy(s->data, src, nbytes);
            } else {
                void *buf;
                size_t len;
                if (tn_zip_read(c->z, (size_t)idx, 0, &buf, &len) < 0) {
                    tn_storage_release(s);
                    return NULL;
                }
                memcpy(s->data, buf, nbytes);
                free(buf);
            }
        }
    }
    if (!s)
        return NULL;
    c->by_entry[idx] = s;
    c->dtype_by_entry[idx] = dtype;
    return tn_storage_retain(s);
}

/* Reads a small text record (version, byteorder) into buf; 0 when absent. */
static int small_record(struct tn_zip *z, const char *prefix, const char *name, char *buf,
                        size_t cap)
{
    char full[512];
    snprintf(full, sizeof full, "%s/%s", prefix, name);
    long i = tn_zip_find(z, full);
    if (i < 0)
        return 0;
    void *d;
    size_t len;
    if (tn_zip_read(z, (size_t)i, 4096, &d, &len) < 0)
        return -1;
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(buf, d, n);
    buf[n] = 0;
    free(d);
    return 1;
}

/* torch.load(weights_only=True) of an opened archive (tensor/io.h; z
 * borrowed): the archive folder is the first member's, data.pkl runs through
 * the restricted machine with opts' allowlist (NULL: the defaults), its
 * storages come from load_storage. A new value, or NULL with an error naming
 * the archive. */
struct tn_value *tn_ckpt_load_zip(struct tn_zip *z, const struct tn_load_options *opts)
{
    struct tn_load_options defaults = {0};
    if (!opts)
        opts = &defaults;
    const char *L = tn_zip_label(z);
    if (tn_zip_count(z) == 0) {
        tn_set_error(TN_EFORMAT, "%s: an empty zip archive is not a checkpoint", L);
        return NULL;
    }
    /* The archive folder comes from the first entry, as PyTorch takes it. */
    const char *first = tn_zip_entry_at(z, 0)->name;
    const char *slash = strchr(first, '/');
    if (!slash || slash == first || (size_t)(slash - first) > 400) {
        tn_set_error(TN_EFORMAT, "%s: the first zip entry %s is not inside an archive folder", L,
                     first);
        return NULL;
    }
    char prefix[402];
    size_t pl = (size_t)(slash - first);
    memcpy(prefix, first, pl);
    prefix[pl] = 0;
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const char *n = tn_zip_entry_at(z, i)->name;
        if (strncmp(n, prefix, pl) || n[pl] != '/') {
            tn_set_error(TN_EFORMAT, "%s: file %s isn't in the same archive as the first (%s/)",
                         L, n, prefix);
            return NULL;
        }
    }
    char buf[64];
    int r = small_record(z, prefix, "constants.pkl", buf, sizeof buf);
    if (r != 0) {
        if (r > 0)
            tn_set_error(TN_EFORMAT, "%s: a TorchScript archive (it holds constants.pkl): "
                         "loading it would run its code; use torch.jit.load", L);
        return NULL;
    }
    r = small_record(z, prefix, ".data/version", buf, sizeof buf);
    if (r == 0)
        r = small_record(z, prefix, "version", buf, sizeof buf);
    if (r < 0)
        return NULL;
    if (r == 0) {
        tn_set_error(TN_EFORMAT, "%s: missing record %s/version", L, prefix);
        return NULL;
    }
    char *end;
    long ver = strtol(buf, &end, 10);
    if (end == buf || ver < 1 || ver > 10) {
        tn_set_error(TN_EFORMAT, "%s: unsupported checkpoint version '%s'", L, buf);
        return NULL;
    }
    r = small_record(z, prefix, "byteorder", buf, sizeof buf);
    if (r < 0)
        return NULL;
    if (r > 0 && strcmp(buf, "little")) {
        tn_set_error(TN_EFORMAT, "%s: byteorder '%s' is not supported (only little-endian)", L,
                     buf);
        return NULL;
    }
    char full[512];
    snprintf(full, sizeof full, "%s/data.pkl", prefix);
    long pi = tn_zip_find(z, full);
    if (pi < 0) {
        tn_set_error(TN_EFORMAT, "%s: missing record %s", L, full);
        return NULL;
    }
    void *pkl;
    size_t plen;
    if (tn_zip_read(z, (size_t)pi, opts->max_pickle ? opts->max_pickle : DEFAULT_MAX_PICKLE, &pkl,
                    &plen) < 0)
        return NULL;
    struct load_ctx c = {.z = z, .prefix = prefix, .opts = opts};
    c.by_entry = calloc(tn_zip_count(z), sizeof *c.by_entry);
    c.dtype_by_entry = calloc(tn_zip_count(z), sizeof *c.dtype_by_entry);
    if (!c.by_entry || !c.dtype_by_entry) {
        free(pkl);
        free(c.by_entry);
        free(c.dtype_by_entry);
        tn_set_error(TN_ENOMEM, "%s: out of memory", L);
        return NULL;
    }
    struct tn_pickle_reader_hooks hooks = {load_storage, &c, false, false};
    char label[600];
    snprintf(label, sizeof label, "%s: %s", L, full);
    struct tn_value *v = tn__pickle_load(pkl, plen, label, opts->allowlist, &hooks);
    free(pkl);
    for (size_t i = 0; i < tn_zip_count(z); i++)
        tn_storage_release(c.by_entry[i]);
    free(c.by_entry);
    free(c.dtype_by_entry);
    return v;
}

/* tn_load (tensor/io.h): a torch zip or pre-1.6 file through the one loader
 * (tn_io_file_open), anything else refused as not a checkpoint. A new value,
 * or NULL with an error naming path. */
struct tn_value *tn_load(const char *path, const struct tn_load_options *opts)
{
    struct tn_io_file *f = tn_io_file_open(path);
    if (!f)
        return NULL;
    enum tn__io_format fmt = tn__io_file_kind(f);
    struct tn_value *v = NULL;
    if (fmt == TN_IO_FMT_TORCH || fmt == TN_IO_FMT_LEGACY)
        v = tn_io_file_load(f, opts, NULL);
    else
        tn_set_error(TN_EFORMAT, "%s: not a PyTorch checkpoint (no zip header)",
                     strcmp(path, "-") ? path : "<stdin>");
    tn_io_file_close(f);
    return v;
}
