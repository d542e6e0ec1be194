/*
 * tensor/graph.h: the JSON graph, a subset of torch.export's serialized
 * ExportedProgram (man 5 tensorkit-graph, schemas/graph.schema.json).
 *
 * A graph is read from JSON text or a .pt2 archive (tn_graph_parse,
 * tn_graph_load), checked against the operator registry and through the
 * Meta kernels (tn_graph_check), written back (tn_graph_write) and run node
 * by node through the boxed dispatcher (tn_graph_run).
 *
 * Graphs are untrusted input: every count, name and size has a limit
 * (struct tn_graph_limits), and every error names the node and the reason.
 */
#ifndef TENSOR_GRAPH_H
#define TENSOR_GRAPH_H

#include <tensor/core.h>
#include <tensor/dispatch.h>
#include <tensor/io.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Hard limits on what a graph may declare. Zero fields take the defaults. */
struct tn_graph_limits {
    size_t max_bytes;    /* JSON text; default 256 MiB */
    int max_nodes;       /* default 1,000,000 */
    int max_values;      /* tensors and symbols; default 4,000,000 */
    int max_args;        /* inputs of one node, items of one list; default 4096 */
    int max_depth;       /* JSON nesting; default 64 */
    int64_t max_numel;   /* elements of one declared tensor; default 2^40 */
};

/* The argument kinds of the union `Argument` that we implement. */
enum tn_garg_kind {
    TN_GARG_NONE = 0,
    TN_GARG_TENSOR,      /* as_tensor: items[0].value */
    TN_GARG_TENSORS,     /* as_tensors; as_optional_tensors (value -1 for None) */
    TN_GARG_INT,         /* as_int, as_sym_int, as_sym_bool: items[0] */
    TN_GARG_INTS,        /* as_ints, as_sym_ints */
    TN_GARG_FLOAT,       /* as_float, as_sym_float: items[0] */
    TN_GARG_FLOATS,
    TN_GARG_BOOL,        /* as_bool: items[0].i */
    TN_GARG_BOOLS,
    TN_GARG_STRING,      /* as_string: s */
    TN_GARG_DTYPE,       /* as_scalar_type: items[0].i is an enum tn_dtype */
    TN_GARG_DEVICE,      /* as_device: s "cpu", "cuda:0" */
    TN_GARG_LAYOUT,      /* as_layout: items[0].i (torch.strided only) */
    TN_GARG_MEMORY_FORMAT /* as_memory_format: items[0].i */
};

/* One item of an argument: a constant (i or f), or a value of the graph
 * (value >= 0: a tensor, or a SymInt, SymFloat or SymBool that a node
 * computes). */
struct tn_graph_item {
    int64_t i;
    double f;
    int value;
};

struct tn_graph_arg {
    enum tn_garg_kind kind;
    int n;                        /* items; 1 for the scalar kinds */
    struct tn_graph_item *items;
    char *s;
    bool sym_bool;                /* TN_GARG_INT read from as_sym_bool */
};

/* One NamedArgument of a node. */
struct tn_graph_input {
    char *name;                   /* the schema's argument name */
    int kind;                     /* 1 positional, 2 keyword */
    struct tn_graph_arg arg;
};

#define TN_GRAPH_UNDEFINED (-2)   /* value.def: named but never defined */
#define TN_GRAPH_INPUT (-1)       /* value.def: a graph input */

/* The numbers of a graph: in sym_int_values, sym_float_values and
 * sym_bool_values, and as_sym_int, as_sym_float, as_sym_bool arguments. */
enum tn_graph_sym_type { TN_GSYM_INT = 0, TN_GSYM_FLOAT, TN_GSYM_BOOL };

/* A tensor or a number (SymInt, SymFloat, SymBool) of the graph, with what
 * tensor_values declares. */
