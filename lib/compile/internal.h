/*
 * compile/internal.h: what lib/compile's files share.
 *
 * The pipeline: lower.c turns a checked graph, specialised on its inputs'
 * metadata, into loop-level IR (struct tn__cprog: buffers, kernels whose
 * stages evaluate expression trees over affine loads, and extern steps run
 * through the dispatcher); codegen.c writes the kernels as C; cc.c
 * compiles and caches them; exec.c runs a program.
 */
#ifndef TN_COMPILE_INTERNAL_H
#define TN_COMPILE_INTERNAL_H

#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include <tensor/compile.h>

/* ---------------------------------------------------------------- hashing */

struct tn__sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t nbuf;
};
void tn__sha256_init(struct tn__sha256 *s);
void tn__sha256_update(struct tn__sha256 *s, const void *p, size_t n);
void tn__sha256_final(struct tn__sha256 *s, unsigned char out[32]);
/* hex of SHA-256(p, n) into hex (65 bytes with the NUL) */
void tn__sha256_hex(const void *p, size_t n, char hex[65]);
/* the 32 bytes of a digest as hex */
void tn__sha256_tohex(const unsigned char d[32], char hex[65]);
/* hex of SHA-256 of what fd holds from its offset to its end, *n the
 * bytes read; false on a read error (errno set). */
bool tn__sha256_fd(int fd, char hex[65], int64_t *n);

/* ------------------------------------------------ compiling and the cache */

struct tn__cc_info {
    bool hit;              /* found in the cache, nothing compiled */
    double cc_s;           /* seconds the C compiler ran (0 on a hit) */
    char key[65];          /* the entry's key */
    char c_path[4096];     /* the generated C in the cache */
    char so_path[4096];    /* the library in the cache */
};

/* A dlopen handle (RTLD_NOW | RTLD_LOCAL) for the library built from the
 * C source src (len bytes). The key is SHA-256 over the source, the
 * compiler's identity (its path and `--version` text), the flags (which
 * name the CPU through -march=native: the CPU's model and feature flags go
 * in too), tensorkit's version and the cache format's version. An entry
 * is looked up in the cache (opts->cache_dir, tn_compile_cache_dir) and
 * loaded when it is whole and ours; otherwise src is compiled by the C
 * compiler in a child process (killed past opts->cc_timeout) into a
 * temporary and renamed in, with the source and a manifest beside it.
 * Returns NULL with an error in words: no compiler ("cc: not found"), its
 * first error line, a timeout, a cache folder refused and why. */
void *tn__cc_load(const char *src, size_t len, const struct tn_compile_options *opts,
                  struct tn__cc_info *info);

/* Copies the entry's kernel.c, kernel.so and manifest.json into dir
 * (created when missing). */
int tn__cc_export(const struct tn__cc_info *info, const char *dir);

/* A growing string: tn__put appends printf-style; oom is set (and the
 * text stays as it was) when memory runs out. */
