/*
 * io/zip.c: the zip reader (any writer's archives: stored and deflated
 * members, zip64, data descriptors) and the writer that lays members out
 * exactly as PyTorch's miniz-based PyTorchStreamWriter does.
 */
#include "io/internal.h"
#include "core/le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Limits on what an archive can make us allocate. */
#define TN_ZIP_MAX_ENTRIES (1u << 22)
#define TN_ZIP_MAX_INFLATE ((uint64_t)1 << 40)

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define SIG_DESC 0x08074b50u

struct tn_zip {
    struct tn_io_map *map;
    char *label;
    struct tn_zip_entry *entries;
    size_t n;
    char *names; /* every entry's name, NUL-terminated, back to back */
    uint32_t *index; /* open addressing: entry index + 1 of each distinct name */
    size_t index_cap;
    bool encrypted_ok; /* the scanner's view: members flagged encrypted are listed */
};

/* FNV-1a of a NUL-terminated member name, for the name index. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Indexes names so lookups stay O(1) with 20,000-storage checkpoints; the
 * first of duplicate names wins, as tn_zip_find documents. */
static int zip_index(struct tn_zip *z)
{
    size_t cap = 16;
    while (cap < 2 * z->n)
        cap *= 2;
    z->index = calloc(cap, sizeof *z->index);
    if (!z->index)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", z->label);
    z->index_cap = cap;
    for (size_t i = 0; i < z->n; i++) {
        size_t j = (size_t)name_hash(z->entries[i].name) & (cap - 1);
        for (; z->index[j]; j = (j + 1) & (cap - 1))
            if (!strcmp(z->entries[z->index[j] - 1].name, z->entries[i].name))
                break;
        if (!z->index[j])
            z->index[j] = (uint32_t)i + 1;
    }
    return 0;
}

/* Is [off, off+n) inside [0, len)? Without overflow. */
static bool in_range(uint64_t off, uint64_t n, uint64_t len) { return off <= len && n <= len - off; }

/* Fills the zip64 values an entry marks with all-ones, in the format's order
 * (size, compressed size, header offset), from extra field tag 0x0001. */
static int zip64_extra(const unsigned char *ex, size_t exlen, uint64_t *size, uint64_t *csize,
                       uint64_t *off, const char *label, const char *name)
{
    size_t p = 0;
    while (p + 4 <= exlen) {
        uint16_t tag = tn__rd16(ex + p), n = tn__rd16(ex + p + 2);
        if (p + 4 + n > exlen)
            break;
        if (tag == 1) {
            const unsigned char *f = ex + p + 4;
            size_t k = 0;
            uint64_t *want[3] = {size, csize, off};
            for (int i = 0; i < 3; i++) {
                if (*want[i] != 0xFFFFFFFFu)
                    continue;
                if (k + 8 > n)
                    return tn_set_error(TN_EFORMAT, "%s: %s: truncated zip64 extra field", label,
                                        name);
                *want[i] = tn__rd64(f + k);
                k += 8;
            }
            return 0;
        }
        p += 4 + (size_t)n;
    }
    if (*size == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *off == 0xFFFFFFFFu)
        return tn_set_error(TN_EFORMAT, "%s: %s: sizes need a zip64 extra field that is missing",
                            label, name);
    return 0;
}

/* Reads the central directory of z->map (untrusted bytes): the end record is
 * the last within the comment's reach, zip64 records are followed, every
 * count, size and offset is checked against the file before use, and each
 * member's local header must exist and its data fit in the file. Fills
 * z->entries and z->names (owned by z) and the name index. Returns 0, or
 * TN_EFORMAT/TN_ENOMEM naming z->label and the member. */
