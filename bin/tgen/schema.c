/*
 * bin/tgen/schema.c: reads a native_functions.yaml (libyaml's document
 * loader, which keeps each node's line and column) and parses each `func:`
 * string in PyTorch's schema grammar. The YAML is untrusted: sizes are
 * bounded and every error names file:line:column.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "tgen.h"

#define TG_MAX_FILE (64u << 20)
#define TG_MAX_FUNCS 20000

static const char *tg_path;

static int tg_error(int line, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tg_error(int line, int col, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d:%d: ", tg_path, line, col);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static char *xstrndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) {
        fprintf(stderr, "tgen: out of memory\n");
        exit(2);
    }
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

const char *tg_type_name(enum tg_type t)
{
    static const char *names[] = {"Tensor", "Tensor[]", "Scalar", "int", "int[]", "float",
                                  "bool", "str", "ScalarType", "bool[]", "Tensor?[]", "float[]",
                                  "Layout", "Device", "MemoryFormat"};
    return names[t];
}

/* ------------------------------------------------------- schema strings */

struct cursor {
    const char *s;
    size_t i;
    int line, col; /* where s[0] is in the file */
};

static int cur_error(const struct cursor *c, size_t at, const char *msg, const char *what)
{
    return tg_error(c->line, c->col + (int)at, "%s%s%s", msg, what ? ": " : "", what ? what : "");
}

static void skip_ws(struct cursor *c)
{
    while (c->s[c->i] == ' ')
        c->i++;
}

static size_t ident_len(const char *p)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)p[0]) || p[0] == '_'))
        return 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_')
        n++;
    return n;
}

/* Parses "Type[(a!)][[N]][?]" into *type and flags. */
static int parse_type(struct cursor *c, enum tg_type *type, bool *optional, bool *mut,
                      char *alias, int *list_len)
{
    size_t start = c->i, n = ident_len(c->s + c->i);
    if (!n)
        return cur_error(c, c->i, "expected a type", NULL);
    char word[32];
    if (n >= sizeof word)
        return cur_error(c, start, "unknown type", NULL);
    memcpy(word, c->s + c->i, n);
    word[n] = 0;
    c->i += n;
    *mut = false;
    *alias = 0;
    *optional = false;
    *list_len = 0;
    if (c->s[c->i] == '(') {
        if (strcmp(word, "Tensor") != 0)
            return cur_error(c, c->i, "alias annotations are for Tensor arguments only", NULL);
        c->i++;
        if (!islower((unsigned char)c->s[c->i]))
            return cur_error(c, c->i, "expected an alias set name like (a) or (a!)", NULL);
        *alias = c->s[c->i++];
        if (c->s[c->i] == '!') {
            *mut = true;
            c->i++;
        }
        if (!strncmp(c->s + c->i, " -> *", 5)) /* (a -> *): a Tensor[] result aliases it */
            c->i += 5;
        if (c->s[c->i] != ')')
            return cur_error(c, c->i, "expected ')' closing the alias annotation", NULL);
        c->i++;
    }
    bool list = false, opt_elems = false;
    if (c->s[c->i] == '?' && c->s[c->i + 1] == '[') { /* Tensor?[]: entries may be None */
        if (strcmp(word, "Tensor") != 0)
            return cur_error(c, c->i, "lists of optional values are for Tensor only", word);
        opt_elems = true;
        c->i++;
    }
    if (c->s[c->i] == '[') {
        list = true;
        c->i++;
        while (isdigit((unsigned char)c->s[c->i])) {
            *list_len = *list_len * 10 + (c->s[c->i] - '0');
            if (*list_len > 64)
                return cur_error(c, c->i, "list length too large", NULL);
            c->i++;
        }
        if (c->s[c->i] != ']')
            return cur_error(c, c->i, "expected ']'", NULL);
        c->i++;
    }
    if (c->s[c->i] == '?') {
        *optional = true;
        c->i++;
    }
    if (opt_elems && (*optional || *list_len))
        return cur_error(c, start, "Tensor?[] takes no length and cannot be optional itself", NULL);
    if (opt_elems)
        *type = TG_OPT_TENSOR_LIST;
    else if (strcmp(word, "Tensor") == 0)
        *type = list ? TG_TENSOR_LIST : TG_TENSOR;
    else if (strcmp(word, "int") == 0 || strcmp(word, "SymInt") == 0)
        *type = list ? TG_INT_LIST : TG_INT;
    else if (list && strcmp(word, "bool") == 0)
        *type = TG_BOOL_LIST; /* output_mask of the backward ops */
    else if (list && strcmp(word, "float") == 0)
        *type = TG_FLOAT_LIST;
    else if (list)
        return cur_error(c, start, "lists are supported for Tensor, int, SymInt, bool and float "
                         "only", word);
    else if (strcmp(word, "Scalar") == 0)
        *type = TG_SCALAR;
    else if (strcmp(word, "float") == 0)
        *type = TG_FLOAT;
    else if (strcmp(word, "bool") == 0)
        *type = TG_BOOL;
    else if (strcmp(word, "str") == 0)
        *type = TG_STR;
    else if (strcmp(word, "ScalarType") == 0)
        *type = TG_SCALAR_TYPE;
    else if (strcmp(word, "Layout") == 0)
        *type = TG_LAYOUT;
    else if (strcmp(word, "Device") == 0)
        *type = TG_DEVICE;
    else if (strcmp(word, "MemoryFormat") == 0)
        *type = TG_MEMORY_FORMAT;
    else
        return cur_error(c, start, "unknown type", word);
    if ((*type == TG_LAYOUT || *type == TG_MEMORY_FORMAT) && !*optional)
        return cur_error(c, start, "Layout and MemoryFormat are supported as optional (?) "
                         "arguments only", word);
    return 0;
}

