/*
 * io/scan.c: the checkpoint auditor behind `tckpt scan`: containers and the
 * report (the pickle machine is scan_pickle.c, the names scan_policy.c).  Default deny: a
 * model of the pickle machine simulates the stack and memo for every opcode
 * of protocols 0-5 (through tn__pickle_decode, the decoder the loader walks
 * too), resolves every global as CPython's find_class would (Py2 names
 * mapped for protocol < 3, dotted qualnames), and flags every global outside
 * the weights_only allowlist; containers (torch zips, legacy files, stacked
 * pickles, npy/npz, tars, nested archives, safetensors) are found from the
 * content and walked with limits.  Nothing in the input is ever run.
 */
#include "io/scan_internal.h"
#include "core/le.h"

#include <tensor/dcp.h>

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the report */

static const struct tn_scan_options default_opts;

/* A malloc'd NUL-terminated copy of s's first n bytes (the caller frees it),
 * or NULL without memory. */
char *tn__scan_dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Appends a finding to the report (copies of entry, mod and name, which stay
 * the caller's; reason is a static string kept as is). Past
 * TN__SCAN_MAX_FINDINGS, or without memory, the report is marked incomplete
 * instead: a scan that lost a finding never reads as clean. */
void tn__scan_add(struct tn__scan_ctx *c, const char *entry, uint64_t off, const char *mod,
                  const char *name, enum tn_scan_use use, int sev, const char *reason)
{
    struct tn_scan_report *r = c->r;
    if (r->n >= TN__SCAN_MAX_FINDINGS) {
        r->incomplete = true;
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct tn_scan_finding *f = realloc(r->f, cap * sizeof *f);
        if (!f) {
            c->oom = true;
            r->incomplete = true;
            return;
        }
        r->f = f;
        r->cap = cap;
    }
    struct tn_scan_finding *f = &r->f[r->n];
    f->entry = tn__scan_dupn(entry, strlen(entry));
    f->module = tn__scan_dupn(mod, strlen(mod));
    f->name = tn__scan_dupn(name, strlen(name));
    if (!f->entry || !f->module || !f->name) {
        free(f->entry);
        free(f->module);
        free(f->name);
        c->oom = true;
        r->incomplete = true;
        return;
    }
    f->detail = NULL;
    f->offset_in_parent = false;
    f->offset = off;
    f->use = use;
    f->severity = (enum tn_scan_severity)sev;
    f->reason = reason;
    r->n++;
}

/* A SUSPICIOUS finding with no global: a structural anomaly named by its
 * reason code. */
void tn__scan_anomaly(struct tn__scan_ctx *c, const char *entry, uint64_t off, const char *reason)
{
    tn__scan_add(c, entry, off, "", "", TN_SCAN_NONE, TN_SCAN_SUSPICIOUS, reason);
}

/* An anomaly of a member's header: its offset counts in the archive that
 * holds the member. */
static void member_anomaly(struct tn__scan_ctx *c, const char *entry, uint64_t off,
                           const char *reason)
{
    size_t n = c->r->n;
    tn__scan_anomaly(c, entry, c->base + off, reason);
    if (c->r->n > n)
        c->r->f[n].offset_in_parent = true;
}

/* Gives finding n its words (copied) if it was added and has none yet;
 * without memory the finding keeps none. */
void tn__scan_set_detail(struct tn__scan_ctx *c, size_t n, const char *detail)
{
    if (c->r->n > n && !c->r->f[n].detail &&
        !(c->r->f[n].detail = tn__scan_dupn(detail, strlen(detail))))
        c->oom = true;
}

/* An anomaly with words: the loader's refusal of what the scanner read. */
static void anomaly_detail(struct tn__scan_ctx *c, const char *entry, uint64_t off,
                           const char *reason, const char *detail)
{
    size_t n = c->r->n;
    tn__scan_anomaly(c, entry, off, reason);
    tn__scan_set_detail(c, n, detail);
}

/* Marks the report incomplete, the first reason kept (copied) as its error. */
void tn__scan_incomplete(struct tn__scan_ctx *c, const char *why)
{
    c->r->incomplete = true;
    if (!c->r->error)
        c->r->error = tn__scan_dupn(why, strlen(why));
}

/* Frees what the report holds and zeroes it (the struct itself is the
 * caller's); NULL is fine. */
void tn_scan_report_free(struct tn_scan_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->f[i].entry);
        free(r->f[i].module);
        free(r->f[i].name);
        free(r->f[i].detail);
    }
    free(r->f);
    free(r->error);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ containers */