static int zip_parse(struct tn_zip *z)
{
    const unsigned char *b = z->map->addr;
    size_t len = z->map->len;
    const char *L = z->label;
    if (len < 22)
        return tn_set_error(TN_EFORMAT, "%s: not a zip archive (too short)", L);
    /* The end record is the last PK\5\6 within the comment's reach. */
    size_t eocd = (size_t)-1;
    size_t lo = len >= 22 + 65535 ? len - 22 - 65535 : 0;
    for (size_t p = len - 22 + 1; p-- > lo;) {
        if (tn__rd32(b + p) == SIG_EOCD) {
            eocd = p;
            break;
        }
    }
    if (eocd == (size_t)-1)
        return tn_set_error(TN_EFORMAT, "%s: not a zip archive (no end of central directory)", L);
    uint64_t count = tn__rd16(b + eocd + 10);
    uint64_t cdsize = tn__rd32(b + eocd + 12);
    uint64_t cdoff = tn__rd32(b + eocd + 16);
    if (eocd >= 20 && tn__rd32(b + eocd - 20) == SIG_LOC64) {
        uint64_t off64 = tn__rd64(b + eocd - 20 + 8);
        if (!in_range(off64, 56, len) || tn__rd32(b + off64) != SIG_EOCD64)
            return tn_set_error(TN_EFORMAT, "%s: corrupt zip64 end of central directory", L);
        count = tn__rd64(b + off64 + 32);
        cdsize = tn__rd64(b + off64 + 40);
        cdoff = tn__rd64(b + off64 + 48);
    }
    if (!in_range(cdoff, cdsize, len))
        return tn_set_error(TN_EFORMAT, "%s: central directory lies outside the file", L);
    if (count > cdsize / 46 || count > TN_ZIP_MAX_ENTRIES)
        return tn_set_error(TN_EFORMAT, "%s: central directory claims %llu entries in %llu bytes",
                            L, (unsigned long long)count, (unsigned long long)cdsize);
    z->entries = calloc(count ? count : 1, sizeof *z->entries);
    z->names = malloc(cdsize + 1);
    if (!z->entries || !z->names)
        return tn_set_error(TN_ENOMEM, "%s: out of memory reading the central directory", L);
    size_t p = cdoff, end = cdoff + cdsize, np = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (!in_range(p, 46, end) || tn__rd32(b + p) != SIG_CENTRAL)
            return tn_set_error(TN_EFORMAT, "%s: corrupt central directory entry %llu", L,
                                (unsigned long long)i);
        struct tn_zip_entry *e = &z->entries[i];
        e->flags = tn__rd16(b + p + 8);
        e->method = tn__rd16(b + p + 10);
        e->crc = tn__rd32(b + p + 16);
        e->csize = tn__rd32(b + p + 20);
        e->size = tn__rd32(b + p + 24);
        size_t nlen = tn__rd16(b + p + 28), xlen = tn__rd16(b + p + 30), clen = tn__rd16(b + p + 32);
        e->header_offset = tn__rd32(b + p + 42);
        if (!in_range(p + 46, nlen + xlen + clen, end))
            return tn_set_error(TN_EFORMAT, "%s: corrupt central directory entry %llu", L,
                                (unsigned long long)i);
        if (memchr(b + p + 46, 0, nlen))
            return tn_set_error(TN_EFORMAT, "%s: entry %llu has a NUL byte in its name", L,
                                (unsigned long long)i);
        memcpy(z->names + np, b + p + 46, nlen);
        z->names[np + nlen] = 0;
        e->name = (const char *)(uintptr_t)np; /* fixed up below, names may move */
        np += nlen + 1;
        if (zip64_extra(b + p + 46 + nlen, xlen, &e->size, &e->csize, &e->header_offset, L,
                        z->names + (size_t)e->name) < 0)
            return tn_last_status();
        p += 46 + nlen + xlen + clen;
        const char *nm = z->names + (uintptr_t)e->name;
        if ((e->flags & 1) && !z->encrypted_ok)
            return tn_set_error(TN_EFORMAT, "%s: %s is encrypted", L, nm);
        if (e->method != 0 && e->method != 8)
            return tn_set_error(TN_EFORMAT, "%s: %s uses compression method %u (only stored and "
                                "deflated are read)", L, nm, e->method);
        if (e->method == 0 && e->csize != e->size && !(e->flags & 1))
            return tn_set_error(TN_EFORMAT, "%s: %s is stored but its sizes differ", L, nm);
        uint64_t h = e->header_offset;
        if (!in_range(h, 30, len) || tn__rd32(b + h) != SIG_LOCAL)
            return tn_set_error(TN_EFORMAT, "%s: %s: no local file header at offset %llu", L, nm,
                                (unsigned long long)h);
        e->data_offset = h + 30 + tn__rd16(b + h + 26) + tn__rd16(b + h + 28);
        if (!in_range(e->data_offset, e->csize, len))
            return tn_set_error(TN_EFORMAT, "%s: %s: %llu bytes at offset %llu run past the end "
                                "of the file (%zu bytes)", L, nm, (unsigned long long)e->csize,
                                (unsigned long long)e->data_offset, len);
    }
    z->n = count;
    for (size_t i = 0; i < count; i++)
        z->entries[i].name = z->names + (uintptr_t)z->entries[i].name;
    return zip_index(z);
}