/* The end of one comma-separated item at bracket depth 0. */
static size_t item_end(const char *s, size_t i, char close)
{
    int depth = 0;
    for (; s[i]; i++) {
        if (s[i] == '(' || s[i] == '[')
            depth++;
        else if ((s[i] == ')' || s[i] == ']') && depth > 0)
            depth--;
        else if (depth == 0 && (s[i] == ',' || s[i] == close))
            return i;
    }
    return i;
}

static int check_default(struct cursor *c, size_t at, const struct tg_arg *a)
{
    const char *d = a->def;
    char *end;
    if (strcmp(d, "None") == 0) {
        if (!a->optional)
            return cur_error(c, at, "None is a default for optional (?) arguments only", a->name);
        return 0;
    }
    switch (a->type) {
    case TG_TENSOR:
    case TG_TENSOR_LIST:
    case TG_OPT_TENSOR_LIST:
        return cur_error(c, at, "a Tensor default can only be None", a->name);
    case TG_BOOL:
        if (strcmp(d, "True") && strcmp(d, "False"))
            return cur_error(c, at, "a bool default is True or False", a->name);
        return 0;
    case TG_INT:
        if (!strcmp(d, "Mean") || !strcmp(d, "Sum")) /* at::Reduction, as PyTorch writes it */
            return 0;
        strtoll(d, &end, 10);
        if (*end || end == d)
            return cur_error(c, at, "an int default must be an integer", a->name);
        return 0;
    case TG_FLOAT:
    case TG_SCALAR:
        if (a->type == TG_SCALAR && (!strcmp(d, "True") || !strcmp(d, "False")))
            return 0;
        strtod(d, &end);
        if (*end || end == d)
            return cur_error(c, at, "the default must be a number", a->name);
        return 0;
    case TG_INT_LIST:
        if (d[0] == '[') {
            size_t n = strlen(d);
            if (d[n - 1] != ']')
                return cur_error(c, at, "an int[] default is [n, ...] or one integer", a->name);
            return 0;
        }
        strtoll(d, &end, 10);
        if (*end || end == d)
            return cur_error(c, at, "an int[] default is [n, ...] or one integer", a->name);
        return 0;
    case TG_STR:
        if (d[0] != '"' && d[0] != '\'')
            return cur_error(c, at, "a str default is quoted", a->name);
        return 0;
    case TG_SCALAR_TYPE:
        return cur_error(c, at, "a ScalarType default can only be None", a->name);
    case TG_BOOL_LIST:
        return cur_error(c, at, "a bool[] default can only be None", a->name);
    case TG_FLOAT_LIST:
    case TG_LAYOUT:
    case TG_DEVICE:
    case TG_MEMORY_FORMAT:
        return cur_error(c, at, "the default can only be None", a->name);
    }
    return 0;
}