struct tn__out {
    char *s;
    size_t len, cap;
    bool oom;
};
void tn__put(struct tn__out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The generated C of the last entry built or run (borrowed), or NULL. */
const char *tn__compile_source(const struct tn_compiled *c);
const struct tn_graph *tn__compile_graph(const struct tn_compiled *c);
struct tn_compile_options tn__compile_options(const struct tn_compiled *c);

/* Compiles src_path into the shared library out_path with the cache's
 * flags, extra words after the source (libraries, -Wl options; at most
 * 8), the compiler's command and timeout from opts; *secs the seconds it
 * ran. Returns 0 or the compiler's error. */
int tn__cc_build(const struct tn_compile_options *opts, const char *src_path, const char *out_path,
                 const char *const *extra, int nextra, double *secs);

/* ------------------------------------------- helpers of cc.c and cache.c */

/* The cache format's version: a change of layout or manifest bumps it, so
 * older entries are never read as new ones. */
#define TN__CACHE_FORMAT 1
/* A manifest is read as untrusted input: larger than this is corrupt. */
#define TN__CACHE_MANIFEST_MAX 65536

/* Runs argv (argv[0] looked up on PATH) in its own process group, with
 * stdin from /dev/null and stdout and stderr together into out (at most
 * cap - 1 bytes kept, NUL-terminated; the rest is read and dropped); the
 * group is killed past timeout seconds. Returns 0 with *status its wait
 * status, or TN_ETIMEOUT, or TN_EIO with an error ("NAME: not found" when
 * argv[0] cannot be run). */
int tn__spawn(char *const argv[], double timeout, char *out, size_t cap, int *status);
/* Seconds on the monotonic clock. */
double tn__cc_now(void);

/* The C compiler's command split on spaces and tabs ("ccache gcc"):
 * words point into buf. */
#define TN__CC_MAX_WORDS 32
#define TN__CC_OUTPUT_MAX 65536 /* of the compiler's output, what is kept */
struct tn__cc_cmd {
    char buf[1024];
    char *words[TN__CC_MAX_WORDS + 1];
    int n;
};
int tn__cc_split(const char *cmd, struct tn__cc_cmd *c);

/* Who compiles: what the key says of the compiler and the CPU. */
struct tn__cc_id {
    const char *cmd;       /* the command as given */
    char path[4096];       /* its first word, resolved on PATH */
    const char *version;   /* its `--version` text */
    const char *cpu_model; /* "AMD EPYC", or "" */
    const char *cpu_hash;  /* hex SHA-256 of the CPU's model and features */
    struct tn__cc_id *next;
};
/* The identity of cmd (split in c), learnt once per process and kept in
 * dir/compilers (dir may be NULL); NULL with an error ("NAME: not found",
 * its --version failing). Thread-safe; the result lives as long as the
 * process. */
const struct tn__cc_id *tn__cc_identity(const char *cmd, const struct tn__cc_cmd *c, double timeout,
                                        const char *dir);
/* The error for a run of the compiler (named name, what: "" or
 * " --version") that failed: a timeout, its first line naming an error
 * ("NAME failed: LINE"), or how it ended. rc and status as tn__spawn gave
 * them, out its output. Returns the status. */
int tn__cc_error(const char *name, const char *what, int rc, int status, const char *out, double timeout);
/* Writes len bytes as path atomically with mode `mode`; a path that is not
 * a regular file (a link) is removed first rather than written through. */
int tn__write_private(const char *path, const void *data, size_t len, mode_t mode);

/* The cache folder for override (tn_compile_cache_dir) into dir, checked:
 * a folder, ours, not writable by group or others, and with `write`,
 * writable by us (created, mode 0700 with its parents, when missing).
 * Returns 0, 1 when !write and it does not exist, or an error naming the
 * folder and the reason. */
int tn__cache_open(const char *override, bool write, char *dir, size_t len);

/* printf into a path buffer of n bytes; TN_EINVAL naming the start of
 * the path when it does not fit. */
int tn__path(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* mkdir -p: what it creates gets mode (less the umask). */
int tn__make_folders(const char *dir, mode_t mode);

/* The same checks on a folder of the cache (dir itself or a subfolder). */
int tn__cache_check_folder(const char *dir, bool write);

/* Checks entry `key` in subfolder `sub` (dir/<first 2 hex>): its .so and
 * .json are regular files owned by us, not writable by group or others,
 * the manifest names `key` and the .so's size and SHA-256, the .c has the
 * size the manifest says. Returns true when whole and ours; otherwise
 * false with why (a short phrase) set. *so_st gets the .so's stat. */
bool tn__cache_entry_ok(const char *sub, const char *key, char *why, size_t whylen, struct stat *so_st);

#endif

/* ------------------------------------------------------ the loop-level IR */

#include <tensor/graph.h>

/* Expression operators: a tree (a DAG, hash-consed) evaluated at one point
 * of a loop space.  Loads read a buffer at an affine index of the loop
 * variables; every other operator computes in its result dtype (float for
 * float16/bfloat16), its operands already converted by the lowering. */
enum tn__xop {
    TN_X_LOAD, TN_X_CONST, TN_X_CAST,
    /* unary */
    TN_X_NEG, TN_X_ABS, TN_X_EXP, TN_X_LOG, TN_X_SQRT, TN_X_RSQRT, TN_X_TANH, TN_X_SIGMOID,
    TN_X_ERF, TN_X_ERF1P /* 1 + erf(a), without erf's two branches */, TN_X_SIN, TN_X_COS, TN_X_LOG1P, TN_X_EXPM1, TN_X_RECIP, TN_X_FLOOR, TN_X_CEIL,
    TN_X_NOT,
    /* binary */
    TN_X_ADD, TN_X_SUB, TN_X_MUL, TN_X_DIV, TN_X_MAX, TN_X_MIN, TN_X_POW,
    TN_X_ERF1PE /* float32 1 + erf(a) given b = exp(-a^2) (tn__x_erf1p) */,
    TN_X_EQ, TN_X_NE, TN_X_LT, TN_X_LE, TN_X_GT, TN_X_GE, TN_X_AND, TN_X_OR,
    /* ternary: a ? b : c */
    TN_X_WHERE,
    TN_X_NOPS
};
#define TN_X_FIRST_BINARY TN_X_ADD

struct tn__x {
    uint8_t op;                   /* enum tn__xop */
    int8_t dt;                    /* the result's enum tn_dtype */
    int a, b, c;                  /* operands, -1 for none */
    double k;                     /* CONST of a floating dtype */
    int64_t ki;                   /* CONST of an integral dtype */
    int buf;                      /* LOAD: the buffer, -1 otherwise */
    int nd;                       /* LOAD: the loop space's rank */
    int64_t off;                  /* LOAD: element offset */
    int64_t coef[TN_MAX_DIMS];    /* LOAD: stride per loop variable */
};

enum tn__buf_kind { TN_BUF_INPUT, TN_BUF_TEMP, TN_BUF_EXTERN };

struct tn__buf {
    int kind;                     /* enum tn__buf_kind */
    enum tn_dtype dt;
    int64_t numel;
    int input;                    /* INPUT: the graph input's index */
    int last;                     /* the last step reading it (-1: none, or an output) */
    bool output;                  /* a graph output views it: kept to the end */
    bool private_;                /* only its kernel reads it: never in memory */
    int64_t arena;                /* TEMP: byte offset in the run's arena; -1 none */
};

enum tn__red { TN_RED_NONE = -1, TN_RED_SUM, TN_RED_MAX, TN_RED_MIN };

/* One loop nest writing one buffer: sizes[nd] is its loop space, of which
 * the last nred dimensions are reduced (nred 0: pointwise, the buffer is
 * the whole space, contiguous). */
struct tn__stage {
    int red;                      /* enum tn__red */
    int buf, x;
    int nd, nred;
    int64_t sizes[TN_MAX_DIMS];
    enum tn_dtype acc;            /* the accumulator's dtype (reductions) */
};

/* A value as a view of a buffer (what extern steps and outputs take). */
struct tn__view {
    int buf;
    int nd;
    int64_t off;
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
};

enum tn__step_kind { TN_STEP_KERNEL, TN_STEP_NODE, TN_STEP_MATMUL };

struct tn__step {
    int kind;                     /* enum tn__step_kind */
    int stage0, nstages;          /* KERNEL: its stages */
    int nrow;                     /* KERNEL of several stages: its row (inner) dims */
    int64_t nouter, grain;        /* KERNEL: the parallel loop */
    int node;                     /* NODE: the graph node */
    int nargs;                    /* NODE: tensor values it reads; MATMUL: 2 */
    int *argv;                    /* NODE: their graph values */
    struct tn__view *args;        /* their views */
    int nouts;
    int *outbuf;                  /* per output (NODE: the node's outputs), -1 unused */
    char *why;                    /* NODE: why it stayed extern */
    bool views;                   /* NODE: an output may be a view of an argument */
    char *label;                  /* the graph nodes it stands for */
};

/* A lowered graph: buffers, stages and steps in order, and the graph's
 * outputs as views. */
struct tn__cprog {
    const struct tn_graph *g;
    struct tn__x *xs;
    int nx, capx;
    int *xhash;                   /* open addressing over xs, index + 1 */
    int hcap;
    struct tn__buf *bufs;
    int nbufs, capbufs;
    struct tn__stage *stages;
    int nstages, capstages;
    struct tn__step *steps;
    int nsteps, capsteps;
    struct tn__view *outs;        /* per graph output */
    int64_t *ints;                /* per graph value: its SymInt's value */
    int nfused;                   /* graph nodes lowered into kernels */
    int64_t arena_bytes;          /* the TEMP buffers' arena, reused by liveness */
    int64_t temp_bytes;           /* what they would take one by one */
};

/* lib/compile/ir.c */
int tn__x_add(struct tn__cprog *P, const struct tn__x *x); /* hash-consed; -1 on ENOMEM */
int tn__x_const(struct tn__cprog *P, enum tn_dtype dt, double k);
int tn__x_un(struct tn__cprog *P, int op, enum tn_dtype dt, int a);
int tn__x_bin(struct tn__cprog *P, int op, enum tn_dtype dt, int a, int b);
int tn__x_erf1p(struct tn__cprog *P, enum tn_dtype dt, int z);
int tn__x_where(struct tn__cprog *P, int c, int a, int b);
int tn__x_cast(struct tn__cprog *P, enum tn_dtype dt, int a);
int tn__x_load(struct tn__cprog *P, int buf, int nd, int64_t off, const int64_t *coef);
/* Rewrites expression x over an old loop space of rank m->nold into the
 * new one: old index d = mul[d] * new index src[d] + add[d] (src -1: add
 * only). */
struct tn__vmap {
    int nold;
    int src[TN_MAX_DIMS];
    int64_t mul[TN_MAX_DIMS], add[TN_MAX_DIMS];
};
int tn__x_remap(struct tn__cprog *P, int x, const struct tn__vmap *m);
int tn__buf_new(struct tn__cprog *P, int kind, enum tn_dtype dt, int64_t numel);
int tn__stage_new(struct tn__cprog *P, const struct tn__stage *s);
struct tn__step *tn__step_new(struct tn__cprog *P, int kind);
void tn__cprog_free(struct tn__cprog *P);

/* lib/compile/lower.c: g (checked) with the inputs' tensors (by graph
 * input, borrowed) into a new program; NULL with an error. */
struct tn__cprog *tn__lower(const struct tn_graph *g, struct tn_tensor *const *inputs);

/* lib/compile/sched.c: fuses consecutive kernels over one loop space
 * (reductions with their prologues and epilogues) and marks the buffers
 * only their kernel reads; then each buffer's last reader. */
void tn__schedule(struct tn__cprog *P);
void tn__schedule_private(struct tn__cprog *P);
/* Places the temporary buffers in one arena by liveness: a buffer takes
 * the lowest offset no buffer alive at the same steps holds. */
int tn__plan_memory(struct tn__cprog *P);

/* lib/compile/codegen.c: the program's kernels as C (a new string). */
char *tn__codegen(struct tn__cprog *P);

/* lib/compile/exec.c: runs the program with the kernels resolved from
 * the library `lib` (dlopen's handle) by tn__exec_bind. */
int tn__exec_bind(struct tn__cprog *P, void *lib, void ***fns);
/* lib/compile/explain.c: the program in words (a new string). */
char *tn__explain(const struct tn__cprog *P, const struct tn__cc_info *info);

/* lib/compile/skinny.c: a @ b for a float32 [M, K] (rows contiguous) of
 * 2 to 8 rows, K from 2048, and b [K, N] a linear layer's weight
 * transposed (columns contiguous), on AVX-512: a new [M, N] tensor, or NULL
 * when the shapes or the CPU are not its case (or memory ran out: the
 * caller's tn_mm then says so). */
struct tn_tensor *tn__skinny_mm(const struct tn_tensor *a, const struct tn_tensor *b);

/* lib/compile/exec.c: runs the program; o's step_done (o may be NULL)
 * times each step. */
int tn__exec(const struct tn__cprog *P, void *const *fns, struct tn_tensor *const *inputs,
             struct tn_value **outputs, const struct tn_compile_options *o);

/* ------------------------------------------------------ lowering (lower.c) */

/* A graph value while lowering: an expression over its own index space. */
struct tn__lv {
    int x;                        /* -1: not lowered (a SymInt, or unset) */
    int nd;
    int64_t sizes[TN_MAX_DIMS];
    enum tn_dtype dt;
};

struct tn__lctx {
    struct tn__cprog *P;
    const struct tn_graph *g;
    struct tn__lv *v;             /* per graph value */
    struct tn_tensor **meta;      /* per graph value: its Meta tensor */
    int *uses;                    /* per graph value: the nodes and outputs reading it */
    const struct tn_graph_node *n;/* the node being lowered */
    char why[200];                /* why it stays extern */
    const char *ext;              /* the extern node whose arguments are realized */
    int *xnode;                   /* per expression before xmapped: the node made it, -1 */
    int xmapped;
    bool *rt;                     /* per graph value: a number known only at run time */
};

/* A lowering: 0 lowered, 1 left to the dispatcher (why in L->why), or a
 * negative tn_status. */
typedef int (*tn__lower_fn)(struct tn__lctx *L, const struct tn_graph_node *n);

/* lib/compile/numbers.c: the numbers known only at run time. Whether
 * node n reads a tensor's data into a number (item, _local_scalar_dense). */
bool tn__reads_tensor_data(const struct tn_graph_node *n);
/* Marks in rt (per graph value) the numbers read from tensors' data and
 * those computed from them; an error naming the node when one reaches an
 * op whose result's sizes follow it. */
int tn__runtime_numbers(const struct tn_graph *g, bool *rt);
/* Why node n stays an extern step for its numbers (written into buf), or
 * NULL: it reads a tensor's data, takes a run-time number, or a SymFloat
 * (which only the run's value slots hold). */
const char *tn__runtime_reason(const struct tn_graph *g, const struct tn_graph_node *n,
                               const bool *rt, char *buf, size_t len);
/* Whether the Meta pass skips node n: it reads a tensor's data, or takes
 * a run-time number and gives only numbers. */
bool tn__runtime_only(const struct tn_graph *g, const struct tn_graph_node *n, const bool *rt);

/* lib/compile/decomp.c: the lowering of "aten::NAME.OVERLOAD", or NULL. */
tn__lower_fn tn__decomp_find(const char *qualname);
/* The number of ops in the table (for tests and --explain). */
int tn__decomp_count(void);
const char *tn__decomp_name(int i);

/* lower.c's helpers for the lowerings */
const struct tn_graph_arg *tn__arg(const struct tn_graph_node *n, const char *name);
int tn__arg_tensor(const struct tn_graph_node *n, const char *name);    /* value, -1 */
double tn__arg_float(const struct tn_graph_node *n, const char *name, double dflt);
int64_t tn__arg_int(const struct tn__lctx *L, const struct tn_graph_node *n, const char *name,
                    int64_t dflt);
/* int list into out (max TN_MAX_DIMS); returns its length, -1 when absent
 * or None */
int tn__arg_ints(const struct tn__lctx *L, const struct tn_graph_node *n, const char *name,
                 int64_t *out);
const struct tn_tensor *tn__out_meta(const struct tn__lctx *L, int k);
/* value vi's expression in the space sizes[nd] (numpy broadcasting) */
int tn__bcast(struct tn__lctx *L, int vi, int nd, const int64_t *sizes);
int tn__bcast_lv(struct tn__lctx *L, const struct tn__lv *v, int nd, const int64_t *sizes);
/* An operand: the tensor argument `name` broadcast to output k's space and
 * cast to dt, or its scalar as a constant of dt; -1 with why when absent. */
int tn__operand(struct tn__lctx *L, const struct tn_graph_node *n, const char *name, int k,
                enum tn_dtype dt);
/* Sets output k of the node to expression x over its meta sizes. */
int tn__set_out(struct tn__lctx *L, int k, int x, enum tn_dtype dt);
/* Sets output k to value vi's expression viewed through map m (the
 * output's sizes from its meta). */
int tn__set_view(struct tn__lctx *L, int k, int vi, const struct tn__vmap *m);
/* Makes value vi a load of a buffer (realizing it in a kernel unless it
 * already is one); with contiguous, a contiguous one. */
int tn__realize(struct tn__lctx *L, int vi, bool contiguous);
/* The work of computing x once (transcendentals count 8). */
int tn__x_cost(const struct tn__cprog *P, int x);
/* Realizes v (contiguous) when recomputing it costs more than a load. */
int tn__realize_costly(struct tn__lctx *L, struct tn__lv *v);
/* A reduction of vi over the dims in mask (bit d): a new value (not a
 * graph value: returned as an lv) of the kept dims (keepdim: size 1 kept). */
int tn__reduce(struct tn__lctx *L, const struct tn__lv *in, unsigned mask, int red,
               enum tn_dtype acc, bool keepdim, struct tn__lv *out);
/* The dtype to compute dt in: float for float16 and bfloat16. */
enum tn_dtype tn__compute_dtype(enum tn_dtype dt);
int tn__lv_remap(struct tn__lctx *L, const struct tn__lv *in, const struct tn__vmap *m,
                 int nd, const int64_t *sizes, struct tn__lv *out);
/* A matrix product step: a [..., M,K] x b [..., K,N] views of two loads
 * of the same rank, with the same batch sizes (broadcast ones of stride
 * 0). Returns the output buffer's value as an lv [..., M,N]
 * (contiguous), or a negative status. A batched operand whose matrices
 * have neither dimension contiguous is copied first. */
int tn__matmul(struct tn__lctx *L, const struct tn__lv *a, const struct tn__lv *b,
               struct tn__lv *out);
/* Reshapes an lv to sizes (realizing it when no view can); lv in place. */
int tn__reshape(struct tn__lctx *L, struct tn__lv *lv, int nd, const int64_t *sizes);
/* The formulas of derivatives.yaml's op entries that tcompile grad cannot
 * emit as ops: each calls a helper (directly or through a define: entry)
 * that is no op, no lib/core function and has no define: entry. fn (may be
 * NULL) gets each one: the op ("aten::mul.Tensor"), its formula's inputs
 * ("self") and the helper. Returns how many. */
int tn__joint_unexpressed(void (*fn)(const char *op, const char *inputs, const char *helper,
                                     void *ctx),
                          void *ctx);

/* joint_sdpa.c: g with each scaled_dot_product_attention node whose
 * dropout_p > 0 replaced by PyTorch's math path as ops (their dropout a
 * dropout node), for tn_compile_joint: 1 and a new checked graph in *out
 * (tn_graph_free), 0 when g has none, < 0 an error. */
int tn__joint_sdpa_dropout(const struct tn_graph *g, struct tn_graph **out);

/* bmm.c: whether a matrix view (its last two dimensions) is one BLAS
 * reads in place: rows contiguous (trans false) or columns (trans true),
 * *ld its leading dimension. */
bool tn__gemm_layout(const struct tn__view *w, bool *trans, int64_t *ld);
/* The batched product of views a and b (rank 3 or more, laid out as
 * tn__gemm_layout takes; pa, pb their buffers' data) of dtype dt
 * (float32, float64): a new contiguous tensor, NULL with an error. */
struct tn_tensor *tn__bmm_run(const struct tn__view *a, const char *pa, const struct tn__view *b,
                              const char *pb, enum tn_dtype dt);
/* Lowerings (bmm.c): aten::bmm, and aten::matmul of two tensors of 2 or
 * more dimensions whose output has batch dimensions (broadcast). A bmm
 * operand that a view flattened from more batch dimensions (matmul's
 * decomposition: expand, view, bmm) is read through the view. */
int tn__lower_bmm(struct tn__lctx *L, const struct tn_graph_node *n);
/* Whether view node n's result is read only by a bmm that reads through
 * it (and lowers): the view is then left unlowered, not copied. */
bool tn__bmm_reads_through(const struct tn__lctx *L, const struct tn_graph_node *n);
int tn__lower_batched_matmul(struct tn__lctx *L, const struct tn_graph_node *n);

/* convbw.c: runs node n of a compiled program when it is a float32 2-D
 * convolution's weight gradient (groups 1: products over chunks of the
 * batch) or input gradient (stride 1, no dilation: the forward
 * convolution of the output gradient), its result in
 * slots[n->outs[0]].t: TN_OK, 1 when it takes no such node (the caller
 * runs it through libtensor), or a negative status. */
struct tn__graph_slot;
int tn__exec_conv_bw(const struct tn_graph_node *n, struct tn__graph_slot *slots);
