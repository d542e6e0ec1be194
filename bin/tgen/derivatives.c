/*
 * bin/tgen/derivatives.c: reads a derivatives.yaml in PyTorch's field names:
 *
 *   - name: mul.Tensor(Tensor self, Tensor other) -> Tensor
 *     self: grad * other
 *     other: grad * self
 *
 * `name` holds the op's name.overload, optionally followed by its schema
 * (as PyTorch writes it); each other key names one Tensor input and holds
 * its formula (autograd.c compiles it), or names several ("input, weight,
 * bias") whose gradients one call of an op returning a tuple gives.
 * `output_differentiability` says which results of an op returning a tuple
 * get a history; `result` (a forward-mode formula) and `dispatch` are
 * accepted and not used.
 * The YAML is untrusted: its size is bounded and errors name
 * file:line:column.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "tgen.h"

#define TG_MAX_DERIV_FILE (16u << 20)

static const char *d_path;

static int d_error(int line, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int d_error(int line, int col, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d:%d: ", d_path, line, col);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static char *dup_or_die(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) {
        fputs("tgen: out of memory\n", stderr);
        exit(2);
    }
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

#define LINE(n) ((int)(n)->start_mark.line + 1)
#define COL(n) ((int)(n)->start_mark.column + 1)

static const char *scalar_of(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* PyTorch's CamelCase of an op name (each '_'-separated word title-cased,
 * so a letter after a digit is upper case too): "log_softmax" ->
 * "LogSoftmax", "max_pool2d" -> "MaxPool2D", "log1p" -> "Log1P" */
static void camel(const char *name, char *out, size_t len)
{
    size_t k = 0, n = strlen(name);
    bool up = true;
    /* and without a "_forward" suffix: nll_loss_forward -> NllLoss */
    if (n > 8 && !strcmp(name + n - 8, "_forward"))
        n -= 8;
    for (const char *p = name; p < name + n && k + 1 < len; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        out[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        up = !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'));
    }
    out[k] = 0;
}

/* PyTorch numbers a node by the entries of ITS derivatives.yaml with the
 * same op name before it (AddBackward1 is add.Scalar's); where ours holds
 * fewer of them before an op, the number PyTorch's grad_fn shows. */
static const struct {
    const char *op;
    int nr;
} torch_node_nr[] = {
    {"clamp", 1},          {"div.Tensor_mode", 2},  {"fmod.Tensor", 1},  {"remainder.Tensor", 1},
    {"pow.Tensor_Tensor", 1}, {"mean.dim", 1},     {"sum.dim_IntList", 1}, {"lerp.Tensor", 1},
    {"sum", 0},            {"mean", 0},             {"div.Scalar", 1},
};

static int node_number(const struct tg_derivs *ds, int i)
{
    for (size_t k = 0; k < sizeof torch_node_nr / sizeof torch_node_nr[0]; k++)
        if (!strcmp(torch_node_nr[k].op, ds->d[i].name))
            return torch_node_nr[k].nr;
    int same = 0;
    for (int j = 0; j < i; j++)
        same += !strcmp(ds->d[j].fn->name, ds->d[i].fn->name);
    return same;
}

static struct tg_func *find_op(struct tg_schema *s, const char *name)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        char full[256];
        snprintf(full, sizeof full, "%s%s%s", f->name, f->overload[0] ? "." : "", f->overload);
        if (!f->inplace && !f->is_out && !strcmp(full, name))
            return f;
    }
    return NULL;
}

/* Adds the formula `key: value` (scalars) to d. */
static int add_formula(struct tg_deriv *d, yaml_node_t *k, yaml_node_t *v)
{
    if (d->nf == TG_MAX_ARGS)
        return d_error(LINE(k), COL(k), "too many formulas");
    struct tg_formula *f = &d->f[d->nf++];
    f->input = dup_or_die(scalar_of(k), strlen(scalar_of(k)));
    f->expr = dup_or_die(scalar_of(v), strlen(scalar_of(v)));
    f->line = LINE(v);
    f->col = COL(v);
    return 0;
}

