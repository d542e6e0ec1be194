/*
 * graph/internal.h: what lib/graph's files share.
 */
#ifndef TN_GRAPH_INTERNAL_H
#define TN_GRAPH_INTERNAL_H

#include <config.h>

#include <jansson.h>

#include <tensor/graph.h>

/* The name index: open addressing over value indices. */
struct tn_graph_index {
    int *slots;     /* value index + 1; 0 empty */
    size_t cap;     /* a power of two */
    int vcap;       /* room in g->values */
};

/* Parses JSON text (flags as json_loadb's) into *root, its tree in an
 * arena that *arena receives (NULL: the tree is jansson's own, where the
 * program installed other allocation functions during the parse), refusing
 * text nested deeper than max_depth.  jansson's allocation functions are
 * ours only during the parse: the program's are back when it returns (and
 * its other threads' jansson calls go to them meanwhile). Returns 0, or
 * TN_EFORMAT (messages "LABEL:LINE:COLUMN: jansson's words", or the
 * depth) or TN_ENOMEM, holding nothing. tn__graph_json_drop(*root,
 * *arena) releases the tree at once: keep no pointer into it past that. */
struct tn__json_arena;
int tn__graph_json_load(const char *text, size_t len, const char *label, int max_depth,
                        size_t flags, json_t **root, struct tn__json_arena **arena);
void tn__graph_json_drop(json_t *root, struct tn__json_arena *arena);

/* lib/graph/json.c: len bytes of JSON text -> a new tree built with
 * jansson's constructors, where json_loadb(text, len, flags) reads one
 * (the same tree); NULL where it refuses the text (or memory ran out, or
 * flags hold more than JSON_REJECT_DUPLICATES), and also where the text
 * nests deeper than max_depth: *deep then says so. No error message. */
json_t *tn__graph_json_parse(const char *text, size_t len, size_t flags, int max_depth,
                             bool *deep);

/* The value named `name`, adding it (undefined, no meta) when absent.
 * Returns its index, or a negative tn_status. */
int tn__graph_intern(struct tn_graph *g, const char *name);

/* Frees what node n holds, and zeroes it. */
void tn__graph_free_node(struct tn_graph_node *n);

/* Rebuilds the name index after values were renamed. */
int tn__graph_reindex(struct tn_graph *g);

/* lib/graph/functionalize.c: rewrites g's in-place and out= ops (the
 * training IR torch.export writes by default) to functional ops, mutated
 * graph inputs to outputs with mutation specs (called by tn_graph_check
 * first). A functional graph is left as it is. Returns the number of
 * problems given to fn (nodes it cannot rewrite), or a negative tn_status. */
int tn__graph_functionalize(struct tn_graph *g, tn_graph_problem_fn fn, void *ctx);

/* Evaluates a size expression ("s0", "2*s0 + 1", "s0//2") with the
 * symbols' values in vals (nsymbols long). Returns 0 and *out, or -1 for
 * an expression we do not read (an unknown symbol, an operator, overflow). */
int tn__graph_eval(const struct tn_graph *g, const char *expr, const int64_t *vals,
                   int64_t *out);

/* The union arms of InputSpec and OutputSpec by enum tn_graph_in_kind and
 * tn_graph_out_kind, and the field naming each one's target (NULL: none). */
extern const char *const tn__graph_in_arms[4], *const tn__graph_out_arms[7];
extern const char *const tn__graph_in_targets[4], *const tn__graph_out_targets[7];

/* The symbol's name when expr is nothing but one symbol ("s0", or sympy's
 * "Symbol('s0', positive=True, integer=True)"): 0 and the name in buf;
 * -1 otherwise. */
int tn__graph_bare_symbol(const char *expr, char *buf, size_t len);

/* The schema arguments of the graph's own ops (views that lib/core
 * implements outside the dispatcher). */
const struct tn_op *tn__graph_builtin(const char *qualname);
/* symbolic.c's ops on Python numbers (_operator::add, torch::sym_float,
 * math::trunc) and item / _local_scalar_dense; NULL for another name. */
const struct tn_op *tn__graph_sym_op(const char *qualname);
/* The factories and aliases of factory.c (which tn__graph_builtin also
 * finds); while tn__graph_meta_factories is set (tn_graph_check's Meta
 * pass), those without a tensor argument make Meta tensors. */
const struct tn_op *tn__graph_factory(const char *qualname);
/* An entry of the graph's own op tables (builtin.c, factory.c, random.c):
 * aten::NAME[OVL], boxed FN, NRETS results. */
#define TN__GRAPH_OP(name, ovl, args, fn, nrets)                                              \
    {"aten", name, ovl, "aten::" name "" ovl, NULL, args, sizeof args / sizeof *args, nrets,   \
     NULL, 0, {0}, fn, NULL, NULL, NULL, 0}
/* The entry of ops[0..n) named qualname, NULL when none. */
const struct tn_op *tn__graph_find(const struct tn_op *ops, size_t n, const char *qualname);
/* Pushes t as a boxed op's one result (1), or fails naming op when NULL. */
int tn__graph_result(const struct tn_op *op, struct tn_ivalue *st, struct tn_tensor *t);
extern _Thread_local bool tn__graph_meta_factories;
/* Set around a Meta pass (tn_graph_check's, the compiler's): the graph's
 * device arguments read as "meta", where every value is Meta. */
extern _Thread_local bool tn__graph_meta_devices;
bool tn__graph_is_factory(const struct tn_op *op);
/* The random ops of random.c (rand, randn_like, bernoulli, normal, ...),
 * which tn__graph_builtin also finds. They draw from the default generator, nothing on
 * a Meta pass; tn__graph_is_factory counts them too (no gradient). */
extern const struct tn_op tn__graph_randoms[];
extern const size_t tn__graph_nrandoms;
bool tn__graph_is_random(const struct tn_op *op);
/* Whether input I is a frozen parameter (requires_grad false, as
 * torch.export records it): it gets no gradient. A graph none of whose
 * parameters says requires_grad (our writer and the 1.13 exporter leave it
 * false throughout) has none frozen. */
bool tn__graph_param_frozen(const struct tn_graph *g, int i);

/* Writes "float32[2, 8]" (or "sym 7") for a tensor into buf. */
void tn__graph_describe(const struct tn_tensor *t, char *buf, size_t len);

/* A value while a graph runs: its tensor (owned), or its number (a
 * SymFloat's in f, its value as an int in i; a SymInt's or SymBool's in i,
 * as a double in f). */
struct tn__graph_slot {
    struct tn_tensor *t;
    int64_t i;
    double f;
    bool set;
};

struct tn__graph_scratch {
    int64_t *ints;
    size_t cap;
};

/* Runs node n (n->op set) on the values in slots, storing its results in
 * its outputs' slots. Returns 0, or an error naming the graph, the node,
 * the op and the shapes of its tensor arguments. */
/* The monotonic clock in seconds (the profiling hooks' times). */
double tn__graph_now(void);

int tn__graph_call(const struct tn_graph *g, const struct tn_graph_node *n,
                   struct tn__graph_slot *slots, struct tn__graph_scratch *s);

/* The tensors for g's inputs (by graph input; borrowed from weights and
 * inputs) into out, checked against tensor_values with the symbols'
 * ranges, as the interpreter binds them. Returns 0 or an error. */
int tn__graph_bind(const struct tn_graph *g, const struct tn_value *weights,
                   const struct tn_value *inputs, struct tn_tensor **out);

#endif
