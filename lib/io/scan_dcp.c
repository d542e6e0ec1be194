/*
 * io/scan_dcp.c: the scanner over a distributed checkpoint folder: its
 * .metadata with the DCP metadata classes allowed besides the policy's
 * globals (anything else, a command PyTorch's loader would run, is
 * reported), then every item its storage entries place in the .distcp
 * files, each a torch.save archive scanned as a file is.
 */
#include "io/scan_internal.h"

#include <tensor/dcp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Findings from n0 on get `prefix` before their entry ("" becomes prefix
 * less its "!"). */
static void prefix_entries(struct tn_scan_report *r, size_t n0, const char *prefix)
{
    for (size_t i = n0; i < r->n; i++) {
        struct tn_scan_finding *f = &r->f[i];
        size_t pl = strlen(prefix), el = strlen(f->entry);
        char *e = malloc(pl + el + 2);
        if (!e) {
            r->incomplete = true;
            return;
        }
        if (el)
            sprintf(e, "%s!%s", prefix, f->entry);
        else
            strcpy(e, prefix);
        free(f->entry);
        f->entry = e;
    }
}

/* Marks r incomplete with `why` as its first error (copied; later reasons
 * are dropped). */
static void incomplete(struct tn_scan_report *r, const char *why)
{
    r->incomplete = true;
    if (!r->error)
        r->error = tn__scan_dupn(why, strlen(why));
}

/* Contract in scan_internal.h: scans dir/.metadata with the DCP classes
 * added to opts' allowlist, then every chunk of every .distcp file as a
 * blob of its own (findings prefixed with file@offset).  The loader's
 * refusal of the folder (or an unreadable file) is an incomplete scan,
 * not an error.  0, or an error such as out of memory. */
int tn__scan_dcp(const char *dir, const struct tn_scan_options *opts, struct tn_scan_report *r)
{
    struct tn_scan_options o = {0};
    if (opts)
        o = *opts;
    size_t nd = tn__dcp_nglobals;
    const char **allow = malloc((o.nallow + nd) * sizeof *allow);
    char *mp = malloc(strlen(dir) + 11);
    if (!allow || !mp) {
        free(allow);
        free(mp);
        return tn_set_error(TN_ENOMEM, "%s: out of memory", dir);
    }
    for (size_t i = 0; i < o.nallow; i++)
        allow[i] = o.allow[i];
    for (size_t i = 0; i < nd; i++)
        allow[o.nallow + i] = tn__dcp_globals[i];
    sprintf(mp, "%s/.metadata", dir);
    struct tn_scan_options om = o;
    om.allow = allow;
    om.nallow = o.nallow + nd;
    size_t n0 = r->n;
    int rc = tn_scan_file(mp, &om, r);
    free(allow);
    free(mp);
    if (rc < 0)
        return rc;
    prefix_entries(r, n0, ".metadata");
    r->format = "dcp";
    struct tn_dcp *d = tn_dcp_open(dir);
    if (!d) {
        /* the loader's refusal: with no finding, the scan is not clean */
        incomplete(r, tn_last_error());
        return 0;
    }
    for (size_t i = 0; i < tn_dcp_count(d); i++) {
        const struct tn_dcp_item *it = tn_dcp_item_at(d, i);
        for (size_t c = 0; c < it->nchunks; c++) {
            const struct tn_dcp_chunk *k = &it->chunks[c];
            size_t len;
            const unsigned char *b = tn__dcp_file_bytes(d, k->file, &len);
            char label[600];
            snprintf(label, sizeof label, "%s@%llu", tn_dcp_file_name(d, k->file),
                     (unsigned long long)k->offset);
            n0 = r->n;
            const char *fmt = r->format;
            if (tn_scan_memory(b + k->offset, (size_t)k->length, label, &o, r) < 0) {
                tn_dcp_close(d);
                return tn_last_status();
            }
            r->format = fmt;
            prefix_entries(r, n0, label);
        }
    }
    tn_dcp_close(d);
    return 0;
}
