/*
 * tensor/io.h: libtensor's io module: zip archives, PyTorch checkpoints
 * (torch.save's zip format, both the 1.13 and the 2.x layouts), safetensors
 * and .npy, over the nested values of tensor/value.h (core's).
 *
 * Every reader here takes untrusted bytes: sizes and offsets are checked
 * before use, allocations the input controls have limits, and nothing in a
 * file can run code.  Ownership and errors follow tensor/core.h.
 */
#ifndef TENSOR_IO_H
#define TENSOR_IO_H

#include <tensor/core.h>
#include <tensor/value.h> /* the nested values every loader returns */

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------- zip read */

/* One member of a zip archive, as its central-directory entry and local
 * header describe it. */
struct tn_zip_entry {
    const char *name;      /* NUL-terminated; the archive's own bytes */
    uint64_t header_offset; /* of the local file header */
    uint64_t data_offset;  /* of the member's (stored or compressed) bytes */
    uint64_t size;         /* uncompressed size */
    uint64_t csize;        /* compressed size (== size when stored) */
    uint32_t crc;          /* as recorded (never checked, as in PyTorch) */
    uint16_t method;       /* 0 stored, 8 deflated */
    uint16_t flags;        /* general-purpose bits of the central directory */
};

struct tn_zip;

/* Opens a zip archive, mapping the file read-only (copy on write).  Reads
 * the end records (zip64 too), the central directory and every local header;
 * refuses entries whose bytes lie outside the file, encrypted entries and
 * methods other than stored and deflated.  NULL with an error naming `path`. */
struct tn_zip *tn_zip_open(const char *path);
/* The same over `len` bytes the caller keeps alive until tn_zip_close;
 * `label` names them in errors. */
struct tn_zip *tn_zip_open_memory(const void *data, size_t len, const char *label);
void tn_zip_close(struct tn_zip *z); /* NULL is fine */

size_t tn_zip_count(const struct tn_zip *z);
const struct tn_zip_entry *tn_zip_entry_at(const struct tn_zip *z, size_t i);
/* The index of the (first) entry named `name`, or -1. */
long tn_zip_find(const struct tn_zip *z, const char *name);
/* The label given at open (the path). */
const char *tn_zip_label(const struct tn_zip *z);
/* The whole archive's bytes (the mapping) and its length. */
const unsigned char *tn_zip_bytes(const struct tn_zip *z, size_t *len);

/* A stored member's bytes inside the mapping (no copy), or NULL with an
 * error when the member is compressed. */
const void *tn_zip_data(const struct tn_zip *z, size_t i);
/* The member's bytes in a malloc'd buffer (inflated when deflated) that the
 * caller frees; at most `limit` bytes (0: no limit beyond the entry's size).
 * Returns 0 or an error. */
int tn_zip_read(const struct tn_zip *z, size_t i, size_t limit, void **out, size_t *len);

/* zip's CRC-32 of len bytes, continued from crc (0 to start). */
uint32_t tn_zip_crc32(uint32_t crc, const void *data, size_t len);

/* A storage over a stored member's bytes in the mapping, keeping the mapping
 * alive until the storage goes: the zero-copy path for tensors. */
struct tn_storage *tn_zip_storage(struct tn_zip *z, size_t i, size_t nbytes);

/* -------------------------------------------------------------- zip write */

struct tn_zip_writer;

/* Starts writing an archive that will replace `path` when finished: the
 * bytes go to a temporary file in the same folder.  Members are stored, laid
 * out exactly as PyTorch's miniz writer lays them out (data aligned to
 * `alignment` bytes through the "FB" padding field, data descriptors, zip64
 * end records).  NULL with an error. */
struct tn_zip_writer *tn_zip_writer_open(const char *path, unsigned alignment);
/* Appends one stored member.  Returns 0 or an error (the writer stays usable
 * only for tn_zip_writer_abort). */
int tn_zip_writer_add(struct tn_zip_writer *w, const char *name, const void *data, uint64_t len);
/* Writes the central directory and end records, flushes, renames the
 * temporary file over the target and frees the writer, in every case.
 * Returns 0 or an error (the target is then untouched). */
