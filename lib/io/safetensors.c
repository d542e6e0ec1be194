/*
 * io/safetensors.c: .safetensors read and write, with the format's rules:
 * u64 header length (at most 100,000,000), a JSON header starting with
 * '{', no duplicate names, data offsets contiguous from 0 to the end of the
 * file, each exactly numel * element size.
 */
#include "io/internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER 100000000ull

/* The dtype of a safetensors dtype code ("F32", "BF16", ...) from the dtype
 * table, or TN_DTYPE_UNSET. */
static enum tn_dtype st_dtype(const char *code)
{
    for (int d = 0; d < TN_NUM_ALL_DTYPES; d++) {
        const char *sf = tn_dtype_info((enum tn_dtype)d)->safetensors;
        if (sf && !strcmp(code, sf))
            return (enum tn_dtype)d;
    }
    return TN_DTYPE_UNSET;
}

struct st_entry {
    const char *name;
    enum tn_dtype dtype;
    int64_t sizes[TN_MAX_DIMS];
    int ndim;
    uint64_t begin, end;
};

/* qsort order of entries by their data offset, to check that they tile the
 * data without gaps or overlaps. */
static int by_begin(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/*
 * The header of b (len bytes, named label) checked as tn_st_load needs it:
 * the entries (sorted by offset, their names pointing into *hdr), the
 * header's length and the metadata (when meta is not NULL).  0, or an error
 * naming label: shapes with negative sizes or an element count that
 * overflows int64 ("overflow computing the size of 'w'"), unknown dtypes
 * (TN_EDTYPE), offsets outside the data, gaps and overlaps.  The scanner
 * (tn__st_check) and the loader share it, so scan flags what ls refuses.
 */
static int st_parse(const unsigned char *b, size_t len, const char *label, json_t **hdrp,
                    struct st_entry **entsp, size_t *nep, uint64_t *hlen, struct tn_value **meta,
                    const char **what)
{
    *what = "safetensors-header";
    json_t *hdr = NULL;
    struct st_entry *ents = NULL;
    int rc = TN_OK;
    *hdrp = NULL;
    *entsp = NULL;
    *nep = 0;
    if (len < 8)
        return tn_set_error(TN_EFORMAT, "%s: not a safetensors file (shorter than 8 bytes)", label);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    if (n > ST_MAX_HEADER || n > len - 8) {
        *what = "safetensors-header-length";
        return tn_set_error(TN_EFORMAT, "%s: safetensors header of %llu bytes is too large", label,
                            (unsigned long long)n);
    }
    if (n < 2 || b[8] != '{')
        return tn_set_error(TN_EFORMAT, "%s: safetensors header does not start with '{'", label);
    json_error_t err;
    hdr = json_loadb((const char *)b + 8, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    if (!hdr || !json_is_object(hdr)) {
        rc = tn_set_error(TN_EFORMAT, "%s: invalid safetensors header: %s", label,
                          hdr ? "not an object" : err.text);
        goto out;
    }
    size_t count = json_object_size(hdr);
    ents = calloc(count ? count : 1, sizeof *ents);
    if (!ents) {
        rc = tn_set_error(TN_ENOMEM, "%s: out of memory", label);
        goto out;
    }
    size_t ne = 0;
    const char *key;
    json_t *val;
    uint64_t data_len = len - 8 - n;
    json_object_foreach(hdr, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                rc = tn_set_error(TN_EFORMAT, "%s: __metadata__ must be an object", label);
                goto out;
            }
            if (meta && !(*meta = tn_value_dict())) {
                rc = tn_last_status();
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = tn_set_error(TN_EFORMAT, "%s: __metadata__ value of %s is not a string",
                                      label, mk);
                    goto out;
                }
                if (meta && tn_value_set(*meta, tn_value_str(mk),
                                         tn_value_str(json_string_value(mv))) < 0) {
                    rc = tn_last_status();
                    goto out;
                }
            }
            continue;
        }
        struct st_entry *e = &ents[ne];
        json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
               *off = json_object_get(val, "data_offsets");
        if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
            json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
            !json_is_integer(json_array_get(off, 1))) {
            rc = tn_set_error(TN_EFORMAT, "%s: %s: needs dtype, shape and data_offsets", label, key);
            goto out;
        }
        e->name = key;
        e->dtype = st_dtype(json_string_value(dt));
        if (e->dtype == TN_DTYPE_UNSET) {
            rc = tn_set_error(TN_EDTYPE, "%s: %s: dtype %s is not supported by tensorkit", label,
                              key, json_string_value(dt));
            goto out;
        }
        if (json_array_size(sh) > TN_MAX_DIMS) {
            rc = tn_set_error(TN_EFORMAT, "%s: %s has more than %d dimensions", label, key,
                              TN_MAX_DIMS);
            goto out;
        }
        e->ndim = (int)json_array_size(sh);
        for (int d = 0; d < e->ndim; d++) {
            json_t *x = json_array_get(sh, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0) {
                *what = "safetensors-shape";
                rc = tn_set_error(TN_EFORMAT, "%s: %s: shape must hold non-negative integers",
                                  label, key);
                goto out;
            }
            e->sizes[d] = json_integer_value(x);
        }
        /* Element count and byte count in int64, as a tensor holds them. */
        uint64_t nbytes = tn_dtype_size(e->dtype);
        bool over = false;
        for (int d = 0; d < e->ndim; d++) {
            uint64_t s = (uint64_t)e->sizes[d];
            if (s && nbytes > (uint64_t)INT64_MAX / s)
                over = true;
            nbytes *= s;
        }
        if (over) {
            *what = "safetensors-shape";
            rc = tn_set_error(TN_EFORMAT, "%s: overflow computing the size of '%s'", label, key);
            goto out;
        }
        json_int_t b0 = json_integer_value(json_array_get(off, 0));
        json_int_t b1 = json_integer_value(json_array_get(off, 1));
        if (b0 < 0 || b1 < b0 || (uint64_t)b1 > data_len) {
            *what = "safetensors-offsets";
            rc = tn_set_error(TN_EFORMAT, "%s: %s: data_offsets [%lld, %lld] outside the %llu data bytes",
                              label, key, (long long)b0, (long long)b1, (unsigned long long)data_len);
            goto out;
        }
        e->begin = (uint64_t)b0;
        e->end = (uint64_t)b1;
        if (nbytes != e->end - e->begin) {
            *what = "safetensors-offsets";
            rc = tn_set_error(TN_EFORMAT, "%s: %s: %llu bytes in data_offsets but the shape needs %llu",
                              label, key, (unsigned long long)(e->end - e->begin),
                              (unsigned long long)nbytes);
            goto out;
        }
        ne++;
    }
    qsort(ents, ne, sizeof *ents, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < ne; i++) {
        if (ents[i].begin != at) {
            *what = "safetensors-offsets";
            rc = tn_set_error(TN_EFORMAT, "%s: %s starts at %llu, not at %llu: tensors must be contiguous",
                              label, ents[i].name, (unsigned long long)ents[i].begin,
                              (unsigned long long)at);
            goto out;
        }
        at = ents[i].end;
    }
    if (at != data_len) {
        *what = "safetensors-offsets";
        rc = tn_set_error(TN_EFORMAT, "%s: %llu data bytes but the tensors cover %llu", label,
                          (unsigned long long)data_len, (unsigned long long)at);
        goto out;
    }
    *hdrp = hdr;
    *entsp = ents;
    *nep = ne;
    *hlen = n;
    return TN_OK;