/* Scans len untrusted bytes by what their content is (zip, npy, tar, 7z or a
 * compressed stream, legacy torch, safetensors, pickle, or a zip with bytes
 * before it), never by trusting the name alone; top records the format in the
 * report. Reports; returns nothing. */
static void scan_blob(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                      const char *entry, const char *name, bool top);

/* Whether s ends with suf. */
static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), l = strlen(suf);
    return a >= l && !strcmp(s + a - l, suf);
}

/* "parent!name", malloc'd (the caller frees it), NULL without memory: a
 * member's path in findings. */
char *tn__scan_join(const char *parent, const char *name)
{
    size_t a = strlen(parent), l = strlen(name);
    char *s = malloc(a + l + 2);
    if (!s)
        return NULL;
    if (a) {
        memcpy(s, parent, a);
        s[a++] = '!';
    }
    memcpy(s + a, name, l + 1);
    return s;
}

/* Whether b starts with PROTO 0-5, as pickles of protocol 2 and later do. */
static bool is_pickle_start(const unsigned char *b, size_t len)
{
    return len >= 2 && b[0] == 0x80 && b[1] <= 5;
}

/* Bytes that are no known format but a pickle: the opcodes decode up to a
 * STOP, or their decodable prefix imports or calls something.  Text and
 * tensor bytes fail within a few opcodes. */
static bool looks_like_pickle(const unsigned char *b, size_t len)
{
    size_t pos = 0, ops = 0;
    struct tn_pickle_op op;
    while (pos < len && tn__pickle_decode(b, len, &pos, &op, "sniff") == 0) {
        ops++;
        if (op.code == TN_OP_STOP)
            return ops >= 2;
        if (op.code == TN_OP_GLOBAL || op.code == TN_OP_INST || op.code == TN_OP_STACK_GLOBAL ||
            op.code == TN_OP_REDUCE)
            return true;
    }
    return false;
}

/* A member of an archive: nested archives and pickles are scanned. */
void tn__scan_member(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                        const char *entry, const char *name)
{
    if (++c->entries > (c->o->max_entries ? c->o->max_entries : 100000)) {
        if (c->entries == (c->o->max_entries ? c->o->max_entries : 100000) + 1)
            tn__scan_anomaly(c, entry, 0, "entry-limit");
        tn__scan_incomplete(c, "more archive members than the entry limit");
        return;
    }
    if (c->depth + 1 > (c->o->max_depth ? c->o->max_depth : 4)) {
        tn__scan_anomaly(c, entry, 0, "depth-limit");
        tn__scan_incomplete(c, "archives nested deeper than the depth limit");
        return;
    }
    uint64_t base = c->base;
    c->base = 0;
    c->depth++;
    scan_blob(c, b, len, entry, name, false);
    c->depth--;
    c->base = base;
}

static bool is_zip(const unsigned char *b, size_t len);

/* Bytes the scanner reads as something (an archive, a pickle, an array):
 * a member flagged encrypted whose bytes are none of these is taken as
 * really encrypted. */
static bool recognised(const unsigned char *b, size_t len, const char *name)
{
    return is_zip(b, len) || (len >= 6 && !memcmp(b, "\x93NUMPY", 6)) ||
           is_pickle_start(b, len) || looks_like_pickle(b, len) ||
           (len >= 262 && !memcmp(b + 257, "ustar", 5)) ||
           (name && ends_with(name, ".pkl") && len && b[len - 1] == '.');
}

/* Takes n bytes from the scan's expanded-size budget (max_expanded, 4 GiB by
 * default): false, taking nothing, when they do not fit, so a decompression
 * bomb stops at the limit. */
