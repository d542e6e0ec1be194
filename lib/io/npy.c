/*
 * io/npy.c: NumPy's .npy (format 1.0-3.0) and .npz (a zip of .npy
 * members, stored or deflated) read and write (lib/io/load.c finds the
 * format of a file).
 */
#include "io/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_HEADER (1u << 20)

/* The dtype of a numpy descr string ('<f4', '|b1', ...) through the dtype
 * table's numpy codes, or TN_DTYPE_UNSET for one tensorkit lacks (a
 * big-endian one among them). */
static enum tn_dtype npy_dtype(const char *descr)
{
    /* '=' and '<' are both little-endian here; '|' for one-byte types. */
    char d[16];
    snprintf(d, sizeof d, "%s", descr);
    if (d[0] == '=')
        d[0] = '<';
    for (int i = 0; i < TN_NUM_ALL_DTYPES; i++) {
        const char *np = tn_dtype_info((enum tn_dtype)i)->numpy;
        if (np && !strcmp(d, np))
            return (enum tn_dtype)i;
    }
    /* numpy writes one-byte types with '|', but accept '<' too. */
    if (!strcmp(d, "<b1")) return TN_BOOL;
    if (!strcmp(d, "<u1")) return TN_UINT8;
    if (!strcmp(d, "<i1")) return TN_INT8;
    return TN_DTYPE_UNSET;
}

/* Finds 'key': in the header dict and returns a pointer past the colon. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

/* What a .npy header says (tn__npy_header). */
struct npy_header {
    enum tn_dtype dtype;
    bool fortran;
    int ndim;
    int64_t sizes[TN_MAX_DIMS];
    int64_t numel;
    size_t data; /* where the array's bytes start */
};

/*
 * The header of a .npy of len bytes, checked as tn_npy_parse needs it: a
 * dtype tensorkit has (TN_EDTYPE otherwise), a shape of non-negative sizes
 * whose byte count fits int64 ("overflow computing the size of the
 * array"), and data bytes enough.  The scanner (tn__npy_check) and the
 * loader share it, so scan flags what ls refuses.
 */
static int npy_header(const unsigned char *b, size_t len, const char *label, struct npy_header *o)
{
    if (len < 10 || memcmp(b, "\x93NUMPY", 6))
        return tn_set_error(TN_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", label);
    int major = b[6];
    size_t hl, at;
    if (major == 1) {
        hl = (size_t)b[8] | (size_t)b[9] << 8;
        at = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return tn_set_error(TN_EFORMAT, "%s: truncated .npy header", label);
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        at = 12;
    } else {
        return tn_set_error(TN_EFORMAT, "%s: .npy format version %d is not supported", label, major);
    }
    if (hl > NPY_MAX_HEADER || hl > len - at)
        return tn_set_error(TN_EFORMAT, "%s: .npy header of %zu bytes runs past the file", label, hl);
    char *h = malloc(hl + 1);
    if (!h)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", label);
    memcpy(h, b + at, hl);
    h[hl] = 0;
    int rc = TN_OK;
    const char *p = dict_value(h, "descr");
    char descr[16] = "";
    if (p && *p == '\'') {
        const char *q = strchr(p + 1, '\'');
        if (q && (size_t)(q - p - 1) < sizeof descr) {
            memcpy(descr, p + 1, (size_t)(q - p - 1));
            descr[q - p - 1] = 0;
        }
    }
    o->dtype = npy_dtype(descr);
    if (o->dtype == TN_DTYPE_UNSET) {
        rc = tn_set_error(TN_EDTYPE, "%s: .npy dtype '%s' is not supported by tensorkit", label,
                          p ? descr : "?");
        goto out;
    }
    p = dict_value(h, "fortran_order");
    if (p && !strncmp(p, "False", 5))
        o->fortran = false;
    else if (p && !strncmp(p, "True", 4))
        o->fortran = true;
    else {
        rc = tn_set_error(TN_EFORMAT, "%s: .npy header has no fortran_order", label);
        goto out;
    }
    p = dict_value(h, "shape");
    if (!p || *p != '(') {
        rc = tn_set_error(TN_EFORMAT, "%s: .npy header has no shape", label);
        goto out;
    }
    o->ndim = 0;
    p++;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        if (*p == '-') {
            rc = tn_set_error(TN_EFORMAT, "%s: .npy shape holds a negative size", label);
            goto out;
        }
        if (*p < '0' || *p > '9' || o->ndim == TN_MAX_DIMS) {
            rc = tn_set_error(TN_EFORMAT, "%s: bad .npy shape", label);
            goto out;
        }
        errno = 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (errno == ERANGE) {
            rc = tn_set_error(TN_EFORMAT, "%s: overflow computing the size of the array", label);
            goto out;
        }
        o->sizes[o->ndim++] = v;
        p = end;
        if (*p == 'L')
            p++;
    }
    /* Element and byte counts in int64, as a tensor holds them. */
    size_t es = tn_dtype_size(o->dtype);
    uint64_t nbytes = es;
    o->numel = 1;
    for (int d = 0; d < o->ndim; d++) {
        uint64_t s = (uint64_t)o->sizes[d];
        if (s && nbytes > (uint64_t)INT64_MAX / s) {
            rc = tn_set_error(TN_EFORMAT, "%s: overflow computing the size of the array", label);
            goto out;
        }
        nbytes *= s;
        o->numel *= o->sizes[d];
    }
    size_t body = len - at - hl;
    if (nbytes > body) {
        rc = tn_set_error(TN_EFORMAT, "%s: .npy data holds %zu bytes but the shape needs %llu",
                          label, body, (unsigned long long)nbytes);
        goto out;
    }
    o->data = at + hl;
out:
    free(h);
    return rc;
}