out:
    if (meta) {
        tn_value_release(*meta);
        *meta = NULL;
    }
    free(ents);
    json_decref(hdr);
    return rc;
}

/* st_parse's checks alone, for the scanner (io/internal.h): 0 or the loader's
 * error, *what the scanner's reason code. */
int tn__st_check(const void *data, size_t len, const char *label, const char **what)
{
    json_t *hdr;
    struct st_entry *ents;
    size_t ne;
    uint64_t n;
    int rc = st_parse(data, len, label, &hdr, &ents, &ne, &n, NULL, what);
    if (rc == TN_OK) {
        free(ents);
        json_decref(hdr);
    }
    return rc;
}

/* tn__st_load_map over the mapped file; the tensors keep the mapping alive.
 * NULL with an error naming path. */
struct tn_value *tn_st_load(const char *path, struct tn_value **metadata)
{
    if (metadata)
        *metadata = NULL;
    struct tn_io_map *m = tn__io_map_open(path);
    if (!m)
        return NULL;
    struct tn_value *v = tn__st_load_map(m, path, metadata);
    tn__io_map_release(m);
    return v;
}

/* An ODICT of name -> tensor over m (untrusted bytes, checked whole by
 * st_parse first): a tensor aligned for its dtype shares m's pages (copy on
 * write), a misaligned one is copied. *metadata (may be NULL) receives
 * __metadata__ as a DICT of strings, or NULL. New value or NULL with an error
 * naming path. */
struct tn_value *tn__st_load_map(struct tn_io_map *m, const char *path, struct tn_value **metadata)
{
    if (metadata)
        *metadata = NULL;
    struct tn_value *out = NULL, *meta = NULL;
    struct st_entry *ents = NULL;
    json_t *hdr = NULL;
    size_t ne;
    uint64_t n;
    const char *what;
    if (st_parse(m->addr, m->len, path, &hdr, &ents, &ne, &n, &meta, &what) < 0)
        goto out;
    out = tn_value_odict();
    if (!out)
        goto out;
    for (size_t i = 0; i < ne; i++) {
        struct st_entry *e = &ents[i];
        size_t off = 8 + (size_t)n + (size_t)e->begin, nb = (size_t)(e->end - e->begin);
        struct tn_storage *s;
        if (((uintptr_t)(m->addr + off)) % tn_dtype_size(e->dtype) == 0) {
            s = tn__io_map_storage(m, off, nb);
        } else {
            s = tn_storage_new(nb, TN_CPU);
            if (s && nb)
                memcpy(s->data, m->addr + off, nb);
        }
        struct tn_tensor *t = s ? tn_tensor_from_storage(s, 0, e->sizes, e->ndim, NULL, e->dtype) : NULL;
        tn_storage_release(s);
        if (!t || tn_value_set(out, tn_value_str(e->name), tn_value_tensor(t)) < 0) {
            tn_release(t);
            tn_value_release(out);
            out = NULL;
            goto out;
        }
        tn_release(t);
    }
    if (metadata) {
        *metadata = meta;
        meta = NULL;
    }
out:
    tn_value_release(meta);
    free(ents);
    json_decref(hdr);
    return out;
}

