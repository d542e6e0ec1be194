/*
 * bin/tgen/gen.c: writes C from a parsed schema: the public header (typed
 * entry points, and under TN_OPS_NATIVE the prototypes of the kernels and
 * meta functions the developer writes), the source (the struct tn_op of
 * each overload with its argument table; per C signature the trampolines
 * below a key and of the boxed call, and the structured engine; per op
 * the redispatch entry and the public entry that call them; the
 * registration table), and the --list output.
 */
#include <stdlib.h>
#include <string.h>

#include "tgen.h"

static const char *const key_enum[] = {"TN_KEY_CPU", "TN_KEY_CUDA", "TN_KEY_META"};


/* "int[]" etc. for the argument table, with the schema's spelling. */
static void type_text(const struct tg_arg *a, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", tg_type_name(a->type), a->optional ? "?" : "");
}

static const char *iv_tag(enum tg_type t)
{
    switch (t) {
    case TG_TENSOR: return "TN_IV_TENSOR";
    case TG_TENSOR_LIST: return "TN_IV_TENSORLIST";
    case TG_SCALAR: return "TN_IV_SCALAR";
    case TG_INT: return "TN_IV_INT";
    case TG_INT_LIST: return "TN_IV_INTLIST";
    case TG_FLOAT: return "TN_IV_DOUBLE";
    case TG_BOOL: return "TN_IV_BOOL";
    case TG_STR: return "TN_IV_STR";
    case TG_SCALAR_TYPE: return "TN_IV_DTYPE";
    case TG_BOOL_LIST: return "TN_IV_INTLIST"; /* boxed as 0/1 ints */
    case TG_OPT_TENSOR_LIST: return "TN_IV_OPTTENSORLIST";
    case TG_FLOAT_LIST: return "TN_IV_DOUBLELIST";
    case TG_LAYOUT: /* PyTorch's c10 enum values, as its IValues hold them */
    case TG_MEMORY_FORMAT: return "TN_IV_INT";
    case TG_DEVICE: return "TN_IV_STR"; /* "cpu", "cuda:1" */
    }
    return "TN_IV_NONE";
}

void tg_c_param(FILE *f, const struct tg_arg *a)
{
    const char *n = a->name;
    switch (a->type) {
    case TG_TENSOR:
        fprintf(f, "%sstruct tn_tensor *%s", a->mutable_ ? "" : "const ", n);
        break;
    case TG_TENSOR_LIST:
    case TG_OPT_TENSOR_LIST: /* NULL entries are None */
        fprintf(f, "const struct tn_tensor *const *%s, int %s_len", n, n);
        break;
    case TG_SCALAR:
        fprintf(f, a->optional ? "const struct tn_scalar *%s" : "struct tn_scalar %s", n);
        break;
    case TG_INT:
        fprintf(f, a->optional ? "const int64_t *%s" : "int64_t %s", n);
        break;
    case TG_INT_LIST:
        fprintf(f, "const int64_t *%s, int %s_len", n, n);
        break;
    case TG_FLOAT:
        fprintf(f, a->optional ? "const double *%s" : "double %s", n);
        break;
    case TG_BOOL:
        fprintf(f, a->optional ? "const bool *%s" : "bool %s", n);
        break;
    case TG_STR:
        fprintf(f, "const char *%s", n);
        break;
    case TG_SCALAR_TYPE:
        fprintf(f, "enum tn_dtype %s", n);
        break;
    case TG_BOOL_LIST:
        fprintf(f, "const bool *%s, int %s_len", n, n);
        break;
    case TG_FLOAT_LIST: /* NULL for None */
        fprintf(f, "const double *%s, int %s_len", n, n);
        break;
    case TG_LAYOUT:
    case TG_MEMORY_FORMAT: /* optional only: NULL for None */
        fprintf(f, "const int64_t *%s", n);
        break;
    case TG_DEVICE:
        fprintf(f, "const struct tn_device *%s", n);
        break;
    }
}

/* Parameters from..to, with a leading ", " when `comma`. */
static void params(FILE *f, const struct tg_func *fn, int from, int to, bool comma)
{
    for (int i = from; i < to; i++) {
        if (comma || i > from)
            fputs(", ", f);
        tg_c_param(f, &fn->args[i]);
    }
}

static void call_args(FILE *f, const struct tg_func *fn, int from, int to, bool comma)
{
    for (int i = from; i < to; i++) {
        const struct tg_arg *a = &fn->args[i];
        if (comma || i > from)
            fputs(", ", f);
        if (tg_is_list(a->type))
            fprintf(f, "%s, %s_len", a->name, a->name);
        else
            fputs(a->name, f);
    }
}

/* A functional op with several returns (max.dim -> (values, indices))
 * hands them back through trailing out-pointers, one new reference each,
 * and returns 0 or a negative tn_status like in-place and out= ops. */
static bool multi_ret(const struct tg_func *fn)
{
    return !fn->inplace && !fn->is_out && fn->nrets > 1;
}

/* A functional op returning Tensor[] (split.Tensor) returns the number of
 * tensors, and leaves in its trailing out-pointer a malloc'd array of that
 * many new references (tn_release_list frees it; NULL on failure). */
static bool list_ret(const struct tg_func *fn)
{
    return !fn->inplace && !fn->is_out && fn->nrets == 1 && fn->rets[0].type == TG_TENSOR_LIST;
}

static bool returns_int(const struct tg_func *fn)
{
    return fn->inplace || fn->is_out || fn->nrets != 1 || list_ret(fn);
}

static const char *ret_type(const struct tg_func *fn)
{
    return returns_int(fn) ? "int" : "struct tn_tensor *";
}