static int parse_arg(struct cursor *c, size_t end, struct tg_arg *a, bool kwonly)
{
    memset(a, 0, sizeof *a);
    a->kwonly = kwonly;
    if (parse_type(c, &a->type, &a->optional, &a->mutable_, &a->alias, &a->list_len) < 0)
        return -1;
    if (c->s[c->i] != ' ')
        return cur_error(c, c->i, "expected a space between the type and the argument name", NULL);
    skip_ws(c);
    size_t n = ident_len(c->s + c->i);
    if (!n)
        return cur_error(c, c->i, "expected an argument name", NULL);
    a->name = xstrndup(c->s + c->i, n);
    c->i += n;
    if (c->s[c->i] == '=') {
        size_t at = ++c->i;
        if (at >= end)
            return cur_error(c, at, "expected a default value after '='", a->name);
        a->def = xstrndup(c->s + at, end - at);
        c->i = end;
        if (check_default(c, at, a) < 0)
            return -1;
    }
    skip_ws(c);
    if (c->i != end)
        return cur_error(c, c->i, "unexpected text after the argument", a->name);
    return 0;
}

static int parse_returns(struct cursor *c, struct tg_func *f)
{
    skip_ws(c);
    bool tuple = c->s[c->i] == '(';
    if (tuple)
        c->i++;
    f->nrets = 0;
    if (tuple && c->s[c->i] == ')') {
        c->i++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        size_t end = item_end(c->s, c->i, tuple ? ')' : 0);
        if (f->nrets == TG_MAX_RETS)
            return cur_error(c, c->i, "too many returns", NULL);
        struct tg_ret *r = &f->rets[f->nrets++];
        bool opt;
        int len;
        if (parse_type(c, &r->type, &opt, &r->mutable_, &r->alias, &len) < 0)
            return -1;
        if (r->type != TG_TENSOR && r->type != TG_TENSOR_LIST && r->type != TG_SCALAR &&
            r->type != TG_INT && r->type != TG_FLOAT && r->type != TG_BOOL)
            return cur_error(c, c->i, "unsupported return type", tg_type_name(r->type));
        skip_ws(c);
        size_t n = ident_len(c->s + c->i);
        if (n) {
            r->name = xstrndup(c->s + c->i, n);
            c->i += n;
        }
        skip_ws(c);
        if (c->i != end)
            return cur_error(c, c->i, "unexpected text in the returns", NULL);
        if (!c->s[c->i])
            break;
        if (c->s[c->i] == ')') {
            c->i++;
            break;
        }
        c->i++; /* ',' */
    }
    if (!tuple && f->nrets > 1)
        return cur_error(c, 0, "several returns need parentheses", NULL);
    skip_ws(c);
    if (c->s[c->i])
        return cur_error(c, c->i, "unexpected text after the returns", NULL);
    return 0;
}

