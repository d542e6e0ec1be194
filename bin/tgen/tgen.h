/*
 * bin/tgen/tgen.h: what tgen's parts share: the parsed schema (one struct
 * tg_func per `func:` entry of a native_functions.yaml) and the writers.
 */
#ifndef TGEN_H
#define TGEN_H

#include <stdbool.h>
#include <stdio.h>

#define TG_MAX_ARGS 32
#define TG_MAX_RETS 8
#define TG_MAX_DISPATCH 8
#define TG_MAX_TAGS 8

enum tg_type {
    TG_TENSOR, TG_TENSOR_LIST, TG_SCALAR, TG_INT, TG_INT_LIST, TG_FLOAT, TG_BOOL, TG_STR,
    TG_SCALAR_TYPE, TG_BOOL_LIST,
    TG_OPT_TENSOR_LIST, /* Tensor?[]: a list whose entries may be None (index) */
    TG_FLOAT_LIST,      /* float[]: the scale_factors of upsample_*.vec */
    /* optional (?) only, default None: what _to_copy and to take */
    TG_LAYOUT, TG_DEVICE, TG_MEMORY_FORMAT
};

/* Whether arguments of type t pass in C as a pointer and a length. */
static inline bool tg_is_list(enum tg_type t)
{
    return t == TG_INT_LIST || t == TG_TENSOR_LIST || t == TG_BOOL_LIST ||
           t == TG_OPT_TENSOR_LIST || t == TG_FLOAT_LIST;
}

struct tg_arg {
    char *name;
    enum tg_type type;
    bool optional;    /* `?` */
    bool mutable_;    /* `(a!)` */
    char alias;       /* 'a' in `(a)` / `(a!)`, 0 when none */
    int list_len;     /* N of int[N], 0 when not given */
    bool kwonly;      /* after `*` */
    char *def;        /* the default's text, NULL when none */
};

struct tg_ret {
    enum tg_type type;
    bool mutable_;
    char alias;
    char *name;       /* NULL when unnamed */
};

enum tg_key { TG_KEY_CPU, TG_KEY_CUDA, TG_KEY_META, TG_KEY_IMPLICIT, TG_KEY_EXPLICIT, TG_NKEYS };

struct tg_func {
    char *text;          /* the func: string */
    int line, col;       /* of the entry (1-based) */
    char *ns;            /* "aten" unless the string says "ns::" */
    char *name;          /* without a trailing '_' */
    char *overload;      /* "" when none */
    bool inplace;        /* name_ */
    bool is_out;         /* has out= arguments */
    struct tg_arg args[TG_MAX_ARGS];
    int nargs;
    struct tg_ret rets[TG_MAX_RETS];
    int nrets;
    char *kernel[TG_NKEYS]; /* C function per dispatch key, NULL when none */
    bool has_dispatch;
    bool structured;
    char *delegate;      /* structured_delegate */
    char *inherits;      /* structured_inherits */
    bool variant_function, variant_method;
    /* manual_cpp_binding: True: the C binding is a lib/core function of
     * the same name (tn_to_dtype, tn_fill_), so the generated entry is the
     * internal tn__op_<ident> and the op is reached boxed or through it */
    bool manual_binding;
    char *tags[TG_MAX_TAGS];
    int ntags;
    char cname[160];     /* tn_add_out */
    char ident[160];     /* add_out: name.overload made an identifier (unique) */
    char rdname[192];    /* tn__redispatch_add_out: the entry below a key */
    bool no_redispatch;  /* --redispatch left it none: nothing calls it */
    char autograd[176];  /* its Autograd kernel (from derivatives.yaml), "" when none */
    /* no derivatives.yaml entry: the Autograd kernel records a node (named
     * `node`) whose backward fails with PyTorch's "not implemented" */
    bool no_derivative;
    char node[96];
    /* an out= overload: its Autograd kernel refuses inputs that require
     * grad, in PyTorch's words */
    bool out_check;
};

struct tg_schema {
    const char *path;
    struct tg_func *funcs;
    int nfuncs;
};

/* Reads and checks `path`. On error prints "file:line:column: message" to
 * stderr and returns -1. */
int tg_load(const char *path, struct tg_schema *out);
void tg_free(struct tg_schema *s);

/* 0 when every op returns one Tensor, a tuple of them, or (functional,
 * not structured) one Tensor[] (what the writers handle so far); else
 * prints file:line:column for the first that does not, returns -1. */
int tg_check_generatable(const struct tg_schema *s);

/* The schema's function structured_delegate names, or NULL. */
const struct tg_func *tg_find(const struct tg_schema *s, const char *name_dot_overload);

const char *tg_type_name(enum tg_type t);
/* Declares arg in C ("const struct tn_tensor *self"). */
void tg_c_param(FILE *f, const struct tg_arg *a);

/* Writers: return 0, or -1 after printing why. `base` is the YAML's file
 * name for the "generated from" comment. */
/* The public header; with split, the declarations below the public API
 * (manual_cpp_binding entries, redispatch entries, kernels, meta
 * functions, the op table) are left to tg_write_private, which writes them
 * into a header of their own that #includes the public one by `include`. */
int tg_write_header(const struct tg_schema *s, FILE *f, const char *guard, bool plugin,
                    bool split);
int tg_write_private(const struct tg_schema *s, FILE *f, const char *guard, const char *include);
/* The source #includes `private` ("...") when given, else `header` <...>. */
int tg_write_source(const struct tg_schema *s, FILE *f, const char *header, const char *private,
                    bool plugin);
void tg_write_list(const struct tg_schema *s, FILE *f, bool json);

/* ---- derivatives.yaml (derivatives.c) and the Autograd kernels (autograd.c) */

struct tg_formula {
    char *input;         /* "self", or "input, weight, bias" for a formula giving a tuple */
    int arg[TG_MAX_RETS]; /* the inputs' argument indices */
    int nin;
    char *expr;          /* "grad * other" */
    int line, col;
};

struct tg_deriv {
    char *name;          /* "mul.Tensor" */
    int line, col;
    struct tg_formula f[TG_MAX_ARGS];
    int nf;
    struct tg_func *fn;  /* the op it differentiates */
    char node[96];       /* "MulBackward0" */
    /* output_differentiability (all true when not given) */
    bool out_diff[TG_MAX_RETS];
    int n_out_diff;       /* entries given */
    /* a `define:` entry (an op-level definition of a helper formula, fn
     * NULL): its parameters, "grad, self, approximate='none'", and one
     * formula per result (f[k].input "result" or "result<k>") */
    char *params;
};

struct tg_derivs {
    const char *path;
    struct tg_deriv *d;
    int n;
    struct tg_deriv *defs; /* the `define:` entries */
    int ndefs;
};

/* Reads `path` against the ops of s, and names each op's Autograd kernel
 * (tg_func.autograd) for the op table: the op itself, and its in-place and
 * out= overloads. -1 after printing file:line:column: message. */
int tg_load_derivatives(const char *path, struct tg_schema *s, struct tg_derivs *out);
void tg_free_derivatives(struct tg_derivs *d);
/* Writes the C of every Autograd kernel and node. 0, or -1 after printing
 * file:line:column: message for a formula it cannot compile. */
int tg_write_autograd(const struct tg_schema *s, const struct tg_derivs *d, FILE *f,
                      const char *header, const char *private);

#endif
