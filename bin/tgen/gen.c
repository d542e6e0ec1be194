/*
 * bin/tgen/gen.c: writes C from a parsed schema: the public header (typed
 * entry points, and under TN_OPS_NATIVE the prototypes of the kernels and
 * meta functions the developer writes), the source (the struct tn_op of
 * each overload, its argument table, the boxed wrapper, the structured
 * wrappers, the registration table), and the --list output.
 */
#include <stdlib.h>
#include <string.h>

#include "tgen.h"

static const char *const key_enum[] = {"TN_KEY_CPU", "TN_KEY_CUDA", "TN_KEY_META"};

static bool is_kernel_key(int k) { return k == TG_KEY_CPU || k == TG_KEY_CUDA || k == TG_KEY_META; }

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

static void comment(FILE *f, const struct tg_func *fn)
{
    fprintf(f, "/* %s%s%s */\n", strcmp(fn->ns, "aten") ? "" : "", fn->text, "");
}

/* ---------------------------------------------------------------- header */

int tg_write_header(const struct tg_schema *s, FILE *f, const char *guard, bool plugin)
{
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    fprintf(f, "/* Generated by tgen from %s: do not edit. */\n", base);
    fprintf(f, "/*\n * The typed entry points of the operators %s declares. Functional\n"
               " * variants return a new tensor (NULL with tn_last_error() on failure);\n"
               " * in-place (name_) and out= variants return 0 or a negative tn_status,\n"
               " * as do functional variants with several returns, which leave a new\n"
               " * reference in each trailing out-pointer (NULL on failure). A Tensor[]\n"
               " * return gives the number of tensors and a malloc'd array of new\n"
               " * references in the trailing out-pointer, for tn_release_list().\n"
               " * Tensor arguments are borrowed; an optional one may be NULL (None).\n"
               " */\n", base);
    fprintf(f, "#ifndef %s\n#define %s\n\n#include <tensor/core.h>\n#include <tensor/dispatch.h>\n\n",
            guard, guard);
    fputs("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        comment(f, fn);
        if (fn->manual_binding) /* lib/core's function is the public one */
            fputs("#ifdef TN_OPS_NATIVE\n", f);
        fprintf(f, "%s %s(", ret_type(fn), fn->cname);
        if (!fn->nargs)
            fputs("void", f);
        params(f, fn, 0, fn->nargs, false);
        ret_params(f, fn); /* (tg_check_generatable: never without arguments) */
        fputs(fn->manual_binding ? ");\n#endif\n" : ");\n", f);
        /* below a key: an Autograd kernel calls this with its key removed */
        fprintf(f, "%s tn_redispatch_%s(tn_keyset ks", ret_type(fn), fn->ident);
        params(f, fn, 0, fn->nargs, true);
        ret_params(f, fn);
        fputs(");\n\n", f);
    }
    fputs("#ifdef TN_OPS_NATIVE\n/* What the kernels' authors write: each kernel takes the key set first,\n"
          " * then the schema's arguments; a structured out= kernel writes into an\n"
          " * output of exactly the meta function's shape and dtype. The meta function\n"
          " * of an op with N returns fills m[0..N). */\n", f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        for (int k = 0; k < TG_NKEYS; k++) {
            if (!fn->kernel[k])
                continue;
            fprintf(f, "%s %s(tn_keyset ks", ret_type(fn), fn->kernel[k]);
            params(f, fn, 0, fn->nargs, true);
            ret_params(f, fn);
            fputs(");\n", f);
        }
        if (fn->autograd[0]) { /* from derivatives.yaml (autograd.c) */
            fprintf(f, "%s %s(tn_keyset ks", ret_type(fn), fn->autograd);
            params(f, fn, 0, fn->nargs, true);
            ret_params(f, fn);
            fputs(");\n", f);
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
                 : "/* Every built-in op, NULL-terminated. */\nextern struct tn_op *const tn__builtin_ops[];\n", f);
    fputs("#endif\n\n#ifdef __cplusplus\n}\n#endif\n#endif\n", f);
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

static void write_structured(FILE *f, const struct tg_func *fn, const struct tg_func *d, int key)
{
    const char *kn = key == TG_KEY_META ? "meta" : key == TG_KEY_CPU ? "cpu" : "cuda";
    int nin = n_inputs(d), nr = d->nrets;
    fprintf(f, "static %s gen_%s_%s(tn_keyset ks", ret_type(fn), kn, fn->ident);
    params(f, fn, 0, fn->nargs, true);
    ret_params(f, fn);
    fprintf(f, ")\n{\n    struct tn_meta m_[%d];\n    int rc_ = ", nr);
    meta_name(f, d);
    fputc('(', f);
    call_args(f, fn, 0, nin, false);
    fprintf(f, "%sm_);\n", nin ? ", " : "");
    if (!fn->inplace && !fn->is_out) {
        const char *fail = multi_ret(fn) ? "rc_" : "NULL";
        fprintf(f, "    if (rc_ < 0)\n        return %s;\n", fail);
        fprintf(f, "    struct tn_tensor *out_[%d] = {NULL};\n", nr);
        fprintf(f, "    for (int i_ = 0; i_ < %d && rc_ >= 0; i_++)\n"
                   "        if (!(out_[i_] = tn_dispatch_meta_alloc(&m_[i_], %s->device)))\n"
                   "            rc_ = tn_last_status();\n", nr, first_tensor(fn));
        if (key != TG_KEY_META) {
            fprintf(f, "    if (rc_ >= 0)\n        rc_ = %s(ks, ", d->kernel[key]);
            call_args(f, fn, 0, nin, false);
            for (int i = 0; i < nr; i++)
                fprintf(f, ", out_[%d]", i);
            fputs(");\n", f);
        }
        fprintf(f, "    if (rc_ < 0) {\n        for (int i_ = 0; i_ < %d; i_++)\n"
                   "            tn_release(out_[i_]);\n        return %s;\n    }\n", nr, fail);
        if (!multi_ret(fn)) {
            fputs("    return out_[0];\n}\n\n", f);
            return;
        }
        char b[80];
        for (int i = 0; i < nr; i++)
            fprintf(f, "    *%s = out_[%d];\n", ret_name(fn, i, b, sizeof b), i);
        fputs("    return 0;\n}\n\n", f);
        return;
    }
    /* each output readied in turn; those readied are finished whatever happens */
    fprintf(f, "    struct tn_tensor *t_[%d];\n    int k_ = 0;\n", nr);
    for (int i = 0; i < nr; i++)
        fprintf(f, "    if (rc_ >= 0 && (rc_ = tn_dispatch_prepare_out(&m_[%d], %s, %s, &t_[%d])) >= 0)\n"
                   "        k_++;\n", i, out_arg(fn, i), fn->inplace ? "true" : "false", i);
    if (key != TG_KEY_META) {
        fprintf(f, "    if (rc_ >= 0)\n        rc_ = %s(ks, ", d->kernel[key]);
        call_args(f, fn, 0, nin, false);
        for (int i = 0; i < nr; i++)
            fprintf(f, ", t_[%d]", i);
        fputs(");\n", f);
    }
    for (int i = 0; i < nr; i++)
        fprintf(f, "    if (k_ > %d)\n        rc_ = tn_dispatch_finish_out(rc_, %s, t_[%d]);\n", i,
                out_arg(fn, i), i);
    fputs("    return rc_;\n}\n\n", f);
}

static void write_boxed(FILE *f, const struct tg_func *fn)
{
    fprintf(f, "static int boxed_%s(const struct tn_op *op, struct tn_ivalue *st, int n)\n{\n",
            fn->ident);
    for (int i = 0; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        const char *nm = a->name;
        switch (a->type) {
        case TG_TENSOR:
            fprintf(f, "    struct tn_tensor *%s;\n    if (tn_ivalue_tensor(op, st, n, %d, &%s) < 0)\n"
                       "        return tn_last_status();\n", nm, i, nm);
            break;
        case TG_TENSOR_LIST:
            fprintf(f, "    if (%d >= n || st[%d].tag != TN_IV_TENSORLIST || st[%d].v.tensors.n < 0)\n"
                       "        return tn_set_error(TN_EINVAL, \"%%s: argument '%s' (position %d) "
                       "must be a list of tensors\", op->qualname);\n"
                       "    const struct tn_tensor *const *%s = "
                       "(const struct tn_tensor *const *)st[%d].v.tensors.data;\n"
                       "    int %s_len = st[%d].v.tensors.n;\n", i, i, i, nm, i + 1, nm, i, nm, i);
            break;
        case TG_OPT_TENSOR_LIST: /* a pointer and a length, from the stack */
        case TG_FLOAT_LIST: {
            bool fl = a->type == TG_FLOAT_LIST;
            fprintf(f, "    %s%s;\n    int %s_len;\n"
                       "    if (tn_ivalue_%s(op, st, n, %d, &%s, &%s_len) < 0)\n"
                       "        return tn_last_status();\n",
                    fl ? "const double *" : "const struct tn_tensor *const *", nm, nm,
                    fl ? "doubles" : "opt_tensors", i, nm, nm);
            break;
        }
        case TG_INT_LIST:
            fprintf(f, "    int64_t %s_buf[TN_MAX_DIMS];\n    const int64_t *%s;\n    int %s_len;\n"
                       "    if (tn_ivalue_ints(op, st, n, %d, %s_buf, &%s, &%s_len) < 0)\n"
                       "        return tn_last_status();\n", nm, nm, nm, i, nm, nm, nm);
            break;
        case TG_BOOL_LIST:
            fprintf(f, "    int64_t %s_buf[TN_MAX_DIMS];\n    const int64_t *%s_i;\n    int %s_len;\n"
                       "    bool %s[TN_MAX_DIMS];\n"
                       "    if (tn_ivalue_ints(op, st, n, %d, %s_buf, &%s_i, &%s_len) < 0)\n"
                       "        return tn_last_status();\n"
                       "    if (%s_len > TN_MAX_DIMS)\n"
                       "        return tn_set_error(TN_EINVAL, \"%%s: too many bools for %s\", "
                       "op->qualname);\n"
                       "    for (int k_ = 0; k_ < %s_len; k_++)\n"
                       "        %s[k_] = %s_i[k_] != 0;\n", nm, nm, nm, nm, i, nm, nm, nm, nm, nm,
                    nm, nm, nm);
            break;
        case TG_STR:
            fprintf(f, "    const char *%s;\n    if (tn_ivalue_str(op, st, n, %d, &%s) < 0)\n"
                       "        return tn_last_status();\n", nm, i, nm);
            break;
        case TG_SCALAR_TYPE:
            fprintf(f, "    enum tn_dtype %s;\n    if (tn_ivalue_dtype(op, st, n, %d, &%s) < 0)\n"
                       "        return tn_last_status();\n", nm, i, nm);
            break;
        case TG_DEVICE: /* a pointer, NULL for an absent optional one */
            if (!a->optional) {
                fprintf(f, "    struct tn_device %s_v;\n    const struct tn_device *%s = &%s_v;\n"
                           "    if (tn_ivalue_device(op, st, n, %d, &%s_v) < 0)\n"
                           "        return tn_last_status();\n", nm, nm, nm, i, nm);
                break;
            }
            fprintf(f, "    struct tn_device %s_v;\n    const struct tn_device *%s = NULL;\n"
                       "    if (%d < n && st[%d].tag != TN_IV_NONE) {\n"
                       "        if (tn_ivalue_device(op, st, n, %d, &%s_v) < 0)\n"
                       "            return tn_last_status();\n        %s = &%s_v;\n    }\n",
                    nm, nm, i, i, i, nm, nm, nm);
            break;
        default: {
            /* Layout and MemoryFormat: optional ints */
            bool is_int = a->type == TG_INT || a->type == TG_LAYOUT || a->type == TG_MEMORY_FORMAT;
            const char *ct = a->type == TG_SCALAR ? "struct tn_scalar"
                             : is_int  ? "int64_t"
                             : a->type == TG_FLOAT ? "double" : "bool";
            const char *getter = a->type == TG_SCALAR ? "scalar"
                                 : is_int  ? "int"
                                 : a->type == TG_FLOAT ? "double" : "bool";
            if (a->optional) {
                fprintf(f, "    %s %s_v;\n    const %s *%s = NULL;\n"
                           "    if (%d < n && st[%d].tag != TN_IV_NONE) {\n"
                           "        if (tn_ivalue_%s(op, st, n, %d, &%s_v) < 0)\n"
                           "            return tn_last_status();\n        %s = &%s_v;\n    }\n",
                        ct, nm, ct, nm, i, i, getter, i, nm, nm, nm);
            } else {
                fprintf(f, "    %s %s;\n    if (tn_ivalue_%s(op, st, n, %d, &%s) < 0)\n"
                           "        return tn_last_status();\n", ct, nm, getter, i, nm);
            }
        }
        }
    }
    if (fn->inplace || fn->is_out) {
        fprintf(f, "    int rc_ = %s(", fn->cname);
        call_args(f, fn, 0, fn->nargs, false);
        fputs(");\n    if (rc_ < 0)\n        return rc_;\n", f);
        for (int i = 0; i < fn->nrets; i++)
            fprintf(f, "    st[%d] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = tn_retain(%s)};\n",
                    i, out_arg(fn, i));
        fprintf(f, "    return %d;\n}\n\n", fn->nrets);
    } else if (list_ret(fn)) { /* the result owns the array and its references */
        fprintf(f, "    struct tn_tensor **r_ = NULL;\n    int rc_ = %s(", fn->cname);
        call_args(f, fn, 0, fn->nargs, false);
        fputs(", &r_);\n    if (rc_ < 0)\n        return rc_;\n"
              "    st[0] = (struct tn_ivalue){.tag = TN_IV_TENSORLIST, .v.tensors = {r_, rc_}};\n"
              "    return 1;\n}\n\n", f);
    } else if (multi_ret(fn)) {
        fprintf(f, "    struct tn_tensor *r_[%d] = {NULL};\n    int rc_ = %s(", fn->nrets, fn->cname);
        call_args(f, fn, 0, fn->nargs, false);
        for (int i = 0; i < fn->nrets; i++)
            fprintf(f, ", &r_[%d]", i);
        fprintf(f, ");\n    if (rc_ < 0)\n        return rc_;\n"
                   "    for (int i_ = 0; i_ < %d; i_++) /* an output not asked for is None */\n"
                   "        st[i_] = (struct tn_ivalue){.tag = r_[i_] ? TN_IV_TENSOR : TN_IV_NONE,\n"
                   "                                    .v.t = r_[i_]};\n"
                   "    return %d;\n}\n\n", fn->nrets, fn->nrets);
    } else {
        fprintf(f, "    struct tn_tensor *r_ = %s(", fn->cname);
        call_args(f, fn, 0, fn->nargs, false);
        fputs(");\n    if (!r_)\n        return tn_last_status();\n"
              "    st[0] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = r_};\n    return 1;\n}\n\n",
              f);
    }
}

static void write_entry(FILE *f, const struct tg_func *fn)
{
    const bool ret_int = returns_int(fn);
    /* pick the kernel for ks and call it: inline in the public entry, and
     * the exported redispatch entry */
    fprintf(f, "static inline %s redispatch_%s(tn_keyset ks", ret_type(fn), fn->ident);
    params(f, fn, 0, fn->nargs, true);
    ret_params(f, fn);
    fprintf(f, ")\n{\n    typedef %s (*fn_t)(tn_keyset", ret_type(fn));
    params(f, fn, 0, fn->nargs, true);
    ret_params(f, fn);
    fprintf(f, ");\n    fn_t fn_ = (fn_t)tn_dispatch_kernel(&op_%s, ks);\n", fn->ident);
    fprintf(f, "    if (!fn_)\n        return %s;\n    return fn_(ks", ret_int ? "tn_last_status()" : "NULL");
    call_args(f, fn, 0, fn->nargs, true);
    ret_call(f, fn);
    fputs(");\n}\n\n", f);
    fprintf(f, "%s tn_redispatch_%s(tn_keyset ks", ret_type(fn), fn->ident);
    params(f, fn, 0, fn->nargs, true);
    ret_params(f, fn);
    fprintf(f, ")\n{\n    return redispatch_%s(ks", fn->ident);
    call_args(f, fn, 0, fn->nargs, true);
    ret_call(f, fn);
    fputs(");\n}\n\n", f);

    /* the public entry: check the arguments, compute the key set */
    fprintf(f, "%s %s(", ret_type(fn), fn->cname);
    if (!fn->nargs)
        fputs("void", f);
    params(f, fn, 0, fn->nargs, false);
    ret_params(f, fn);
    fputs(")\n{\n", f);
    char rb[80];
    for (int i = 0; (multi_ret(fn) || list_ret(fn)) && i < fn->nrets; i++)
        fprintf(f, "    *%s = NULL;\n", ret_name(fn, i, rb, sizeof rb));
    int nt = 0;
    for (int i = 0; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        if (a->type != TG_TENSOR)
            continue;
        nt++;
        if (!a->optional)
            fprintf(f, "    if (!%s)\n        return %stn_dispatch_null_arg(\"%s\", \"%s\", %d)%s;\n",
                    a->name, ret_int ? "" : "(void)", fn->name, a->name, i + 1,
                    ret_int ? "" : ", NULL");
    }
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_OPT_TENSOR_LIST)
            fprintf(f, "    if (%s_len < 0 || (%s_len > 0 && !%s))\n        return %s"
                       "tn_dispatch_bad_list(\"%s\", \"%s\", %d)%s;\n", fn->args[i].name,
                    fn->args[i].name, fn->args[i].name, ret_int ? "" : "(void)", fn->name,
                    fn->args[i].name, i + 1, ret_int ? "" : ", NULL");
    if (nt) {
        fputs("    const struct tn_tensor *ts_[] = {", f);
        int k = 0;
        for (int i = 0; i < fn->nargs; i++)
            if (fn->args[i].type == TG_TENSOR)
                fprintf(f, "%s%s", k++ ? ", " : "", fn->args[i].name);
        fprintf(f, "};\n    return redispatch_%s(tn_dispatch_keyset(ts_, %d)", fn->ident, nt);
    } else {
        fprintf(f, "    return redispatch_%s(", fn->ident);
    }
    /* the tensors of a Tensor[] count too (cat of tensors that require grad) */
    bool first = nt == 0;
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
    fputs(");\n}\n\n", f);
}

int tg_write_source(const struct tg_schema *s, FILE *f, const char *header, bool plugin)
{
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    fprintf(f, "/* Generated by tgen from %s: do not edit. */\n", base);
    fprintf(f, "#define TN_OPS_NATIVE\n#include <%s>\n\n", header);
    /* tables and forward declarations first: entries refer to each other */
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        fprintf(f, "static const struct tn_arg_schema args_%s[] = {\n", fn->ident);
        for (int k = 0; k < fn->nargs; k++) {
            const struct tg_arg *a = &fn->args[k];
            char tt[32];
            type_text(a, tt, sizeof tt);
            fprintf(f, "    {\"%s\", \"%s\", %s, %s, %s, %s, ", a->name, tt, iv_tag(a->type),
                    a->optional ? "true" : "false", a->mutable_ ? "true" : "false",
                    a->kwonly ? "true" : "false");
            if (a->def && a->type == TG_INT && !strcmp(a->def, "Mean"))
                c_string(f, "1");
            else if (a->def && a->type == TG_INT && !strcmp(a->def, "Sum"))
                c_string(f, "2");
            else if (a->def)
                c_string(f, a->def);
            else
                fputs("NULL", f);
            fputs("},\n", f);
        }
        if (!fn->nargs)
            fputs("    {NULL, NULL, TN_IV_NONE, false, false, false, NULL},\n", f);
        fputs("};\n", f);
        fprintf(f, "static const char *const tags_%s[] = {", fn->ident);
        for (int k = 0; k < fn->ntags; k++)
            fprintf(f, "\"%s\", ", fn->tags[k]);
        fputs("NULL};\n", f);
        fprintf(f, "static int boxed_%s(const struct tn_op *op, struct tn_ivalue *st, int n);\n",
                fn->ident);
    }
    fputc('\n', f);
    /* structured wrappers, per backend key of the out= kernel, plus Meta */
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        const struct tg_func *d = structured_of(s, fn);
        if (!d)
            continue;
        for (int k = 0; k < TG_NKEYS; k++)
            if (is_kernel_key(k) && (d->kernel[k] || k == TG_KEY_META))
                write_structured(f, fn, d, k);
    }
    /* the ops */
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *fn = &s->funcs[i];
        const struct tg_func *d = structured_of(s, fn);
        fprintf(f, "static struct tn_op op_%s = {\n    \"%s\", \"%s%s\", \"%s\", \"%s::%s%s%s%s\",\n    ",
                fn->ident, fn->ns, fn->name, fn->inplace ? "_" : "", fn->overload, fn->ns,
                fn->name, fn->inplace ? "_" : "", fn->overload[0] ? "." : "", fn->overload);
        c_string(f, fn->text);
        fprintf(f, ",\n    args_%s, %d, %d, tags_%s, %d,\n    {", fn->ident, fn->nargs, fn->nrets,
                fn->ident, fn->ntags);
        for (int k = 0; k < 4; k++) {
            const char *kern = NULL;
            char gen[200];
            if (k == 3 && fn->autograd[0]) {
                kern = fn->autograd; /* derivatives.yaml's, before a decomposition */
            } else if (d && k < 3 && (d->kernel[k] || k == TG_KEY_META)) {
                snprintf(gen, sizeof gen, "gen_%s_%s", k == 0 ? "cpu" : k == 1 ? "cuda" : "meta",
                         fn->ident);
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
                fprintf(f, "\n        [%s] = (void (*)(void))%s,",
                        k < 3 ? key_enum[k] : "TN_KEY_AUTOGRAD", kern);
        }
        fprintf(f, "\n    },\n    boxed_%s, NULL\n};\n\n", fn->ident);
    }
    for (int i = 0; i < s->nfuncs; i++) {
        write_entry(f, &s->funcs[i]);
        write_boxed(f, &s->funcs[i]);
    }
    if (plugin) {
        fputs("int tn_plugin_init(void)\n{\n    int rc;\n", f);
        for (int i = 0; i < s->nfuncs; i++)
            fprintf(f, "    if ((rc = tn_op_register(&op_%s)) < 0)\n        return rc;\n",
                    s->funcs[i].ident);
        fputs("    return 0;\n}\n", f);
    } else {
        fputs("struct tn_op *const tn__builtin_ops[] = {\n", f);
        for (int i = 0; i < s->nfuncs; i++)
            fprintf(f, "    &op_%s,\n", s->funcs[i].ident);
        fputs("    NULL\n};\n", f);
    }
    return ferror(f) ? -1 : 0;
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