struct tn_graph_value {
    char *name;
    bool is_sym;                  /* a Python number (sym_*_values), not a tensor */
    enum tn_graph_sym_type sym_type; /* which number, when is_sym */
    char *sym_json;               /* its sym_*_values entry as read (compact JSON:
                                   * as_expr's expr_str and hint, or a constant),
                                   * written back as is; NULL when made here */
    bool has_meta;                /* tensor_values describes it */
    enum tn_dtype dtype;
    int ndim;
    int64_t sizes[TN_MAX_DIMS];   /* the hint for a symbolic size */
    char *exprs[TN_MAX_DIMS];     /* as_expr's expr_str, NULL for a number */
    bool requires_grad;
    int def;                      /* the defining node, TN_GRAPH_INPUT or _UNDEFINED */
    int last_use;                 /* the last node reading it; nnodes for outputs */
};

struct tn_graph_meta_entry {
    char *key, *val;
};

struct tn_graph_node {
    char *name;                   /* its first output's name when absent */
    char *target;                 /* "torch.ops.aten.addmm.default" */
    const struct tn_op *op;       /* the registry's op; NULL until checked */
    int nin;
    struct tn_graph_input *in;
    int nout;
    int *outs;                    /* value indices; -1 for an as_none output */
    int nmeta;
    struct tn_graph_meta_entry *meta;
};

enum tn_graph_in_kind {
    TN_GIN_USER_INPUT = 0,
    TN_GIN_PARAMETER,
    TN_GIN_BUFFER,
    TN_GIN_TENSOR_CONSTANT
};

enum tn_graph_out_kind {
    TN_GOUT_USER_OUTPUT = 0,
    TN_GOUT_LOSS_OUTPUT,
    TN_GOUT_BUFFER_MUTATION,
    TN_GOUT_GRADIENT_TO_PARAMETER,
    TN_GOUT_GRADIENT_TO_USER_INPUT,
    TN_GOUT_USER_INPUT_MUTATION,
    TN_GOUT_PARAMETER_MUTATION
};

struct tn_graph_spec {
    int kind;                     /* enum tn_graph_in_kind or tn_graph_out_kind */
    int value;                    /* the placeholder or output value */
    char *target;                 /* parameter/buffer/constant name; NULL for user ones */
    bool persistent;              /* buffers */
};

/* A symbol of range_constraints ("s0": {"min_val": 2, "max_val": 1024}). */
struct tn_graph_symbol {
    char *name;
    int64_t min, max;             /* INT64_MAX for an unbounded max */
    int64_t hint;                 /* from a size expression's hint; 0 when none */
};

struct tn_graph {
    char *label;                  /* the file name, for messages */
    int nvalues, nnodes, ninputs, noutputs, nsymbols;
    struct tn_graph_value *values;
    struct tn_graph_node *nodes;
    struct tn_graph_spec *inputs;   /* one per graph input, in order */
    struct tn_graph_spec *outputs;  /* one per graph output, in order */
    struct tn_graph_symbol *symbols;
    bool has_signature;
    int schema_major, schema_minor;
    struct tn_graph_limits limits;
    void *priv;                     /* the library's name index */
};

/* Reads a graph from JSON text: an ExportedProgram ({"graph_module":
 * {"graph", "signature"}, "range_constraints", ...}) or a bare Graph
 * object. Checks the structure (the union arms we implement, names, counts
 * against `lim`, NULL for the defaults), not the ops: see tn_graph_check.
 * Returns a new graph (tn_graph_free), or NULL with an error naming `label`
 * and the node. */
struct tn_graph *tn_graph_parse(const char *json, size_t len, const char *label,
                                const struct tn_graph_limits *lim);

/* Reads path: JSON text, or a .pt2 zip (its models/<name>.json), or stdin
 * for "-". For a .pt2, *weights (when not NULL) receives its weights as a
 * new dict (name -> tensor), or NULL when the archive holds none. */
struct tn_graph *tn_graph_load(const char *path, const struct tn_graph_limits *lim,
                               struct tn_value **weights);

void tn_graph_free(struct tn_graph *g); /* NULL is fine */

/* The value named `name`, or -1. */
int tn_graph_find_value(const struct tn_graph *g, const char *name);

