/*
 * io/legacy.c: torch.save's format before 1.6 (_use_new_zipfile_serialization
 * =False): pickles back to back, then raw storages.  The magic number, the
 * protocol version (1001), sys_info, the object (storages as persistent ids
 * ('storage', class, key, location, numel, None)), the sorted list of
 * storage keys; then each of those storages as an 8-byte little-endian
 * element count and its bytes.  The object goes through the same
 * restricted pickle machine as a zip checkpoint's data.pkl.
 */
#include "io/internal.h"

#include <stdlib.h>
#include <string.h>

/* 0x1950a86a20f9469cfc6c, the LONG torch.save pickles first. */
static const unsigned char MAGIC[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

struct legacy_ctx {
    const char *label;
    size_t file_len;
    char **keys;
    struct tn_storage **st;
    enum tn_dtype *dtype;
    size_t n, cap;
};

/* Where the pickle starting at `pos` ends (just past its STOP). */
static int pickle_end(const unsigned char *b, size_t len, size_t pos, size_t *end, const char *label)
{
    struct tn_pickle_op op;
    do {
        if (pos >= len)
            return tn_set_error(TN_EFORMAT, "%s: a pickle without STOP at the end of the file",
                                label);
        if (tn__pickle_decode(b, len, &pos, &op, label) < 0)
            return tn_last_status();
    } while (op.code != TN_OP_STOP);
    *end = pos;
    return 0;
}

/* Storages are made empty when the object names them and filled from the
 * data that follows the pickles. */
static struct tn_storage *legacy_storage(const char *key, enum tn_dtype dtype, int64_t numel,
                                         void *vctx)
{
    struct legacy_ctx *c = vctx;
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->keys[i], key)) {
            if (c->dtype[i] != dtype) {
                tn_set_error(TN_EFORMAT, "%s: storage %s is used as both %s and %s", c->label,
                             key, tn_dtype_name(c->dtype[i]), tn_dtype_name(dtype));
                return NULL;
            }
            return tn_storage_retain(c->st[i]);
        }
    size_t esz = tn_dtype_size(dtype);
    /* its bytes must fit in the file: no allocation the file cannot back */
    if ((uint64_t)numel > c->file_len / esz) {
        tn_set_error(TN_EFORMAT, "%s: storage %s of %lld elements is larger than the file",
                     c->label, key, (long long)numel);
        return NULL;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        char **k = realloc(c->keys, cap * sizeof *k);
        if (k)
            c->keys = k;
        struct tn_storage **s = realloc(c->st, cap * sizeof *s);
        if (s)
            c->st = s;
        enum tn_dtype *d = realloc(c->dtype, cap * sizeof *d);
        if (d)
            c->dtype = d;
        if (!k || !s || !d) {
            tn_set_error(TN_ENOMEM, "%s: out of memory", c->label);
            return NULL;
        }
        c->cap = cap;
    }
    struct tn_storage *s = tn_storage_new((size_t)numel * esz, TN_CPU);
    char *k = strdup(key);
    if (!s || !k) {
        tn_storage_release(s);
        free(k);
        tn_set_error(TN_ENOMEM, "%s: out of memory", c->label);
        return NULL;
    }
    c->keys[c->n] = k;
    c->st[c->n] = s;
    c->dtype[c->n++] = dtype;
    return tn_storage_retain(s);
}

/* Fills the storages from the raw data after the pickles, in the order of
 * the key list. */
static int read_storages(struct legacy_ctx *c, const struct tn_value *keys,
                         const unsigned char *b, size_t len, size_t pos)
{
    if (keys->kind != TN_VALUE_LIST)
        return tn_set_error(TN_EFORMAT, "%s: the storage keys are a %s, not a list", c->label,
                            tn_value_kind_name(keys->kind));
    for (size_t i = 0; i < keys->v.seq.n; i++) {
        const struct tn_value *k = keys->v.seq.items[i];
        size_t j = 0;
        while (k->kind == TN_VALUE_STR && j < c->n && strcmp(c->keys[j], k->v.str.s))
            j++;
        if (k->kind != TN_VALUE_STR || j == c->n)
            return tn_set_error(TN_EFORMAT, "%s: storage key %zu names no storage of the object",
                                c->label, i);
        if (len - pos < 8)
            return tn_set_error(TN_EFORMAT, "%s: storage %s: the file ends at byte %zu",
                                c->label, c->keys[j], pos);
        uint64_t numel = 0;
        for (int q = 7; q >= 0; q--)
            numel = numel << 8 | b[pos + (size_t)q];
        pos += 8;
        size_t nbytes = c->st[j]->nbytes;
        if (numel != nbytes / tn_dtype_size(c->dtype[j]))
            return tn_set_error(TN_EFORMAT, "%s: storage %s holds %llu elements but the object "
                                "names %zu", c->label, c->keys[j], (unsigned long long)numel,
                                nbytes / tn_dtype_size(c->dtype[j]));
        if (len - pos < nbytes)
            return tn_set_error(TN_EFORMAT, "%s: storage %s needs %zu bytes but the file has %zu "
                                "left", c->label, c->keys[j], nbytes, len - pos);
        if (nbytes)
            memcpy(c->st[j]->data, b + pos, nbytes);
        pos += nbytes;
    }
    if (keys->v.seq.n != c->n)
        return tn_set_error(TN_EFORMAT, "%s: the object names %zu storages but the file holds %zu",
                            c->label, c->n, keys->v.seq.n);
    return 0;
}

