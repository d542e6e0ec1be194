/*
 * tensor/compile.h: the graph compiler (man 3 tn_compile).
 *
 * A checked graph (tensor/graph.h) is lowered to loop-level IR, fused into
 * kernels, written out as C, compiled with the system C compiler, loaded
 * with dlopen and cached on disk, content-addressed.  Each compiled entry
 * is specialised on its inputs' dtypes, sizes and strides (a guard); a new
 * specialisation compiles again, up to a recompile limit, past which the
 * graph runs in the interpreter.  When the compiler is missing or fails
 * the run falls back to the interpreter and says why through the warning
 * callback (unless `strict`, where it is an error).
 */
#ifndef TENSOR_COMPILE_H
#define TENSOR_COMPILE_H

#include <tensor/core.h>
#include <tensor/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called with one line (no newline) for each warning: a fallback to the
 * interpreter and its reason, the recompile limit reached. */
typedef void (*tn_compile_warn_fn)(const char *msg, void *ctx);

struct tn_compile_options {
    const char *cc;          /* the C compiler; NULL: $CC, else "cc" */
    const char *cache_dir;   /* NULL: $TN_COMPILE_CACHE, else $XDG_CACHE_HOME/tensorkit,
                                else ~/.cache/tensorkit */
    int recompile_limit;     /* specialisations per graph; 0: 8 */
    double cc_timeout;       /* seconds for one compile; 0: 300 */
    bool strict;             /* a compile failure is an error, not a fallback */
    bool interpret;          /* never compile: the interpreter, for comparison */
    tn_compile_warn_fn warn; /* NULL: warnings are dropped */
    void *warn_ctx;
    /* A library already loaded (a dlopen handle) that holds the kernels
     * of the generated source whose hex SHA-256 is kernels_sha: an entry
     * generating that source uses it and runs no compiler (a package's
     * own kernels, tn_model_open). NULL: none. */
    void *kernels_lib;
    const char *kernels_sha;
    /* Profiling: when set, called after each step of a run with its index
     * in the run's order, its name (a graph node's; for generated code the
     * nodes it stands for), its kind (the node's target; "kernel" for a
     * fused kernel, "matmul" for a matrix product) and the seconds it
     * took. In the interpreter (interpret, or a fallback) each node is a
     * step, as tn_graph_run's node_done sees it. */
    void (*step_done)(void *ctx, int step, const char *name, const char *kind, double seconds);
    void *step_ctx;
};

/* What the last run did, for --time and --explain. */
struct tn_compile_stats {
    int entries;             /* specialisations compiled and loaded */
    int compiles;            /* compiles run (cache misses) */
    int hits;                /* entries found in the on-disk cache */
    int fallbacks;           /* runs in the interpreter */
    double compile_s;        /* lowering, code generation, cc and dlopen, all runs */
    double cc_s;             /* of which the C compiler */
};

struct tn_compiled;

/* A compiler for g, which must be checked (tn_graph_check returned 0) and
 * outlive the result (borrowed). opts may be NULL. NULL on out of memory. */
struct tn_compiled *tn_compile_new(const struct tn_graph *g, const struct tn_compile_options *opts);
void tn_compile_free(struct tn_compiled *c); /* NULL is fine */

/* Runs the graph as tn_graph_run does (same weights, inputs and outputs),
 * through the entry compiled for these inputs' metadata (compiling it on
 * first use). Returns 0 or an error. */
int tn_compile_run(struct tn_compiled *c, const struct tn_value *weights,
                   const struct tn_value *inputs, struct tn_value **outputs);

/* Fills the cache for these inputs without running (inputs' values unused).
 * With dir, also writes kernel.c, kernel.so and manifest.json there. */
int tn_compile_build(struct tn_compiled *c, const struct tn_value *weights,
                     const struct tn_value *inputs, const char *dir);

/* The plan of the last entry built or run, in words: the fused kernels and
 * the nodes each holds, the nodes left to libtensor's kernels and why,
 * where the generated C is. A new string (free), or NULL when none. */
char *tn_compile_explain(const struct tn_compiled *c);

/* AOT autograd of a checked graph g with a loss (its loss output, else the
 * sum of its user outputs' elements): *fwd receives the forward graph as
 * JSON text (g's outputs, then the activations the backward reads), *bwd
 * the backward (inputs: the parameters and user inputs it reads, then those
 * activations by name; outputs: GRADIENT_TO_PARAMETER, one per parameter
 * the loss reaches). Both new strings (free). Returns 0, or an error naming
 * a node whose op has no graph derivative yet, or a graph without a loss. */