static void make_names(struct tg_func *f, bool keep_tensor)
{
    /* overload tokens "Tensor" and "out" carry no meaning in C (unless
     * dropping "Tensor" would give another op's name: clamp.Tensor) */
    char suffix[128] = "";
    const char *p = f->overload;
    while (*p) {
        size_t n = strcspn(p, "_");
        if (!((n == 6 && !strncmp(p, "Tensor", 6) && !keep_tensor) ||
              (n == 3 && !strncmp(p, "out", 3)))) {
            size_t l = strlen(suffix);
            if (l + n + 2 < sizeof suffix) {
                suffix[l] = '_';
                for (size_t k = 0; k < n; k++)
                    suffix[l + 1 + k] = (char)tolower((unsigned char)p[k]);
                suffix[l + 1 + n] = 0;
            }
        }
        p += n;
        if (*p == '_')
            p++;
    }
    /* aten ops are tn_add; a plugin's ns::op is ns_op. ATen's underscore
     * ops (_softmax) are tn_underscore_softmax: tn__ names are the
     * library's private ones, which it does not export. */
    bool aten = !strcmp(f->ns, "aten");
    /* PyTorch's own other namespaces (torch_nn::, the custom ops of
     * torch.nn) are libtensor's ops too, exported as tn_<ns>_<op> */
    char ns[96];
    snprintf(ns, sizeof ns, "%s%s", strncmp(f->ns, "torch_", 6) ? "" : "tn_",
             aten ? "tn" : f->ns);
    snprintf(f->cname, sizeof f->cname, "%s_%s%s%s%s%s", ns,
             aten && f->name[0] == '_' ? "underscore_" : "", aten && f->name[0] == '_' ?
             f->name + 1 : f->name, suffix, f->inplace ? "_" : "", f->is_out ? "_out" : "");
    snprintf(f->ident, sizeof f->ident, "%s_%s%s%s", strcmp(f->ns, "aten") ? f->ns : "",
             f->name, f->inplace ? "_" : "", f->overload[0] ? "_" : "");
    size_t l = strlen(f->ident);
    snprintf(f->ident + l, sizeof f->ident - l, "%s", f->overload);
    if (f->ident[0] == '_')
        memmove(f->ident, f->ident + 1, strlen(f->ident));
    /* the redispatch entry: the public name with its prefix made private
     * (tn_fill_scalar_ -> tn__redispatch_fill_scalar_) */
    size_t pre = strcspn(f->cname, "_");
    snprintf(f->rdname, sizeof f->rdname, "%.*s__redispatch%.150s", (int)pre, f->cname,
             f->cname + pre);
}

