/*
 * io/scan_internal.h: what the parts of the checkpoint auditor share
 * (scan.c: containers and the report; scan_pickle.c: the pickle machine;
 * scan_policy.c: names and their severities).  Internal to lib/io.
 */
#ifndef TN_IO_SCAN_INTERNAL_H
#define TN_IO_SCAN_INTERNAL_H

#include "io/internal.h"

#define TN__SCAN_MAX_FINDINGS 10000u

/* One scan in progress: options, the report it fills, container limits. */
struct tn__scan_ctx {
    const struct tn_scan_options *o;
    struct tn_scan_report *r;
    const char *label; /* the file's name, for messages */
    uint64_t base;     /* where the archive being walked starts in its entry (a zip after
                        * other bytes): added to offsets of members' headers */
    unsigned depth;
    size_t entries;
    uint64_t expanded;
    bool oom;
};

/* The report (scan.c). */
char *tn__scan_dupn(const char *s, size_t n);
void tn__scan_add(struct tn__scan_ctx *c, const char *entry, uint64_t off, const char *mod,
                  const char *name, enum tn_scan_use use, int sev, const char *reason);
void tn__scan_anomaly(struct tn__scan_ctx *c, const char *entry, uint64_t off, const char *reason);
void tn__scan_incomplete(struct tn__scan_ctx *c, const char *why);
/* Gives finding n (when it was added) its words. */
void tn__scan_set_detail(struct tn__scan_ctx *c, size_t n, const char *detail);

/* Containers (scan.c): "parent!name" (malloc'd, NULL without memory); a
 * member scanned one level deeper; n more bytes taken from the expanded-
 * size budget (false when over it). */
char *tn__scan_join(const char *parent, const char *name);
void tn__scan_member(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                     const char *entry, const char *name);
bool tn__scan_budget(struct tn__scan_ctx *c, uint64_t n);

/* Compressed streams and 7z (scan_archive.c): the kind at b ("gzip",
 * "bzip2", "xz", "lzma", "zstd", "lz4", "compress", "zlib", "7z") or NULL;
 * a stream's content scanned (false: it does not decompress); a 7z's
 * members scanned. */
const char *tn__scan_packed_kind(const unsigned char *b, size_t len);
bool tn__scan_stream(struct tn__scan_ctx *c, const unsigned char *b, size_t len,
                     const char *entry, const char *kind);
void tn__scan_7z(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry);

/* Severity of a resolved module.name under c's options (scan_policy.c). */
int tn__scan_classify(const char *mod, const char *name, const struct tn_scan_options *o);

/* The object graph a pickle builds (scan_graph.c): nodes from 1 (0: a
 * scalar, or tracking stopped at a limit: `limit`, or memory: `oom`). */
struct tn__scan_graph {
    struct node *nodes;
    struct edge *edges;
    size_t n, capn, ne, cape;
    bool off, limit, oom;
};
uint32_t tn__graph_node(struct tn__scan_graph *g);
/* parent holds child (0: a scalar); build: it is BUILD's state */
void tn__graph_child(struct tn__scan_graph *g, uint32_t parent, uint32_t child, bool build);
/* The number of values a walk from root meets (saturating at UINT64_MAX),
 * and whether containers on it hold themselves.  -1 out of memory. */
int tn__graph_walk(struct tn__scan_graph *g, uint32_t root, uint64_t *len, bool *cycle);
void tn__graph_free(struct tn__scan_graph *g);

/* An .npy header as numpy reads it (scan_npy.c): parsed (a dict literal
 * with a descr), whether descr_to_dtype would give objects, and whether it
 * is exactly the literal numpy writes.  0, or TN_ENOMEM. */
struct tn__npy_verdict {
    bool parsed, object, canonical;
};
int tn__npy_header_verdict(const char *h, size_t n, struct tn__npy_verdict *v);

/* The pickle machine (scan_pickle.c): one pickle at *pos (0 when it reached
 * STOP, -1 when it broke or hit a limit), or every pickle of b in turn. */
int tn__scan_one_pickle(struct tn__scan_ctx *c, const unsigned char *b, size_t len, size_t *pos,
                        const char *entry);
void tn__scan_pickles(struct tn__scan_ctx *c, const unsigned char *b, size_t len, const char *entry,
                      int expect, bool tail_ok);

/* A distributed checkpoint folder (scan_dcp.c): .metadata with the DCP
 * classes allowed, then each item of its .distcp files. */
int tn__scan_dcp(const char *dir, const struct tn_scan_options *opts, struct tn_scan_report *r);

#endif