bool tn__scan_budget(struct tn__scan_ctx *c, uint64_t n)
{
    uint64_t lim = c->o->max_expanded ? c->o->max_expanded : (4ull << 30);
    if (n > lim - c->expanded || c->expanded > lim)
        return false;
    c->expanded += n;
    return true;
}

/* qsort order of uint64_t offsets. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Local headers the central directory does not list, in the gaps between
 * the listed ones: a loader reading by local header would see them. */
static void scan_zip_gaps(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                          struct tn_zip *z, const char *entry)
{
    size_t n = tn_zip_count(z);
    uint64_t *iv = malloc((n + 1) * 2 * sizeof *iv);
    if (!iv) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        iv[2 * i] = e->header_offset;
        iv[2 * i + 1] = e->data_offset + e->csize;
    }
    qsort(iv, n, 2 * sizeof *iv, cmp_u64);
    /* The central directory's start bounds the last gap. */
    uint64_t cd = len;
    for (size_t p = len >= 22 ? len - 22 + 1 : 0; p-- > 0 && p + 65557 >= len;)
        if (tn__rd32(b + p) == 0x06054b50) {
            cd = tn__rd32(b + p + 16);
            break;
        }
    uint64_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t end = i < n ? iv[2 * i] : (cd < len ? cd : len);
        for (uint64_t p = at; p + 30 <= end && p + 30 <= len; p++) {
            if (tn__rd32(b + p) != 0x04034b50)
                continue;
            size_t nl = tn__rd16(b + p + 26), xl = tn__rd16(b + p + 28);
            char nm[256] = "?";
            if (p + 30 + nl <= len) {
                size_t k = nl < 255 ? nl : 255;
                memcpy(nm, b + p + 30, k);
                nm[k] = 0;
                for (size_t q = 0; q < k; q++)
                    if (!nm[q])
                        nm[q] = '?';
            }
            char *sub = tn__scan_join(entry, nm);
            if (!sub) {
                c->oom = true;
                break;
            }
            member_anomaly(c, sub, p, "zip-unindexed-entry");
            uint64_t cs = tn__rd32(b + p + 18), data = p + 30 + nl + xl;
            if (tn__rd16(b + p + 8) == 0 && data <= len && cs <= len - data)
                tn__scan_member(c, b + data, (size_t)cs, sub, nm);
            free(sub);
            p = data > p ? data - 1 : p;
        }
        if (i < n && iv[2 * i + 1] > at)
            at = iv[2 * i + 1];
    }
    free(iv);
}

/* Audits a zip of untrusted bytes through lib/io's own reader (opened to list
 * encrypted members): duplicate names, local headers that disagree with the
 * central directory, several archive folders, TorchScript code, CRC
 * mismatches and members past the expanded-size budget are findings, and each
 * member is scanned by its content one level deeper. Reports; returns
 * nothing. */