/* The out-pointer of return i: its schema name, else result<i>; a name an
 * argument has already gets a trailing '_'. */
static const char *ret_name(const struct tg_func *fn, int i, char *buf, size_t len)
{
    if (fn->rets[i].name)
        snprintf(buf, len, "%s", fn->rets[i].name);
    else if (fn->nrets == 1) /* a Tensor[] */
        snprintf(buf, len, "result");
    else
        snprintf(buf, len, "result%d", i);
    for (int k = 0; k < fn->nargs; k++)
        if (!strcmp(fn->args[k].name, buf)) {
            size_t l = strlen(buf);
            if (l + 1 < len)
                buf[l] = '_', buf[l + 1] = 0;
        }
    return buf;
}

/* ", struct tn_tensor **values, struct tn_tensor **indices" */
static void ret_params(FILE *f, const struct tg_func *fn)
{
    char b[80];
    for (int i = 0; multi_ret(fn) && i < fn->nrets; i++)
        fprintf(f, ", struct tn_tensor **%s", ret_name(fn, i, b, sizeof b));
    if (list_ret(fn))
        fprintf(f, ", struct tn_tensor ***%s", ret_name(fn, 0, b, sizeof b));
}

static void ret_call(FILE *f, const struct tg_func *fn)
{
    char b[80];
    for (int i = 0; (multi_ret(fn) || list_ret(fn)) && i < fn->nrets; i++)
        fprintf(f, ", %s", ret_name(fn, i, b, sizeof b));
}

/* How many leading arguments are not out= ones. */
static int n_inputs(const struct tg_func *fn)
{
    int n = 0;
    while (n < fn->nargs && !(fn->args[n].mutable_ && fn->args[n].kwonly))
        n++;
    return n;
}

static const struct tg_func *structured_of(const struct tg_schema *s, const struct tg_func *fn)
{
    if (fn->structured)
        return fn;
    return fn->delegate ? tg_find(s, fn->delegate) : NULL;
}

static void meta_name(FILE *f, const struct tg_func *out)
{
    /* tn_add_out -> tn__meta_add_out; myops_scale_out -> myops__meta_scale_out */
    const char *us = strchr(out->cname, '_');
    fprintf(f, "%.*s__meta%s", (int)(us - out->cname), out->cname, us);
}

/* Ends a declaration's line with its schema in a comment (one line per
 * declaration: "int tn_add_(...); " then the comment "add_.Tensor(...) -> Tensor(a!)"). */
static void comment(FILE *f, const struct tg_func *fn)
{
    fprintf(f, " /* %s */\n", fn->text);
}

/* ---------------------------------------------------------------- header */

/* "struct tn_tensor *tn_add(const struct tn_tensor *self, ...)" */
static void entry_decl(FILE *f, const struct tg_func *fn, const char *name, bool ks)
{
    fprintf(f, "%s %s(%s", ret_type(fn), name, ks ? "tn_keyset ks" : "");
    if (!fn->nargs && !ks)
        fputs("void", f);
    params(f, fn, 0, fn->nargs, ks);
    ret_params(f, fn); /* (tg_check_generatable: never without arguments) */
    fputs(")", f);
}

/* The entries below a key, which an Autograd kernel calls with its key
 * removed (hidden: the library's own, or the plugin's). */
static void redispatch_decls(FILE *f, const struct tg_schema *s)
{
    fputs("/* Below a key: each op's kernel for a key set the caller gives (with\n"
          " * tgen --redispatch, only the ops an Autograd kernel or a hand-written\n"
          " * kernel calls so: add one to the list in lib/ops/local.mk). */\n", f);
    for (int i = 0; i < s->nfuncs; i++) {
        if (s->funcs[i].no_redispatch)
            continue;
        fputs("__attribute__((visibility(\"hidden\"))) ", f);
        entry_decl(f, &s->funcs[i], s->funcs[i].rdname, true);
        fputs(";\n", f);
    }
}

/* Whether fn's kernel for key k is one an earlier op or key declared. */
static bool declared(const struct tg_schema *s, int i, int k)
{
    const char *name = s->funcs[i].kernel[k];
    for (int j = 0; j <= i; j++)
        for (int l = 0; l < (j < i ? TG_NKEYS : k); l++)
            if (s->funcs[j].kernel[l] && !strcmp(s->funcs[j].kernel[l], name))
                return true;
    return false;
}

static void native_decls(FILE *f, const struct tg_schema *s, bool plugin)
{
    fputs("/* What the kernels' authors write: each kernel takes the key set first,\n"
          " * then the schema's arguments; a structured out= kernel writes into an\n"
          " * output of exactly the meta function's shape and dtype. The meta function\n"
          " * of an op with N returns fills m[0..N). */\n", f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        for (int k = 0; k < TG_NKEYS; k++) {
            if (!fn->kernel[k] || declared(s, i, k))
                continue;
            entry_decl(f, fn, fn->kernel[k], true);
            fputs(";\n", f);
        }
        if (fn->autograd[0]) { /* from derivatives.yaml (autograd.c) */
            entry_decl(f, fn, fn->autograd, true);
            fputs(";\n", f);
        }
        if (fn->structured) {
            fputs("int ", f);
            meta_name(f, fn);
            fputc('(', f);
            params(f, fn, 0, n_inputs(fn), false);
            fprintf(f, "%sstruct tn_meta *m);\n", n_inputs(fn) ? ", " : "");
        }
    }
    fputs(plugin ? "/* The registration function tn_library_load() runs. */\nint tn_plugin_init(void);\n"
                 : "/* Every built-in op, NULL-terminated. */\nextern struct tn_op *const tn__builtin_ops[];\n"
                   "/* Queues a built-in table for registration (lib/dispatch/registry.c). */\n"
                   "void tn__op_register_builtins(struct tn_op *const *table);\n", f);
}