/* Parses f->text (at line, col in the file). */
static int parse_func(struct tg_func *f)
{
    struct cursor c = {f->text, 0, f->line, f->col};
    const char *s = f->text;
    size_t n = ident_len(s);
    if (!n)
        return cur_error(&c, 0, "expected an operator name", NULL);
    f->ns = xstrdup("aten");
    if (s[n] == ':' && s[n + 1] == ':') {
        free(f->ns);
        f->ns = xstrndup(s, n);
        c.i = n + 2;
        n = ident_len(s + c.i);
        if (!n)
            return cur_error(&c, c.i, "expected an operator name after '::'", NULL);
    }
    f->inplace = s[c.i + n - 1] == '_' && n > 1 && s[c.i + n - 2] != '_';
    f->name = xstrndup(s + c.i, n - (f->inplace ? 1 : 0));
    c.i += n;
    if (s[c.i] == '.') {
        c.i++;
        n = ident_len(s + c.i);
        if (!n)
            return cur_error(&c, c.i, "expected an overload name after '.'", NULL);
        f->overload = xstrndup(s + c.i, n);
        c.i += n;
    } else {
        f->overload = xstrdup("");
    }
    if (s[c.i] != '(')
        return cur_error(&c, c.i, "expected '(' after the operator name", NULL);
    c.i++;
    bool kwonly = false;
    skip_ws(&c);
    if (s[c.i] == ')')
        c.i++;
    else
        for (;;) {
            skip_ws(&c);
            size_t end = item_end(s, c.i, ')');
            if (!s[end])
                return cur_error(&c, end, "missing ')' closing the arguments", NULL);
            if (s[c.i] == '*' && end == c.i + 1) {
                if (kwonly)
                    return cur_error(&c, c.i, "a second '*'", NULL);
                kwonly = true;
                c.i = end;
            } else {
                if (f->nargs == TG_MAX_ARGS)
                    return cur_error(&c, c.i, "too many arguments", NULL);
                struct tg_arg *a = &f->args[f->nargs];
                if (parse_arg(&c, end, a, kwonly) < 0)
                    return -1;
                for (int k = 0; k < f->nargs; k++)
                    if (!strcmp(f->args[k].name, a->name))
                        return cur_error(&c, end, "duplicate argument name", a->name);
                f->nargs++;
            }
            if (s[end] == ')') {
                c.i = end + 1;
                break;
            }
            c.i = end + 1;
        }
    skip_ws(&c);
    if (strncmp(s + c.i, "->", 2) != 0)
        return cur_error(&c, c.i, "expected '->' and the returns", NULL);
    c.i += 2;
    if (parse_returns(&c, f) < 0)
        return -1;

    /* torchgen's conventions, checked so that generated code can rely on them */
    int nout = 0;
    for (int k = 0; k < f->nargs; k++) {
        const struct tg_arg *a = &f->args[k];
        if (a->mutable_ && a->kwonly) {
            nout++;
            if (a->type != TG_TENSOR)
                return cur_error(&c, 0, "an out= argument must be a Tensor(a!)", a->name);
        } else if (nout)
            return cur_error(&c, 0, "out= arguments come last", a->name);
    }
    f->is_out = nout > 0;
    for (int k = 0; k < f->nargs; k++)
        if (f->args[k].mutable_ && !f->args[k].kwonly && !(k == 0 && f->inplace))
            return cur_error(&c, 0, "a Tensor(a!) argument is the self of an in-place op (name_) "
                             "or a keyword-only out= argument", f->args[k].name);
    if (f->is_out && f->inplace)
        return cur_error(&c, 0, "an operator is either in-place (name_) or has out= arguments",
                         NULL);
    if (f->inplace && (f->nargs == 0 || !f->args[0].mutable_ || f->args[0].type != TG_TENSOR))
        return cur_error(&c, 0, "an in-place operator's first argument must be Tensor(a!) self",
                         NULL);
    if ((f->inplace || f->is_out) &&
        (f->nrets < 1 || !f->rets[0].mutable_ || f->rets[0].type != TG_TENSOR))
        return cur_error(&c, 0, "an in-place or out= operator returns its Tensor(a!)", NULL);
    if (f->is_out && nout != f->nrets)
        return cur_error(&c, 0, "an out= operator returns each out= argument", NULL);
    make_names(f, false);
    return 0;
}

/* ------------------------------------------------------------------ YAML */

static const char *scalar(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

#define LINE(n) ((int)(n)->start_mark.line + 1)
#define COL(n) ((int)(n)->start_mark.column + 1)

static int parse_key_name(const char *k, enum tg_key *out)
{
    static const char *names[TG_NKEYS] = {"CPU", "CUDA", "Meta", "CompositeImplicitAutograd",
                                          "CompositeExplicitAutograd"};
    for (int i = 0; i < TG_NKEYS; i++)
        if (!strcmp(k, names[i])) {
            *out = (enum tg_key)i;
            return 0;
        }
    return -1;
}

static int is_c_ident(const char *s)
{
    return ident_len(s) == strlen(s) && s[0];
}

static int load_dispatch(yaml_document_t *doc, yaml_node_t *map, struct tg_func *f)
{
    if (map->type != YAML_MAPPING_NODE)
        return tg_error(LINE(map), COL(map), "dispatch: expected a mapping of keys to kernels");
    f->has_dispatch = true;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *ks = scalar(k), *vs = scalar(v);
        if (!ks || !vs)
            return tg_error(LINE(k), COL(k), "dispatch: keys and kernels are plain strings");
        if (!is_c_ident(vs))
            return tg_error(LINE(v), COL(v), "dispatch: kernel '%s' is not a C identifier", vs);
        /* "CPU, CUDA: kernel" names several keys */
        char *copy = xstrdup(ks), *save = NULL;
        for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            enum tg_key key;
            if (parse_key_name(tok, &key) < 0) {
                tg_error(LINE(k), COL(k), "dispatch: unknown dispatch key '%s' (known: CPU, CUDA, "
                         "Meta, CompositeImplicitAutograd, CompositeExplicitAutograd)", tok);
                free(copy);
                return -1;
            }
            if (f->kernel[key]) {
                tg_error(LINE(k), COL(k), "dispatch: key '%s' given twice", tok);
                free(copy);
                return -1;
            }
            f->kernel[key] = xstrdup(vs);
        }
        free(copy);
    }
    return 0;
}