static int load_entry(yaml_document_t *doc, yaml_node_t *map, struct tg_schema *s,
                      struct tg_deriv *d)
{
    if (map->type != YAML_MAPPING_NODE)
        return d_error(LINE(map), COL(map), "expected a mapping with a name: key");
    d->line = LINE(map);
    d->col = COL(map);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = scalar_of(k), *val = scalar_of(v);
        if (!key)
            return d_error(LINE(k), COL(k), "keys are plain strings");
        if (!strcmp(key, "name")) {
            if (!val)
                return d_error(LINE(v), COL(v), "name: expected name.overload");
            d->name = dup_or_die(val, strcspn(val, "( "));
            continue;
        }
        if (!strcmp(key, "output_differentiability")) {
            if (v->type != YAML_SEQUENCE_NODE)
                return d_error(LINE(v), COL(v), "output_differentiability: expected a list");
            int nd = 0;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++, nd++) {
                const char *b = scalar_of(yaml_document_get_node(doc, *it));
                if (nd == TG_MAX_RETS || !b || (strcmp(b, "True") && strcmp(b, "False")))
                    return d_error(LINE(v), COL(v), "output_differentiability: expected at most "
                                   "%d of True or False", TG_MAX_RETS);
                d->out_diff[nd] = !strcmp(b, "True");
            }
            d->n_out_diff = nd;
            continue;
        }
        if (!strcmp(key, "result") || !strcmp(key, "dispatch") ||
            !strcmp(key, "manual_cpp_binding"))
            continue;
        if (!val)
            return d_error(LINE(v), COL(v), "%s: expected a formula", key);
        if (add_formula(d, k, v) < 0)
            return -1;
    }
    if (!d->name)
        return d_error(d->line, d->col, "an entry without name:");
    d->fn = find_op(s, d->name);
    if (!d->fn)
        return d_error(d->line, d->col, "name: '%s' is not a functional op of the schema",
                       d->name);
    for (int r = 0; r < d->fn->nrets; r++)
        if (d->fn->rets[r].type != TG_TENSOR)
            return d_error(d->line, d->col, "'%s': only ops returning Tensors are differentiated "
                           "so far", d->name);
    if (d->n_out_diff && d->n_out_diff != d->fn->nrets)
        return d_error(d->line, d->col, "'%s': output_differentiability has %d entries for %d "
                       "results", d->name, d->n_out_diff, d->fn->nrets);
    for (int r = d->n_out_diff; r < d->fn->nrets; r++)
        d->out_diff[r] = true;
    for (int i = 0; i < d->nf; i++) {
        struct tg_formula *f = &d->f[i];
        for (const char *p = f->input; *p;) {
            p += strspn(p, ", ");
            size_t n = strcspn(p, ", ");
            if (!n)
                break;
            int a = 0;
            while (a < d->fn->nargs && (strlen(d->fn->args[a].name) != n ||
                                        strncmp(d->fn->args[a].name, p, n)))
                a++;
            if (a == d->fn->nargs || d->fn->args[a].type != TG_TENSOR)
                return d_error(f->line, f->col, "'%.*s' is not a Tensor argument of %s", (int)n,
                               p, d->name);
            if (f->nin == TG_MAX_RETS)
                return d_error(f->line, f->col, "too many inputs in one key");
            f->arg[f->nin++] = a;
            p += n;
        }
        if (!f->nin)
            return d_error(f->line, f->col, "a formula without an input");
        for (int j = 0; j < i; j++)
            for (int x = 0; x < d->f[j].nin; x++)
                for (int y = 0; y < f->nin; y++)
                    if (d->f[j].arg[x] == f->arg[y])
                        return d_error(f->line, f->col, "'%s' has a formula already",
                                       d->fn->args[f->arg[y]].name);
    }
    return 0;
}

/* A `define:` entry: an op-level definition of a helper that formulas
 * call (`_gelu_bw`), as formulas over ops, one per result:
 *
 *   - define: _gelu_bw(grad, self, approximate='none')
 *     result: grad * (...)
 *
 * A parameter written name='text' makes the definition serve the calls
 * whose argument is that string. Graph autograd (lib/compile/joint.c)
 * expands these; the eager engine calls the C helper of the same name. */
