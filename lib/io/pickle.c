/*
 * io/pickle.c: the pickle opcode decoder (shared by the restricted loader
 * and the scanner) and the writer that emits what torch.save's pickler
 * emits, memo included, so that our files match PyTorch's byte for byte.
 */
#include "io/internal.h"

#include <stdlib.h>
#include <string.h>

/* The opcode table's name for a byte (io/internal.h), or NULL: a static
 * string. */
const char *tn__pickle_op_name(int code)
{
    switch (code) {
#define TN_X_NAME(N, c, r, k) case c: return #N;
        TN_PICKLE_OPCODES(TN_X_NAME)
#undef TN_X_NAME
    default:
        return NULL;
    }
}

/* The readers that execute an opcode (NONE for a byte that is none). */
static enum tn__pickle_reader op_reader(int code)
{
    switch (code) {
#define TN_X_READER(N, c, r, k) case c: return TN_PICKLE_READER_##r;
        TN_PICKLE_OPCODES(TN_X_READER)
#undef TN_X_READER
    default:
        return TN_PICKLE_READER_NONE;
    }
}

/* The table's fourth column as counts (io/internal.h). */
struct tn__pickle_slice tn__pickle_op_slice(int code)
{
    enum { NO, T1, T2, T3, F1, F2, TM, FM };
    static const struct tn__pickle_slice of[] = {
        [NO] = {0, false}, [T1] = {1, false}, [T2] = {2, false}, [T3] = {3, false},
        [F1] = {1, true}, [F2] = {2, true}, [TM] = {TN_PICKLE_SLICE_MARK, false},
        [FM] = {TN_PICKLE_SLICE_MARK, true},
    };
    switch (code) {
#define TN_X_SLICE(N, c, r, k) case c: return of[k];
        TN_PICKLE_OPCODES(TN_X_SLICE)
#undef TN_X_SLICE
    default:
        return of[NO];
    }
}

/* weights_only's opcode set for `allow`, from the table's third column
 * (io/internal.h). */
bool tn__pickle_op_allowed(int code, enum tn_ckpt_allowlist allow)
{
    enum tn__pickle_reader r = op_reader(code);
    return r == TN_PICKLE_READER_ALL || r == TN_PICKLE_READER_CKPT ||
           (r == TN_PICKLE_READER_TORCH2 && allow != TN_ALLOW_TORCH1);
}

/* The opcodes our reader of a DCP .metadata runs, from the same column. */
bool tn__pickle_op_dcp(int code)
{
    enum tn__pickle_reader r = op_reader(code);
    return r == TN_PICKLE_READER_ALL || r == TN_PICKLE_READER_TORCH2 ||
           r == TN_PICKLE_READER_DCP;
}

/* The error for an argument running past the end of the stream: TN_EFORMAT
 * naming label, the opcode and its offset. */
static int truncated(const char *label, size_t pos, int code)
{
    return tn_set_error(TN_EFORMAT, "%s: truncated pickle: %s at byte %zu runs past the end",
                        label, tn__pickle_op_name(code), pos);
}

/* A newline-terminated argument starting at *p in buf[0..len) (untrusted):
 * *s and *n point into buf (borrowed, no NUL), *p moves past the newline.
 * -1 when no newline follows (the caller names the truncation). */
static int line_arg(const unsigned char *buf, size_t len, size_t *p, const char **s, size_t *n)
{
    const unsigned char *nl = *p <= len ? memchr(buf + *p, '\n', len - *p) : NULL;
    if (!nl)
        return -1;
    *s = (const char *)buf + *p;
    *n = (size_t)(nl - (buf + *p));
    *p += *n + 1;
    return 0;
}

/* n little-endian bytes at p (n <= 8; the caller checked they are in the
 * stream). */
static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Parses a decimal integer argument (INT, LONG, GET, PUT); sets big when it
 * does not fit in int64. */
static void parse_decimal(struct tn_pickle_op *op)
{
    const char *s = op->s;
    size_t n = op->slen, i = 0;
    bool neg = false;
    if (n && s[n - 1] == 'L')
        n--;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t v = 0;
    op->big = false;
    if (i == n)
        op->big = true; /* not a number: treated as unusable */
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            op->big = true;
            return;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + neg)
        op->big = true;
    op->i = neg ? (int64_t)(0 - v) : (int64_t)v;
}