/* The header checks of tn_npy_parse alone, for the scanner (io/internal.h). 0
 * or the loader's error naming label. */
int tn__npy_check(const void *data, size_t len, const char *label)
{
    struct npy_header h;
    return npy_header(data, len, label, &h);
}

/* The strides of a .npy's array: Fortran order keeps its own. */
static void npy_strides(const struct npy_header *hd, int64_t *strides)
{
    if (!hd->fortran) {
        tn_contiguous_strides(hd->sizes, hd->ndim, strides);
        return;
    }
    int64_t s = 1;
    for (int d = 0; d < hd->ndim; d++) {
        strides[d] = s;
        s *= hd->sizes[d] ? hd->sizes[d] : 1;
    }
}

/* A new tensor from .npy bytes (untrusted: the header is parsed within
 * NPY_MAX_HEADER and the data's size checked against len by npy_header before
 * the copy). Fortran order keeps its strides. The caller owns the tensor;
 * data stays the caller's. NULL with an error naming label. */
struct tn_tensor *tn_npy_parse(const void *data, size_t len, const char *label)
{
    const unsigned char *b = data;
    struct npy_header hd;
    if (npy_header(b, len, label, &hd) < 0)
        return NULL;
    int64_t strides[TN_MAX_DIMS];
    npy_strides(&hd, strides);
    struct tn_tensor *t = tn_empty_strided(hd.sizes, hd.ndim, strides, hd.dtype);
    if (t && hd.numel)
        memcpy(t->storage->data, b + hd.data, (size_t)hd.numel * tn_dtype_size(hd.dtype));
    return t;
}

/* The .npy header (format 1.0, C order, padded as numpy pads it so the
 * data starts 64-aligned) of the contiguous c into *o. 0, or TN_EDTYPE for
 * a dtype numpy lacks, or TN_ENOMEM (o freed). */
static int npy_header_bytes(const struct tn_tensor *c, struct tn__bytes *o)
{
    const char *descr = tn_dtype_info(c->dtype)->numpy;
    if (!descr)
        return tn_set_error(TN_EDTYPE, "numpy has no %s dtype", tn_dtype_name(c->dtype));
    struct tn__bytes h = {0};
    tn__bytes_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < c->ndim; d++)
        tn__bytes_printf(&h, d + 1 == c->ndim && c->ndim == 1 ? "%lld," : d + 1 < c->ndim ? "%lld, " : "%lld",
                          (long long)c->sizes[d]);
    tn__bytes_printf(&h, "), }");
    /* numpy pads with spaces and a newline so the data starts 64-aligned. */
    size_t total = 10 + h.len + 1;
    size_t pad = (64 - total % 64) % 64;
    for (size_t i = 0; i < pad; i++)
        tn__bytes_byte(&h, ' ');
    tn__bytes_byte(&h, '\n');
    tn__bytes_put(o, "\x93NUMPY\x01\x00", 8);
    tn__bytes_u16(o, (uint16_t)h.len);
    tn__bytes_put(o, h.data, h.len);
    free(h.data);
    if (o->failed || h.failed || h.len > 0xFFFF) {
        free(o->data);
        *o = (struct tn__bytes){0};
        return tn_set_error(TN_ENOMEM, "out of memory encoding .npy");
    }
    return 0;
}

