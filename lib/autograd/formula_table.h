/*
 * autograd/formula_table.h: schemas/derivatives.yaml as data, written by
 * tgen into autograd_gen.c beside the Autograd kernels it compiles from
 * the same formulas, so eager and graph autograd (lib/compile/joint.c)
 * read one source.
 *
 * Each formula is its parse tree in prefix order: a row, then its nkid
 * children's subtrees. A call's text is the op it resolves to
 * ("aten::mul.Tensor", "aten::_softmax_backward_data") or, when it names
 * no op, the function as the formula wrote it: a lib/core function (t,
 * transpose, expand) or a helper ("_gelu_bw"), which a `define:` entry of
 * derivatives.yaml may define over ops.
 */
#ifndef TN_AUTOGRAD_FORMULA_TABLE_H
#define TN_AUTOGRAD_FORMULA_TABLE_H

enum tn__dx_kind {
    TN__DX_NUM,  /* text: a number as written */
    TN__DX_STR,  /* text: a string literal's contents */
    TN__DX_ID,   /* grad, grads[k], result, result<k>, an argument, true, false */
    TN__DX_CALL, /* text(kids...); x.f(a) is f(x, a) */
    TN__DX_BIN,  /* kid0 op kid1, op one of + - * / */
    TN__DX_NEG   /* -kid0 */
};

struct tn__dx {
    unsigned char kind;   /* enum tn__dx_kind */
    unsigned char nkid;
    char op;
    const char *text;
};

struct tn__dformula {
    const char *inputs;   /* "self", "input, weight, bias"; "result<k>" in a define */
    int root;             /* its first row in tn__dx_rows */
};

struct tn__dentry {
    const char *name;     /* "aten::mul.Tensor", or a define's "_gelu_bw" */
    const char *params;   /* a define's parameters ("grad, self, approximate='none'"), else NULL */
    int formula, nf;      /* its formulas: tn__dx_formulas[formula .. formula + nf) */
};

extern const struct tn__dx tn__dx_rows[];
extern const struct tn__dformula tn__dx_formulas[];
extern const struct tn__dentry tn__dx_entries[];
extern const int tn__dx_nentries;

#endif