static void header_top(FILE *f, const struct tg_schema *s, const char *guard)
{
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    fprintf(f, "/* Generated by tgen from %s: do not edit. */\n", base);
    fprintf(f, "#ifndef %s\n#define %s\n\n", guard, guard);
}

int tg_write_header(const struct tg_schema *s, FILE *f, const char *guard, bool plugin,
                    bool split)
{
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    header_top(f, s, guard);
    fprintf(f, "/*\n * The typed entry points of the operators %s declares. Functional\n"
               " * variants return a new tensor (NULL with tn_last_error() on failure);\n"
               " * in-place (name_) and out= variants return 0 or a negative tn_status,\n"
               " * as do functional variants with several returns, which leave a new\n"
               " * reference in each trailing out-pointer (NULL on failure). A Tensor[]\n"
               " * return gives the number of tensors and a malloc'd array of new\n"
               " * references in the trailing out-pointer, for tn_release_list().\n"
               " * Tensor arguments are borrowed; an optional one may be NULL (None).\n"
               " */\n", base);
    fputs("#include <tensor/core.h>\n#include <tensor/dispatch.h>\n\n", f);
    fputs("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        if (fn->manual_binding && split) /* lib/core's function is the public one */
            continue;
        if (fn->manual_binding)
            fputs("#ifdef TN_OPS_NATIVE\n", f);
        entry_decl(f, fn, fn->cname, false);
        fputc(';', f);
        comment(f, fn);
        if (fn->manual_binding)
            fputs("#endif\n", f);
    }
    if (!split) {
        fputs("\n#ifdef TN_OPS_NATIVE\n", f);
        redispatch_decls(f, s);
        native_decls(f, s, plugin);
        fputs("#endif\n", f);
    }
    fputs("\n#ifdef __cplusplus\n}\n#endif\n#endif\n", f);
    return ferror(f) ? -1 : 0;
}

int tg_write_private(const struct tg_schema *s, FILE *f, const char *guard, const char *include)
{
    header_top(f, s, guard);
    fprintf(f, "/* The library's own declarations for the operators: the entry points\n"
               " * below a key, the kernels and meta functions, the op table. Not\n"
               " * installed; none of these is exported. */\n#include <%s>\n\n", include);
    for (int i = 0; i < s->nfuncs; i++)
        if (s->funcs[i].manual_binding) { /* reached boxed, or through lib/core's */
            fputs("__attribute__((visibility(\"hidden\"))) ", f);
            entry_decl(f, &s->funcs[i], s->funcs[i].cname, false);
            fputc(';', f);
            comment(f, &s->funcs[i]);
        }
    redispatch_decls(f, s);
    native_decls(f, s, false);
    fputs("\n#endif\n", f);
    return ferror(f) ? -1 : 0;
}

/* ---------------------------------------------------------------- source */

static void c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The first Tensor argument (whose device a new output takes). */
static const char *first_tensor(const struct tg_func *fn)
{
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_TENSOR && !fn->args[i].optional)
            return fn->args[i].name;
    return NULL;
}

/* The out= tensor that receives return i of an in-place or out= op. */
static const char *out_arg(const struct tg_func *fn, int i)
{
    return fn->inplace ? fn->args[0].name : fn->args[n_inputs(fn) + i].name;
}

/* One letter per C parameter shape: ops whose letters, return shape and
 * (for structured wrappers) output layout agree share one trampoline. */
static char arg_code(const struct tg_arg *a)
{
    switch (a->type) {
    case TG_TENSOR: return a->mutable_ ? 'T' : 't';
    case TG_TENSOR_LIST: return 'l';
    case TG_OPT_TENSOR_LIST: return 'o';
    case TG_SCALAR: return a->optional ? 'S' : 's';
    case TG_INT: return a->optional ? 'I' : 'i';
    case TG_LAYOUT:
    case TG_MEMORY_FORMAT: return 'I'; /* optional ints */
    case TG_INT_LIST: return 'n';
    case TG_FLOAT: return a->optional ? 'D' : 'd';
    case TG_BOOL: return a->optional ? 'B' : 'b';
    case TG_STR: return 'c';
    case TG_SCALAR_TYPE: return 'y';
    case TG_BOOL_LIST: return 'q';
    case TG_FLOAT_LIST: return 'f';
    case TG_DEVICE: return 'v';
    }
    return '?';
}

/* How the boxed engine hands back what the entry returned (op->form). */
static const char *box_form(const struct tg_func *fn)
{
    return list_ret(fn) ? "TN_BOX_LIST" : multi_ret(fn) ? "TN_BOX_TUPLE"
           : returns_int(fn) ? "TN_BOX_STATUS" : "TN_BOX_TENSOR";
}

/* The boxed signature of fn: its return shape and parameter letters. */
static void box_key(const struct tg_func *fn, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s%d:", box_form(fn), fn->nrets);
    for (int i = 0; i < fn->nargs && (size_t)n + 1 < len; i++)
        buf[n++] = arg_code(&fn->args[i]), buf[n] = 0;
}

/* Index of the first entry of keys[0..n) equal to key, appending it when new. */
static int intern(char (*keys)[96], int *n, const char *key)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(keys[i], key))
            return i;
    snprintf(keys[*n], 96, "%s", key);
    return (*n)++;
}