/* Called once per problem that tn_graph_check finds: `node` is the node's
 * name ("" for the graph as a whole), `msg` says what is wrong. */
typedef void (*tn_graph_problem_fn)(const char *node, const char *msg, void *ctx);

/* Checks g: first rewrites a graph with in-place or out= ops (the training
 * IR torch.export writes by default) to its functional form, as
 * ExportedProgram.run_decompositions does: `y = relu_(x)` becomes
 * `y = relu(x)` and later reads of x (and of views of x) read y; a mutated
 * graph input becomes an output named INPUT_mutated with a
 * BUFFER_MUTATION, USER_INPUT_MUTATION or PARAMETER_MUTATION spec, before
 * the user outputs, which tn_graph_run returns like the others. Then: every target is a known op, arguments match its schema (names
 * and types), values are defined before use (a cycle is named as one),
 * outputs exist, and the shapes and dtypes that the Meta kernels compute
 * agree with tensor_values, for symbolic sizes at two points of their
 * range. Fills node.op, value.last_use, and the meta of values that
 * tensor_values leaves out. Returns the number of problems (0: runnable),
 * or a negative tn_status when it could not check (out of memory). */
int tn_graph_check(struct tn_graph *g, tn_graph_problem_fn fn, void *ctx);

/* Writes g as ExportedProgram JSON (schema_version 8.x) to `path` (atomic;
 * "-" for stdout), or into a new string (free) with tn_graph_to_json. */
int tn_graph_write(const struct tn_graph *g, const char *path);
char *tn_graph_to_json(const struct tn_graph *g);

struct tn_graph_run_options {
    bool requires_grad;   /* parameters require grad and autograd records */
    bool keep_all;        /* never release intermediates (debugging) */
    /* Profiling: when set, called after each node that ran with its index
     * in g->nodes and the seconds it took (monotonic clock, the call
     * through the dispatcher only, not the release of intermediates). */
    void (*node_done)(void *ctx, int node, double seconds);
    void *node_ctx;       /* node_done's first argument */
};

/* Runs a checked graph (tn_graph_check returned 0). `weights` maps the
 * signature's parameter, buffer and constant names to tensors; `inputs`
 * maps user inputs' placeholder names to tensors (both dicts of str ->
 * tensor, borrowed). Each intermediate is released after its last use.
 * *outputs receives a new dict: output value name -> tensor, in the
 * signature's order. Returns 0 or an error naming the node, the op and the
 * shapes of its arguments. */
int tn_graph_run(const struct tn_graph *g, const struct tn_value *weights,
                 const struct tn_value *inputs, struct tn_value **outputs,
                 const struct tn_graph_run_options *opts);

/* Runs g with autograd, as tn_graph_run with requires_grad, and
 * differentiates the loss (the signature's loss output, else the sum of
 * every user output's elements: not the mutation outputs) with respect to each parameter: *grads receives
 * a new dict of parameter name -> gradient (parameters the loss does not
 * reach are left out, as PyTorch leaves their .grad None), *outputs the
 * outputs. Returns 0 or an error. */
int tn_graph_grad(const struct tn_graph *g, const struct tn_value *weights,
                  const struct tn_value *inputs, struct tn_value **outputs,
                  struct tn_value **grads);

/* "torch.ops.aten.addmm.default" -> the op (the registry's, or one of the
 * graph's own view ops); NULL with an error when unknown. */
const struct tn_op *tn_graph_op(const char *target);

/* The op that runs `target` once the graph is functional: tn_graph_op's,
 * or for an in-place op ("torch.ops.aten.relu_.default") the functional op
 * it is rewritten to (aten::relu), for an out= overload its functional
 * overload. NULL with an error naming what is missing. */
const struct tn_op *tn_graph_functional_op(const char *target);

/* The dtype of torch.export's ScalarType number, TN_DTYPE_UNSET if none. */
enum tn_dtype tn_graph_dtype(int scalar_type);
int tn_graph_scalar_type(enum tn_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