static void scan_zip(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    const char *label = *entry ? entry : "zip";
    struct tn_zip *z = tn__zip_open_memory_encrypted(b, len, label);
    if (!z) {
        tn__scan_anomaly(c, entry, 0, "zip-unreadable");
        tn__scan_incomplete(c, tn_last_error());
        return;
    }
    size_t n = tn_zip_count(z);
    bool torch = false, script = false;
    const char *root = NULL;
    size_t rootlen = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = tn_zip_entry_at(z, i)->name;
        if (ends_with(nm, "data.pkl"))
            torch = true;
        if (strstr(nm, "/code/") || ends_with(nm, "constants.pkl"))
            script = true;
    }
    if ((torch || script) && c->depth == 0)
        c->r->format = script ? "torchscript" : "torch";
    bool roots_reported = false, script_reported = false;
    size_t locked = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        const char *nm = e->name;
        char *sub = tn__scan_join(entry, nm);
        if (!sub) {
            c->oom = true;
            break;
        }
        if (tn_zip_find(z, nm) != (long)i)
            member_anomaly(c, sub, e->header_offset, "zip-duplicate-name");
        /* The local header must agree with the central directory. */
        const unsigned char *lh = b + e->header_offset;
        size_t lnl = tn__rd16(lh + 26);
        if (lnl != strlen(nm) || e->header_offset + 30 + lnl > len ||
            memcmp(lh + 30, nm, lnl))
            member_anomaly(c, sub, e->header_offset, "zip-name-mismatch");
        else if (tn__rd16(lh + 8) != e->method || ((tn__rd16(lh + 6) ^ e->flags) & ~8u & 0xff))
            member_anomaly(c, sub, e->header_offset, "zip-header-mismatch");
        const char *slash = strchr(nm, '/');
        if (torch && slash) {
            if (!root) {
                root = nm;
                rootlen = (size_t)(slash - nm);
            } else if (!roots_reported &&
                       ((size_t)(slash - nm) != rootlen || memcmp(nm, root, rootlen))) {
                member_anomaly(c, sub, e->header_offset, "zip-several-roots");
                roots_reported = true;
            }
        }
        if (script && !script_reported && strstr(nm, "/code/") && !ends_with(nm, ".debug_pkl")) {
            tn__scan_add(c, sub, 0, "torch.jit", "TorchScript code", TN_SCAN_CALLED,
                         TN_SCAN_UNKNOWN, "torchscript-code");
            script_reported = true;
        }
        /* Storage records are raw bytes torch never unpickles: not read,
         * so the time does not grow with the tensor data. */
        bool storage = torch && slash && !strncmp(slash + 1, "data/", 5) && !ends_with(nm, ".pkl");
        /* TorchScript's Python source (reported above) is compiled by
         * torch.jit.load, never unpickled: not read as a pickle */
        bool source = script && strstr(nm, "/code/") && ends_with(nm, ".py");
        if (!storage && !source && !ends_with(nm, "/")) {
            void *data = NULL;
            size_t dl = 0;
            if (!tn__scan_budget(c, e->size)) {
                member_anomaly(c, sub, e->header_offset, "expanded-size-limit");
                tn__scan_incomplete(c, "archive members larger than the expanded-size limit");
            } else if ((e->flags & 1) && (tn_zip_read(z, i, 0, &data, &dl) < 0 ||
                                          !recognised(data, dl, nm))) {
                locked++; /* really encrypted: nobody reads it without the password */
            } else if (!data && tn_zip_read(z, i, 0, &data, &dl) < 0) {
                member_anomaly(c, sub, e->header_offset, "zip-member-unreadable");
            } else {
                /* The flag says encrypted, the bytes are plain: a reader that
                 * ignores the flag runs them, a scanner that honours it skips
                 * them (CVE-2025-1945). */
                if (e->flags & 1)
                    member_anomaly(c, sub, e->header_offset, "zip-encrypted-flag");
                if (tn_zip_crc32(0, data, dl) != e->crc)
                    member_anomaly(c, sub, e->header_offset, "zip-crc-mismatch");
                tn__scan_member(c, data, dl, sub, nm);
            }
            free(data);
        }
        free(sub);
    }
    if (locked) {
        char why[160];
        snprintf(why, sizeof why, "%s: %zu of %zu members are password-protected (encrypted): "
                 "they cannot be read", *entry ? entry : c->label, locked, n);
        tn__scan_incomplete(c, why);
        if (locked == n && c->depth == 0) {
            c->r->format = "encrypted zip";
            c->r->not_model = true;
        }
    }
    scan_zip_gaps(c, b, len, z, entry);
    tn_zip_close(z);
}

/* A tar header's octal field of n bytes (NUL or space ended); *ok false for a
 * malformed one. */
static uint64_t octal(const unsigned char *p, size_t n, bool *ok)
{
    uint64_t v = 0;
    size_t i = 0;
    *ok = true;
    if (p[0] & 0x80) { /* base-256 */
        *ok = false;
        return 0;
    }
    while (i < n && p[i] == ' ')
        i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60) {
            *ok = false;
            return 0;
        }
        v = v * 8 + (uint64_t)(p[i] - '0');
    }
    return v;
}