/* Argument i of a boxed call, from the unpacked array a_. */
static void unboxed_arg(FILE *f, const struct tg_arg *a, int i)
{
    switch (arg_code(a)) {
    case 't': case 'T': fprintf(f, "(struct tn_tensor *)a_[%d].v.p", i); break;
    case 'l': case 'o':
        fprintf(f, "(const struct tn_tensor *const *)a_[%d].v.p, a_[%d].len", i, i);
        break;
    case 's': fprintf(f, "a_[%d].v.s", i); break;
    case 'S': fprintf(f, "(const struct tn_scalar *)a_[%d].v.p", i); break;
    case 'i': fprintf(f, "a_[%d].v.i", i); break;
    case 'I': fprintf(f, "(const int64_t *)a_[%d].v.p", i); break;
    case 'n': fprintf(f, "(const int64_t *)a_[%d].v.p, a_[%d].len", i, i); break;
    case 'd': fprintf(f, "a_[%d].v.d", i); break;
    case 'D': fprintf(f, "(const double *)a_[%d].v.p", i); break;
    case 'b': fprintf(f, "a_[%d].v.b", i); break;
    case 'B': fprintf(f, "(const bool *)a_[%d].v.p", i); break;
    case 'c': fprintf(f, "(const char *)a_[%d].v.p", i); break;
    case 'y': fprintf(f, "a_[%d].v.dt", i); break;
    case 'q': fprintf(f, "(const bool *)a_[%d].v.p, a_[%d].len", i, i); break;
    case 'f': fprintf(f, "(const double *)a_[%d].v.p, a_[%d].len", i, i); break;
    case 'v': fprintf(f, "(const struct tn_device *)a_[%d].v.p", i); break;
    }
}

/* fn with its arguments renamed a0, a1, ... and its out-pointers r0, r1,
 * ...: the parameters of the trampolines one signature shares. */
static void generic(const struct tg_func *fn, struct tg_func *g, char (*names)[8])
{
    *g = *fn;
    for (int i = 0; i < g->nargs; i++)
        snprintf(names[i], 8, "a%d", i), g->args[i].name = names[i];
    for (int i = 0; i < g->nrets; i++)
        snprintf(names[TG_MAX_ARGS + i], 8, "r%d", i), g->rets[i].name = names[TG_MAX_ARGS + i];
}

/* The signature's parameter types with generic names, after `lead`. */
static void sig_params(FILE *f, const struct tg_func *g, const char *lead)
{
    fputs(lead, f);
    if (!g->nargs && !*lead)
        fputs("void", f);
    params(f, g, 0, g->nargs, *lead != 0);
    ret_params(f, g);
}

/* The two trampolines of signature k, from its first op fn:
 * - rd_k, below a key: the kernel tn_dispatch_kernel picks for ks, which
 *   for a structured op's backend key is the engine of its C signature
 *   and takes the op's descriptor sd first; each op's redispatch entry
 *   and public entry (after its argument checks) call it;
 * - cl_k, boxed: the call of the op's typed entry with the unpacked
 *   arguments, which the op table holds (op->call, with op->form) for
 *   lib/dispatch's engine (tn_dispatch_boxed: unpack the stack, call, box
 *   the results) that tn_op_call runs. */
static void write_signature(FILE *f, const struct tg_func *fn, int k, bool structured)
{
    struct tg_func g;
    char names[TG_MAX_ARGS + TG_MAX_RETS][8];
    generic(fn, &g, names);
    const char *rt = ret_type(fn), *fail = returns_int(fn) ? "tn_last_status()" : "NULL";
    /* the descriptor only where an op of the signature is structured */
    fprintf(f, "static inline %s rd_%d(const struct tn_op *op, %s", rt, k,
            structured ? "const struct gen_structured *sd, " : "");
    sig_params(f, &g, "tn_keyset ks");
    fputs(")\n{\n    void (*k_)(void) = tn_dispatch_kernel(op, ks);\n", f);
    if (structured) {
        fprintf(f, "    if (sd && k_ && k_ != op->kernels[TN_KEY_AUTOGRAD])\n        return ((%s (*)(",
                rt);
        sig_params(f, &g, "const struct gen_structured *, tn_keyset");
        fputs("))k_)(sd, ks", f);
        call_args(f, &g, 0, g.nargs, true);
        ret_call(f, &g);
        fputs(");\n", f);
    }
    fprintf(f, "    return k_ ? ((%s (*)(", rt);
    sig_params(f, &g, "tn_keyset");
    fputs("))k_)(ks", f);
    call_args(f, &g, 0, g.nargs, true);
    ret_call(f, &g);
    fprintf(f, ") : %s;\n}\n", fail);

    /* the typed call the boxed engine (tn_dispatch_boxed) runs */
    fprintf(f, "static int cl_%d(const struct tn_op *op, const struct tn_dispatch_arg *a_, "
               "struct tn_tensor **r_, struct tn_tensor ***l_)\n{ return %s((%s (*)(", k,
            returns_int(&g) ? "" : "(r_[0] = ", rt);
    sig_params(f, &g, "");
    fputs("))op->entry)(", f);
    for (int i = 0; i < g.nargs; i++) {
        if (i)
            fputs(", ", f);
        unboxed_arg(f, &g.args[i], i);
    }
    if (list_ret(&g))
        fputs(", l_", f);
    for (int i = 0; multi_ret(&g) && i < g.nrets; i++)
        fprintf(f, ", &r_[%d]", i);
    fputs(!returns_int(&g) ? ")) ? 0 : tn_last_status(); }\n\n" : "); }\n\n", f);
}

/* The structured signature: kind, parameters, inputs, outputs, and for a
 * functional op the tensor whose device new outputs take. */
