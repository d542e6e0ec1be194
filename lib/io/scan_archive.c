/*
 * io/scan_archive.c: what the auditor reads through libarchive and zlib:
 * compressed streams (gzip, bzip2, xz, lzma, zstd, lz4, compress, and the
 * raw zlib streams of joblib's zlib compressor), whose content is scanned
 * like any file, and 7z archives, whose members are.  Every byte inflated
 * counts against the scan's expanded-size budget, so a decompression bomb
 * stops at the limit (reported, incomplete) instead of filling memory.
 * Zips stay with lib/io's own reader (scan.c), which sees the header
 * disagreements a library would smooth over.
 */
#include "io/scan_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The kind ("gzip", "bzip2", "xz", "lzma", "zstd", "7z", ...) of the
 * compressed stream or archive whose magic starts b[0..len) (untrusted; each
 * test checks len first), a static string; NULL for none. */
const char *tn__scan_packed_kind(const unsigned char *b, size_t len)
{
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return "gzip";
    if (len >= 4 && !memcmp(b, "BZh", 3) && b[3] >= '1' && b[3] <= '9')
        return "bzip2";
    if (len >= 6 && !memcmp(b, "\xfd" "7zXZ\0", 6))
        return "xz";
    if (len >= 13 && b[0] == 0x5d && b[1] == 0 && b[2] == 0) /* lzma alone: "]\0" is no pickle */
        return "lzma";
    if (len >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4))
        return "zstd";
    if (len >= 4 && !memcmp(b, "\x04\x22\x4d\x18", 4))
        return "lz4";
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x9d)
        return "compress";
    /* zlib: CM 8, a window up to 32K, the check bits ('x' is no opcode) */
    if (len >= 2 && b[0] == 0x78 && ((unsigned)b[0] << 8 | b[1]) % 31 == 0)
        return "zlib";
    if (len >= 6 && !memcmp(b, "7z\xbc\xaf\x27\x1c", 6))
        return "7z";
    return NULL;
}

/* Appends to a growing buffer within the budget; false when over it. */
static bool grow(struct tn__scan_ctx *c, unsigned char **buf, size_t *n, size_t *cap,
                 const void *p, size_t k, bool *over)
{
    if (!tn__scan_budget(c, k)) {
        *over = true;
        return false;
    }
    if (*n + k > *cap) {
        size_t nc = *cap ? *cap : 65536;
        while (nc < *n + k)
            nc *= 2;
        unsigned char *nb = realloc(*buf, nc);
        if (!nb) {
            c->oom = true;
            return false;
        }
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *n, p, k);
    *n += k;
    return true;
}

/* A raw zlib stream (RFC 1950), as joblib's zlib compressor writes it. */
static int inflate_zlib(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                        unsigned char **out, size_t *n, bool *over)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return -1;
    size_t cap = 0;
    unsigned char chunk[65536];
    int rc = Z_OK;
    z.next_in = (unsigned char *)b;
    while (rc == Z_OK) {
        size_t in = len - (size_t)((const unsigned char *)z.next_in - b);
        z.avail_in = in > 1u << 30 ? 1u << 30 : (uInt)in;
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        size_t got = sizeof chunk - z.avail_out;
        if ((rc == Z_OK || rc == Z_STREAM_END) && got && !grow(c, out, n, &cap, chunk, got, over))
            break;
        if (rc == Z_OK && !got && !z.avail_in)
            rc = Z_BUF_ERROR; /* truncated */
    }
    inflateEnd(&z);
    return rc == Z_STREAM_END ? 0 : -1;
}

/* Any stream libarchive's filters undo, read through its raw format. */
static int inflate_archive(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                           unsigned char **out, size_t *n, bool *over)
{
    struct archive *a = archive_read_new();
    if (!a) {
        c->oom = true;
        return -1;
    }
    archive_read_support_filter_all(a);
    archive_read_support_format_raw(a);
    int rc = -1;
    struct archive_entry *e;
    size_t cap = 0;
    if (archive_read_open_memory(a, b, len) == ARCHIVE_OK &&
        archive_read_next_header(a, &e) == ARCHIVE_OK) {
        unsigned char chunk[65536];
        la_ssize_t k;
        while ((k = archive_read_data(a, chunk, sizeof chunk)) > 0)
            if (!grow(c, out, n, &cap, chunk, (size_t)k, over))
                break;
        rc = k == 0 && !*over && !c->oom ? 0 : -1;
    }
    archive_read_free(a);
    return rc;
}