/* Decodes one opcode of untrusted bytes (io/internal.h): every length is
 * checked against len before the argument is read, string arguments point
 * into buf (borrowed, not NUL-terminated), integers too wide for int64 set
 * op->big. Returns 0 with *pos advanced, or TN_EFORMAT naming label and the
 * offset (*pos unchanged). */
int tn__pickle_decode(const unsigned char *buf, size_t len, size_t *pos, struct tn_pickle_op *op,
                      const char *label)
{
    size_t p = *pos;
    memset(op, 0, sizeof *op);
    op->pos = p;
    if (p >= len)
        return tn_set_error(TN_EFORMAT, "%s: truncated pickle: no STOP before byte %zu", label, p);
    int c = buf[p++];
    op->code = c;
    size_t avail = len - p;
    int fixed = -1; /* bytes of a fixed-size argument */
    int lenbytes = 0; /* bytes of a length prefix */
    switch (c) {
    case TN_OP_BININT1: case TN_OP_BINGET: case TN_OP_BINPUT: case TN_OP_EXT1: case TN_OP_PROTO:
        fixed = 1; break;
    case TN_OP_BININT2: case TN_OP_EXT2:
        fixed = 2; break;
    case TN_OP_BININT: case TN_OP_LONG_BINGET: case TN_OP_LONG_BINPUT: case TN_OP_EXT4:
        fixed = 4; break;
    case TN_OP_BINFLOAT: case TN_OP_FRAME:
        fixed = 8; break;
    case TN_OP_LONG1: case TN_OP_SHORT_BINSTRING: case TN_OP_SHORT_BINUNICODE:
    case TN_OP_SHORT_BINBYTES:
        lenbytes = 1; break;
    case TN_OP_LONG4: case TN_OP_BINSTRING: case TN_OP_BINUNICODE: case TN_OP_BINBYTES:
        lenbytes = 4; break;
    case TN_OP_BINUNICODE8: case TN_OP_BINBYTES8: case TN_OP_BYTEARRAY8:
        lenbytes = 8; break;
    case TN_OP_FLOAT: case TN_OP_INT: case TN_OP_LONG: case TN_OP_STRING: case TN_OP_UNICODE:
    case TN_OP_PERSID: case TN_OP_GET: case TN_OP_PUT:
        if (line_arg(buf, len, &p, &op->s, &op->slen) < 0)
            return truncated(label, op->pos, c);
        if (c == TN_OP_INT || c == TN_OP_LONG || c == TN_OP_GET || c == TN_OP_PUT)
            parse_decimal(op);
        else if (c == TN_OP_FLOAT) {
            char tmp[64];
            size_t n = op->slen < 63 ? op->slen : 63;
            memcpy(tmp, op->s, n);
            tmp[n] = 0;
            op->f = strtod(tmp, NULL);
        }
        *pos = p;
        return 0;
    case TN_OP_GLOBAL: case TN_OP_INST:
        if (line_arg(buf, len, &p, &op->s, &op->slen) < 0 ||
            line_arg(buf, len, &p, &op->s2, &op->s2len) < 0)
            return truncated(label, op->pos, c);
        *pos = p;
        return 0;
    default:
        if (!tn__pickle_op_name(c))
            return tn_set_error(TN_EFORMAT, "%s: invalid pickle opcode 0x%02x at byte %zu", label,
                                c, op->pos);
        *pos = p; /* no argument */
        return 0;
    }
    if (fixed > 0) {
        if (avail < (size_t)fixed)
            return truncated(label, op->pos, c);
        const unsigned char *a = buf + p;
        if (c == TN_OP_BININT)
            op->i = (int32_t)(uint32_t)le(a, 4);
        else if (c == TN_OP_BINFLOAT) {
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++)
                bits = bits << 8 | a[i];
            memcpy(&op->f, &bits, 8);
        } else
            op->i = (int64_t)le(a, fixed);
        *pos = p + (size_t)fixed;
        return 0;
    }
    if (avail < (size_t)lenbytes)
        return truncated(label, op->pos, c);
    uint64_t n = le(buf + p, lenbytes);
    if ((c == TN_OP_LONG4 || c == TN_OP_BINSTRING) && (int32_t)n < 0)
        return tn_set_error(TN_EFORMAT, "%s: negative length in %s at byte %zu", label,
                            tn__pickle_op_name(c), op->pos);
    p += (size_t)lenbytes;
    if (n > len - p)
        return truncated(label, op->pos, c);
    op->s = (const char *)buf + p;
    op->slen = (size_t)n;
    if (c == TN_OP_LONG1 || c == TN_OP_LONG4) {
        /* Little-endian two's complement; int64 or "big". */
        const unsigned char *d = buf + p;
        if (n == 0) {
            op->i = 0;
        } else {
            bool neg = d[n - 1] & 0x80;
            size_t sig = (size_t)n;
            while (sig > 1 && d[sig - 1] == (neg ? 0xff : 0x00) && ((d[sig - 2] & 0x80) != 0) == neg)
                sig--;
            if (sig > 8) {
                op->big = true;
            } else {
                uint64_t v = neg ? UINT64_MAX : 0;
                for (size_t i = sig; i-- > 0;)
                    v = v << 8 | d[i];
                op->i = (int64_t)v;
            }
        }
    }
    *pos = p + (size_t)n;
    return 0;
}