static void structured_key(const struct tg_func *fn, const struct tg_func *d, char *buf,
                           size_t len)
{
    char b[80];
    box_key(fn, b, sizeof b);
    int ft = 0;
    while (ft < fn->nargs && !(fn->args[ft].type == TG_TENSOR && !fn->args[ft].optional))
        ft++;
    snprintf(buf, len, "%s/%d/%d/%d/%d", b, n_inputs(d), d->nrets, fn->inplace,
             fn->inplace || fn->is_out ? -1 : ft);
}

/* One structured engine per signature: the meta function sizes the
 * outputs, the engine's helpers allocate or ready them, the kernel (none
 * under Meta) fills them. d_ names the op's meta function and kernel. */
static void write_structured_engine(FILE *f, const struct tg_func *fn, const struct tg_func *d,
                                    int k)
{
    int nin = n_inputs(d), nr = d->nrets;
    fprintf(f, "static %s st_%d(const struct gen_structured *d_, tn_keyset ks", ret_type(fn), k);
    params(f, fn, 0, fn->nargs, true);
    ret_params(f, fn);
    fprintf(f, ")\n{\n    struct tn_meta m_[%d];\n", nr);
    for (int i = 0; i < nr; i++) /* contiguous unless the meta function lays it out */
        fprintf(f, "    m_[%d].strided = false;\n", i);
    const bool fun = !fn->inplace && !fn->is_out;
    if (fun)
        fprintf(f, "    struct tn_tensor *o_[%d] = {NULL}, **t_ = o_;\n", nr);
    else {
        fprintf(f, "    struct tn_tensor *o_[%d] = {", nr);
        for (int i = 0; i < nr; i++)
            fprintf(f, "%s%s", i ? ", " : "", out_arg(fn, i));
        fprintf(f, "}, *t_[%d];\n    int k_ = 0;\n", nr);
    }
    /* the backend key the dispatcher chose (Meta has no kernel) */
    fputs("    void (*kern_)(void) = d_->kernel[tn_keyset_highest(ks & TN_KEYSET_BACKENDS)];\n", f);
    fputs("    int rc_ = ((int (*)(", f);
    params(f, fn, 0, nin, false);
    fprintf(f, "%sstruct tn_meta *))d_->meta)(", nin ? ", " : "");
    call_args(f, fn, 0, nin, false);
    fprintf(f, "%sm_);\n", nin ? ", " : "");
    if (fun)
        fprintf(f, "    if (rc_ >= 0)\n        rc_ = tn_dispatch_alloc_outs(m_, %d, %s->device, o_);\n",
                nr, first_tensor(fn));
    else
        fprintf(f, "    rc_ = tn_dispatch_prepare_outs(rc_, m_, %d, o_, %s, t_, &k_);\n", nr,
                fn->inplace ? "true" : "false");
    fputs("    if (rc_ >= 0 && kern_)\n        rc_ = ((int (*)(tn_keyset", f);
    params(f, fn, 0, nin, true);
    for (int i = 0; i < nr; i++)
        fputs(", struct tn_tensor *", f);
    fputs("))kern_)(ks", f);
    call_args(f, fn, 0, nin, true);
    for (int i = 0; i < nr; i++)
        fprintf(f, ", t_[%d]", i);
    fputs(");\n", f);
    if (!fun) {
        fprintf(f, "    return tn_dispatch_finish_outs(rc_, o_, t_, k_);\n}\n\n");
        return;
    }
    fprintf(f, "    if (tn_dispatch_release_outs(rc_, o_, %d) < 0)\n        return %s;\n", nr,
            multi_ret(fn) ? "rc_" : "NULL");
    if (!multi_ret(fn)) {
        fputs("    return o_[0];\n}\n\n", f);
        return;
    }
    char b[80];
    for (int i = 0; i < nr; i++)
        fprintf(f, "    *%s = o_[%d];\n", ret_name(fn, i, b, sizeof b), i);
    fputs("    return 0;\n}\n\n", f);
}

/* Rows that several ops share (argument tables, tag lists, structured
 * descriptors) are written once, under the name of the first op that has
 * them: `text` is the row's initialiser, `ident` that op's. */
struct rows {
    char **text;
    const char **ident;
    int n;
};

/* The name of the row holding `text` (taking ownership), appending it
 * under `ident` when new: *fresh tells which. NULL when out of memory. */
static const char *row(struct rows *r, char *text, const char *ident, bool *fresh)
{
    *fresh = false;
    if (!text)
        return NULL;
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->text[i], text)) {
            free(text);
            return r->ident[i];
        }
    r->text[r->n] = text;
    r->ident[r->n] = ident;
    *fresh = true;
    return r->ident[r->n++];
}

static void rows_free(struct rows *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->text[i]);
    free(r->text);
    free(r->ident);
}

/* A memory stream for a row's text. */
static FILE *row_open(char **buf, size_t *len)
{
    *buf = NULL;
    return open_memstream(buf, len);
}

/* Closes the row's stream m (its buffer *buf is only final then) and
 * returns the row's name, writing `decl` (a format taking the name and
 * the row's text) when no op before had the same row. NULL when out of
 * memory. */
static const char *row_end(FILE *f, struct rows *r, FILE *m, char **buf, const char *ident,
                           const char *decl)
{
    if (!m || fclose(m)) {
        free(*buf);
        return NULL;
    }
    bool fresh;
    const char *name = row(r, *buf, ident, &fresh);
    if (fresh)
        fprintf(f, decl, name, r->text[r->n - 1]);
    return name;
}

/* A structured op's descriptor (its meta function, its out= kernels),
 * which its entries hand the engine; ops sharing one share the row. */