int tn_zip_writer_finish(struct tn_zip_writer *w);
/* Removes the temporary file and frees the writer.  NULL is fine. */
void tn_zip_writer_abort(struct tn_zip_writer *w);

/* ---------------------------------------------------------- checkpoints */

enum tn_ckpt_layout {
    TN_CKPT_TORCH2 = 0, /* the current layout (PyTorch >= 2.7): the default */
    TN_CKPT_TORCH1 = 1  /* PyTorch 1.13's layout */
};

/* Which torch.load(weights_only=True) allowlist of opcodes and globals a
 * load accepts. */
enum tn_ckpt_allowlist {
    TN_ALLOW_CURRENT = 0, /* PyTorch 2.x (BINFLOAT, set, complex, device, ...) */
    TN_ALLOW_TORCH1 = 1,  /* PyTorch 1.13's (no BINFLOAT) */
    TN_ALLOW_PICKLE = 2   /* tn_scan only (loads take it as CURRENT): 2.x's list plus
                           * globals whose unpickling runs no code of the file's
                           * (builtins' values, collections, datetime, numpy arrays,
                           * torch.nn and torchvision modules, ...) */
};

struct tn_save_options {
    enum tn_ckpt_layout layout;
    const char *archive_name; /* NULL: the file name less its last extension, as torch.save */
    /* By default the save is durable (O_DIRECT writes past the page cache,
     * one sync, the rename, the folder synced).  no_fsync: buffered and not
     * synced, still atomic against a crash of the process (the target is
     * the old file or the new one), but not against a power loss or an OS
     * crash; torch.save never syncs.  tn_io(3) gives figures. */
    bool no_fsync;
};

struct tn_load_options {
    enum tn_ckpt_allowlist allowlist;
    bool no_mmap;          /* copy every storage into memory */
    size_t max_pickle;     /* 0: 1 GiB: the largest data.pkl accepted */
};

/* torch.save(value, path): writes `value` in PyTorch's zip format through a
 * temporary file renamed over `path`.  Tensors sharing a storage are written
 * once and reload as views of one storage; every storage is written whole.
 * opts NULL means the defaults.  Returns 0 or an error. */
int tn_save(const char *path, const struct tn_value *value, const struct tn_save_options *opts);

/* torch.load(path, weights_only=True): reads a zip checkpoint written by
 * PyTorch 1.6+ (any archive folder name, stored or deflated members), or a
 * legacy one (torch.save(..., _use_new_zipfile_serialization=False): its
 * storages are copied into memory); "-" and pipes are read whole.
 * Storages are mapped from the file where their record is 64-byte aligned
 * and stored, copied otherwise.  Refuses, with a message naming the file,
 * record, byte offset and opcode or global, anything outside the allowlist,
 * pre-0.4 tar files and TorchScript archives.  A call to an allowed global
 * tensorkit cannot rebuild (torch.device, set, bytes, complex, a sparse
 * or quantized tensor) gives a TN_VALUE_OPAQUE in its place.  NULL with an error. */
struct tn_value *tn_load(const char *path, const struct tn_load_options *opts);

/* The same over an archive already open. */
struct tn_value *tn_ckpt_load_zip(struct tn_zip *z, const struct tn_load_options *opts);

/* --------------------------------------------------- safetensors and npy */

/* Reads a .safetensors file into an ODICT of name -> tensor (file order of
 * data offsets); `metadata` (may be NULL) receives a DICT of the
 * __metadata__ strings or NULL.  Mapped where possible.  NULL with an error. */
struct tn_value *tn_st_load(const char *path, struct tn_value **metadata);
/* Writes the tensors of a flat DICT/ODICT of name -> tensor (contiguous
 * copies are made where needed) with optional __metadata__ (a DICT of
 * strings, may be NULL), ordered as the safetensors package orders them
 * (larger elements first, then by name).  safetensors has no aliasing:
 * names sharing memory are written as separate copies.  Atomic.  Returns 0
 * or an error. */
int tn_st_save(const char *path, const struct tn_value *tensors, const struct tn_value *metadata);