/* A reader over m, which it takes over (released on failure too), labelled
 * `label` in messages; encrypted_ok lists encrypted members (the scanner)
 * instead of refusing the archive. NULL with an error. */
static struct tn_zip *zip_new(struct tn_io_map *m, const char *label, bool encrypted_ok)
{
    struct tn_zip *z = calloc(1, sizeof *z);
    if (!z || !(z->label = strdup(label))) {
        free(z);
        tn__io_map_release(m);
        tn_set_error(TN_ENOMEM, "%s: out of memory", label);
        return NULL;
    }
    z->map = m;
    z->encrypted_ok = encrypted_ok;
    if (zip_parse(z) < 0) {
        tn_zip_close(z);
        return NULL;
    }
    return z;
}

/* Maps `path` and reads its central directory (tensor/io.h). The archive owns
 * the mapping; NULL with an error naming path. */
struct tn_zip *tn_zip_open(const char *path)
{
    struct tn_io_map *m = tn__io_map_open(path);
    return m ? zip_new(m, path, false) : NULL;
}

/* A reader over a mapping the caller keeps: takes its own reference to m.
 * NULL with an error naming label. */
struct tn_zip *tn__zip_open_map(struct tn_io_map *m, const char *label)
{
    TN_ATOMIC_INC(&m->refcount);
    return zip_new(m, label, false);
}

/* A reader over the caller's bytes, borrowed (they must outlive the archive).
 * NULL with an error naming label. */
struct tn_zip *tn_zip_open_memory(const void *data, size_t len, const char *label)
{
    struct tn_io_map *m = tn__io_map_memory(data, len);
    return m ? zip_new(m, label, false) : NULL;
}

/* As tn_zip_open_memory, listing encrypted members instead of refusing them:
 * for the scanner, which reports them. */
struct tn_zip *tn__zip_open_memory_encrypted(const void *data, size_t len, const char *label)
{
    struct tn_io_map *m = tn__io_map_memory(data, len);
    return m ? zip_new(m, label, true) : NULL;
}

/* Releases z, its entries and its reference to the mapping (storages made
 * from it keep theirs). NULL is fine. */
void tn_zip_close(struct tn_zip *z)
{
    if (!z)
        return;
    tn__io_map_release(z->map);
    free(z->entries);
    free(z->names);
    free(z->index);
    free(z->label);
    free(z);
}

/* The number of members (the central directory's, checked at open). */
size_t tn_zip_count(const struct tn_zip *z) { return z->n; }

/* Member i (i < tn_zip_count: a bug otherwise), borrowed from z. */
const struct tn_zip_entry *tn_zip_entry_at(const struct tn_zip *z, size_t i)
{
    TN_ASSERT(i < z->n);
    return &z->entries[i];
}

/* The index of the first member named `name`, or -1: an O(1) lookup in the
 * index built at open. */
