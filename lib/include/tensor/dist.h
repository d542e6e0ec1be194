/*
 * tensor/dist.h: libtensor's distributed module: key-value stores (TCP,
 * file, in-process hash, prefix) behind one interface, the TCPStore server
 * that speaks PyTorch's wire protocol, and tn_dist_init, the rendezvous of
 * init_process_group.
 *
 * Stores are refcounted: a constructor returns one reference that the caller
 * drops with tn_store_release(). Values are bytes; a value a function returns
 * through `void **val` is malloc'd, belongs to the caller (free()) and has a
 * NUL after its length, so text values read as C strings. Keys
 * are NUL-terminated strings, as PyTorch's std::string keys are in practice.
 * A blocking operation gives up after the store's timeout (tn_store_set_timeout,
 * default 300 s like PyTorch) with TN_ETIMEOUT and a message naming the keys,
 * in PyTorch's words ("wait timeout after 1000ms, keys: /k").
 */
#ifndef TENSOR_DIST_H
#define TENSOR_DIST_H

#include <tensor/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ stores */

struct tn_store;

/* Default timeout of every store, as c10d's (300 s). */
#define TN_STORE_DEFAULT_TIMEOUT_MS 300000

/* Keys and values larger than these are refused (by the server: the client
 * is disconnected), so a hostile length cannot exhaust memory. */
#define TN_STORE_MAX_KEY (64u * 1024u)
#define TN_STORE_MAX_VALUE (256u * 1024u * 1024u)
#define TN_STORE_MAX_KEYS_PER_REQUEST (128u * 1024u)

void tn_store_retain(struct tn_store *s);
void tn_store_release(struct tn_store *s);

/* Timeout in milliseconds of the blocking operations (get, wait, blocking
 * queue_pop). */
void tn_store_set_timeout(struct tn_store *s, int64_t timeout_ms);
int64_t tn_store_timeout(const struct tn_store *s);

/* Overwrites key with the value and wakes its waiters. */
int tn_store_set(struct tn_store *s, const char *key, const void *val, size_t len);

/* Waits until key exists, then returns its value in *val (malloc'd; a
 * zero-length value is a valid 1-byte allocation) and *len. */
int tn_store_get(struct tn_store *s, const char *key, void **val, size_t *len);

/* Adds delta to the integer stored as decimal text at key (a missing key
 * counts as 0); the new value goes to *out when out is not NULL. */
int tn_store_add(struct tn_store *s, const char *key, int64_t delta, int64_t *out);

/* PyTorch's compare_set: stores desired when the key holds expected (or is
 * missing and expected is empty) and returns the value now stored (or
 * expected when the key is missing and expected is not empty). */
int tn_store_compare_set(struct tn_store *s, const char *key, const void *expected, size_t elen,
                         const void *desired, size_t dlen, void **val, size_t *len);

/* Waits until every key exists. timeout_ms < 0 means the store's timeout. */
int tn_store_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms);

/* 1 when every key exists, 0 when one does not, or a negative status. */
int tn_store_check(struct tn_store *s, const char *const *keys, size_t n);

/* 1 when the key existed and is now deleted, 0 when it did not exist. */
int tn_store_delete(struct tn_store *s, const char *key);

/* The number of keys, PyTorch's internal ones included. */
int tn_store_num_keys(struct tn_store *s, int64_t *out);

/* Appends bytes to the value at key (creating it). */
int tn_store_append(struct tn_store *s, const char *key, const void *val, size_t len);

/* Gets n keys at once (waiting for them); vals[i] are malloc'd. On failure
 * no value is returned. */
int tn_store_multi_get(struct tn_store *s, const char *const *keys, size_t n, void **vals,
                       size_t *lens);
/* Sets n keys at once, atomically: every key or none, and no reader sees
 * some of them set without the others. */
int tn_store_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                       const void *const *vals, const size_t *lens);

/* Queues: push appends an item to the queue named key; pop takes the oldest
 * (waiting up to the timeout when block is true and the queue is empty;
 * TN_ETIMEOUT, or TN_EINDEX without block when empty). */