/* A pre-1.6 torch.save file over m (untrusted: the magic number, protocol
 * and sys_info pickles are checked, the object and the storage keys are
 * read by the restricted machine with opts' allowlist, a storage's numel
 * is bounded by the file's size before anything is allocated, and the
 * storages read must be the ones the object named).  opts NULL means the
 * defaults.  A new value (its storages copied out of m), or NULL with an
 * error naming label. */
struct tn_value *tn__legacy_load(struct tn_io_map *m, const char *label,
                                 const struct tn_load_options *opts)
{
    struct tn_load_options defaults = {0};
    if (!opts)
        opts = &defaults;
    const unsigned char *b = m->addr;
    size_t len = m->len, pos = 0, end;
    struct tn_pickle_op op;
    /* the magic number: PROTO 2, LONG1 of 10 bytes, STOP */
    size_t p = 0;
    if (tn__pickle_decode(b, len, &p, &op, label) < 0 || op.code != TN_OP_PROTO ||
        tn__pickle_decode(b, len, &p, &op, label) < 0 || op.code != TN_OP_LONG1 ||
        op.slen != sizeof MAGIC || memcmp(op.s, MAGIC, sizeof MAGIC)) {
        tn_set_error(TN_EFORMAT, "%s: not a legacy torch checkpoint (no magic number)", label);
        return NULL;
    }
    if (pickle_end(b, len, pos, &end, label) < 0)
        return NULL;
    pos = end;
    struct tn_value *v = NULL, *keys = NULL, *proto = NULL, *info = NULL;
    struct legacy_ctx c = {.label = label, .file_len = len};
    char where[600];
    /* the protocol version and sys_info: plain values */
    if (pickle_end(b, len, pos, &end, label) < 0)
        goto out;
    snprintf(where, sizeof where, "%s: protocol version", label);
    if (!(proto = tn__pickle_load(b + pos, end - pos, where, opts->allowlist, NULL)))
        goto out;
    if (proto->kind != TN_VALUE_INT || proto->v.i != 1001) {
        tn_set_error(TN_EFORMAT, "%s: legacy protocol version is not 1001", label);
        goto out;
    }
    pos = end;
    if (pickle_end(b, len, pos, &end, label) < 0)
        goto out;
    snprintf(where, sizeof where, "%s: sys_info", label);
    if (!(info = tn__pickle_load(b + pos, end - pos, where, opts->allowlist, NULL)))
        goto out;
    const struct tn_value *le = info->kind == TN_VALUE_DICT ? tn_value_get(info, "little_endian") : NULL;
    if (le && le->kind == TN_VALUE_BOOL && !le->v.b) {
        tn_set_error(TN_EFORMAT, "%s: a big-endian checkpoint is not supported", label);
        goto out;
    }
    pos = end;
    /* the object, with its storages */
    if (pickle_end(b, len, pos, &end, label) < 0)
        goto out;
    struct tn_pickle_reader_hooks hooks = {legacy_storage, &c, true, false};
    snprintf(where, sizeof where, "%s: object at byte %zu", label, pos);
    if (!(v = tn__pickle_load(b + pos, end - pos, where, opts->allowlist, &hooks)))
        goto out;
    pos = end;
    if (pickle_end(b, len, pos, &end, label) < 0)
        goto fail;
    snprintf(where, sizeof where, "%s: storage keys at byte %zu", label, pos);
    if (!(keys = tn__pickle_load(b + pos, end - pos, where, opts->allowlist, NULL)))
        goto fail;
    if (read_storages(&c, keys, b, len, end) < 0)
        goto fail;
    goto out;
fail:
    tn_value_release(v);
    v = NULL;
out:
    tn_value_release(proto);
    tn_value_release(info);
    tn_value_release(keys);
    for (size_t i = 0; i < c.n; i++) {
        free(c.keys[i]);
        tn_storage_release(c.st[i]);
    }
    free(c.keys);
    free(c.st);
    free(c.dtype);
    return v;
}