long tn_zip_find(const struct tn_zip *z, const char *name)
{
    if (!z->index_cap)
        return -1;
    for (size_t j = (size_t)name_hash(name) & (z->index_cap - 1); z->index[j];
         j = (j + 1) & (z->index_cap - 1))
        if (!strcmp(z->entries[z->index[j] - 1].name, name))
            return (long)z->index[j] - 1;
    return -1;
}

/* The name z was opened under (borrowed), for messages. */
const char *tn_zip_label(const struct tn_zip *z) { return z->label; }

/* The whole archive's bytes (borrowed, valid while z is open); *len receives
 * their count. */
const unsigned char *tn_zip_bytes(const struct tn_zip *z, size_t *len)
{
    if (len)
        *len = z->map->len;
    return z->map->addr;
}

/* A stored member's bytes in place (borrowed, valid while z is open; its size
 * is the entry's); NULL with an error for a compressed member. */
const void *tn_zip_data(const struct tn_zip *z, size_t i)
{
    const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
    if (e->method != 0) {
        tn_set_error(TN_EFORMAT, "%s: %s is compressed", z->label, e->name);
        return NULL;
    }
    return z->map->addr + e->data_offset;
}

/* Member i's bytes in a new malloc'd buffer the caller frees: stored members
 * copied, deflated ones inflated, at most `limit` bytes (0:
 * TN_ZIP_MAX_INFLATE), and a deflated size the compressed bytes could not
 * produce is refused before allocating. The inflated length must be the
 * declared one. Returns 0, or TN_EFORMAT/TN_ENOMEM naming the member. */
int tn_zip_read(const struct tn_zip *z, size_t i, size_t limit, void **out, size_t *len)
{
    const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
    *out = NULL;
    *len = 0;
    uint64_t cap = limit ? limit : TN_ZIP_MAX_INFLATE;
    if (e->size > cap || e->size > SIZE_MAX - 1)
        return tn_set_error(TN_ENOMEM, "%s: %s holds %llu bytes, more than the limit of %llu",
                            z->label, e->name, (unsigned long long)e->size,
                            (unsigned long long)cap);
    /* Deflate expands at most 1032:1: a larger claim is a lie that would
     * make us allocate for nothing. */
    if (e->method == 8 && e->size / 1032 > e->csize + 1)
        return tn_set_error(TN_EFORMAT, "%s: %s claims %llu bytes from %llu compressed bytes",
                            z->label, e->name, (unsigned long long)e->size,
                            (unsigned long long)e->csize);
    /* (only an archive opened for the scanner lists such a member: an
     * encrypted one, whose stored bytes carry a header) */
    if (e->method == 0 && e->csize != e->size)
        return tn_set_error(TN_EFORMAT, "%s: %s is stored but its sizes differ", z->label,
                            e->name);
    unsigned char *buf = malloc(e->size ? e->size : 1);
    if (!buf)
        return tn_set_error(TN_ENOMEM, "%s: %s: out of memory for %llu bytes", z->label, e->name,
                            (unsigned long long)e->size);
    const unsigned char *src = z->map->addr + e->data_offset;
    if (e->method == 0) {
        memcpy(buf, src, e->size);
    } else {
        z_stream s;
        memset(&s, 0, sizeof s);
        if (inflateInit2(&s, -MAX_WBITS) != Z_OK) {
            free(buf);
            return tn_set_error(TN_ENOMEM, "%s: %s: cannot start inflating", z->label, e->name);
        }
        /* zlib counts in uInt: feed and drain in chunks below 4 GiB. */
        uint64_t in_left = e->csize, out_done = 0;
        int rc = Z_OK;
        s.next_in = (unsigned char *)(uintptr_t)src;
        while (rc == Z_OK) {
            if (s.avail_in == 0 && in_left) {
                s.avail_in = (uInt)(in_left > 0x40000000u ? 0x40000000u : in_left);
                in_left -= s.avail_in;
            }
            uint64_t room = e->size - out_done;
            s.next_out = buf + out_done;
            s.avail_out = (uInt)(room > 0x40000000u ? 0x40000000u : room);
            uInt before = s.avail_out;
            if (s.avail_out == 0) {
                /* Output full: more data would overflow the declared size. */
                unsigned char probe;
                s.next_out = &probe;
                s.avail_out = 1;
                rc = inflate(&s, Z_NO_FLUSH);
                if (s.avail_out == 0) {
                    rc = Z_DATA_ERROR;
                }
                break;
            }
            rc = inflate(&s, Z_NO_FLUSH);
            out_done += before - s.avail_out;
            if (rc == Z_BUF_ERROR && s.avail_in == 0 && in_left == 0)
                break;
            if (rc == Z_BUF_ERROR)
                rc = Z_OK;
        }
        inflateEnd(&s);
        if (rc != Z_STREAM_END || out_done != e->size) {
            free(buf);
            return tn_set_error(TN_EFORMAT, "%s: %s: corrupt deflated data", z->label, e->name);
        }
    }
    *out = buf;
    *len = e->size;
    return 0;
}