/* ------------------------------------------------------------------ writer */

/* The memo: object identity -> memo index, as CPython's pickler keys it by
 * id().  Open addressing over pointers. */
struct memo {
    const void **keys;
    uint32_t *vals;
    size_t cap, n;
};

/* A pointer's slot in a memo of cap (a power of two) slots. */
static size_t memo_hash(const void *k, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

/* The memo index the writer gave object k, or -1. */
static long memo_get(const struct memo *m, const void *k)
{
    if (!m->cap)
        return -1;
    for (size_t i = memo_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (m->keys[i] == k)
            return m->vals[i];
    }
}

/* Records memo index v for object k, growing the table at half full. 0 or
 * TN_ENOMEM. */
static int memo_put(struct memo *m, const void *k, uint32_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        const void **keys = calloc(cap, sizeof *keys);
        uint32_t *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return tn_set_error(TN_ENOMEM, "out of memory for the pickle memo");
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = memo_hash(m->keys[i], cap);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t i = memo_hash(k, m->cap);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
    return 0;
}

struct writer {
    struct tn__bytes *out;
    struct memo memo;
    uint32_t next; /* the next memo index (len(memo)) */
    struct tn_pickle_storages *st;
    int depth;
};

/* Identity keys for objects CPython shares: globals (a class or function is
 * one object), 'storage' and 'cpu' (interned literals), the empty string
 * and one-character latin-1 strings (CPython's singletons). */
static const char k_odict, k_rebuild_v2, k_rebuild_v3, k_rebuild_param, k_storage_str, k_cpu_str;
static const char k_untyped;
static const char k_storage_class[TN_NUM_ALL_DTYPES], k_dtype_global[TN_NUM_ALL_DTYPES];

/* Memoizes the object just written under the next index (BINPUT, or
 * LONG_BINPUT past 255) and returns the index. */
static uint32_t put_fresh(struct writer *w)
{
    uint32_t idx = w->next++;
    if (idx < 256) {
        tn__bytes_byte(w->out, TN_OP_BINPUT);
        tn__bytes_byte(w->out, (unsigned char)idx);
    } else {
        tn__bytes_byte(w->out, TN_OP_LONG_BINPUT);
        tn__bytes_u32(w->out, idx);
    }
    return idx;
}

/* Memoizes the object just written (put_fresh) under identity key. 0 or
 * TN_ENOMEM. */
static int put_memo(struct writer *w, const void *key)
{
    return memo_put(&w->memo, key, put_fresh(w));
}

/* Writes a memo get and returns 1 when key is memoized, else 0. */
static int try_get(struct writer *w, const void *key)
{
    long idx = memo_get(&w->memo, key);
    if (idx < 0)
        return 0;
    if (idx < 256) {
        tn__bytes_byte(w->out, TN_OP_BINGET);
        tn__bytes_byte(w->out, (unsigned char)idx);
    } else {
        tn__bytes_byte(w->out, TN_OP_LONG_BINGET);
        tn__bytes_u32(w->out, (uint32_t)idx);
    }
    return 1;
}

/* GLOBAL module\nname\n, or a memo get when key was written before (CPython's
 * pickler shares the class object). 0 or TN_ENOMEM. */
static int save_global(struct writer *w, const void *key, const char *module, const char *name)
{
    if (try_get(w, key))
        return 0;
    tn__bytes_byte(w->out, TN_OP_GLOBAL);
    tn__bytes_printf(w->out, "%s\n%s\n", module, name);
    return put_memo(w, key);
}

/* An int in the shortest form CPython's protocol 2 pickler uses (BININT1,
 * BININT2, BININT, LONG1), so our bytes equal torch.save's. */
static void save_int(struct writer *w, int64_t x)
{
    if (x >= 0 && x < 256) {
        tn__bytes_byte(w->out, TN_OP_BININT1);
        tn__bytes_byte(w->out, (unsigned char)x);
    } else if (x >= 0 && x < 65536) {
        tn__bytes_byte(w->out, TN_OP_BININT2);
        tn__bytes_u16(w->out, (uint16_t)x);
    } else if (x >= INT32_MIN && x <= INT32_MAX) {
        tn__bytes_byte(w->out, TN_OP_BININT);
        tn__bytes_u32(w->out, (uint32_t)(int32_t)x);
    } else {
        /* pickle's encode_long: the fewest two's complement bytes. */
        unsigned char b[8];
        uint64_t u = (uint64_t)x;
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(u >> (8 * i));
        int n = 8;
        while (n > 1 && b[n - 1] == (x < 0 ? 0xff : 0) && ((b[n - 2] & 0x80) != 0) == (x < 0))
            n--;
        tn__bytes_byte(w->out, TN_OP_LONG1);
        tn__bytes_byte(w->out, (unsigned char)n);
        tn__bytes_put(w->out, b, (size_t)n);
    }
}

/* A str, memoized by identity as CPython's pickler memoizes it: equal
 * strings that are distinct objects are written twice (PyTorch's files
 * show this even for one-character strings). */
static int save_str_key(struct writer *w, const void *key, const char *s, size_t n)
{
    const void *k = key;
    if (k && try_get(w, k))
        return 0;
    if (n > UINT32_MAX)
        return tn_set_error(TN_EINVAL, "a string of %zu bytes is too long to pickle", n);
    tn__bytes_byte(w->out, TN_OP_BINUNICODE);
    tn__bytes_u32(w->out, (uint32_t)n);
    tn__bytes_put(w->out, s, n);
    if (!k) /* a fresh object nothing refers to again */
        return put_fresh(w), 0;
    return put_memo(w, k);
}

static int save(struct writer *w, const struct tn_value *v);

/* Items of a dict in batches of 1000, as pickle's _batch_setitems. */
static int save_items(struct writer *w, const struct tn_value *d)
{
    size_t n = d->v.dict.n;
    for (size_t b = 0; b < n; b += 1000) {
        size_t k = n - b < 1000 ? n - b : 1000;
        if (k > 1)
            tn__bytes_byte(w->out, TN_OP_MARK);
        for (size_t i = b; i < b + k; i++)
            if (save(w, d->v.dict.keys[i]) < 0 || save(w, d->v.dict.vals[i]) < 0)
                return tn_last_status();
        tn__bytes_byte(w->out, k > 1 ? TN_OP_SETITEMS : TN_OP_SETITEM);
    }
    return 0;
}

/* collections.OrderedDict() as CPython reduces it (the Parameter's empty
 * hooks dict). 0 or an error. */
static int save_empty_odict(struct writer *w)
{
    if (save_global(w, &k_odict, "collections", "OrderedDict") < 0)
        return tn_last_status();
    tn__bytes_byte(w->out, TN_OP_EMPTY_TUPLE);
    tn__bytes_byte(w->out, TN_OP_REDUCE);
    /* A fresh object: memoized under a key nothing else has. */
    put_fresh(w);
    return 0;
}

/* A fresh tuple of ints (sizes, strides), memoized like any new tuple. */
static int save_int_tuple(struct writer *w, const int64_t *x, int n)
{
    if (n == 0) {
        tn__bytes_byte(w->out, TN_OP_EMPTY_TUPLE);
        return 0;
    }
    if (n > 3)
        tn__bytes_byte(w->out, TN_OP_MARK);
    for (int i = 0; i < n; i++)
        save_int(w, x[i]);
    tn__bytes_byte(w->out, n == 1 ? TN_OP_TUPLE1 : n == 2 ? TN_OP_TUPLE2 : n == 3 ? TN_OP_TUPLE3
                                                                               : TN_OP_TUPLE);
    put_fresh(w);
    return 0;
}

/* Grows the storage table by one entry: s's bytes [off, off + len) as
 * dtype.  Its key, or -1 on error. */
static int64_t add_storage(struct tn_pickle_storages *st, struct tn_storage *s, enum tn_dtype dtype,
                           size_t off, size_t len)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        struct tn_storage **ns = realloc(st->s, cap * sizeof *ns);
        if (ns)
            st->s = ns;
        enum tn_dtype *nd = ns ? realloc(st->dtype, cap * sizeof *nd) : NULL;
        if (nd)
            st->dtype = nd;
        size_t *no = nd ? realloc(st->off, cap * sizeof *no) : NULL;
        if (no)
            st->off = no;
        size_t *nl = no ? realloc(st->len, cap * sizeof *nl) : NULL;
        if (!nl)
            return tn_set_error(TN_ENOMEM, "out of memory"), -1;
        st->len = nl;
        st->cap = cap;
    }
    st->s[st->n] = s;
    st->dtype[st->n] = dtype;
    st->off[st->n] = off;
    st->len[st->n] = len;
    return (int64_t)st->n++;
}