/* .npy: one array.  NULL / an error as usual. */
struct tn_tensor *tn_npy_load(const char *path);
struct tn_tensor *tn_npy_parse(const void *data, size_t len, const char *label);
int tn_npy_save(const char *path, const struct tn_tensor *t);
/* tn_npy_save with the fsync optional: header and data written straight
 * from the tensor, no encoded copy. */
int tn_npy_write(const char *path, const struct tn_tensor *t, bool sync);
/* The .npy bytes of t in a malloc'd buffer the caller frees. */
int tn_npy_encode(const struct tn_tensor *t, void **out, size_t *len);
/* .npz: an ODICT of name -> tensor (".npy" dropped from member names). */
struct tn_value *tn_npz_load(const char *path);
/* The same over an archive already open. */
struct tn_value *tn_npz_load_zip(struct tn_zip *z);
int tn_npz_save(const char *path, const struct tn_value *tensors);

/* ------------------------------------------------------------- progress */

/* Progress of long writes: tn_save, tn_st_save and tn_npz_save call fn
 * from the writing thread with the bytes of the file written so far, after
 * every few MiB (callers know the total they asked for; a file is a little
 * larger than its tensors' bytes).  The setting is per thread; NULL turns
 * it off (the default).  fn must not call back into the writer. */
typedef void (*tn_io_progress_fn)(uint64_t written, void *ctx);
void tn_io_set_progress(tn_io_progress_fn fn, void *ctx);

/* Detects a file's format from its first bytes: "torch" (zip), "safetensors",
 * "npy", "npz" (a zip whose members end in .npy), "legacy" (pre-1.6 torch
 * pickle) or NULL with an error. */
const char *tn_io_detect(const char *path);

/* ------------------------------------------------------- any input file */

/* An input of any supported format, read once: "-" is standard input, a
 * pipe (<(...)) or a device is read to its end into memory, a regular file
 * is mapped; a folder holding `.metadata` is a distributed checkpoint
 * (tensor/dcp.h), any other folder is refused ("Is a directory").  The
 * format comes from the content.  A Hugging Face sharded index (a JSON object with a
 * "weight_map", such as model.safetensors.index.json) stands for its
 * shards, named relative to the index's folder, read as one checkpoint. */
struct tn_io_file;
/* NULL with an error naming `path`. */
struct tn_io_file *tn_io_file_open(const char *path);
/* "torch", "safetensors", "npz", "npy", "legacy", "sharded" or "dcp". */
const char *tn_io_file_format(const struct tn_io_file *f);
/* dcp: the folder, opened and checked (borrowed); else NULL. */
struct tn_dcp;
struct tn_dcp *tn_io_file_dcp(const struct tn_io_file *f);
/* torch and npz: the archive, borrowed (for checks of its members); else NULL. */
struct tn_zip *tn_io_file_zip(const struct tn_io_file *f);
/* sharded: the number of shards and the i-th one's path (borrowed). */
size_t tn_io_file_shards(const struct tn_io_file *f);
const char *tn_io_file_shard(const struct tn_io_file *f, size_t i);
/* The content as a value (a new reference): a checkpoint's object, an ODICT
 * of name -> tensor for safetensors, npz and sharded files, {"<stem>": t}
 * for a .npy, for a DCP folder the nested dict dcp_to_torch_save makes of
 * it.  `metadata` (may be NULL) receives safetensors' __metadata__
 * (a DICT of strings; a sharded index's "metadata" object likewise) or NULL.
 * opts NULL means the defaults.  NULL with an error. */
struct tn_value *tn_io_file_load(struct tn_io_file *f, const struct tn_load_options *opts,
                                 struct tn_value **metadata);
void tn_io_file_close(struct tn_io_file *f); /* NULL is fine */
/* Open, load with the defaults and close: the content, which must be a
 * dict (of name -> tensor, for weights and inputs); NULL with an error
 * naming path otherwise. */
struct tn_value *tn_io_load_dict(const char *path);

/* ---------------------------------------------------------------- scan */