/* t as .npy bytes (npy_header_bytes, then the data) in a new malloc'd
 * buffer *out of *len bytes that the caller frees. 0, TN_EDTYPE for a
 * dtype numpy lacks, or TN_ENOMEM. */
int tn_npy_encode(const struct tn_tensor *t, void **out, size_t *len)
{
    if (!tn_dtype_info(t->dtype)->numpy)
        return tn_set_error(TN_EDTYPE, "numpy has no %s dtype", tn_dtype_name(t->dtype));
    struct tn_tensor *c = tn_contiguous(t);
    if (!c)
        return tn_last_status();
    struct tn__bytes o = {0};
    int rc = npy_header_bytes(c, &o);
    if (rc == 0) {
        tn__bytes_put(&o, tn_data(c), tn_nbytes(c));
        if (o.failed) {
            free(o.data);
            rc = tn_set_error(TN_ENOMEM, "out of memory encoding .npy");
        }
    }
    tn_release(c);
    if (rc < 0)
        return rc;
    *out = o.data;
    *len = o.len;
    return 0;
}

/* The mapped file's array as a tensor over the mapping (private, so
 * writes to the tensor copy pages, never the file; the storage keeps the
 * map alive) where its data is aligned for its dtype, as checkpoints and
 * safetensors load; else tn_npy_parse's copy. Copying 32 MiB out of the
 * map (and faulting in fresh pages for it) was a large part of `tcompile
 * run`'s whole-process overhead (issue 27). NULL with an error naming
 * path. */
struct tn_tensor *tn_npy_load(const char *path)
{
    struct tn_io_map *m = tn__io_map_open(path);
    if (!m)
        return NULL;
    struct npy_header hd;
    struct tn_tensor *t = NULL;
    if (m->mapped && npy_header(m->addr, m->len, path, &hd) == 0 && hd.numel &&
        (uintptr_t)(m->addr + hd.data) % tn_dtype_size(hd.dtype) == 0) {
        int64_t strides[TN_MAX_DIMS];
        npy_strides(&hd, strides);
        struct tn_storage *s =
            tn__io_map_storage(m, hd.data, (size_t)hd.numel * tn_dtype_size(hd.dtype));
        t = s ? tn_tensor_from_storage(s, 0, hd.sizes, hd.ndim, strides, hd.dtype) : NULL;
        tn_storage_release(s);
    } else {
        t = tn_npy_parse(m->addr, m->len, path);
    }
    tn__io_map_release(m);
    return t;
}

/* Writes t to path as .npy through tn_out_open (atomic; fsynced with
 * sync): the header, then the tensor's own bytes, with no encoded copy (a
 * contiguous tensor is written from its storage; a 32 MiB output's copy
 * into a growing buffer took 15 ms of `tcompile run`, issue 27). 0 or an
 * error naming path. */
int tn_npy_write(const char *path, const struct tn_tensor *t, bool sync)
{
    if (!tn_dtype_info(t->dtype)->numpy)
        return tn_set_error(TN_EDTYPE, "%s: numpy has no %s dtype", path, tn_dtype_name(t->dtype));
    struct tn_tensor *c = tn_contiguous(t);
    if (!c)
        return tn_error_prefix("%s", path);
    struct tn__bytes h = {0};
    if (npy_header_bytes(c, &h) < 0) {
        tn_release(c);
        return tn_error_prefix("%s", path);
    }
    struct tn_out *o = tn_out_open(path);
    int rc = o ? 0 : tn_last_status();
    if (o) {
        FILE *f = tn_out_file(o);
        size_t n = tn_nbytes(c);
        if (fwrite(h.data, 1, h.len, f) != h.len || (n && fwrite(tn_data(c), 1, n, f) != n)) {
            int err = errno;
            tn_out_abort(o);
            rc = tn_set_error(TN_EIO, "%s: cannot write: %s", path, strerror(err));
        } else {
            rc = tn_out_commit(o, sync);
        }
    }
    free(h.data);
    tn_release(c);
    return rc;
}