/* A compressed stream: its content is scanned as a member named
 * "(KIND)".  Returns false when b does not decompress (then it is left to
 * the other readers: a pickle may start with these bytes). */
bool tn__scan_stream(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                     const char *entry, const char *kind)
{
    unsigned char *out = NULL;
    size_t n = 0;
    bool over = false;
    uint64_t before = c->expanded;
    int rc = !strcmp(kind, "zlib") ? inflate_zlib(c, b, len, &out, &n, &over)
                                   : inflate_archive(c, b, len, &out, &n, &over);
    if (rc < 0 && !over && !c->oom) {
        free(out);
        c->expanded = before;
        return false;
    }
    char name[32];
    snprintf(name, sizeof name, "(%s)", kind);
    char *sub = tn__scan_join(entry, name);
    if (!sub) {
        c->oom = true;
    } else if (over) {
        tn__scan_anomaly(c, sub, 0, "expanded-size-limit");
        tn__scan_incomplete(c, "a compressed stream inflates past the expanded-size limit");
    } else if (!c->oom) {
        tn__scan_member(c, out, n, sub, name);
    }
    free(sub);
    free(out);
    return true;
}

/* A 7z archive: every member scanned; one that cannot be read (encrypted,
 * a method libarchive lacks) leaves the file incomplete. */
void tn__scan_7z(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    struct archive *a = archive_read_new();
    if (!a) {
        c->oom = true;
        return;
    }
    archive_read_support_format_7zip(a);
    struct archive_entry *e;
    int hr = ARCHIVE_FATAL;
    if (archive_read_open_memory(a, b, len) == ARCHIVE_OK) {
        while ((hr = archive_read_next_header(a, &e)) == ARCHIVE_OK && !c->oom) {
            const char *nm = archive_entry_pathname(e);
            char *sub = tn__scan_join(entry, nm ? nm : "?");
            if (!sub) {
                c->oom = true;
                break;
            }
            if (archive_entry_filetype(e) == AE_IFREG) {
                unsigned char *out = NULL, chunk[65536];
                size_t n = 0, cap = 0;
                bool over = false;
                la_ssize_t k;
                while ((k = archive_read_data(a, chunk, sizeof chunk)) > 0)
                    if (!grow(c, &out, &n, &cap, chunk, (size_t)k, &over))
                        break;
                if (over) {
                    tn__scan_anomaly(c, sub, 0, "expanded-size-limit");
                    tn__scan_incomplete(c, "a 7z member inflates past the expanded-size limit");
                } else if (k < 0) {
                    char why[300];
                    snprintf(why, sizeof why, "%s: a 7z member cannot be read: %s", sub,
                             archive_error_string(a) ? archive_error_string(a) : "?");
                    tn__scan_incomplete(c, why);
                } else if (!c->oom) {
                    tn__scan_member(c, out, n, sub, nm ? nm : "?");
                }
                free(out);
            }
            free(sub);
        }
    }
    if (hr != ARCHIVE_EOF && !c->oom) {
        char why[300];
        snprintf(why, sizeof why, "%s: the 7z archive cannot be read: %s",
                 *entry ? entry : c->label,
                 archive_error_string(a) ? archive_error_string(a) : "?");
        tn__scan_anomaly(c, entry, 0, "archive-unreadable");
        tn__scan_incomplete(c, why);
    }
    archive_read_free(a);
    /* Bytes past the archive's end (its start header gives where the
     * directory ends) are read by no 7z reader: scanned as pickles */
    uint64_t off = 0, size = 0;
    for (int i = 7; i >= 0 && len >= 32; i--) {
        off = off << 8 | b[12 + i];
        size = size << 8 | b[20 + i];
    }
    if (len >= 32 && off <= len && size <= len && 32 + off + size < len && !c->oom) {
        size_t end = (size_t)(32 + off + size);
        tn__scan_anomaly(c, entry, end, "trailing-data");
        tn__scan_pickles(c, b + end, len - end, entry, 0, false);
    }
}
