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

void tn_compile_get_stats(const struct tn_compiled *c, struct tn_compile_stats *s);

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