/* tn_npy_write, fsynced. */
int tn_npy_save(const char *path, const struct tn_tensor *t)
{
    return tn_npy_write(path, t, true);
}

/* tn_npz_load_zip over the archive at path. NULL with an error. */
struct tn_value *tn_npz_load(const char *path)
{
    struct tn_zip *z = tn_zip_open(path);
    if (!z)
        return NULL;
    struct tn_value *v = tn_npz_load_zip(z);
    tn_zip_close(z);
    return v;
}

/* An ODICT of member name without .npy -> tensor for every member of z
 * (borrowed), each read within tn_zip_read's limit and parsed as untrusted; a
 * member not named *.npy is an error. New value or NULL with an error naming
 * the member. */
struct tn_value *tn_npz_load_zip(struct tn_zip *z)
{
    const char *path = tn_zip_label(z);
    struct tn_value *out = tn_value_odict();
    for (size_t i = 0; out && i < tn_zip_count(z); i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        size_t nl = strlen(e->name);
        if (nl < 4 || strcmp(e->name + nl - 4, ".npy")) {
            tn_set_error(TN_EFORMAT, "%s: member %s is not a .npy file", path, e->name);
            goto fail;
        }
        void *d;
        size_t len;
        if (tn_zip_read(z, i, 0, &d, &len) < 0)
            goto fail;
        char label[1024];
        snprintf(label, sizeof label, "%s: %s", path, e->name);
        struct tn_tensor *t = tn_npy_parse(d, len, label);
        free(d);
        if (!t)
            goto fail;
        struct tn_value *k = tn_value_str_n(e->name, nl - 4);
        if (tn_value_set(out, k, tn_value_tensor(t)) < 0) {
            tn_release(t);
            goto fail;
        }
        tn_release(t);
    }
    return out;
fail:
    tn_value_release(out);
    return NULL;
}

/* Writes a flat dict of name -> tensor to path as an .npz (stored members
 * named <name>.npy, 64-aligned), atomically. 0 or an error naming path. */
int tn_npz_save(const char *path, const struct tn_value *tensors)
{
    if (tensors->kind != TN_VALUE_DICT && tensors->kind != TN_VALUE_ODICT)
        return tn_set_error(TN_EINVAL, "%s: .npz holds a flat dict of name -> tensor", path);
    struct tn_zip_writer *w = tn_zip_writer_open(path, 64);
    if (!w)
        return tn_last_status();
    for (size_t i = 0; i < tensors->v.dict.n; i++) {
        const struct tn_value *k = tensors->v.dict.keys[i], *v = tensors->v.dict.vals[i];
        if (k->kind != TN_VALUE_STR || v->kind != TN_VALUE_TENSOR) {
            tn_zip_writer_abort(w);
            return tn_set_error(TN_EINVAL, "%s: item %zu is not a str -> tensor pair", path, i);
        }
        void *d;
        size_t n;
        if (tn_npy_encode(v->v.tensor, &d, &n) < 0) {
            tn_zip_writer_abort(w);
            return tn_error_prefix("%s: %s", path, k->v.str.s);
        }
        char *name = malloc(k->v.str.len + 5);
        if (!name) {
            free(d);
            tn_zip_writer_abort(w);
            return tn_set_error(TN_ENOMEM, "out of memory");
        }
        snprintf(name, k->v.str.len + 5, "%s.npy", k->v.str.s);
        int rc = tn_zip_writer_add(w, name, d, n);
        free(name);
        free(d);
        if (rc < 0) {
            tn_zip_writer_abort(w);
            return rc;
        }
    }
    return tn_zip_writer_finish(w);
}