/*
 * The tar checkpoints of PyTorch before 0.4 (torch.load still reads them):
 * members sys_info and pickle are pickles, but storages and tensors are
 * pickles with raw bytes between them, laid out as _legacy_load reads
 * them.  Walked in that layout, every pickle in them is scanned and the
 * bytes between are skipped, so a clean file is not "trailing-data".
 *   storages: pickle(n), n x (pickle((key, location, torch.XStorage)),
 *             int64 numel, numel x element size bytes), pickle(views)
 *   tensors:  pickle(n), n x (pickle((key, storage key, tensor type)),
 *             int32 ndim, 4 bytes, ndim int64 sizes, ndim int64 strides,
 *             int64 offset)
 */

/* Scans one pickle at *pos; *value gets its first integer operand (the
 * count pickles are a bare int), or -1. */
static int legacy_pickle(struct tn__scan_ctx *c, const unsigned char *b, size_t len, size_t *pos,
                         const char *entry, int64_t *value, size_t *esize)
{
    size_t start = *pos;
    if (tn__scan_one_pickle(c, b, len, pos, entry) < 0)
        return -1;
    *value = -1;
    if (esize)
        *esize = 0;
    struct tn_pickle_op op;
    for (size_t q = start; q < *pos && tn__pickle_decode(b, *pos, &q, &op, entry) == 0;) {
        if (*value < 0 && (op.code == TN_OP_BININT || op.code == TN_OP_BININT1 ||
                           op.code == TN_OP_BININT2) && op.i >= 0)
            *value = op.i;
        if (esize && op.code == TN_OP_GLOBAL && op.slen == 5 && !memcmp(op.s, "torch", 5)) {
            enum tn_dtype dt = tn__storage_class_dtype(op.s2, op.s2len);
            if (dt != TN_DTYPE_UNSET)
                *esize = tn_dtype_size(dt);
        }
    }
    return 0;
}

/* A broken legacy layout: reported, and the scan of it is incomplete. */
static void legacy_broken(struct tn__scan_ctx *c, const char *entry, size_t off)
{
    tn__scan_anomaly(c, entry, off, "legacy-tar-layout");
    tn__scan_incomplete(c, "a pre-0.4 tar checkpoint member does not follow torch's layout");
}

/* One pickle member of a pre-1.6 tar checkpoint: its leading count is checked
 * against the bytes left, then the pickles it holds are scanned; storages
 * says the member also carries raw storage data after them. Reports; returns
 * nothing. */
static void scan_legacy_member(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                               const char *entry, bool storages)
{
    size_t pos = 0;
    int64_t n, dummy;
    if (legacy_pickle(c, b, len, &pos, entry, &n, NULL) < 0)
        return;
    if (n < 0 || (uint64_t)n > len) { /* every item takes at least a byte */
        legacy_broken(c, entry, 0);
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        size_t at = pos, esize = 0;
        if (legacy_pickle(c, b, len, &pos, entry, &dummy, storages ? &esize : NULL) < 0)
            return;
        if (storages) {
            uint64_t numel = len - pos >= 8 ? tn__rd64(b + pos) : 0;
            if (!esize || len - pos < 8 || numel > (len - pos - 8) / esize) {
                legacy_broken(c, entry, at);
                return;
            }
            pos += 8 + (size_t)numel * esize;
        } else {
            uint32_t nd = len - pos >= 4 ? tn__rd32(b + pos) : UINT32_MAX;
            if (nd > 64 || len - pos < 16 + 16 * (size_t)nd) {
                legacy_broken(c, entry, at);
                return;
            }
            pos += 16 + 16 * (size_t)nd;
        }
    }
    if (storages && legacy_pickle(c, b, len, &pos, entry, &dummy, NULL) < 0)
        return;
    if (pos < len) { /* what follows is no part of the layout: scan it */
        tn__scan_anomaly(c, entry, pos, "trailing-data");
        tn__scan_pickles(c, b + pos, len - pos, entry, 0, false);
    }
}

/* Does the tar hold pickle, storages and tensors (a pre-0.4 checkpoint)? */
static bool legacy_tar(const unsigned char *b, size_t len)
{
    int seen = 0;
    for (size_t p = 0; p + 512 <= len;) {
        bool ok;
        uint64_t sz = octal(b + p + 124, 12, &ok);
        if (!ok || sz > len - p - 512)
            break;
        const char *nm = (const char *)b + p;
        seen |= (!strncmp(nm, "pickle", 100)) | (!strncmp(nm, "storages", 100)) << 1 |
                (!strncmp(nm, "tensors", 100)) << 2;
        p += 512 + (size_t)((sz + 511) / 512 * 512);
    }
    return seen == 7;
}