/* How bad a finding is.  Default deny: a global outside the chosen
 * weights_only allowlist is at least UNKNOWN. */
enum tn_scan_severity {
    TN_SCAN_SUSPICIOUS = 1, /* an anomaly: parser differential, broken frame, trailing bytes, ... */
    TN_SCAN_UNKNOWN = 2,    /* outside the allowlist, or a callable not resolvable to a constant */
    TN_SCAN_DANGEROUS = 3   /* known to run code or touch files, processes or the network */
};

/* How the pickle used a global (the strongest use wins). */
enum tn_scan_use { TN_SCAN_NONE = 0, TN_SCAN_IMPORTED, TN_SCAN_BUILT, TN_SCAN_CALLED };

struct tn_scan_finding {
    char *entry;      /* "archive/data.pkl", "outer.zip!inner.pt!archive/data.pkl"; "" for the file */
    uint64_t offset;  /* byte offset inside that entry */
    char *module;     /* as CPython would resolve it (Py2 names mapped); "" for none */
    char *name;       /* may be dotted */
    enum tn_scan_use use;
    enum tn_scan_severity severity;
    const char *reason; /* a static short code: "dangerous-global", "frame-boundary", ... */
    char *detail;       /* what is wrong, in words (a loader's refusal), or NULL */
    bool offset_in_parent; /* a member's header: offset counts in the archive holding entry */
};

struct tn_scan_options {
    enum tn_ckpt_allowlist policy;   /* TN_ALLOW_CURRENT (torch2), TN_ALLOW_TORCH1 or
                                      * TN_ALLOW_PICKLE */
    const char *const *allow;        /* extra "module.name" entries (see tn_scan_allow_ok) */
    size_t nallow;
    unsigned max_depth;              /* archives inside archives; 0: 4 */
    size_t max_entries;              /* members of all archives together; 0: 100000 */
    uint64_t max_expanded;           /* bytes inflated or read from members; 0: 4 GiB */
};

struct tn_scan_report {
    struct tn_scan_finding *f;
    size_t n, cap;
    const char *format;  /* what the top level was found to be ("torch", "pickle", ...) */
    bool incomplete;     /* some part could not be read or analysed: never "clean" */
    char *error;         /* the first reason it is incomplete, or NULL */
    bool not_model;      /* incomplete because the file is no model at all (an image,
                          * text, an empty file, a password-protected zip): error and
                          * format say what it is */
};

/* Scans `len` bytes named `label` (the format found from the content) and
 * appends findings to r (zeroed by the caller first).  Returns 0 when the
 * scan ran (r->incomplete may still be set), or an error for bad arguments
 * or memory exhaustion.  Nothing in the input is ever run. */
int tn_scan_memory(const void *data, size_t len, const char *label,
                   const struct tn_scan_options *opts, struct tn_scan_report *r);
/* The same for a file (mapped read-only).  An unreadable file gives
 * r->incomplete and r->error, and returns 0. */
int tn_scan_file(const char *path, const struct tn_scan_options *opts, struct tn_scan_report *r);
void tn_scan_report_free(struct tn_scan_report *r);

/* The severity of global module.name used from a pickle of protocol
 * `proto` under the options (Py2 names mapped as CPython maps them for
 * proto < 3; the stronger verdict of the raw and the mapped name), or 0
 * when it is allowed.  The loader refuses exactly the globals this flags. */
int tn_scan_global_severity(const char *module, const char *name, int proto,
                            const struct tn_scan_options *opts);
/* Whether "module.name" may be added with --allow: never anything in os,
 * posix, nt, sys, subprocess or builtins.eval/exec (or dangerous paths). */
bool tn_scan_allow_ok(const char *module_dot_name);

/* Every reason code a finding can carry (tn_scan_finding.reason), with a
 * description: n gets the count. */
struct tn_scan_rule {
    const char *id;
    const char *description;
};
const struct tn_scan_rule *tn_scan_rules(size_t *n);

const char *tn_scan_severity_name(enum tn_scan_severity s);
const char *tn_scan_use_name(enum tn_scan_use u);

#ifdef __cplusplus
}
#endif
#endif