static int load_define(yaml_document_t *doc, yaml_node_t *map, struct tg_deriv *d)
{
    d->line = LINE(map);
    d->col = COL(map);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = scalar_of(k), *val = scalar_of(v);
        if (!key || !val)
            return d_error(LINE(k), COL(k), "define: expected keys with formulas");
        if (!strcmp(key, "define")) {
            size_t n = strcspn(val, "(");
            const char *close = strrchr(val, ')');
            if (!n || !val[n] || !close || close < val + n)
                return d_error(LINE(v), COL(v), "define: expected name(parameters)");
            d->name = dup_or_die(val, n);
            d->params = dup_or_die(val + n + 1, (size_t)(close - val - n - 1));
            continue;
        }
        if (strncmp(key, "result", 6) || strspn(key + 6, "0123456789") != strlen(key + 6))
            return d_error(LINE(k), COL(k), "define: '%s' is not result or result<k>", key);
        if (add_formula(d, k, v) < 0)
            return -1;
    }
    if (!d->name || !d->nf)
        return d_error(d->line, d->col, "define: needs a name(parameters) and a result");
    return 0;
}

/* fn and its in-place overload (same name and overload, same arguments).
 * out= overloads get mark_out_check's kernel instead. */
static void name_kernels(struct tg_schema *s, struct tg_func *fn)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        if (strcmp(f->name, fn->name) || strcmp(f->ns, fn->ns) || f->is_out ||
            strcmp(f->overload, fn->overload) || f->nargs != fn->nargs)
            continue;
        snprintf(f->autograd, sizeof f->autograd, "tn__autograd_%s", f->ident);
    }
}

/* The ops with a kernel of their own (not a decomposition), a Tensor
 * argument, one Tensor return that is not a view, and no entry: PyTorch
 * records for them a node whose backward says the derivative is not
 * implemented, rather than a result that silently does not require grad.
 * out= overloads still run below Autograd; of an op returning a tuple,
 * the floating results take the node. */
/* The comparisons, whose functional result is always bool: no node can
 * record on it (tn__ad_noderiv_result returns a bool result as it is), so
 * they get no Autograd kernel and dispatch falls through to their kernel.
 * Their in-place forms (eq_: self's dtype) keep one. */
static bool bool_result(const struct tg_func *f)
{
    static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    if (f->inplace || strcmp(f->ns, "aten"))
        return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(f->name, names[i]))
            return true;
    return false;
}

static int mark_no_derivative(struct tg_schema *s)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        bool own = f->delegate || f->kernel[TG_KEY_CPU] || f->kernel[TG_KEY_CUDA] ||
                   f->kernel[TG_KEY_META] || f->kernel[TG_KEY_EXPLICIT];
        bool tensor_arg = false, tensors = f->nrets >= 1 && (f->nrets == 1 || !f->inplace);
        for (int a = 0; a < f->nargs; a++)
            tensor_arg |= f->args[a].type == TG_TENSOR;
        for (int r = 0; r < f->nrets; r++)
            tensors &= f->rets[r].type == TG_TENSOR;
        if (f->autograd[0] || f->is_out || !own || f->kernel[TG_KEY_IMPLICIT] || !tensor_arg ||
            !tensors || bool_result(f))
            continue;
        /* a view (`Tensor(a)`) shares its input's history; in place needs self first */
        if (f->inplace ? !(f->args[0].type == TG_TENSOR && f->args[0].mutable_)
                       : f->rets[0].alias != 0)
            continue;
        char cc[80];
        camel(f->name, cc, sizeof cc);
        if (snprintf(f->node, sizeof f->node, "%sBackward0", cc) >= (int)sizeof f->node) {
            fprintf(stderr, "tgen: %s: name too long\n", f->name);
            return -1;
        }
        f->no_derivative = true;
        snprintf(f->autograd, sizeof f->autograd, "tn__autograd_%s", f->ident);
    }
    return 0;
}

/* The out= overloads with a Tensor argument: PyTorch refuses them when an
 * argument requires grad (grad mode on) rather than writing a result
 * without history. No kernel is generated: their op table's Autograd slot
 * holds lib/dispatch's marker, tn_dispatch_out_requires_grad, which the
 * dispatch answers with that refusal (gen.c). */