/* Audits a tar of untrusted bytes header by header (sizes from octal fields
 * checked against the file before use), a pre-1.6 torch tar's members scanned
 * as such, any other member by its content. Reports; returns nothing. */
static void scan_tar(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    size_t p = 0;
    bool legacy = legacy_tar(b, len);
    while (p + 512 <= len) {
        const unsigned char *h = b + p;
        bool zero = true;
        for (int i = 0; i < 512 && zero; i++)
            zero = !h[i];
        if (zero)
            return;
        bool ok;
        uint64_t sz = octal(h + 124, 12, &ok);
        char nm[101];
        memcpy(nm, h, 100);
        nm[100] = 0;
        char *sub = tn__scan_join(entry, nm);
        if (!sub) {
            c->oom = true;
            return;
        }
        if (!ok || sz > len - p - 512) {
            member_anomaly(c, sub, p, "tar-size");
            tn__scan_incomplete(c, "a tar member runs past the end of the archive");
            free(sub);
            return;
        }
        bool regular = h[156] == '0' || h[156] == 0 || h[156] == '7';
        if (regular && legacy && (!strcmp(nm, "storages") || !strcmp(nm, "tensors")))
            scan_legacy_member(c, h + 512, (size_t)sz, sub, nm[0] == 's');
        else if (regular && tn__scan_budget(c, 0))
            tn__scan_member(c, h + 512, (size_t)sz, sub, nm);
        free(sub);
        p += 512 + (size_t)((sz + 511) / 512 * 512);
        if (c->oom || c->r->n >= TN__SCAN_MAX_FINDINGS)
            return;
    }
}

/* What the loader refuses is never clean: a dtype tensorkit lacks leaves the
 * file unchecked (incomplete), any other refusal is an anomaly with the
 * loader's words (negative or overflowing shapes, offsets, overlaps). */
static void loader_check(struct tn__scan_ctx *c, int rc, const char *entry, const char *reason)
{
    if (rc == TN_OK)
        return;
    if (rc == TN_ENOMEM)
        c->oom = true;
    else if (rc == TN_EDTYPE)
        tn__scan_incomplete(c, tn_last_error());
    else
        anomaly_detail(c, entry, 0, reason, tn_last_error());
}

/* Audits an .npy header through the loader's own checks (so the scanner never
 * calls clean what tn_npy_parse refuses) and numpy's reading of the header
 * literal; an object array is a finding, since loading it runs pickle.
 * Reports; returns nothing. */
static void scan_npy(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    if (len < 10) {
        tn__scan_anomaly(c, entry, 0, "npy-header");
        return;
    }
    size_t hl, at;
    if (b[6] == 1) {
        hl = tn__rd16(b + 8);
        at = 10;
    } else {
        if (len < 12) {
            tn__scan_anomaly(c, entry, 0, "npy-header");
            return;
        }
        hl = tn__rd32(b + 8);
        at = 12;
    }
    if (hl > len - at) {
        tn__scan_anomaly(c, entry, 0, "npy-header");
        return;
    }
    /* numpy's reading of the header decides: a literal, evaluated */
    struct tn__npy_verdict v;
    if (tn__npy_header_verdict((const char *)b + at, hl, &v) < 0) {
        c->oom = true;
        return;
    }
    if (!v.parsed) {
        anomaly_detail(c, entry, 0, "npy-header", "the header is no dict literal with a descr");
        return;
    }
    if (!v.canonical)
        anomaly_detail(c, entry, 0, "npy-header-noncanonical", "the header is not the literal "
                       "numpy writes (escapes, double quotes, concatenated strings, duplicate "
                       "keys, comments, other spacing or order): readers may disagree on it");
    bool object = v.object;
    if (object) {
        /* --policy pickle: an object array is a pickle like any other */
        if (c->o->policy != TN_ALLOW_PICKLE)
            tn__scan_anomaly(c, entry, 0, "npy-object-array");
        tn__scan_pickles(c, b + at + hl, len - at - hl, entry, 1, false);
        return;
    }
    loader_check(c, tn__npy_check(b, len, *entry ? entry : c->label), entry, "npy-header");
}

