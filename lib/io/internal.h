/*
 * io/internal.h: what lib/io's files share and the public API does not
 * offer: CRC-32, atomic file writes, the pickle opcode decoder (which the
 * loader and the scanner both walk, so they never disagree), the pickle
 * writer and the restricted pickle machine.
 */
#ifndef TN_IO_INTERNAL_H
#define TN_IO_INTERNAL_H

#include <config.h>
#include <tensor/io.h>
#include "core/internal.h"

/* zlib's CRC-32 (the one zip uses), continued from `crc` (0 to start). */
uint32_t tn__io_crc32(uint32_t crc, const void *data, size_t len);

/* The formats tn_io_file_open tells apart from a file's first bytes (a
 * folder: DCP), in one place for every reader: tckpt, tcompile's -i/-w,
 * tn_load and tn_io_detect all go through it. */
enum tn__io_format {
    TN_IO_FMT_TORCH,       /* a zip that is not an .npz: torch.save's format */
    TN_IO_FMT_SAFETENSORS,
    TN_IO_FMT_NPZ,         /* a zip whose members all end in .npy */
    TN_IO_FMT_NPY,
    TN_IO_FMT_LEGACY,      /* torch.save before 1.6: pickles back to back */
    TN_IO_FMT_SHARDED,     /* a Hugging Face index naming its shards */
    TN_IO_FMT_DCP,         /* a distributed checkpoint folder */
};
struct tn_io_file;
/* The format tn_io_file_open found for f. */
enum tn__io_format tn__io_file_kind(const struct tn_io_file *f);

/* Sizes and offsets from this value on are written in zip64 fields: 4 GiB
 * - 1 (0xFFFFFFFF), as the format requires.  Only tests change it, to
 * exercise the zip64 path without writing 4 GiB. */
extern uint64_t tn__zip64_threshold;

/* The CRC-32 of the member tn_zip_writer_add wrote last (computed while
 * writing, so callers need not read the bytes again). */
uint32_t tn__zip_writer_last_crc(const struct tn_zip_writer *w);

/* Reports `written` bytes to the thread's tn_io_set_progress callback. */
void tn__io_progress(uint64_t written);
/* fwrite of a large buffer in pieces, reporting *written (advanced by
 * len) after each.  Returns 0, or -1 with errno as fwrite leaves it. */
int tn__io_write_progress(FILE *f, const void *data, size_t len, uint64_t *written);

/* A zip writer onto an open stream, from its current position: offsets in
 * the archive count from there, alignment too; finish flushes the stream
 * and leaves it open (abort leaves what was written).  `label` names it.
 * With `writeback` (the file offset up to which the kernel was asked to
 * write back, shared by the archives of one file, starting at 0), every
 * 32 MiB written are handed to the kernel's writeback at once, for a file
 * the caller syncs at the end; NULL: none. */
struct tn_zip_writer *tn__zip_writer_on(FILE *f, const char *label, unsigned alignment,
                                        uint64_t *writeback);
/* torch.save(value) as archive "archive" onto f from its current position
 * (a DCP item), with tn__zip_writer_on's `writeback`.  Returns 0 or an
 * error naming `label`. */
int tn__ckpt_write_stream(FILE *f, const char *label, const struct tn_value *value,
                          uint64_t *writeback);

/* A zip writer that skips its fsync and the writeback it starts early. */
void tn__zip_writer_no_fsync(struct tn_zip_writer *w);

/* A file mapped private and writable (copy on write), shared by whatever
 * reads it and the storages made over it. */
struct tn_io_map {
    long refcount;
    unsigned char *addr;
    size_t len;
    bool mapped; /* munmap on release; else borrowed caller memory */
    bool owned;  /* a stream read into malloc'd memory: freed on release */
};
/* Maps `path` whole (an empty file gives len 0); "-" (stdin), a pipe or a
 * device is read to its end into memory instead.  A folder is refused ("Is a
 * directory").  NULL with an error naming `path`. */
/* The header checks tn_st_load and tn_npy_parse make, for the scanner: 0,
 * or the loader's error (TN_EDTYPE for a dtype tensorkit lacks); *what gets
 * the scanner's reason code ("safetensors-offsets", ...). */
int tn__st_check(const void *data, size_t len, const char *label, const char **what);
int tn__npy_check(const void *data, size_t len, const char *label);

struct tn_io_map *tn__io_map_open(const char *path);
/* Wraps caller memory that outlives the map (no copy, never freed). */
struct tn_io_map *tn__io_map_memory(const void *data, size_t len);
void tn__io_map_release(struct tn_io_map *m);
/* A storage over [off, off+nbytes) of the map, which it keeps alive. */
struct tn_storage *tn__io_map_storage(struct tn_io_map *m, size_t off, size_t nbytes);