int tn_store_queue_push(struct tn_store *s, const char *key, const void *val, size_t len);
int tn_store_queue_pop(struct tn_store *s, const char *key, bool block, void **val, size_t *len);
int tn_store_queue_len(struct tn_store *s, const char *key, int64_t *out);

/* In-process store (threads, tests). */
struct tn_store *tn_store_hash_new(void);

/* Every key becomes prefix + "/" + key in base, which the prefix store holds
 * a reference to. */
struct tn_store *tn_store_prefix_new(const char *prefix, struct tn_store *base);

/* PyTorch's FileStore: an append-only log at path shared by num_workers
 * processes (the last one to close it deletes it; num_workers <= 0: never). */
struct tn_store *tn_store_file_new(const char *path, int num_workers);

/* A client of a TCPStore server at host:port (PyTorch's or ours), connected
 * with retries until timeout_ms. When TN_STORE_TOKEN is set in the
 * environment the client authenticates with it (our server only). */
struct tn_store *tn_store_tcp_connect(const char *host, int port, int64_t timeout_ms);

/* ------------------------------------------------------------ TCP server */

struct tn_store_server;

struct tn_store_server_opts {
    const char *host;  /* address to bind; NULL: 0.0.0.0 */
    int port;          /* 0 picks a free port */
    int listen_fd;     /* >= 0: serve this listening TCP socket instead (the
                        * server owns it once started; one that is no
                        * listening TCP socket is refused, left open) */
    const char *token; /* NULL: TN_STORE_TOKEN from the environment, if set */
    int max_clients;   /* 0: 65536 */
    /* NULL, or called (on the server's thread) with one line, no newline,
     * when the server runs out of file descriptors and sheds new clients,
     * and again when it accepts them again */
    void (*log)(void *arg, const char *line);
    void *log_arg;
};

/* Starts a TCPStore server on its own thread (one epoll loop). It speaks the
 * current PyTorch protocol and, recognised from a client's first bytes, the
 * PyTorch 1.x numbering. With a token, a client must present it before any
 * other request or it is disconnected. opts may be NULL. */
struct tn_store_server *tn_store_server_start(const struct tn_store_server_opts *opts);

/* The port the server listens on. */
int tn_store_server_port(const struct tn_store_server *srv);

/* Stops the loop, closes every connection and frees the server. */
void tn_store_server_stop(struct tn_store_server *srv);

/* ------------------------------------------------------- process groups */

struct tn_pg;

enum tn_reduce_op {
    TN_REDUCE_SUM,
    TN_REDUCE_AVG, /* the sum divided by the world size; floating dtypes */
    TN_REDUCE_PRODUCT,
    TN_REDUCE_MIN,
    TN_REDUCE_MAX
};

/* The built-in `tcp` backend: every rank listens on host (NULL: 127.0.0.1)
 * port 0, publishes its address under "tcp_pg/<rank>" in store, and
 * connects to every other rank. Allreduce's data moves through shared
 * memory between ranks of one host (TN_PG_NO_SHM=1: never). A collective
 * gives up after timeout_ms (< 0: 30 minutes) of waiting; then every rank
 * of it fails with the same message, agreed through the store, naming the
 * operation, its sequence number and the ranks that never arrived
 * ("allreduce #3 failed: rank 2 never arrived (...)"), and the group is
 * broken: later collectives fail at once. All ranks must call the same collectives in
 * the same order. Tensors are contiguous CPU tensors, updated in place. */
struct tn_pg *tn_pg_new_tcp(struct tn_store *store, int rank, int world_size, const char *host,
                            int64_t timeout_ms);