static int load_entry(yaml_document_t *doc, yaml_node_t *map, struct tg_func *f)
{
    if (map->type != YAML_MAPPING_NODE)
        return tg_error(LINE(map), COL(map), "expected a mapping with a func: key");
    f->line = LINE(map);
    f->col = COL(map);
    yaml_node_t *func = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = scalar(k), *val = scalar(v);
        if (!key)
            return tg_error(LINE(k), COL(k), "keys are plain strings");
        if (!strcmp(key, "func")) {
            if (!val)
                return tg_error(LINE(v), COL(v), "func: expected a schema string");
            func = v;
        } else if (!strcmp(key, "dispatch")) {
            if (load_dispatch(doc, v, f) < 0)
                return -1;
        } else if (!strcmp(key, "structured")) {
            if (!val || (strcmp(val, "True") && strcmp(val, "False")))
                return tg_error(LINE(v), COL(v), "structured: expected True or False");
            f->structured = !strcmp(val, "True");
        } else if (!strcmp(key, "manual_cpp_binding")) {
            if (!val || (strcmp(val, "True") && strcmp(val, "False")))
                return tg_error(LINE(v), COL(v), "manual_cpp_binding: expected True or False");
            f->manual_binding = !strcmp(val, "True");
        } else if (!strcmp(key, "structured_delegate")) {
            if (!val)
                return tg_error(LINE(v), COL(v), "structured_delegate: expected name.overload");
            f->delegate = xstrdup(val);
        } else if (!strcmp(key, "structured_inherits")) {
            if (!val)
                return tg_error(LINE(v), COL(v), "structured_inherits: expected a class name");
            f->inherits = xstrdup(val);
        } else if (!strcmp(key, "variants")) {
            if (!val)
                return tg_error(LINE(v), COL(v), "variants: expected 'function', 'method' or both");
            char *copy = xstrdup(val), *save = NULL;
            for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
                if (!strcmp(t, "function"))
                    f->variant_function = true;
                else if (!strcmp(t, "method"))
                    f->variant_method = true;
                else {
                    free(copy);
                    return tg_error(LINE(v), COL(v), "variants: unknown variant '%s'", t);
                }
            }
            free(copy);
        } else if (!strcmp(key, "tags")) {
            if (val) {
                f->tags[f->ntags++] = xstrdup(val);
            } else if (v->type == YAML_SEQUENCE_NODE) {
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     it < v->data.sequence.items.top; it++) {
                    yaml_node_t *t = yaml_document_get_node(doc, *it);
                    if (!scalar(t))
                        return tg_error(LINE(t), COL(t), "tags: expected tag names");
                    if (f->ntags == TG_MAX_TAGS)
                        return tg_error(LINE(t), COL(t), "tags: too many tags");
                    f->tags[f->ntags++] = xstrdup(scalar(t));
                }
            } else
                return tg_error(LINE(v), COL(v), "tags: expected a tag or a list of tags");
        } else if (!strcmp(key, "device_check") || !strcmp(key, "device_guard") ||
                   !strcmp(key, "python_module") ||
                   !strcmp(key, "category_override") || !strcmp(key, "autogen") ||
                   !strcmp(key, "cpp_no_default_args") || !strcmp(key, "precomputed")) {
            /* PyTorch fields with no meaning for C: accepted, ignored */
        } else {
            return tg_error(LINE(k), COL(k), "unknown field '%s'", key);
        }
    }
    if (!func)
        return tg_error(f->line, f->col, "entry has no func: key");
    f->text = xstrdup(scalar(func));
    f->line = LINE(func);
    f->col = COL(func);
    /* a quoted string starts one column later */
    if (func->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
        func->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE)
        f->col++;
    if (!f->variant_function && !f->variant_method)
        f->variant_function = true;
    if (parse_func(f) < 0)
        return -1;
    if (f->manual_binding) /* the public name is lib/core's */
        snprintf(f->cname, sizeof f->cname, "tn__op_%.150s", f->ident);
    return 0;
}