/* A storage over the first nbytes of stored member i, sharing the archive's
 * mapping (no copy; the storage keeps the mapping alive). NULL with an error
 * for a compressed member or one shorter than nbytes. */
struct tn_storage *tn_zip_storage(struct tn_zip *z, size_t i, size_t nbytes)
{
    const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
    if (e->method != 0 || nbytes > e->size) {
        tn_set_error(TN_EFORMAT, "%s: %s cannot be mapped", z->label, e->name);
        return NULL;
    }
    return tn__io_map_storage(z->map, (size_t)e->data_offset, nbytes);
}

/* zlib's CRC-32 of data continued from crc (0 to start). */
uint32_t tn_zip_crc32(uint32_t crc, const void *data, size_t len)
{
    return tn__io_crc32(crc, data, len);
}

/* ------------------------------------------------------------------ writer */

uint64_t tn__zip64_threshold = 0xFFFFFFFFu;

struct wentry {
    char *name;
    uint64_t header_offset, size;
    uint32_t crc;
    uint16_t flags;
};

struct tn_zip_writer {
    FILE *f;
    struct tn_out *out;
    char *path;
    unsigned alignment;
    uint64_t off;
    uint64_t synced; /* bytes before this were handed to the kernel's writeback */
    uint64_t base;   /* the file offset of the archive's start (a stream's) */
    uint64_t *wb;    /* the file's writeback cursor (file offset), or NULL: none */
    bool no_fsync;
    bool direct; /* writing through tn__out_direct */
    struct wentry *e;
    size_t n, cap;
    int failed;
};

/* Contract in tensor/io.h: a writer to a temporary file beside `path`
 * (tn_out_open), renamed over it by tn_zip_writer_finish.  alignment in
 * 1..4096.  A new writer owned by the caller until finish or abort; NULL
 * with an error naming path. */
struct tn_zip_writer *tn_zip_writer_open(const char *path, unsigned alignment)
{
    if (alignment == 0 || alignment > 4096) {
        tn_set_error(TN_EINVAL, "%s: alignment %u is not in 1..4096", path, alignment);
        return NULL;
    }
    struct tn_zip_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        tn_set_error(TN_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    w->alignment = alignment;
    w->out = tn_out_open(path);
    if (!w->out) {
        free(w->path);
        free(w);
        return NULL;
    }
    w->f = tn_out_file(w->out);
    return w;
}

/* Contract in internal.h: a writer onto the caller's open stream f
 * (borrowed: flushed at finish, never closed or synced here), offsets and
 * alignment counted from f's current position; `label` names errors.
 * A new writer; NULL with an error. */
struct tn_zip_writer *tn__zip_writer_on(FILE *f, const char *label, unsigned alignment,
                                        uint64_t *writeback)
{
    struct tn_zip_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(label))) {
        free(w);
        tn_set_error(TN_ENOMEM, "%s: out of memory", label);
        return NULL;
    }
    w->alignment = alignment;
    w->f = f;
    w->no_fsync = true;
    if (writeback) {
        long at = ftell(f);
        w->base = at > 0 ? (uint64_t)at : 0;
        w->wb = writeback;
    }
    return w;
}