/* Audits a safetensors file through the loader's own header checks
 * (tn__st_check): a file the loader refuses is a finding under the loader's
 * reason code. Reports; returns nothing. */
static void scan_safetensors(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                             const char *entry)
{
    const char *what = "safetensors-header";
    int rc = tn__st_check(b, len, *entry ? entry : c->label, &what);
    loader_check(c, rc, entry, what);
}

/* Whether b starts as a zip does (a local header, or the end record of an
 * empty archive). */
static bool is_zip(const unsigned char *b, size_t len)
{
    if (len >= 4 && tn__rd32(b) == 0x04034b50)
        return true;
    if (len >= 4 && tn__rd32(b) == 0x06054b50) /* an empty archive */
        return true;
    return false;
}

/* A zip whose end record exists but that starts with other bytes: where
 * its offsets start counting (Python's zipfile finds it the same way:
 * the central directory ends at the end record). */
static bool zip_shift(const unsigned char *b, size_t len, size_t *shift)
{
    if (len < 22)
        return false;
    for (size_t p = len - 22 + 1; p-- > 0 && p + 65557 >= len;)
        if (tn__rd32(b + p) == 0x06054b50) {
            uint64_t cdsize = tn__rd32(b + p + 12), cdoff = tn__rd32(b + p + 16);
            if (!tn__rd16(b + p + 10) || cdsize > p || cdoff > p - cdsize)
                return false;
            *shift = (size_t)(p - cdsize - cdoff);
            return *shift > 0 && *shift < len && tn__rd32(b + *shift) == 0x04034b50;
        }
    return false;
}

/* What a file that is no model is, in a few words. */
static const char *what_is(const unsigned char *b, size_t len)
{
    static const struct {
        const char *magic;
        size_t n;
        const char *what;
    } magic[] = {
        {"\x89PNG\r\n\x1a\n", 8, "a PNG image"}, {"\xff\xd8\xff", 3, "a JPEG image"},
        {"GIF8", 4, "a GIF image"}, {"%PDF", 4, "a PDF document"},
        {"\x7f" "ELF", 4, "an ELF executable"}, {"RIFF", 4, "a RIFF file"},
        {"\x89HDF", 4, "an HDF5 file"}, {"<", 1, "markup (HTML or XML)"},
        {"{", 1, "JSON or other text"},
    };
    if (!len)
        return "an empty file";
    for (size_t i = 0; i < sizeof magic / sizeof *magic; i++)
        if (len >= magic[i].n && !memcmp(b, magic[i].magic, magic[i].n))
            return magic[i].what;
    size_t n = len < 4096 ? len : 4096, bin = 0;
    for (size_t i = 0; i < n; i++)
        bin += b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t';
    return bin ? "data of an unknown format" : "text";
}

/* The top level is none of the formats read: incomplete, and no model. */
static void not_a_model(struct tn__scan_ctx *c, const unsigned char *b, size_t len)
{
    const char *what = what_is(b, len);
    char why[160];
    snprintf(why, sizeof why, "%s: not a model: %s (no checkpoint, pickle, archive, safetensors "
             "or .npy file)", c->label, what);
    tn__scan_incomplete(c, why);
    c->r->not_model = true;
    c->r->format = what;
}

/* Scans b[0..len) (untrusted; any bytes, any length) by what its leading
 * bytes say it is: zip, npy, tar, 7z or a compressed stream, a legacy
 * torch.save, safetensors, a pickle, a zip behind a prefix; else a finding
 * that it is no model.  Findings go to c->r under `entry`; `name` (may be
 * NULL) only hints at a pickle; `top` records the format in the report.
 * Never fails: what cannot be read marks the report incomplete. */