/* The `mpi` backend: the same collectives through Open MPI, for processes
 * started by mpirun (rank and size are MPI_COMM_WORLD's; rank and
 * world_size, when >= 0, must agree with them). libmpi.so.40 is loaded on
 * first use ($TN_MPI_LIBRARY names another copy); MPI is initialised
 * (MPI_THREAD_SERIALIZED) unless the program did, and then finalised at
 * exit. Each group works on its own duplicate of MPI_COMM_WORLD. A
 * collective gives up after timeout_ms like the tcp backend's, the ranks
 * agreeing on the verdict through store; without a store (NULL) each rank
 * reports what it saw. Without Open MPI: NULL with TN_EDEVICE ("MPI support
 * is not available: ..."). */
struct tn_pg *tn_pg_new_mpi(struct tn_store *store, int rank, int world_size, int64_t timeout_ms);

/* The `nccl` backend: the same collectives on CUDA tensors through NCCL
 * (libnccl.so.2 and the CUDA runtime loaded on first use; $TN_NCCL_LIBRARY
 * names another copy), rank 0's ncclUniqueId travelling through store under
 * "nccl_pg/id". Each rank uses CUDA device LOCAL_RANK (else rank modulo the
 * device count). Collectives run on the group's own CUDA stream and return
 * when it finished; one that takes longer than timeout_ms aborts the
 * communicator and fails like the tcp backend's. Without NCCL or a CUDA
 * device: NULL with TN_EDEVICE ("NCCL support is not available: ..."). */
struct tn_pg *tn_pg_new_nccl(struct tn_store *store, int rank, int world_size, int64_t timeout_ms);

/* A group of the named backend, "tcp" (on 127.0.0.1, or $TN_PG_HOST),
 * "mpi" or "nccl"; "gloo" is the tcp backend. */
struct tn_pg *tn_pg_new(const char *backend, struct tn_store *store, int rank, int world_size,
                        int64_t timeout_ms);

void tn_pg_free(struct tn_pg *pg);
int tn_pg_rank(const struct tn_pg *pg);
int tn_pg_size(const struct tn_pg *pg);

/* Ring allreduce (reduce-scatter, then allgather). Bool: sum/max are "or",
 * product/min "and"; complex64: sum, avg and product only. */
int tn_pg_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op);
/* Binomial tree from root; large buffers (256 KiB and up) through shared
 * memory where allreduce's goes, every rank reading root's buffer. */
int tn_pg_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root);
/* out holds world_size copies of in's size, rank-major. A ring; inputs of
 * 256 KiB and up through shared memory (each rank reads every peer's). */
int tn_pg_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in);
int tn_pg_barrier(struct tn_pg *pg);
/* The reduction lands in root's t; other ranks' t are unchanged. */
int tn_pg_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root);
/* out (root only; may be NULL elsewhere) holds world_size inputs, rank-major. */
int tn_pg_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root);
/* in (root only; may be NULL elsewhere) holds world_size outputs. */
int tn_pg_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root);
/* in holds world_size blocks of out's size; rank r gets the reduced block r
 * (an allreduce of a copy; blocks of 256 KiB and up through shared memory,
 * rank r reducing block r of every peer's input). */
int tn_pg_reduce_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                         enum tn_reduce_op op);
/* in and out hold world_size equal blocks; block j of in goes to rank j,
 * and out's block j comes from rank j. */
int tn_pg_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in);
int tn_pg_send(struct tn_pg *pg, const struct tn_tensor *t, int dst);
int tn_pg_recv(struct tn_pg *pg, struct tn_tensor *t, int src);

/* Async work handles, like async_op=True: the collective runs on the
 * group's own thread, in call order with every other collective of the
 * group (a synchronous call waits for the queued ones first), holding a
 * reference to its tensors until it finished. NULL with the error set when
 * it cannot be queued. Free every work before its group. */
struct tn_work;
struct tn_work *tn_pg_allreduce_async(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op);
struct tn_work *tn_pg_broadcast_async(struct tn_pg *pg, struct tn_tensor *t, int root);
struct tn_work *tn_pg_allgather_async(struct tn_pg *pg, struct tn_tensor *out,
                                      const struct tn_tensor *in);
struct tn_work *tn_pg_barrier_async(struct tn_pg *pg);
struct tn_work *tn_pg_reduce_async(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op,
                                   int root);
