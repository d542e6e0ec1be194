/*
 * io/util.c: CRC-32, growable buffers and atomic file writes, shared by the
 * zip, checkpoint, safetensors and npy code.
 */
#include "io/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* zlib's crc32 (table-driven with braids, about 1.6x a slicing-by-8 table
 * here): storages are large and written once, so CRC speed bounds save
 * speed.  zlib counts in uInt: feed it in pieces below 4 GiB. */
uint32_t tn__io_crc32(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    uLong c = crc;
    while (len) {
        uInt n = len > 0x40000000u ? 0x40000000u : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

/* The write-progress callback and its argument: per thread, as each writer
 * reports on its own thread (two threads saving at once each see their
 * own bytes). */
static _Thread_local tn_io_progress_fn progress_fn;
static _Thread_local void *progress_ctx;

/* Sets the calling thread's write-progress callback (tensor/io.h):
 * thread-local, as each writer reports on its own thread; NULL turns it off. */
void tn_io_set_progress(tn_io_progress_fn fn, void *ctx)
{
    progress_fn = fn;
    progress_ctx = ctx;
}

/* Reports `written` to the calling thread's callback, if any. */
void tn__io_progress(uint64_t written)
{
    if (progress_fn)
        progress_fn(written, progress_ctx);
}

/* fwrite of len bytes in 4 MiB pieces, advancing *written and reporting it
 * after each. 0, or -1 with errno as fwrite left it (the caller names the
 * file). */
int tn__io_write_progress(FILE *f, const void *data, size_t len, uint64_t *written)
{
    const unsigned char *p = data;
    while (len) {
        size_t n = len > ((size_t)1 << 22) ? (size_t)1 << 22 : len;
        if (fwrite(p, 1, n, f) != n)
            return -1;
        p += n;
        len -= n;
        *written += n;
        tn__io_progress(*written);
    }
    return 0;
}

/* Appends n bytes to b, doubling its capacity as needed; after a failed
 * allocation b->failed is set and every later put is a no-op, so callers
 * check once at the end. */
void tn__io_buf_put(struct tn_io_buf *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* Appends one byte (tn__io_buf_put's rules). */
void tn__io_buf_byte(struct tn_io_buf *b, unsigned char c) { tn__io_buf_put(b, &c, 1); }

/* Appends v little-endian in 2 bytes (tn__io_buf_put's rules). */
void tn__io_buf_u16(struct tn_io_buf *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    tn__io_buf_put(b, x, 2);
}

/* Appends v little-endian in 4 bytes (tn__io_buf_put's rules). */
void tn__io_buf_u32(struct tn_io_buf *b, uint32_t v)
{
    unsigned char x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    tn__io_buf_put(b, x, 4);
}

/* Appends v little-endian in 8 bytes (tn__io_buf_put's rules). */
void tn__io_buf_u64(struct tn_io_buf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    tn__io_buf_put(b, x, 8);
}

/* Appends printf's output (no NUL) to b (tn__io_buf_put's rules). */
void tn__io_buf_printf(struct tn_io_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        tn__io_buf_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tn__io_buf_put(b, big, (size_t)n);
    free(big);
}

/* The whole of a stream (stdin, a pipe, a device) in memory, for readers
 * that need random access: a map whose release frees it. */
static struct tn_io_map *map_stream(int fd, const char *path)
{
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            tn_set_error(TN_ENOMEM, "%s: out of memory", path);
            return NULL;
        }
        if (len == cap) {
            unsigned char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                tn_set_error(TN_ENOMEM, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
            free(buf);
            return NULL;
        }
        len += (size_t)n;
    }
    struct tn_io_map *m = calloc(1, sizeof *m);
    if (!m) {
        free(buf);
        tn_set_error(TN_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    m->refcount = 1;
    m->addr = buf;
    m->len = len;
    m->owned = true;
    return m;
}

/* A file's bytes, read once (io/internal.h): a regular file mapped private
 * and writable (copy on write: tensors over it may be written without
 * touching the file), "-", a pipe or a device read to the end into memory, a
 * folder refused. The map starts with one reference, the caller's. NULL with
 * an error naming path (<stdin> for "-"). */
struct tn_io_map *tn__io_map_open(const char *path)
{
    bool std = !strcmp(path, "-");
    const char *name = std ? "<stdin>" : path;
    int fd = std ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tn_set_error(TN_EIO, "%s: %s", name, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tn_set_error(TN_EIO, "%s: %s", name, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        tn_set_error(TN_EIO, "%s: %s", name, strerror(EISDIR));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        struct tn_io_map *m = map_stream(fd, name);
        close(fd);
        return m;
    }
    struct tn_io_map *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        tn_set_error(TN_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    m->refcount = 1;
    m->len = (size_t)st.st_size;
    m->mapped = true;
    if (m->len) {
        /* Private and writable: tensors over the mapping may be written in
         * place without touching the file.  The offset is the descriptor's
         * start, which for stdin redirected from a file is the file's. */
        void *a = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (a == MAP_FAILED) {
            tn_set_error(TN_EIO, "%s: cannot map: %s", name, strerror(errno));
            close(fd);
            free(m);
            return NULL;
        }
        m->addr = a;
    }
    close(fd);
    return m;
}

/* A map over the caller's bytes, borrowed (never freed by the map: they must
 * outlive it and every storage made over it). NULL with TN_ENOMEM. */
struct tn_io_map *tn__io_map_memory(const void *data, size_t len)
{
    struct tn_io_map *m = calloc(1, sizeof *m);
    if (!m) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    m->refcount = 1;
    m->addr = (unsigned char *)(uintptr_t)data;
    m->len = len;
    return m;
}

/* Drops one reference; the last unmaps or frees what the map owns. NULL is
 * fine. */
void tn__io_map_release(struct tn_io_map *m)
{
    if (m && TN_ATOMIC_DEC(&m->refcount) == 0) {
        if (m->mapped && m->len)
            munmap(m->addr, m->len);
        else if (m->owned)
            free(m->addr);
        free(m);
    }
}

/* A storage's release of the bytes it borrowed from a map: drops the map
 * reference the storage held. */
static void map_storage_free(void *data, size_t nbytes, void *ctx)
{
    (void)data;
    (void)nbytes;
    tn__io_map_release(ctx);
}

/* A storage over bytes [off, off+nbytes) of m (in range: a bug otherwise),
 * holding a reference to m so the mapping outlives the reader that made it.
 * NULL with TN_ENOMEM. */
struct tn_storage *tn__io_map_storage(struct tn_io_map *m, size_t off, size_t nbytes)
{
    TN_ASSERT(off <= m->len && nbytes <= m->len - off);
    TN_ATOMIC_INC(&m->refcount);
    struct tn_storage *s =
        tn_storage_from_external(m->addr + off, nbytes, TN_CPU, map_storage_free, m);
    if (!s)
        tn__io_map_release(m);
    return s;
}
