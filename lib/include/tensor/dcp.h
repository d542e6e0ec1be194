/*
 * tensor/dcp.h: distributed checkpoints in the format of PyTorch's
 * torch.distributed.checkpoint (DCP): a folder holding `.metadata` (a
 * pickle of torch.distributed.checkpoint.metadata.Metadata) and files
 * `__<rank>_<n>.distcp` where each item lies at an offset: a tensor chunk
 * as a small torch.save zip, any other value as torch.save of the value.
 *
 * PyTorch's own loader unpickles `.metadata` with the full pickle module,
 * so a folder can run code when PyTorch loads it.  Here `.metadata` goes
 * through lib/io's restricted machine, which knows exactly the DCP
 * metadata classes (anything else is refused with the global's name), and
 * every size, offset, length and chunk is checked against the files when
 * the folder is opened, before an item's byte is read.
 *
 * Ownership and errors follow tensor/core.h.
 */
#ifndef TENSOR_DCP_H
#define TENSOR_DCP_H

#include <tensor/io.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One chunk of a tensor item (a bytes item has one chunk, no dimensions):
 * where it sits in the tensor and where its bytes lie. */
struct tn_dcp_chunk {
    int64_t offsets[TN_MAX_DIMS];
    int64_t sizes[TN_MAX_DIMS];
    size_t file;     /* index of the folder's file (tn_dcp_file_name) */
    uint64_t offset; /* of the item's torch.save zip in that file */
    uint64_t length;
};

/* One key of the saved state dict (flattened: "optim.state.0.exp_avg"). */
struct tn_dcp_item {
    const char *fqn;
    bool tensor;         /* TensorStorageMetadata; else BytesStorageMetadata */
    enum tn_dtype dtype; /* tensors */
    int ndim;
    int64_t sizes[TN_MAX_DIMS];
    size_t nchunks;
    struct tn_dcp_chunk *chunks; /* sorted by offsets; they tile the tensor */
    /* planner_data's path of the key in the nested state dict: a TUPLE of
     * STR (dict keys) and INT (list indices), or NULL when absent. */
    const struct tn_value *path;
};

struct tn_dcp;

/* Opens the folder `dir`: reads and checks `.metadata` (at most 1 GiB),
 * then every chunk against its file: a file name outside the folder, an
 * offset or length past the file's end, a chunk outside its tensor,
 * chunks that overlap or leave part of a tensor uncovered, a chunk with no
 * storage entry: each an error naming the key.  Each file is mapped.
 * NULL with an error naming `dir`. */
struct tn_dcp *tn_dcp_open(const char *dir);
void tn_dcp_close(struct tn_dcp *d); /* NULL is fine */

/* Whether `path` is a folder holding `.metadata` (not checked further). */
bool tn_dcp_is_dir(const char *path);

/* The accessors below take the NULL a failed tn_dcp_open gives: counts
 * and sizes are 0, items and names NULL, the version "", and tn_dcp_read,
 * tn_dcp_get and tn_dcp_load_* fail with TN_EINVAL. */
size_t tn_dcp_count(const struct tn_dcp *d);
/* The i-th item in .metadata's order (borrowed; lives until close). */
const struct tn_dcp_item *tn_dcp_item_at(const struct tn_dcp *d, size_t i);
/* The item named fqn, or NULL. */
const struct tn_dcp_item *tn_dcp_find(const struct tn_dcp *d, const char *fqn);
size_t tn_dcp_files(const struct tn_dcp *d);
const char *tn_dcp_file_name(const struct tn_dcp *d, size_t i); /* "__0_0.distcp" */
uint64_t tn_dcp_file_size(const struct tn_dcp *d, size_t i);
/* .metadata's version string ("1.0.0"), or "" when it has none. */
const char *tn_dcp_version(const struct tn_dcp *d);

/* Fills `dst` (any strides, the item's dtype) with the region of tensor
 * item `fqn` that starts at `offsets` and has dst's sizes, reading only
 * the chunks the region overlaps: whatever the chunks were at save time
 * (resharding).  A region outside the tensor, a dtype or rank mismatch, or
 * a chunk whose bytes are not the tensor .metadata promises is an error
 * naming the key.  Returns 0 or an error. */
int tn_dcp_read(struct tn_dcp *d, const char *fqn, const int64_t *offsets, struct tn_tensor *dst);

/* The i-th item's whole value: a new contiguous tensor assembled from its
 * chunks, or the value a bytes item holds (under weights_only's
 * allowlist).  NULL with an error naming the key. */