static const char *write_structured(FILE *f, struct rows *r, const struct tg_func *fn,
                                    const struct tg_func *d)
{
    char *buf;
    size_t len;
    FILE *m = row_open(&buf, &len);
    if (m) {
        fputs("{(void (*)(void))", m);
        meta_name(m, d);
        fputs(", {", m);
        for (int k = 0; k < 3; k++) {
            fputs(k ? ", " : "", m);
            if (d->kernel[k] && k != TG_KEY_META)
                fprintf(m, "(void (*)(void))%s", d->kernel[k]);
            else
                fputs("NULL", m);
        }
        fputs("}}", m);
    }
    return row_end(f, r, m, &buf, fn->ident, "static const struct gen_structured sd_%s = %s;\n");
}

/* The op's two entries: below a key (unless --redispatch left it none),
 * and the public one, which checks the
 * arguments and computes the key set first. Each hands its op and
 * descriptor to the trampoline of its signature (k). The public entry's
 * checks stay in it (inlined: tn_dispatch_entry_keyset): a shared one would
 * cost each call a jump and a copy of its by-value arguments. A failed
 * check's TN_KEYSET_FAILED makes the trampoline return the failure. */
static void write_entry(FILE *f, const struct tg_func *fn, int k, const char *sd, bool sig_sd)
{
    char sdb[200];
    sdb[0] = '\0';
    if (sig_sd)
        snprintf(sdb, sizeof sdb, sd ? "&sd_%s, " : "NULL, ", sd);
    if (!fn->no_redispatch) {
        entry_decl(f, fn, fn->rdname, true);
        fprintf(f, "\n{ return rd_%d(&op_%s, %sks", k, fn->ident, sdb);
        call_args(f, fn, 0, fn->nargs, true);
        ret_call(f, fn);
        fputs("); }\n", f);
    }
    /* the public entry: check the arguments, compute the key set */
    entry_decl(f, fn, fn->cname, false);
    const char *fail = returns_int(fn) ? "tn_last_status()" : "NULL";
    char rb[80];
    bool lists = false, body = multi_ret(fn) || list_ret(fn);
    for (int i = 0; i < fn->nargs; i++)
        lists |= fn->args[i].type == TG_OPT_TENSOR_LIST;
    /* the tensors, checked against NULL by the op's argument table */
    int nt = 0, nreq = 0;
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_TENSOR)
            nt++, nreq += !fn->args[i].optional;
    body |= lists;
    fputs(body ? "\n{\n" : "\n{ ", f);
    for (int i = 0; (multi_ret(fn) || list_ret(fn)) && i < fn->nrets; i++)
        fprintf(f, "    *%s = NULL;\n", ret_name(fn, i, rb, sizeof rb));
    if (nt && lists) {
        fputs("    const struct tn_tensor *ts_[] = {", f);
        for (int i = 0, n = 0; i < fn->nargs; i++)
            if (fn->args[i].type == TG_TENSOR)
                fprintf(f, "%s%s", n++ ? ", " : "", fn->args[i].name);
        fputs("};\n", f);
    }
    if (nreq && lists) /* the tensors first, then the lists */
        fprintf(f, "    if (tn_dispatch_check_tensors(&op_%s, ts_, %d) < 0)\n        return %s;\n",
                fn->ident, nt, fail);
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_OPT_TENSOR_LIST)
            fprintf(f, "    if (%s_len < 0 || (%s_len > 0 && !%s))\n        return %s"
                       "tn_dispatch_bad_list(\"%s\", \"%s\", %d)%s;\n", fn->args[i].name,
                    fn->args[i].name, fn->args[i].name, returns_int(fn) ? "" : "(void)", fn->name,
                    fn->args[i].name, i + 1, returns_int(fn) ? "" : ", NULL");
    fprintf(f, "%sreturn rd_%d(&op_%s, %s", body ? "    " : "", k, fn->ident, sdb);
    /* the tensors of a Tensor[] count too (cat of tensors that require grad) */
    bool first = true;
    if (nt && lists) {
        fprintf(f, "tn_dispatch_keyset(ts_, %d)", nt);
    } else if (nt) { /* the tensors as a compound literal */
        fprintf(f, nreq ? "tn_dispatch_entry_keyset(&op_%s, " : "tn_dispatch_keyset(", fn->ident);
        fputs("(const struct tn_tensor *const[]){", f);
        for (int i = 0, n = 0; i < fn->nargs; i++)
            if (fn->args[i].type == TG_TENSOR)
                fprintf(f, "%s%s", n++ ? ", " : "", fn->args[i].name);
        fprintf(f, "}, %d)", nt);
    }
    first = !nt;
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_TENSOR_LIST || fn->args[i].type == TG_OPT_TENSOR_LIST) {
            fprintf(f, "%stn_dispatch_keyset(%s, %s_len)", first ? "" : " | ", fn->args[i].name,
                    fn->args[i].name);
            first = false;
        }
    if (first)
        fputs("tn_dispatch_keyset(NULL, 0)", f);
    call_args(f, fn, 0, fn->nargs, true);
    ret_call(f, fn);
    fputs(body ? ");\n}\n" : "); }\n", f);
}

/* The argument table of fn, one row of the table per argument; written
 * when no op before had the same one. Its name. */
