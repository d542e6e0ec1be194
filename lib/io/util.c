/*
 * io/util.c: CRC-32, growable buffers and atomic file writes, shared by the
 * zip, checkpoint, safetensors and npy code.
 */
#include "io/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* zlib's crc32 for what the fast path leaves.  zlib counts in uInt: feed
 * it in pieces below 4 GiB. */
static uint32_t crc32_zlib(uint32_t crc, const unsigned char *p, size_t len)
{
    uLong c = crc;
    while (len) {
        uInt n = len > 0x40000000u ? 0x40000000u : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* CRC-32 (zlib's) by carry-less multiplication: four 128-bit lanes folded
 * 64 bytes at a time, then into one, then Barrett-reduced to 32 bits, as
 * in "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 * Instruction" (Gopal, Ozturk et al., Intel 2009), with its bit-reflected
 * constants for 0xEDB88320 (those of Linux's crc32-pclmul and Chromium's
 * zlib).  len >= 64 and a multiple of 16; crc is the inverted running
 * value, and so is the result.  About 10x zlib's tables here (1.15 GB/s):
 * every checkpoint's storages are CRC'd, so this bounds save speed. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(uint32_t crc,
                                                                     const unsigned char *buf,
                                                                     size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    buf += 64;
    len -= 64;
    while (len >= 64) {
        __m128i x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        __m128i x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        __m128i x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        __m128i x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }
    /* the four lanes into one, then the 16-byte blocks left */
    __m128i next[3] = {x2, x3, x4};
    for (int i = 0; i < 3 || len >= 16; i++) {
        __m128i y;
        if (i < 3) {
            y = next[i];
        } else {
            y = _mm_loadu_si128((const __m128i *)buf);
            buf += 16;
            len -= 16;
        }
        __m128i x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, y), x5);
    }
    /* 128 bits to 64, then Barrett's reduction to 32 */
    const __m128i lo32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x2b = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2b);
    x2b = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, lo32), k5k0, 0x00), x2b);
    x2b = _mm_clmulepi64_si128(_mm_and_si128(x1, lo32), poly, 0x10);
    x2b = _mm_clmulepi64_si128(_mm_and_si128(x2b, lo32), poly, 0x00);
    x1 = _mm_xor_si128(x1, x2b);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* zlib's CRC-32 of data continued from crc (0 to start): by carry-less
 * multiplication where the processor has it, else zlib's tables. */
uint32_t tn__io_crc32(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
#if defined(__x86_64__) && defined(__GNUC__)
    if (len >= 64 && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
        size_t n = len & ~(size_t)15;
        crc = ~crc32_clmul(~crc, p, n);
        p += n;
        len -= n;
    }
#endif
    return crc32_zlib(crc, p, len);
}

/* The write-progress callback and its argument: per thread, as each writer
 * reports on its own thread (two threads saving at once each see their
 * own bytes). */
static _Thread_local tn_io_progress_fn progress_fn;
static _Thread_local void *progress_ctx;

/* Sets the calling thread's write-progress callback (tensor/io.h); NULL
 * turns it off. */
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