/* A zip archive over a map (which it takes its own reference to). */
struct tn_zip *tn__zip_open_map(struct tn_io_map *m, const char *label);
/* tn_zip_open_memory that lists members flagged encrypted too (their bytes
 * are read as they are): the scanner sees what a reader ignoring the flag
 * would. */
struct tn_zip *tn__zip_open_memory_encrypted(const void *data, size_t len, const char *label);
/* tn_st_load over a map (borrowed; storages keep it alive); `path` labels. */
struct tn_value *tn__st_load_map(struct tn_io_map *m, const char *path, struct tn_value **metadata);

/* A legacy (pre-1.6, non-zip) torch.save file over a map (borrowed;
 * storages keep it alive), under the same restricted unpickler. */
struct tn_value *tn__legacy_load(struct tn_io_map *m, const char *label,
                                 const struct tn_load_options *opts);

/* ------------------------------------------------------------ pickle ops */

/* Pickle opcodes (protocols 0-5): the one table of name, byte and the
 * readers that execute the opcode, which the decoder (pickle.c), the
 * restricted machine (unpickle.c) and the scanner (scan_pickle.c) share:
 *   ALL     PyTorch 1.13's and 2.x's weights_only unpicklers, and ours
 *   TORCH2  2.x's only (BINFLOAT)
 *   CKPT    weights_only, but not a DCP .metadata (persistent ids)
 *   DCP     a DCP .metadata only (pickle.dumps's protocol 4 forms)
 *   NONE    no reader of ours executes it; the scanner walks it all the same
 * and the slice of the stack it builds from, which both machines take
 * through tn__pickle_op_slice (pickletools' stack_before, checked by
 * test_opcode_table):
 *   T1-T3   the top 1-3 items make one value (TUPLE1-3)
 *   F1, F2  the top 1 or 2 items go into the container below them
 *   TM      the items above the topmost MARK, which is popped
 *   FM      those items go into the container below the MARK
 *   NO      none (any other opcode) */
#define TN_PICKLE_OPCODES(X) \
    X(MARK, '(', ALL, NO) X(STOP, '.', ALL, NO) X(POP, '0', NONE, NO) X(POP_MARK, '1', NONE, TM)  \
    X(DUP, '2', NONE, NO) X(FLOAT, 'F', NONE, NO) X(INT, 'I', NONE, NO) X(BININT, 'J', ALL, NO)   \
    X(BININT1, 'K', ALL, NO) X(LONG, 'L', NONE, NO) X(BININT2, 'M', ALL, NO)                      \
    X(NONE, 'N', ALL, NO) X(PERSID, 'P', NONE, NO) X(BINPERSID, 'Q', CKPT, NO)                    \
    X(REDUCE, 'R', ALL, NO) X(STRING, 'S', NONE, NO) X(BINSTRING, 'T', NONE, NO)                  \
    X(SHORT_BINSTRING, 'U', ALL, NO) X(UNICODE, 'V', NONE, NO) X(BINUNICODE, 'X', ALL, NO)        \
    X(APPEND, 'a', ALL, F1) X(BUILD, 'b', ALL, NO) X(GLOBAL, 'c', ALL, NO)                        \
    X(DICT, 'd', NONE, TM) X(EMPTY_DICT, '}', ALL, NO) X(APPENDS, 'e', ALL, FM)                   \
    X(GET, 'g', NONE, NO) X(BINGET, 'h', ALL, NO) X(INST, 'i', NONE, TM)                          \
    X(LONG_BINGET, 'j', ALL, NO) X(LIST, 'l', NONE, TM) X(EMPTY_LIST, ']', ALL, NO)               \
    X(OBJ, 'o', NONE, TM) X(PUT, 'p', NONE, NO) X(BINPUT, 'q', ALL, NO)                           \
    X(LONG_BINPUT, 'r', ALL, NO) X(SETITEM, 's', ALL, F2) X(TUPLE, 't', ALL, TM)                  \
    X(EMPTY_TUPLE, ')', ALL, NO) X(SETITEMS, 'u', ALL, FM) X(BINFLOAT, 'G', TORCH2, NO)           \
    X(PROTO, 0x80, ALL, NO) X(NEWOBJ, 0x81, ALL, NO) X(EXT1, 0x82, NONE, NO)                      \
    X(EXT2, 0x83, NONE, NO) X(EXT4, 0x84, NONE, NO) X(TUPLE1, 0x85, ALL, T1)                      \
    X(TUPLE2, 0x86, ALL, T2) X(TUPLE3, 0x87, ALL, T3) X(NEWTRUE, 0x88, ALL, NO)                   \
    X(NEWFALSE, 0x89, ALL, NO) X(LONG1, 0x8a, ALL, NO) X(LONG4, 0x8b, NONE, NO)                   \
    X(BINBYTES, 'B', NONE, NO) X(SHORT_BINBYTES, 'C', NONE, NO)                                   \
    X(SHORT_BINUNICODE, 0x8c, DCP, NO) X(BINUNICODE8, 0x8d, NONE, NO)                             \
    X(BINBYTES8, 0x8e, NONE, NO) X(EMPTY_SET, 0x8f, ALL, NO) X(ADDITEMS, 0x90, NONE, FM)          \
    X(FROZENSET, 0x91, NONE, TM) X(NEWOBJ_EX, 0x92, NONE, NO) X(STACK_GLOBAL, 0x93, DCP, NO)      \
    X(MEMOIZE, 0x94, DCP, NO) X(FRAME, 0x95, DCP, NO) X(BYTEARRAY8, 0x96, NONE, NO)               \
    X(NEXT_BUFFER, 0x97, NONE, NO) X(READONLY_BUFFER, 0x98, NONE, NO)