int tg_check_generatable(const struct tg_schema *s)
{
    tg_path = s->path;
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *f = &s->funcs[i];
        bool tensors = f->nrets >= 1 && (f->nargs > 0 || f->nrets == 1);
        for (int k = 0; k < f->nrets; k++)
            tensors = tensors && f->rets[k].type == TG_TENSOR;
        /* a functional op may return one Tensor[] (split, unbind) */
        bool list = f->nrets == 1 && f->rets[0].type == TG_TENSOR_LIST && f->nargs > 0 &&
                    !f->inplace && !f->is_out && !f->structured && !f->delegate;
        if ((!tensors && !list) || (f->inplace && f->nrets != 1))
            return tg_error(f->line, f->col, "%s: only operators returning Tensors (one, a "
                            "tuple of them from arguments, or a Tensor[]) can be generated yet "
                            "(--list shows them all)", f->cname);
    }
    return 0;
}

const struct tg_func *tg_find(const struct tg_schema *s, const char *name)
{
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *f = &s->funcs[i];
        char full[256];
        snprintf(full, sizeof full, "%s%s%s%s", f->name, f->inplace ? "_" : "",
                 f->overload[0] ? "." : "", f->overload);
        if (!strcmp(full, name))
            return f;
    }
    return NULL;
}

static bool has_tensor_token(const char *overload)
{
    for (const char *p = overload; *p;) {
        size_t n = strcspn(p, "_");
        if (n == 6 && !strncmp(p, "Tensor", 6))
            return true;
        p += n + (p[n] == '_');
    }
    return false;
}

/* Cross-entry checks: unique names, delegates that exist and fit. First,
 * an overload whose C name without its "Tensor" token is another op's
 * keeps the token (clamp.Tensor: tn_clamp_tensor beside clamp's tn_clamp),
 * whichever is declared first; of two with the token whose names meet, the
 * later keeps it (isin.Scalar_Tensor: tn_isin_scalar_tensor beside
 * isin.Tensor_Scalar's tn_isin_scalar). */