struct tn_value *tn_dcp_get(struct tn_dcp *d, size_t i);

/* Every item: a DICT nested as planner_data says (as dcp_to_torch_save
 * writes it), or, with `flat`, an ODICT of fqn -> value.  NULL with an
 * error. */
struct tn_value *tn_dcp_load_all(struct tn_dcp *d, bool flat);
/* The same tree with every tensor item a tensor on the meta device (its
 * sizes and dtype, each with a storage of its own) and none of its bytes
 * read: what a listing needs.  Bytes items are read (they may hold
 * anything).  NULL with an error. */
struct tn_value *tn_dcp_load_meta(struct tn_dcp *d, bool flat);

/* The part of a state dict one rank holds, for tn_dcp_load and
 * tn_dcp_save: key `fqn` (flattened, dots between levels), the local
 * tensor, and where it sits in the global tensor of `global_ndim` sizes
 * `global_sizes` (for a tensor every rank holds whole, offsets 0 and the
 * tensor's own sizes).  A shard with a NULL tensor stands for a non-tensor
 * value `value` (borrowed). */
struct tn_dcp_shard {
    const char *fqn;
    struct tn_tensor *tensor;
    int64_t offsets[TN_MAX_DIMS];
    int64_t global_sizes[TN_MAX_DIMS];
    const struct tn_value *value;
};

/* Fills every shard's tensor from the folder `dir` (resharding as
 * tn_dcp_read).  A key the folder lacks, or a global size that differs
 * from the saved one, is an error naming it.  Shards with no tensor are
 * skipped.  Returns 0 or an error. */
int tn_dcp_load(const char *dir, struct tn_dcp_shard *shards, size_t n);

/* Writes the folder `dir` as `nranks` ranks of one process would: every
 * tensor of the flat or nested value `state` (dict keys, list indices
 * joined with dots, as PyTorch flattens them) split along dimension 0 into
 * `nranks` nearly equal chunks (tensors of fewer rows, and scalars, whole
 * on rank 0), rank r's chunks in `__<r>_0.distcp`, non-tensor values on
 * rank 0, then `.metadata`; all inside a temporary folder renamed over
 * `dir` at the end (an existing `dir` that is a DCP folder is replaced; any
 * other existing path is refused).  PyTorch's dcp.load reads the result.
 * Returns 0 or an error. */
int tn_dcp_write(const char *dir, const struct tn_value *state, int nranks);

struct tn_pg;

/* Saves a state dict from every rank of `pg` at once (every rank calls
 * it, with its own shards; lib/dist): each rank writes the chunks of its
 * sharded tensors (a shard smaller than its global size) into
 * `__<rank>_0.distcp`; a tensor or value every rank holds whole is written
 * once, by one rank chosen by its key (copies that ranks still send are
 * de-duplicated); after the ranks agree that all wrote, rank 0 writes
 * .metadata and renames the temporary folder over `dir`.  The ranks agree
 * after each step, so a failure on any rank (or a rank that never joins)
 * fails the save on all of them and leaves the previous checkpoint whole.
 * Returns 0 or an error (the same on every rank but the one that failed,
 * which keeps its own message). */
int tn_dcp_save(const char *dir, const struct tn_dcp_shard *shards, size_t n, struct tn_pg *pg);

/* An asynchronous tn_dcp_save: every shard's tensor is first copied into
 * memory of the save's own (staged; non-tensor values are retained and
 * must not change), then a thread of its own writes the folder while the
 * caller goes on.  The caller may change or release its tensors as soon as
 * this returns, but must not use `pg` (nor free it) until
 * tn_dcp_async_wait: the save's collectives run on it (give the save a
 * process group of its own to train meanwhile, as PyTorch's async_save
 * advises).  Every rank calls it.  Returns 0 and *out, a handle for
 * tn_dcp_async_wait, or an error with *out NULL (nothing started: staging
 * ran out of memory). */
struct tn_dcp_async;
int tn_dcp_save_async(const char *dir, const struct tn_dcp_shard *shards, size_t n,
                      struct tn_pg *pg, struct tn_dcp_async **out);
/* Whether the save has ended (then tn_dcp_async_wait does not block);
 * true for NULL. */
bool tn_dcp_async_done(const struct tn_dcp_async *h);
/* Waits for the save to end and releases `h` (NULL is fine): 0, or the
 * save's error, as tn_dcp_save would have returned it. */
int tn_dcp_async_wait(struct tn_dcp_async *h);

#ifdef __cplusplus
}
#endif
#endif