enum tn_pickle_opcode {
#define TN_X_OP(N, c, r, k) TN_OP_##N = c,
    TN_PICKLE_OPCODES(TN_X_OP)
#undef TN_X_OP
};

/* The readers an opcode runs in (the third column above). */
enum tn__pickle_reader {
    TN_PICKLE_READER_NONE,
    TN_PICKLE_READER_ALL,
    TN_PICKLE_READER_TORCH2,
    TN_PICKLE_READER_CKPT,
    TN_PICKLE_READER_DCP,
};

/* An opcode's slice of the stack (the fourth column above). */
#define TN_PICKLE_SLICE_MARK (-1)
struct tn__pickle_slice {
    int items; /* the top `items` items, or TN_PICKLE_SLICE_MARK: those above the topmost MARK */
    bool into; /* they go into the container below them (F1, F2, FM) */
};
/* The slice of `code` ({0, false} for NO and for a byte that is none). */
struct tn__pickle_slice tn__pickle_op_slice(int code);

/* The name of an opcode ("BINFLOAT"), or NULL for a byte that is none. */
const char *tn__pickle_op_name(int code);
/* Whether torch.load(weights_only=True) of that allowlist's PyTorch
 * executes the opcode (TN_ALLOW_PICKLE counts as 2.x's): the table's
 * ALL, CKPT, and TORCH2 but for TN_ALLOW_TORCH1. */
bool tn__pickle_op_allowed(int code, enum tn_ckpt_allowlist allow);
/* Whether our reader of a DCP .metadata executes it: ALL, TORCH2, DCP. */
bool tn__pickle_op_dcp(int code);

/* One decoded opcode and its argument. */
struct tn_pickle_op {
    int code;
    size_t pos;           /* byte offset of the opcode in the stream */
    int64_t i;            /* integer argument (ints, memo indices, lengths, protocol) */
    bool big;             /* LONG1/LONG4/INT/LONG: the value does not fit in int64 */
    double f;             /* FLOAT, BINFLOAT */
    const char *s;        /* string/bytes argument, inside the stream (not NUL-terminated) */
    size_t slen;
    const char *s2;       /* GLOBAL/INST: the name (s holds the module) */
    size_t s2len;
};

/* Decodes the opcode at *pos of buf[0..len) and advances *pos past it.
 * Every opcode of protocols 0-5 is decoded (so a scanner can walk any
 * pickle); unknown bytes and truncated arguments fail with an error naming
 * `label` and the byte offset.  Returns 0 or TN_EFORMAT. */
int tn__pickle_decode(const unsigned char *buf, size_t len, size_t *pos, struct tn_pickle_op *op,
                      const char *label);

/* --------------------------------------------------------- pickle writer */

/* The storages a pickle refers to, in the order the writer met them: the
 * i-th is written as record data/<i>, the bytes [off[i], off[i] + len[i])
 * of s[i] (the whole storage, or, for a tensor whose storage an earlier
 * tensor of another dtype saved, that tensor's own bytes: it gets a storage
 * of its own, as distinct tensors have in PyTorch). */
struct tn_pickle_storages {
    struct tn_storage **s;
    enum tn_dtype *dtype;
    size_t *off, *len;
    size_t n, cap;
};