/* The persistent id ('storage', <class>, key, 'cpu', numel) + BINPERSID.
 * Sets *offset to the tensor's storage offset in the storage written. */
static int save_storage(struct writer *w, const struct tn_tensor *t, int64_t *offset)
{
    struct tn_storage *s = t->storage;
    struct tn_pickle_storages *st = w->st;
    size_t esize_t = tn_dtype_size(t->dtype);
    size_t key = st->n;
    bool shared = false;
    *offset = t->offset;
    for (size_t i = 0; i < st->n; i++) {
        if (st->s[i] != s) /* the first entry of a storage is all of it */
            continue;
        if (st->dtype[i] == t->dtype)
            key = i;
        else
            shared = true;
        break;
    }
    if (key == st->n) {
        size_t off = 0, len = s->nbytes;
        if (shared) {
            /* Its storage was saved as another dtype: PyTorch cannot load
             * one storage as two types, so this tensor's own bytes get a
             * storage of their own. */
            int64_t extent = 1;
            for (int d = 0; d < t->ndim && extent; d++)
                extent = t->sizes[d] ? extent + (t->sizes[d] - 1) * t->strides[d] : 0;
            off = (size_t)t->offset * esize_t;
            len = (size_t)extent * esize_t;
            *offset = 0;
        }
        int64_t k = add_storage(st, s, t->dtype, off, len);
        if (k < 0)
            return tn_last_status();
        key = (size_t)k;
    }
    const struct tn_dtype_info *di = tn_dtype_info(t->dtype);
    /* dtypes without a storage class go as an untyped storage of bytes */
    size_t esize = di->storage_class ? di->size : 1;
    tn__bytes_byte(w->out, TN_OP_MARK);
    if (save_str_key(w, &k_storage_str, "storage", 7) < 0 ||
        (di->storage_class
             ? save_global(w, &k_storage_class[t->dtype], "torch", di->storage_class)
             : save_global(w, &k_untyped, "torch.storage", "UntypedStorage")) < 0)
        return tn_last_status();
    char kbuf[24];
    int kn = snprintf(kbuf, sizeof kbuf, "%zu", key);
    /* The key string lives in torch's id_map: one object per storage. */
    /* (a storage of its own is a fresh key string: nothing memoizes it) */
    if ((shared ? save_str_key(w, NULL, kbuf, (size_t)kn)
                : save_str_key(w, (const char *)s + 1, kbuf, (size_t)kn)) < 0 ||
        save_str_key(w, &k_cpu_str, "cpu", 3) < 0)
        return tn_last_status();
    save_int(w, (int64_t)(st->len[key] / esize));
    tn__bytes_byte(w->out, TN_OP_TUPLE);
    put_fresh(w);
    tn__bytes_byte(w->out, TN_OP_BINPERSID);
    return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict()),
 * or for a dtype without a storage class (float8, uint16, ...) as PyTorch
 * 2.x writes it: _rebuild_tensor_v3(untyped storage, ..., OrderedDict(), dtype). */