static void mark_out_check(struct tg_schema *s)
{
    for (int i = 0; i < s->nfuncs; i++) {
        struct tg_func *f = &s->funcs[i];
        bool tensor_arg = false;
        for (int a = 0; a < f->nargs; a++)
            tensor_arg |= f->args[a].type == TG_TENSOR;
        if (!f->is_out || f->autograd[0] || !tensor_arg)
            continue;
        f->out_check = true;
    }
}

int tg_load_derivatives(const char *path, struct tg_schema *s, struct tg_derivs *out)
{
    memset(out, 0, sizeof *out);
    out->path = path;
    d_path = path;
    struct stat st;
    FILE *fp = fopen(path, "rb");
    if (!fp || fstat(fileno(fp), &st) < 0) {
        fprintf(stderr, "tgen: %s: %s\n", path, strerror(errno));
        if (fp)
            fclose(fp);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tgen: %s: %s\n", path, strerror(EISDIR));
        fclose(fp);
        return -1;
    }
    if ((uint64_t)st.st_size > TG_MAX_DERIV_FILE) {
        fprintf(stderr, "tgen: %s: larger than %u bytes\n", path, TG_MAX_DERIV_FILE);
        fclose(fp);
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, fp);
    int rc = -1;
    if (!yaml_parser_load(&parser, &doc)) {
        d_error((int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "%s",
                parser.problem ? parser.problem : "invalid YAML");
        yaml_parser_delete(&parser);
        fclose(fp);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = 0;
        goto done;
    }
    if (root->type != YAML_SEQUENCE_NODE) {
        d_error(LINE(root), COL(root), "expected a list of entries (- name: ...)");
        goto done;
    }
    int n = (int)(root->data.sequence.items.top - root->data.sequence.items.start);
    out->d = calloc((size_t)n + 1, sizeof *out->d);
    out->defs = calloc((size_t)n + 1, sizeof *out->defs);
    if (!out->d || !out->defs)
        goto done;
    for (int k = 0; k < n; k++) {
        yaml_node_t *e = yaml_document_get_node(&doc, root->data.sequence.items.start[k]);
        yaml_node_t *k0 = e->type == YAML_MAPPING_NODE && e->data.mapping.pairs.start <
                                                              e->data.mapping.pairs.top
                              ? yaml_document_get_node(&doc, e->data.mapping.pairs.start->key)
                              : NULL;
        if (scalar_of(k0) && !strcmp(scalar_of(k0), "define")) {
            if (load_define(&doc, e, &out->defs[out->ndefs++]) < 0)
                goto done;
            continue;
        }
        int i = out->n++;
        if (load_entry(&doc, e, s, &out->d[i]) < 0)
            goto done;
        for (int j = 0; j < i; j++)
            if (out->d[j].fn == out->d[i].fn) {
                d_error(out->d[i].line, out->d[i].col, "'%s' has an entry already (line %d)",
                        out->d[i].name, out->d[j].line);
                goto done;
            }
        /* PyTorch's node names: the op in CamelCase, "Backward", and the
         * count of earlier entries of the same op name (PyTorch's) */
        char cc[80];
        camel(out->d[i].fn->name, cc, sizeof cc);
        if (snprintf(out->d[i].node, sizeof out->d[i].node, "%sBackward%d", cc,
                     node_number(out, i)) >=
            (int)sizeof out->d[i].node) {
            d_error(out->d[i].line, out->d[i].col, "'%s': name too long", out->d[i].name);
            goto done;
        }
        name_kernels(s, out->d[i].fn);
    }
    rc = mark_no_derivative(s);
    mark_out_check(s);
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(fp);
    return rc;
}

void tg_free_derivatives(struct tg_derivs *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->d[i].name);
        for (int k = 0; k < d->d[i].nf; k++) {
            free(d->d[i].f[k].input);
            free(d->d[i].f[k].expr);
        }
    }
    free(d->d);
    for (int i = 0; i < d->ndefs; i++) {
        free(d->defs[i].name);
        free(d->defs[i].params);
        for (int k = 0; k < d->defs[i].nf; k++) {
            free(d->defs[i].f[k].input);
            free(d->defs[i].f[k].expr);
        }
    }
    free(d->defs);
    memset(d, 0, sizeof *d);
}