/* Writes n bytes at the writer's offset; a short write marks the writer
 * failed (only abort or finish's cleanup remain).  0 or TN_EIO. */
static int w_put(struct tn_zip_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
        return tn_set_error(TN_EIO, "%s: cannot write: %s", w->path, strerror(errno));
    }
    w->off += n;
    return 0;
}

/* Writes a member's bytes in pieces, each CRC'd just before it is written
 * while it is still in cache (one pass over memory instead of two), and
 * (for a buffered file that is synced at the end: a durable one, a DCP
 * shard file; one that is durable goes by O_DIRECT) starts the kernel
 * writing each W_WRITEBACK bytes back to disk at once, so the disk works
 * while the rest is written and the fsync at the end waits for little. */
#define W_CHUNK ((size_t)1 << 22)
#define W_WRITEBACK ((uint64_t)1 << 25)
static int w_data(struct tn_zip_writer *w, const void *data, uint64_t len, uint32_t *crc)
{
    const unsigned char *p = data;
    uint32_t c = 0;
    if (!w->wb && !w->no_fsync && !w->direct)
        w->wb = &w->synced;
    while (len) {
        size_t n = len > W_CHUNK ? W_CHUNK : (size_t)len;
        c = tn__io_crc32(c, p, n);
        if (w_put(w, p, n) < 0)
            return tn_last_status();
        p += n;
        len -= n;
        tn__io_progress(w->off);
#ifdef SYNC_FILE_RANGE_WRITE
        uint64_t at = w->base + w->off;
        if (w->wb && at - *w->wb >= W_WRITEBACK && fflush(w->f) == 0) {
            /* Only a hint: a failure here shows again at the fsync. */
            (void)sync_file_range(fileno(w->f), (off_t)*w->wb, (off_t)(at - *w->wb),
                                  SYNC_FILE_RANGE_WRITE);
            *w->wb = at;
        }
#endif
    }
    *crc = c;
    return 0;
}

/* The archive is not fsynced at finish (a scratch file, tests). */
void tn__zip_writer_no_fsync(struct tn_zip_writer *w) { w->no_fsync = true; }

/* The CRC-32 of the member added last (at least one was: an assertion). */
uint32_t tn__zip_writer_last_crc(const struct tn_zip_writer *w)
{
    TN_ASSERT(w->n > 0);
    return w->e[w->n - 1].crc;
}

/* Writes b's bytes and frees them (b is left empty); b's failed allocation
 * marks the writer failed.  0 or an error. */
static int w_buf(struct tn_zip_writer *w, struct tn__bytes *b)
{
    if (b->failed) {
        free(b->data);
        w->failed = 1;
        return tn_set_error(TN_ENOMEM, "%s: out of memory", w->path);
    }
    int rc = w_put(w, b->data, b->len);
    free(b->data);
    memset(b, 0, sizeof *b);
    return rc;
}

/* Contract in tensor/io.h: appends member `name` (up to 64 KiB - 1 bytes)
 * holding data[0..len) (borrowed, written now), stored, its data aligned
 * through the FB extra field, with a data descriptor when non-empty and
 * zip64 fields where a size or offset needs them.  0, or an error after
 * which w only finishes (failing) or aborts. */