static int save_plain_tensor(struct writer *w, const struct tn_tensor *t, bool requires_grad)
{
    if (t->device.type != TN_DEVICE_CPU)
        return tn_set_error(TN_EDEVICE, "only CPU tensors can be saved (copy to the CPU first)");
    bool v3 = !tn_dtype_info(t->dtype)->storage_class;
    if (save_global(w, v3 ? &k_rebuild_v3 : &k_rebuild_v2, "torch._utils",
                    v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2") < 0)
        return tn_last_status();
    tn__bytes_byte(w->out, TN_OP_MARK);
    int64_t offset;
    if (save_storage(w, t, &offset) < 0)
        return tn_last_status();
    save_int(w, offset);
    save_int_tuple(w, t->sizes, t->ndim);
    save_int_tuple(w, t->strides, t->ndim);
    tn__bytes_byte(w->out, requires_grad ? TN_OP_NEWTRUE : TN_OP_NEWFALSE);
    if (save_empty_odict(w) < 0 ||
        (v3 && save_global(w, &k_dtype_global[t->dtype], "torch", tn_dtype_name(t->dtype)) < 0))
        return tn_last_status();
    tn__bytes_byte(w->out, TN_OP_TUPLE);
    put_fresh(w);
    tn__bytes_byte(w->out, TN_OP_REDUCE);
    return 0;
}

/* A tensor as torch.save reduces it: _rebuild_tensor_v2 with its storage as a
 * persistent id, or _rebuild_parameter around that for a Parameter; memoized
 * by identity so a tensor saved twice is one object on load. 0 or an error. */
static int save_tensor(struct writer *w, const struct tn_tensor *t)
{
    if (try_get(w, t))
        return 0;
    if (t->flags & TN_TENSOR_PARAMETER) {
        if (save_global(w, &k_rebuild_param, "torch._utils", "_rebuild_parameter") < 0)
            return tn_last_status();
        /* Parameter.__reduce_ex__: (self.data, self.requires_grad, OrderedDict()). */
        if (save_plain_tensor(w, t, false) < 0)
            return tn_last_status();
        put_fresh(w); /* self.data: a fresh tensor object */
        tn__bytes_byte(w->out, t->requires_grad ? TN_OP_NEWTRUE : TN_OP_NEWFALSE);
        if (save_empty_odict(w) < 0)
            return tn_last_status();
        tn__bytes_byte(w->out, TN_OP_TUPLE3);
        put_fresh(w);
        tn__bytes_byte(w->out, TN_OP_REDUCE);
        return put_memo(w, t);
    }
    if (save_plain_tensor(w, t, t->requires_grad) < 0)
        return tn_last_status();
    return put_memo(w, t);
}

/* Writes value v (any kind of tn_value) at nesting depth w->depth, refusing
 * more than 1000 levels as CPython's recursion limit would. 0 or an error;
 * out's bytes are then incomplete. */
static int save(struct writer *w, const struct tn_value *v)
{
    if (++w->depth > 1000) {
        w->depth--;
        return tn_set_error(TN_EINVAL, "value nested more than 1000 deep");
    }
    int rc = 0;
    switch (v->kind) {
    case TN_VALUE_NONE:
        tn__bytes_byte(w->out, TN_OP_NONE);
        break;
    case TN_VALUE_BOOL:
        tn__bytes_byte(w->out, v->v.b ? TN_OP_NEWTRUE : TN_OP_NEWFALSE);
        break;
    case TN_VALUE_INT:
        save_int(w, v->v.i);
        break;
    case TN_VALUE_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &v->v.f, 8);
        tn__bytes_byte(w->out, TN_OP_BINFLOAT);
        for (int i = 7; i >= 0; i--)
            tn__bytes_byte(w->out, (unsigned char)(bits >> (8 * i)));
        break;
    }
    case TN_VALUE_STR:
        rc = save_str_key(w, v, v->v.str.s, v->v.str.len);
        break;
    case TN_VALUE_TUPLE: {
        size_t n = v->v.seq.n;
        if (n == 0) {
            tn__bytes_byte(w->out, TN_OP_EMPTY_TUPLE);
            break;
        }
        if (try_get(w, v))
            break;
        if (n > 3)
            tn__bytes_byte(w->out, TN_OP_MARK);
        for (size_t i = 0; i < n && !rc; i++)
            rc = save(w, v->v.seq.items[i]);
        if (rc)
            break;
        tn__bytes_byte(w->out, n == 1 ? TN_OP_TUPLE1 : n == 2 ? TN_OP_TUPLE2 : n == 3 ? TN_OP_TUPLE3
                                                                                   : TN_OP_TUPLE);
        rc = put_memo(w, v);
        break;
    }
    case TN_VALUE_LIST: {
        if (try_get(w, v))
            break;
        tn__bytes_byte(w->out, TN_OP_EMPTY_LIST);
        if ((rc = put_memo(w, v)) < 0)
            break;
        size_t n = v->v.seq.n;
        for (size_t b = 0; b < n && !rc; b += 1000) {
            size_t k = n - b < 1000 ? n - b : 1000;
            if (k > 1)
                tn__bytes_byte(w->out, TN_OP_MARK);
            for (size_t i = b; i < b + k && !rc; i++)
                rc = save(w, v->v.seq.items[i]);
            tn__bytes_byte(w->out, k > 1 ? TN_OP_APPENDS : TN_OP_APPEND);
        }
        break;
    }
    case TN_VALUE_DICT:
        if (try_get(w, v))
            break;
        tn__bytes_byte(w->out, TN_OP_EMPTY_DICT);
        if ((rc = put_memo(w, v)) == 0)
            rc = save_items(w, v);
        break;
    case TN_VALUE_ODICT:
        if (try_get(w, v))
            break;
        if ((rc = save_global(w, &k_odict, "collections", "OrderedDict")) < 0)
            break;
        tn__bytes_byte(w->out, TN_OP_EMPTY_TUPLE);
        tn__bytes_byte(w->out, TN_OP_REDUCE);
        if ((rc = put_memo(w, v)) < 0 || (rc = save_items(w, v)) < 0)
            break;
        if (v->v.dict.attrs && v->v.dict.attrs->v.dict.n) {
            if ((rc = save(w, v->v.dict.attrs)) == 0)
                tn__bytes_byte(w->out, TN_OP_BUILD);
        }
        break;
    case TN_VALUE_TENSOR:
        rc = save_tensor(w, v->v.tensor);
        break;
    case TN_VALUE_GLOBAL: {
        /* a global loaded as a value (torch.float16) is "module.name": the
         * name is what follows the last dot, as for every global the
         * allowlist lets a value be */
        const char *nl = strrchr(v->v.str.s, '.');
        if (!nl || nl == v->v.str.s || !nl[1] || strchr(v->v.str.s, '\n')) {
            rc = tn_set_error(TN_EINVAL, "cannot pickle the global '%s'", v->v.str.s);
            break;
        }
        char *module = strndup(v->v.str.s, (size_t)(nl - v->v.str.s));
        if (!module) {
            rc = tn_set_error(TN_ENOMEM, "out of memory");
            break;
        }
        rc = save_global(w, v, module, nl + 1);
        free(module);
        break;
    }
    case TN_VALUE_OPAQUE:
        rc = tn_set_error(TN_EINVAL, "cannot write %s: tensorkit loaded it without rebuilding it",
                          v->v.str.s);
        break;
    default:
        rc = tn_set_error(TN_EINVAL, "cannot pickle a %s value", tn_value_kind_name(v->kind));
    }
    w->depth--;
    return rc < 0 ? rc : 0;
}

/* Pickles v as torch.save does (io/internal.h): appends protocol 2 bytes to
 * out and the storages met to st (caller frees st's arrays; the storages stay
 * borrowed from v's tensors). 0 or an error. */
int tn__pickle_dump(const struct tn_value *v, struct tn__bytes *out, struct tn_pickle_storages *st)
{
    struct writer w = {.out = out, .st = st};
    tn__bytes_byte(out, TN_OP_PROTO);
    tn__bytes_byte(out, 2);
    int rc = save(&w, v);
    if (rc == 0) {
        tn__bytes_byte(out, TN_OP_STOP);
        if (out->failed)
            rc = tn_set_error(TN_ENOMEM, "out of memory pickling");
    }
    free(w.memo.keys);
    free(w.memo.vals);
    return rc;
}