struct tn_work *tn_pg_gather_async(struct tn_pg *pg, struct tn_tensor *out,
                                   const struct tn_tensor *in, int root);
struct tn_work *tn_pg_scatter_async(struct tn_pg *pg, struct tn_tensor *out,
                                    const struct tn_tensor *in, int root);
struct tn_work *tn_pg_reduce_scatter_async(struct tn_pg *pg, struct tn_tensor *out,
                                           const struct tn_tensor *in, enum tn_reduce_op op);
struct tn_work *tn_pg_all_to_all_async(struct tn_pg *pg, struct tn_tensor *out,
                                       const struct tn_tensor *in);
struct tn_work *tn_pg_send_async(struct tn_pg *pg, struct tn_tensor *t, int dst);
struct tn_work *tn_pg_recv_async(struct tn_pg *pg, struct tn_tensor *t, int src);
/* Whether the collective finished (successfully or not). */
bool tn_work_is_completed(struct tn_work *w);
/* Waits until the collective finished (timeout_ms < 0: however long it
 * takes; it has the group's own timeout) and returns its status, with its
 * message as the error; TN_ETIMEOUT when timeout_ms passed first (the
 * collective goes on). */
int tn_work_wait(struct tn_work *w, int64_t timeout_ms);
/* Waits for the collective, then frees the handle. */
void tn_work_free(struct tn_work *w);

/* ------------------------------------------------------- data parallel */

/* DistributedDataParallel's reducer. tn_ddp_new broadcasts the parameters
 * (contiguous floating CPU tensors; the helper keeps a reference) from rank
 * 0 and puts them in buckets of bucket_bytes (0: 25 MiB) in reverse order,
 * one dtype per bucket. Each iteration, after backward filled the grads:
 * tn_ddp_sync_grads averages every parameter's grad across ranks (a missing
 * grad counts as zeros and is made). To overlap with backward, call
 * tn_ddp_grad_ready(i) as each grad is final (a full bucket's allreduce
 * starts at once, buckets in order), then tn_ddp_finish. Parameters that
 * require grad do that by themselves: tn_ddp_new registers autograd
 * post-accumulate-grad hooks on them, so tn_backward starts the buckets'
 * allreduces while it runs and one tn_ddp_finish (or tn_ddp_sync_grads)
 * afterwards gives DDP (one backward per finish; the hooks go with
 * tn_ddp_free). */
struct tn_ddp;
struct tn_ddp *tn_ddp_new(struct tn_pg *pg, struct tn_tensor *const *params, size_t n,
                          size_t bucket_bytes);
size_t tn_ddp_num_buckets(const struct tn_ddp *d);
int tn_ddp_grad_ready(struct tn_ddp *d, size_t i);
int tn_ddp_finish(struct tn_ddp *d);
int tn_ddp_sync_grads(struct tn_ddp *d);
void tn_ddp_free(struct tn_ddp *d);

/* ------------------------------------------------------------ rendezvous */

struct tn_dist_info {
    struct tn_store *store;          /* "default_pg"-prefixed store (a reference) */
    struct tn_store_server *server;  /* the server rank 0 hosts, or NULL */
    int rank;
    int world_size;
};

/* The rendezvous of init_process_group: url is "env://" (MASTER_ADDR,
 * MASTER_PORT, RANK, WORLD_SIZE; also Slurm's and Open MPI's variables),
 * "tcp://host:port?rank=R&world_size=N" or "file:///path?rank=R&world_size=N".
 * rank or world_size >= 0 override the URL and environment. With torchrun's
 * (or trun's) TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of the
 * launcher's store, inside "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>".
 * Waits until world_size ranks joined or timeout_ms passed. */
int tn_dist_init(const char *url, int rank, int world_size, int64_t timeout_ms,
                 struct tn_dist_info *out);

/* Releases what tn_dist_init made. */
void tn_dist_finish(struct tn_dist_info *info);

#ifdef __cplusplus
}
#endif

#endif