int tn_compile_joint(const struct tn_graph *g, char **fwd, char **bwd);

void tn_compile_get_stats(const struct tn_compiled *c, struct tn_compile_stats *s);

/* --------------------------------------------- packages (tcompile build) */

struct tn_package_options {
    const char *name;        /* the prefix of the library's functions; NULL: "model" */
    bool weights_file;       /* weights come from a file given to NAME_create, not
                                embedded in the library */
    const char *header;      /* also write a C header declaring the functions; NULL: none */
};

/* Builds the shared library so_path (atomic: a temporary folder beside it,
 * removed whatever happens, and a rename): the kernels of c's entry for
 * these inputs (as tn_compile_build), the checked graph and, unless
 * o->weights_file, the weights. A C program links or dlopens it and runs
 * the graph through NAME_create, NAME_run and NAME_destroy (man 3
 * tn_package), with no graph file and no C compiler. opts may be NULL. */
int tn_compile_package(struct tn_compiled *c, const struct tn_value *weights,
                       const struct tn_value *inputs, const char *so_path,
                       const struct tn_package_options *opts);

/* The runtime of a package, in libtensor: what its NAME_ functions call,
 * and what tcompile run calls on a library. */
struct tn_model;
/* The model of the package loaded in this process that holds the address
 * self (any symbol of it); weights: a tensor file for a package built
 * with weights_file, else NULL for the embedded ones (a file given
 * anyway replaces them). opts may be NULL. NULL with an error. */
struct tn_model *tn_model_open(const void *self, const char *weights,
                               const struct tn_compile_options *opts);
void tn_model_free(struct tn_model *m); /* NULL is fine */
const struct tn_graph *tn_model_graph(const struct tn_model *m);
/* The weights bound at open (borrowed). */
const struct tn_value *tn_model_weights(const struct tn_model *m);
/* Runs with inputs a dict of user input name -> tensor; *outputs a new
 * dict of output name -> tensor, as tn_graph_run gives them. */
int tn_model_run(struct tn_model *m, const struct tn_value *inputs, struct tn_value **outputs);
/* The same over arrays in the order of the functions below: inputs[i]
 * borrowed, outputs[i] new references (tn_release). */
int tn_model_run_tensors(struct tn_model *m, struct tn_tensor *const *inputs,
                         struct tn_tensor **outputs);
int tn_model_num_inputs(const struct tn_model *m);
int tn_model_num_outputs(const struct tn_model *m);
/* Name, dtype (enum tn_dtype), dims and size of dim d (-1 for a symbolic
 * size: any value its range allows) of user input i; NULL / -1 past the end. */
const char *tn_model_input_name(const struct tn_model *m, int i);
int tn_model_input_dtype(const struct tn_model *m, int i);
int tn_model_input_ndim(const struct tn_model *m, int i);
int64_t tn_model_input_size(const struct tn_model *m, int i, int d);
const char *tn_model_output_name(const struct tn_model *m, int i);
int tn_model_output_dtype(const struct tn_model *m, int i);
int tn_model_output_ndim(const struct tn_model *m, int i);
int64_t tn_model_output_size(const struct tn_model *m, int i, int d);

/* ------------------------------------------------------------ the cache */

/* The cache folder opts->cache_dir names (see above) into buf. */
int tn_compile_cache_dir(const char *override, char *buf, size_t len);

struct tn_compile_cache_entry {
    char key[65];            /* hex SHA-256 */
    int64_t bytes;           /* the entry's files together */
    int64_t mtime;           /* seconds since the epoch, of its library */
    bool valid;              /* owned by us, not writable by others, whole */
    char why[80];            /* when !valid, why not in a few words ("no manifest") */
};

typedef int (*tn_compile_cache_fn)(const struct tn_compile_cache_entry *e, void *ctx);

/* Calls fn for each entry under dir (NULL: the default), in key order.
 * Returns the count, or an error (a folder we refuse: not ours, writable
 * by others). */
int tn_compile_cache_list(const char *dir, tn_compile_cache_fn fn, void *ctx);

/* Removes every entry under dir, with the temporaries of killed compiles
 * and the compilers' remembered --version texts; returns the count of
 * entries. */
int tn_compile_cache_clear(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