/* Pickles `v` as torch.save does (protocol 2, the memo as CPython's pickler
 * keeps it, storages as persistent ids deduplicated by pointer, tensors as
 * _rebuild_tensor_v2 and Parameters as _rebuild_parameter).  Appends to
 * `out` and fills `st` (which the caller frees with free() on s, dtype, off
 * and len;
 * the storages are borrowed from the tensors).  Returns 0 or an error. */
int tn__pickle_dump(const struct tn_value *v, struct tn__bytes *out, struct tn_pickle_storages *st);

/* ------------------------------------------------------- pickle machine */

/* Resolves a persistent id ('storage', class, key, location, numel) to a
 * storage: the loader maps the record; checks numel against its size. */
struct tn_pickle_reader_hooks {
    struct tn_storage *(*storage)(const char *key, enum tn_dtype dtype, int64_t numel, void *ctx);
    void *ctx;
    bool legacy; /* pre-1.6 ids: a sixth item, the view (None) */
    /* A distributed checkpoint's .metadata (dcp.c): protocol 4's opcodes,
     * instances (NEWOBJ, BUILD) of exactly the classes of
     * torch.distributed.checkpoint.metadata and .filesystem that PyTorch
     * writes there, and no persistent ids.  An instance is an ODICT of its
     * attributes whose attrs dict holds "__class__" (the class's name) and,
     * for a __setstate__ tuple, "__state__". */
    bool dcp;
};

/* Is "module.name" one of the globals a DCP .metadata may name (the
 * classes above, torch.Size, dtypes, _get_layout, pathlib.PosixPath)? */
bool tn__dcp_global_allowed(const char *module, const char *name);
/* Those globals by name, dtypes aside (the scanner allows them in a DCP
 * folder's .metadata). */
extern const char *const tn__dcp_globals[];
extern const size_t tn__dcp_nglobals;
/* dcp.c: tn_dcp_open over .metadata's bytes in memory; the files it names
 * are looked for in `dir`.  For the fuzz target. */
struct tn_dcp *tn__dcp_open_memory(const void *metadata, size_t len, const char *dir);
/* dcp_write.c, the steps of a save (lib/dist's tn_dcp_save runs them on
 * every rank): the temporary folder's name for `dir` (malloc'd), made
 * empty by one rank (tn__dcp_begin: refuses a `dir` that exists and is
 * not a DCP folder); each rank's shards written with their description
 * (replicated ones by one rank chosen by the key); then, by one rank,
 * .metadata from the descriptions and the rename over `dir`; the folder
 * it replaced is then removed in the background (tn__dcp_remove_later),
 * or with keep_old left at `tmp` for the caller. */
struct tn_dcp_shard;
char *tn__dcp_tmp_name(const char *dir);
int tn__dcp_begin(const char *dir, const char *tmp);
int tn__dcp_write_shards(const char *tmp, int rank, int world, const struct tn_dcp_shard *shards,
                         size_t n);
int tn__dcp_finish(const char *tmp, const char *dir, int world, bool keep_old);
/* The folder at `tmp` (files only) renamed aside and removed on a thread
 * of its own, which the process's exit waits for; tn__dcp_remove_wait
 * waits for every such removal now (tests). */
void tn__dcp_remove_later(const char *tmp);
void tn__dcp_remove_wait(void);
/* Removes a failed save's temporary folder (files only). */
int tn__dcp_discard(const char *tmp);
/* The mapped bytes of the folder's i-th file (borrowed). */
const unsigned char *tn__dcp_file_bytes(const struct tn_dcp *d, size_t i, size_t *len);

/* Runs the restricted machine over a data.pkl stream: exactly the opcodes
 * and globals of torch.load(weights_only=True) per `allow`, every container
 * opcode type-checked, memo, stack and depth capped.  `label` names the
 * stream in errors ("model.pt: model/data.pkl").  NULL with an error. */
struct tn_value *tn__pickle_load(const unsigned char *buf, size_t len, const char *label,
                                 enum tn_ckpt_allowlist allow,
                                 const struct tn_pickle_reader_hooks *hooks);

/* Is "module.name" on the weights_only allowlist of `allow`? */
bool tn__pickle_global_allowed(const char *module, const char *name, enum tn_ckpt_allowlist allow);

/* scan.c: module.name as CPython's find_class resolves it for protocol
 * `proto` (Python 2 names mapped when proto < 3); the results point at the
 * inputs or at static strings.  The loader and the scanner both use it. */
void tn__scan_resolve(const char *module, const char *name, int proto, const char **omod,
                      const char **oname);

/* A storage class name ("FloatStorage") -> dtype; TN_DTYPE_UNSET if none. */
enum tn_dtype tn__storage_class_dtype(const char *name, size_t len);

#endif