int tn_zip_writer_add(struct tn_zip_writer *w, const char *name, const void *data, uint64_t len)
{
    if (w->failed)
        return tn_set_error(TN_EIO, "%s: the writer has failed", w->path);
    size_t nlen = strlen(name);
    if (nlen > 0xFFFF)
        return tn_set_error(TN_EINVAL, "%s: member name too long", w->path);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct wentry *e = realloc(w->e, cap * sizeof *e);
        if (!e)
            return tn_set_error(TN_ENOMEM, "%s: out of memory", w->path);
        w->e = e;
        w->cap = cap;
    }
    if (w->off == 0 && w->out && !w->no_fsync && tn__out_direct(w->out)) {
        /* a durable file: large aligned writes past the page cache */
        w->direct = true;
        w->f = tn_out_file(w->out);
    }
    struct wentry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name)))
        return tn_set_error(TN_ENOMEM, "%s: out of memory", w->path);
    w->n++;
    e->header_offset = w->off;
    e->size = len;
    /* miniz: a data descriptor follows every non-empty member. */
    e->flags = len ? 0x0808 : 0x0800;
    bool big_size = len >= tn__zip64_threshold, big_off = w->off >= tn__zip64_threshold;
    uint64_t start = w->off + 30 + nlen + 4;
    size_t z64 = 0;
    if (big_size || big_off)
        z64 = 4 + (big_size ? 16 : 0) + (big_off ? 8 : 0);
    start += z64;
    uint64_t aligned = (start + w->alignment - 1) / w->alignment * w->alignment;
    size_t pad = (size_t)(aligned - start);

    struct tn__bytes b = {0};
    tn__bytes_u32(&b, SIG_LOCAL);
    tn__bytes_u16(&b, 0);  /* version needed */
    tn__bytes_u16(&b, e->flags);
    tn__bytes_u16(&b, 0);  /* method: stored */
    tn__bytes_u16(&b, 0);  /* time */
    tn__bytes_u16(&b, 0);  /* date */
    tn__bytes_u32(&b, 0);  /* crc: in the descriptor */
    tn__bytes_u32(&b, 0);
    tn__bytes_u32(&b, 0);
    tn__bytes_u16(&b, (uint16_t)nlen);
    tn__bytes_u16(&b, (uint16_t)(z64 + 4 + pad));
    tn__bytes_put(&b, name, nlen);
    if (z64) {
        tn__bytes_u16(&b, 1);
        tn__bytes_u16(&b, (uint16_t)(z64 - 4));
        if (big_size) {
            tn__bytes_u64(&b, len);
            tn__bytes_u64(&b, len);
        }
        if (big_off)
            tn__bytes_u64(&b, e->header_offset);
    }
    tn__bytes_put(&b, "FB", 2);
    tn__bytes_u16(&b, (uint16_t)pad);
    for (size_t i = 0; i < pad; i++)
        tn__bytes_byte(&b, 'Z');
    if (w_buf(w, &b) < 0)
        return tn_last_status();
    if (w_data(w, data, len, &e->crc) < 0)
        return tn_last_status();
    if (len) {
        tn__bytes_u32(&b, SIG_DESC);
        tn__bytes_u32(&b, e->crc);
        if (big_size || big_off) {
            tn__bytes_u64(&b, len);
            tn__bytes_u64(&b, len);
        } else {
            tn__bytes_u32(&b, (uint32_t)len);
            tn__bytes_u32(&b, (uint32_t)len);
        }
        if (w_buf(w, &b) < 0)
            return tn_last_status();
    }
    return 0;
}

/* Frees the writer's records, path and itself (not its file). */
static void w_free(struct tn_zip_writer *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    free(w->e);
    free(w->path);
    free(w);
}

/* Contract in tensor/io.h: removes the temporary file (a stream writer
 * leaves what it wrote) and frees w.  NULL: no-op. */
void tn_zip_writer_abort(struct tn_zip_writer *w)
{
    if (!w)
        return;
    tn_out_abort(w->out);
    w_free(w);
}

/* Contract in tensor/io.h: the central directory and end records (zip64
 * where an offset or size needs it), then tn_out_commit's flush, fsync and
 * rename (a stream writer: a flush only).  Frees w in every case; 0, or an
 * error with the target untouched. */