static void scan_blob(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                      const char *entry, const char *name, bool top)
{
#define FMT(f) do { if (top) c->r->format = (f); } while (0)
    if (is_zip(b, len)) {
        FMT("zip");
        scan_zip(c, b, len, entry);
        return;
    }
    if (len >= 6 && !memcmp(b, "\x93NUMPY", 6)) {
        FMT("npy");
        scan_npy(c, b, len, entry);
        return;
    }
    if (len >= 262 && !memcmp(b + 257, "ustar", 5)) {
        FMT("tar");
        scan_tar(c, b, len, entry);
        return;
    }
    /* 7z archives, and compressed streams (joblib's compressors, numpy's
     * and torch's neighbours): what is inside is scanned */
    const char *kind = tn__scan_packed_kind(b, len);
    if (kind && !strcmp(kind, "7z")) {
        FMT("7z");
        tn__scan_7z(c, b, len, entry);
        return;
    }
    if (kind && tn__scan_stream(c, b, len, entry, kind)) {
        FMT(kind);
        return;
    }
    if (len >= 3 && b[0] == 0x80 && b[1] == 2 && b[2] == 0x8a) {
        FMT("legacy");
        /* magic number, protocol, sys_info, the object, the storage keys;
         * raw storage data follows. */
        tn__scan_pickles(c, b, len, entry, 5, true);
        return;
    }
    if (len >= 10 && b[8] == '{' && tn__rd64(b) >= 2) {
        FMT("safetensors");
        scan_safetensors(c, b, len, entry);
        return;
    }
    bool named = name && (ends_with(name, ".pkl") || ends_with(name, ".pickle") ||
                          ends_with(name, "pickle") || ends_with(name, "sys_info"));
    if (is_pickle_start(b, len) || named || looks_like_pickle(b, len)) {
        FMT("pickle");
        tn__scan_pickles(c, b, len, entry, 0, false);
        return;
    }
    size_t shift;
    if (zip_shift(b, len, &shift)) {
        FMT("zip");
        tn__scan_anomaly(c, entry, 0, "zip-prefix");
        uint64_t base = c->base;
        c->base += shift;
        scan_zip(c, b + shift, len - shift, entry);
        c->base = base;
        return;
    }
    if (top)
        not_a_model(c, b, len);
#undef FMT
}

/* tn_scan_memory (tensor/io.h): audits the caller's bytes (borrowed) into r,
 * which the caller frees with tn_scan_report_free. 0 (the report says what
 * was found and whether it is complete), TN_EINVAL for NULL arguments,
 * TN_ENOMEM (the report then incomplete). */
int tn_scan_memory(const void *data, size_t len, const char *label,
                   const struct tn_scan_options *opts, struct tn_scan_report *r)
{
    if (!r || (!data && len))
        return tn_set_error(TN_EINVAL, "tn_scan_memory: NULL argument");
    struct tn__scan_ctx c = {.o = opts ? opts : &default_opts, .r = r,
                             .label = label ? label : "-"};
    scan_blob(&c, data, len, "", NULL, true);
    if (c.oom) {
        tn__scan_incomplete(&c, "out of memory");
        return tn_set_error(TN_ENOMEM, "%s: out of memory while scanning", label ? label : "scan");
    }
    return 0;
}

/* tn_scan_file (tensor/io.h): a DCP folder through tn__scan_dcp, else the
 * file read once (tn__io_map_open) and scanned; an unreadable file gives 0
 * with an incomplete report carrying the error, never a clean one. */
int tn_scan_file(const char *path, const struct tn_scan_options *opts, struct tn_scan_report *r)
{
    if (!path || !r)
        return tn_set_error(TN_EINVAL, "tn_scan_file: NULL argument");
    if (strcmp(path, "-") && tn_dcp_is_dir(path))
        return tn__scan_dcp(path, opts, r);
    struct tn_io_map *m = tn__io_map_open(path);
    if (!m) {
        r->incomplete = true;
        r->error = tn__scan_dupn(tn_last_error(), strlen(tn_last_error()));
        return 0;
    }
    int rc = tn_scan_memory(m->addr, m->len, path, opts, r);
    tn__io_map_release(m);
    return rc;
}