static const char *write_args(FILE *f, struct rows *r, const struct tg_func *fn)
{
    char *buf;
    size_t len;
    FILE *m = row_open(&buf, &len);
    for (int k = 0; m && k < fn->nargs; k++) {
        const struct tg_arg *a = &fn->args[k];
        char tt[32];
        type_text(a, tt, sizeof tt);
        fprintf(m, "%s{\"%s\", \"%s\", %s, %s, %s, %s, ", k ? ", " : "", a->name, tt,
                iv_tag(a->type), a->optional ? "true" : "false", a->mutable_ ? "true" : "false",
                a->kwonly ? "true" : "false");
        if (a->def && a->type == TG_INT && !strcmp(a->def, "Mean"))
            c_string(m, "1");
        else if (a->def && a->type == TG_INT && !strcmp(a->def, "Sum"))
            c_string(m, "2");
        else if (a->def)
            c_string(m, a->def);
        else
            fputs("NULL", m);
        fputs("}", m);
    }
    if (m && !fn->nargs)
        fputs("{NULL, NULL, TN_IV_NONE, false, false, false, NULL}", m);
    return row_end(f, r, m, &buf, fn->ident, "static const struct tn_arg_schema args_%s[] = {%s};\n");
}

static const char *write_tags(FILE *f, struct rows *r, const struct tg_func *fn)
{
    char *buf;
    size_t len;
    FILE *m = row_open(&buf, &len);
    for (int k = 0; m && k < fn->ntags; k++)
        fprintf(m, "\"%s\", ", fn->tags[k]);
    if (m)
        fputs("NULL", m);
    return row_end(f, r, m, &buf, fn->ident, "static const char *const tags_%s[] = {%s};\n");
}

/* The table row of fn: names, schema, arguments, the kernel of each key,
 * the typed entry, and its signature's typed call and box form for the
 * boxed engine (no boxed kernel of its own). */
static void write_op(FILE *f, const struct tg_schema *s, const struct tg_func *fn, const char *args,
                     const char *tags, int sig, int st)
{
    const struct tg_func *d = structured_of(s, fn);
    fprintf(f, "static struct tn_op op_%s = {\"%s\", \"%s%s\", \"%s\", \"%s::%s%s%s%s\", ",
            fn->ident, fn->ns, fn->name, fn->inplace ? "_" : "", fn->overload, fn->ns, fn->name,
            fn->inplace ? "_" : "", fn->overload[0] ? "." : "", fn->overload);
    c_string(f, fn->text);
    fprintf(f, ",\n    args_%s, %d, %d, tags_%s, %d, {", args, fn->nargs, fn->nrets, tags,
            fn->ntags);
    for (int k = 0, n = 0; k < 4; k++) {
        const char *kern = NULL;
        char gen[200];
        if (k == 3 && fn->autograd[0]) {
            kern = fn->autograd; /* derivatives.yaml's, before a decomposition */
        } else if (k == 3 && fn->out_check) {
            kern = "tn_dispatch_out_requires_grad"; /* a marker: the dispatch refuses */
        } else if (d && k < 3 && (d->kernel[k] || k == TG_KEY_META)) {
            snprintf(gen, sizeof gen, "st_%d", st); /* the engine, for every backend key */
            kern = gen;
        } else if (!d && k < 3 && fn->kernel[k]) {
            kern = fn->kernel[k];
        } else if (!d && k < 3 && fn->kernel[TG_KEY_EXPLICIT]) {
            kern = fn->kernel[TG_KEY_EXPLICIT];
        } else if (!d && fn->kernel[TG_KEY_IMPLICIT]) {
            /* a decomposition serves every key, Autograd included */
            kern = fn->kernel[TG_KEY_IMPLICIT];
        }
        if (kern)
            fprintf(f, "%s[%s] = GEN_FN(%s)", n++ ? ", " : "",
                    k < 3 ? key_enum[k] : "TN_KEY_AUTOGRAD", kern);
    }
    fprintf(f, "}, NULL, GEN_FN(%s), NULL, cl_%d, %s};\n", fn->cname, sig, box_form(fn));
}