int tn_zip_writer_finish(struct tn_zip_writer *w)
{
    if (w->failed) {
        tn_zip_writer_abort(w);
        return tn_last_status() ? tn_last_status() : TN_EIO;
    }
    uint64_t cdoff = w->off;
    struct tn__bytes b = {0};
    for (size_t i = 0; i < w->n; i++) {
        struct wentry *e = &w->e[i];
        bool big_size = e->size >= tn__zip64_threshold,
             big_off = e->header_offset >= tn__zip64_threshold;
        size_t nlen = strlen(e->name);
        size_t xlen = (big_size || big_off) ? 4 + (big_size ? 16 : 0) + (big_off ? 8 : 0) : 0;
        tn__bytes_u32(&b, SIG_CENTRAL);
        tn__bytes_u16(&b, 0); /* made by */
        tn__bytes_u16(&b, 0); /* needed */
        tn__bytes_u16(&b, e->flags);
        tn__bytes_u16(&b, 0);
        tn__bytes_u16(&b, 0);
        tn__bytes_u16(&b, 0);
        tn__bytes_u32(&b, e->crc);
        tn__bytes_u32(&b, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
        tn__bytes_u32(&b, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
        tn__bytes_u16(&b, (uint16_t)nlen);
        tn__bytes_u16(&b, (uint16_t)xlen);
        tn__bytes_u16(&b, 0); /* comment */
        tn__bytes_u16(&b, 0); /* disk */
        tn__bytes_u16(&b, 0); /* internal attributes */
        tn__bytes_u32(&b, 0); /* external attributes */
        tn__bytes_u32(&b, big_off ? 0xFFFFFFFFu : (uint32_t)e->header_offset);
        tn__bytes_put(&b, e->name, nlen);
        if (xlen) {
            tn__bytes_u16(&b, 1);
            tn__bytes_u16(&b, (uint16_t)(xlen - 4));
            if (big_size) {
                tn__bytes_u64(&b, e->size);
                tn__bytes_u64(&b, e->size);
            }
            if (big_off)
                tn__bytes_u64(&b, e->header_offset);
        }
    }
    uint64_t cdsize = b.len;
    uint64_t eocd64 = cdoff + cdsize;
    /* miniz writes the zip64 end records always. */
    tn__bytes_u32(&b, SIG_EOCD64);
    tn__bytes_u64(&b, 44);
    tn__bytes_u16(&b, 0x031e);
    tn__bytes_u16(&b, 45);
    tn__bytes_u32(&b, 0);
    tn__bytes_u32(&b, 0);
    tn__bytes_u64(&b, w->n);
    tn__bytes_u64(&b, w->n);
    tn__bytes_u64(&b, cdsize);
    tn__bytes_u64(&b, cdoff);
    tn__bytes_u32(&b, SIG_LOC64);
    tn__bytes_u32(&b, 0);
    tn__bytes_u64(&b, eocd64);
    tn__bytes_u32(&b, 1);
    tn__bytes_u32(&b, SIG_EOCD);
    tn__bytes_u16(&b, 0);
    tn__bytes_u16(&b, 0);
    tn__bytes_u16(&b, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
    tn__bytes_u16(&b, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
    tn__bytes_u32(&b, cdsize >= tn__zip64_threshold ? 0xFFFFFFFFu : (uint32_t)cdsize);
    tn__bytes_u32(&b, cdoff >= tn__zip64_threshold ? 0xFFFFFFFFu : (uint32_t)cdoff);
    tn__bytes_u16(&b, 0);
    if (w_buf(w, &b) < 0) {
        tn_zip_writer_abort(w);
        return tn_last_status();
    }
    int rc = 0;
    if (w->out)
        rc = tn_out_commit(w->out, !w->no_fsync);
    else if (fflush(w->f) != 0)
        rc = tn_set_error(TN_EIO, "%s: cannot write: %s", w->path, strerror(errno));
    w_free(w);
    return rc;
}