static int check_schema(struct tg_schema *s)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        for (int j = 0; j < s->nfuncs && has_tensor_token(f->overload); j++)
            if (j != i && !strcmp(s->funcs[j].cname, f->cname) &&
                (j < i || !has_tensor_token(s->funcs[j].overload))) {
                make_names(f, true);
                break;
            }
    }
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        for (int j = 0; j < i; j++) {
            if (!strcmp(s->funcs[j].ident, f->ident) && !strcmp(s->funcs[j].ns, f->ns))
                return tg_error(f->line, f->col, "%s.%s is declared twice (first at line %d)",
                                f->name, f->overload, s->funcs[j].line);
            if (!strcmp(s->funcs[j].cname, f->cname))
                return tg_error(f->line, f->col, "C name %s is taken by line %d", f->cname,
                                s->funcs[j].line);
        }
        if (f->structured && !f->is_out)
            return tg_error(f->line, f->col, "structured: True belongs on an out= overload");
        if (f->structured && !f->kernel[TG_KEY_CPU] && !f->kernel[TG_KEY_CUDA])
            return tg_error(f->line, f->col, "a structured op needs a CPU or CUDA kernel");
        if (f->delegate) {
            if (f->has_dispatch)
                return tg_error(f->line, f->col, "structured_delegate and dispatch exclude each "
                                "other");
            const struct tg_func *d = tg_find(s, f->delegate);
            if (!d || !d->structured)
                return tg_error(f->line, f->col, "structured_delegate: '%s' is not a structured "
                                "out= op in this file", f->delegate);
            /* the delegate takes the same arguments plus out= */
            int nin = 0;
            while (nin < d->nargs && !(d->args[nin].mutable_ && d->args[nin].kwonly))
                nin++;
            if (nin != f->nargs)
                return tg_error(f->line, f->col, "structured_delegate: '%s' takes other arguments",
                                f->delegate);
            for (int k = 0; k < nin; k++)
                if (d->args[k].type != f->args[k].type || d->args[k].optional != f->args[k].optional)
                    return tg_error(f->line, f->col, "structured_delegate: argument '%s' differs "
                                    "from '%s'", f->args[k].name, f->delegate);
            if (f->nrets != d->nrets)
                return tg_error(f->line, f->col, "structured_delegate: '%s' returns %d values, "
                                "not %d", f->delegate, d->nrets, f->nrets);
        } else if (!f->has_dispatch) {
            return tg_error(f->line, f->col, "no dispatch: and no structured_delegate: (a "
                            "CompositeImplicitAutograd op names its C function under dispatch:)");
        }
    }
    return 0;
}

int tg_load(const char *path, struct tg_schema *out)
{
    memset(out, 0, sizeof *out);
    out->path = path;
    tg_path = path;
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!fp) {
        fprintf(stderr, "tgen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* read it whole, with a limit, so a huge input cannot exhaust memory */
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += got;
        if (len == cap) {
            if (cap >= TG_MAX_FILE) {
                fprintf(stderr, "tgen: %s: larger than %u bytes\n", path, TG_MAX_FILE);
                free(buf);
                buf = NULL;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int rerr = ferror(fp) ? (errno ? errno : EIO) : 0;
    if (fp != stdin)
        fclose(fp);
    if (!buf || rerr) {
        if (rerr)
            fprintf(stderr, "tgen: %s: %s\n", path, strerror(rerr));
        free(buf);
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    int rc = -1;
    if (!yaml_parser_load(&parser, &doc)) {
        tg_error((int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "%s%s%s",
                 parser.problem ? parser.problem : "invalid YAML", parser.context ? " " : "",
                 parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        free(buf);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = 0; /* an empty file declares nothing */
        goto done;
    }
    if (root->type != YAML_SEQUENCE_NODE) {
        tg_error(LINE(root), COL(root), "expected a list of entries (- func: ...)");
        goto done;
    }
    int n = (int)(root->data.sequence.items.top - root->data.sequence.items.start);
    if (n > TG_MAX_FUNCS) {
        tg_error(LINE(root), COL(root), "more than %d entries", TG_MAX_FUNCS);
        goto done;
    }
    out->funcs = calloc((size_t)n + 1, sizeof *out->funcs);
    if (!out->funcs)
        goto done;
    for (int i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(&doc, root->data.sequence.items.start[i]);
        out->nfuncs = i + 1;
        if (load_entry(&doc, e, &out->funcs[i]) < 0)
            goto done;
    }
    rc = check_schema(out);
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(buf);
    return rc;
}

void tg_free(struct tg_schema *s)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        free(f->text);
        free(f->ns);
        free(f->name);
        free(f->overload);
        for (int k = 0; k < f->nargs; k++) {
            free(f->args[k].name);
            free(f->args[k].def);
        }
        for (int k = 0; k < f->nrets; k++)
            free(f->rets[k].name);
        for (int k = 0; k < TG_NKEYS; k++)
            free(f->kernel[k]);
        free(f->delegate);
        free(f->inherits);
        for (int k = 0; k < f->ntags; k++)
            free(f->tags[k]);
    }
    free(s->funcs);
    memset(s, 0, sizeof *s);
}