int tg_write_source(const struct tg_schema *s, FILE *f, const char *header, const char *private,
                    bool plugin)
{
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    fprintf(f, "/* Generated by tgen from %s: do not edit. */\n", base);
    if (private)
        fprintf(f, "#include \"%s\"\n\n", private);
    else
        fprintf(f, "#define TN_OPS_NATIVE\n#include <%s>\n\n", header);
    fputs("/* A structured op: its meta function and its out= kernel per backend key\n"
          " * (none under Meta), for the engine of its signature. */\n"
          "struct gen_structured {\n    void (*meta)(void);\n    void (*kernel[TN_KEY_AUTOGRAD])(void);\n};\n"
          "/* A function as the op table holds it. */\n"
          "#define GEN_FN(f) ((void (*)(void))(f))\n\n", f);
    size_t n = (size_t)s->nfuncs + 1;
    char (*keys)[96] = calloc(n, sizeof *keys);
    int *sig = calloc(n, sizeof *sig), nk = 0;
    int *st = calloc(n, sizeof *st);
    const char **sd = calloc(n, sizeof *sd), **args = calloc(n, sizeof *args);
    const char **tags = calloc(n, sizeof *tags);
    bool *sig_sd = calloc(n, sizeof *sig_sd);
    struct rows rs[3];
    for (int i = 0; i < 3; i++)
        rs[i] = (struct rows){calloc(n, sizeof(char *)), calloc(n, sizeof(char *)), 0};
    int rc = 0;
    if (!keys || !sig || !st || !sd || !args || !tags || !sig_sd || !rs[0].text || !rs[0].ident ||
        !rs[1].text || !rs[1].ident || !rs[2].text || !rs[2].ident)
        goto oom;
    char key[96];
    /* the trampolines, one set per C signature; sig_sd[k]: whether an op of
     * signature k is structured */
    for (int i = 0; i < s->nfuncs; i++) {
        box_key(&s->funcs[i], key, sizeof key);
        sig[i] = intern(keys, &nk, key);
        sig_sd[sig[i]] |= structured_of(s, &s->funcs[i]) != NULL;
    }
    for (int i = 0, done = 0; i < s->nfuncs; i++)
        if (sig[i] == done) /* a signature's first op */
            write_signature(f, &s->funcs[i], done++, sig_sd[sig[i]]);
    /* the structured engines, one per signature, and the descriptors */
    nk = 0;
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        const struct tg_func *d = structured_of(s, fn);
        if (!d)
            continue;
        structured_key(fn, d, key, sizeof key);
        int n0 = nk, k = intern(keys, &nk, key);
        if (nk > n0)
            write_structured_engine(f, fn, d, k);
        st[i] = k;
    }
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *d = structured_of(s, &s->funcs[i]);
        if (d && !(sd[i] = write_structured(f, &rs[0], &s->funcs[i], d)))
            goto oom;
    }
    /* the table */
    fputc('\n', f);
    for (int i = 0; i < s->nfuncs; i++) {
        if (!(args[i] = write_args(f, &rs[1], &s->funcs[i])) ||
            !(tags[i] = write_tags(f, &rs[2], &s->funcs[i])))
            goto oom;
        write_op(f, s, &s->funcs[i], args[i], tags[i], sig[i], st[i]);
    }
    fputc('\n', f);
    /* the typed entry points */
    for (int i = 0; i < s->nfuncs; i++)
        write_entry(f, &s->funcs[i], sig[i], sd[i], sig_sd[sig[i]]);
    fputc('\n', f);
    if (plugin) {
        fputs("int tn_plugin_init(void)\n{\n    int rc;\n", f);
        for (int i = 0; i < s->nfuncs; i++)
            fprintf(f, "    if ((rc = tn_op_register(&op_%s)) < 0)\n        return rc;\n",
                    s->funcs[i].ident);
        fputs("    return 0;\n}\n", f);
    } else {
        fputs("struct tn_op *const tn__builtin_ops[] = {", f);
        for (int i = 0, col = 100; i < s->nfuncs; i++) {
            int w = (int)strlen(s->funcs[i].ident) + 6;
            if (col + w > 100)
                fputs("\n   ", f), col = 3;
            fprintf(f, " &op_%s,", s->funcs[i].ident);
            col += w;
        }
        fputs("\n    NULL\n};\n\n"
              "/* Hands the table to the dispatcher (lib/dispatch/registry.c registers it\n"
              " * on the first lookup), so that dispatch never names ops.  A constructor\n"
              " * in this object, which holds every op's public entry point: a static\n"
              " * link that calls any op carries it (tensor.pc's Libs.private names the\n"
              " * table for one that does not), and libtensor.so runs it at load, before\n"
              " * any plugin's registration. */\n"
              "__attribute__((constructor)) static void builtin_ops_hand_over(void)\n"
              "{\n    tn__op_register_builtins(tn__builtin_ops);\n}\n",
              f);
    }
    if (0) {
oom:
        fputs("tgen: out of memory\n", stderr);
        rc = -1;
    }
    for (int i = 0; i < 3; i++)
        rows_free(&rs[i]);
    free(keys);
    free(sig);
    free(st);
    free(sd);
    free(args);
    free(tags);
    free(sig_sd);
    return rc < 0 || ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ list */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void tg_write_list(const struct tg_schema *s, FILE *f, bool json)
{
    static const char *keys[TG_NKEYS] = {"CPU", "CUDA", "Meta", "CompositeImplicitAutograd",
                                         "CompositeExplicitAutograd"};
    if (!json) {
        for (int i = 0; i < s->nfuncs; i++) {
            const struct tg_func *fn = &s->funcs[i];
            fprintf(f, "%s::%s%s%s%s\t%s\t%s\n", fn->ns, fn->name, fn->inplace ? "_" : "",
                    fn->overload[0] ? "." : "", fn->overload, fn->cname, fn->text);
        }
        return;
    }
    fputs("{\"file\": ", f);
    json_str(f, s->path);
    fputs(", \"ops\": [", f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        char q[300];
        snprintf(q, sizeof q, "%s::%s%s%s%s", fn->ns, fn->name, fn->inplace ? "_" : "",
                 fn->overload[0] ? "." : "", fn->overload);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        json_str(f, q);
        fputs(", \"c_name\": ", f);
        json_str(f, fn->cname);
        fputs(", \"schema\": ", f);
        json_str(f, fn->text);
        fprintf(f, ", \"kind\": \"%s\", \"line\": %d, \"structured\": %s",
                fn->inplace ? "inplace" : fn->is_out ? "out" : "functional", fn->line,
                fn->structured ? "true" : "false");
        fputs(", \"structured_delegate\": ", f);
        if (fn->delegate)
            json_str(f, fn->delegate);
        else
            fputs("null", f);
        fputs(", \"dispatch\": {", f);
        int n = 0;
        for (int k = 0; k < TG_NKEYS; k++)
            if (fn->kernel[k]) {
                fprintf(f, "%s\"%s\": ", n++ ? ", " : "", keys[k]);
                json_str(f, fn->kernel[k]);
            }
        fputs("}, \"variants\": [", f);
        n = 0;
        if (fn->variant_function)
            fprintf(f, "%s\"function\"", n++ ? ", " : "");
        if (fn->variant_method)
            fprintf(f, "%s\"method\"", n++ ? ", " : "");
        fputs("], \"tags\": [", f);
        for (int k = 0; k < fn->ntags; k++) {
            if (k)
                fputs(", ", f);
            json_str(f, fn->tags[k]);
        }
        fputs("]}", f);
    }
    fputs("\n]}\n", f);
}
