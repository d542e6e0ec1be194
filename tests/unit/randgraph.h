/*
 * tests/unit/randgraph.h: random graphs for the compiler's differential
 * tests (test_compile_random, tests/fuzz/fuzz_compile.c).
 *
 * A generator writes a graph in torch.export's serialized JSON (a bare
 * Graph object) with its input tensors: independent chains of pointwise
 * ops (unary, binary with broadcasting and Python scalars, comparisons,
 * where, casts), views (permute, transpose, unsqueeze, squeeze, expand,
 * slice with steps, select, view, reshape, flatten), reductions over random
 * dims (sum, mean, amax, amin, var, softmax, log_softmax, layer_norm),
 * split and unbind, products (linear, mm, addmm: libtensor's kernel with a
 * fused epilogue), and a few ops the compiler leaves to libtensor (cumsum,
 * cat), over float32,
 * float64, float16, bfloat16, int64, int32, uint8 and bool, with
 * non-contiguous, broadcast (stride 0) and zero-size inputs; sizes 0..6,
 * and now and then a long last dim (8 to 9000: past a SIMD vector, the
 * generated code's blocks and the thread pool's grain).
 *
 * Every choice comes from a source: a seed (splitmix64), or the bytes of a
 * fuzz input (a choice past their end is 0, which ends what is open). The
 * generator is type-aware: it tracks each value's dtype, shape, a bound on
 * its magnitude and on how far the compiled value may drift from the
 * interpreter's (fused code rounds once where the eager kernels round per
 * op), and only emits ops whose result stays comparable (a comparison, a
 * floor or a cast to an integer reads only values both sides compute
 * exactly; logs, roots and divisions read operands kept away from 0).
 */
#ifndef TN_RANDGRAPH_H
#define TN_RANDGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include <tensor/compile.h>
#include <tensor/tensor.h>

/* Where the choices come from. */
struct rg_src {
    uint64_t state;                 /* splitmix64's, when data is NULL */
    const unsigned char *data;      /* the fuzz input's bytes, or NULL */
    size_t len, pos;
};

void rg_src_seed(struct rg_src *s, uint64_t seed);
void rg_src_bytes(struct rg_src *s, const unsigned char *data, size_t len);
/* A choice in [0, n) (0 when n <= 1). */
uint32_t rg_pick(struct rg_src *s, uint32_t n);

struct rg_options {
    int chains;                     /* independent chains in one graph (default 4) */
    int max_ops;                    /* ops per chain at most (default 8) */
};

struct rg_output {
    char name[24];
    enum tn_dtype dtype;
    double err;                     /* how far compiled may drift from interpreted */
};

struct rg_graph {
    char *json;                     /* the graph (a bare Graph object) */
    struct tn_value *inputs;        /* dict: input name -> tensor */
    int noutputs;
    struct rg_output *outputs;
    int nnodes;
};

/* Generates one graph from src; 0, or a negative tn_status (out of memory). */
int rg_generate(struct rg_src *src, const struct rg_options *opts, struct rg_graph *out);
void rg_graph_free(struct rg_graph *g);

/* Parses and checks rg's graph, runs it through the interpreter and
 * compiled (strict: a compile failure is a failure, cache in cache_dir),
 * and compares every output: dtype, shape, and values (integers and bools
 * bit for bit, floats within the drift the generator allows, NaN where
 * NaN). Returns 0 when they agree; otherwise 1 with what differs in *why
 * (a new string: the check's problem, the failing step's error, or the
 * output, element and both values). */
int rg_compare(const struct rg_graph *rg, const char *cache_dir, char **why);
/* rg_compare, and with explain (not NULL) the compiler's plan in words
 * (tn_compile_explain: its kernels, and the nodes left to libtensor and
 * why), a new string or NULL. */
int rg_compare_explain(const struct rg_graph *rg, const char *cache_dir, char **why,
                       char **explain);
/* The comparison of outputs alone: got (compiled) against want. */
int rg_compare_outputs(const struct rg_graph *rg, const struct tn_value *got,
                       const struct tn_value *want, char **why);

#endif