struct st_item {
    const char *name;
    struct tn_tensor *t; /* contiguous */
};

/* The writer's order: larger elements first (so every tensor stays aligned to
 * its element size), then by name, as the safetensors library writes. */
static int by_align_then_name(const void *a, const void *b)
{
    const struct st_item *x = a, *y = b;
    size_t sx = tn_dtype_size(x->t->dtype), sy = tn_dtype_size(y->t->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Writes a flat dict of name -> tensor (and metadata, a dict of strings, or
 * NULL) to path as safetensors (tensor/io.h): tensors made contiguous,
 * ordered by by_align_then_name, written through tn_out (atomic). 0 or an
 * error naming path. */
int tn_st_save(const char *path, const struct tn_value *tensors, const struct tn_value *metadata)
{
    if (tensors->kind != TN_VALUE_DICT && tensors->kind != TN_VALUE_ODICT)
        return tn_set_error(TN_EINVAL, "%s: safetensors holds a flat dict of name -> tensor", path);
    size_t n = tensors->v.dict.n;
    struct st_item *items = calloc(n ? n : 1, sizeof *items);
    json_t *hdr = json_object();
    char *text = NULL;
    struct tn_out *out = NULL;
    int rc = 0;
    if (!items || !hdr) {
        rc = tn_set_error(TN_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tn_value *k = tensors->v.dict.keys[i], *v = tensors->v.dict.vals[i];
        if (k->kind != TN_VALUE_STR || v->kind != TN_VALUE_TENSOR) {
            rc = tn_set_error(TN_EINVAL, "%s: item %zu is not a str -> tensor pair", path, i);
            goto out;
        }
        if (!strcmp(k->v.str.s, "__metadata__")) {
            rc = tn_set_error(TN_EINVAL, "%s: __metadata__ is reserved", path);
            goto out;
        }
        items[i].name = k->v.str.s;
        items[i].t = tn_contiguous(v->v.tensor);
        if (!items[i].t) {
            rc = tn_last_status();
            goto out;
        }
    }
    qsort(items, n, sizeof *items, by_align_then_name);
    if (metadata && metadata->v.dict.n) {
        json_t *m = json_object();
        for (size_t i = 0; i < metadata->v.dict.n; i++) {
            const struct tn_value *k = metadata->v.dict.keys[i], *v = metadata->v.dict.vals[i];
            if (k->kind != TN_VALUE_STR || v->kind != TN_VALUE_STR) {
                json_decref(m);
                rc = tn_set_error(TN_EINVAL, "%s: __metadata__ holds str -> str only", path);
                goto out;
            }
            json_object_set_new(m, k->v.str.s, json_string(v->v.str.s));
        }
        json_object_set_new(hdr, "__metadata__", m);
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        struct tn_tensor *t = items[i].t;
        if (!tn_dtype_info(t->dtype)->safetensors) {
            rc = tn_set_error(TN_EDTYPE, "%s: %s: safetensors has no %s dtype", path,
                              items[i].name, tn_dtype_name(t->dtype));
            goto out;
        }
        json_t *e = json_object(), *sh = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(sh, json_integer(t->sizes[d]));
        json_object_set_new(e, "dtype", json_string(tn_dtype_info(t->dtype)->safetensors));
        json_object_set_new(e, "shape", sh);
        uint64_t nb = tn_nbytes(t);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)at, (json_int_t)(at + nb)));
        at += nb;
        if (json_object_set_new(hdr, items[i].name, e) < 0) {
            rc = tn_set_error(TN_EINVAL, "%s: name %s is not valid UTF-8", path, items[i].name);
            goto out;
        }
    }
    text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        rc = tn_set_error(TN_ENOMEM, "out of memory");
        goto out;
    }
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    out = tn_out_open(path);
    if (!out) {
        rc = tn_last_status();
        goto out;
    }
    FILE *f = tn_out_file(out);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(lenb, 1, 8, f);
    fwrite(text, 1, hl, f);
    for (size_t i = hl; i < padded; i++)
        fputc(' ', f);
    uint64_t written = 8 + padded;
    for (size_t i = 0; i < n; i++)
        if (tn__io_write_progress(f, tn_data(items[i].t), tn_nbytes(items[i].t), &written) < 0)
            break; /* the error stays in f: the commit reports it */
    rc = tn_out_commit(out, true);
    out = NULL;
out:
    tn_out_abort(out);
    for (size_t i = 0; items && i < n; i++)
        tn_release(items[i].t);
    free(items);
    free(text);
    json_decref(hdr);
    return rc;
}
