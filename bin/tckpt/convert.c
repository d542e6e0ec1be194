/*
 * bin/tckpt/convert.c: tckpt convert between torch zip, safetensors and
 * npz, with --dtype casting the model's floating tensors and --keys
 * choosing what is written.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/dcp.h>

#include "tckpt.h"

/* Tensors cast once each: tensors shared in the input stay shared in the
 * output. */
struct castmap {
    struct tn_tensor **from, **to;
    size_t n, cap;
    struct progress *bar; /* "converting": bytes of the tensors read so far */
    uint64_t done;
    size_t selected; /* leaves --keys kept */
};

#define PATH_CAP 4096

static struct tn_tensor *cast_one(struct castmap *m, struct tn_tensor *t, bool cast)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->from[i] == t)
            return tn_retain(m->to[i]);
    struct tn_tensor *r;
    if (cast && opt.dtype != TN_DTYPE_UNSET && tn_dtype_is_floating(t->dtype) && t->dtype != opt.dtype) {
        r = tn_to_dtype(t, opt.dtype);
        if (r) {
            r->requires_grad = t->requires_grad;
            r->flags = t->flags;
        }
    } else {
        r = tn_retain(t);
    }
    if (!r)
        die_input();
    if (m->bar)
        progress_draw(m->done += tn_nbytes(t), m->bar);
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->from = realloc(m->from, m->cap * sizeof *m->from);
        m->to = realloc(m->to, m->cap * sizeof *m->to);
    }
    m->from[m->n] = t;
    m->to[m->n++] = r;
    return tn_retain(r);
}

/* A dict holding "state" and "param_groups": an optimizer's state_dict,
 * whose tensors (step counters, moments) are not the model's. */
static bool is_optimizer_state(const struct tn_value *v)
{
    return (v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT) && tn_value_get(v, "state") &&
           tn_value_get(v, "param_groups");
}

/* A copy of v's structure (under the key path in `path`) with the leaves
 * --keys selects, floating tensors of the model cast to --dtype; NULL
 * when nothing under v is selected. */
static struct tn_value *transform(struct castmap *m, struct tn_value *v, char *path, size_t len,
                                  bool optim)
{
    struct tn_value *r = NULL;
    bool seq = v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST;
    bool dict = v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT;
    if ((seq && v->v.seq.n) || (dict && v->v.dict.n)) {
        optim = optim || is_optimizer_state(v);
        size_t n = seq ? v->v.seq.n : v->v.dict.n;
        r = seq ? (v->kind == TN_VALUE_TUPLE ? tn_value_tuple() : tn_value_list())
                : (v->kind == TN_VALUE_DICT ? tn_value_dict() : tn_value_odict());
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            char key[64];
            const char *k = key;
            const struct tn_value *kv = seq ? NULL : v->v.dict.keys[i];
            if (seq)
                snprintf(key, sizeof key, "%zu", i);
            else if (kv->kind == TN_VALUE_STR)
                k = kv->v.str.s;
            else
                k = value_repr(kv, key, sizeof key);
            size_t kl = strlen(k), nl = len + (len ? 1 : 0) + kl;
            if (nl >= PATH_CAP)
                nl = len; /* absurdly deep: matched by its prefix */
            else {
                if (len)
                    path[len] = '.';
                memcpy(path + nl - kl, k, kl + 1);
            }
            struct tn_value *c = transform(m, seq ? v->v.seq.items[i] : v->v.dict.vals[i], path, nl, optim);
            path[len] = 0;
            if (!c)
                continue;
            kept++;
            if (seq)
                tn_value_append(r, c);
            else
                tn_value_set(r, tn_value_retain(v->v.dict.keys[i]), c);
        }
        if (!kept && opt.keys) {
            tn_value_release(r);
            return NULL;
        }
        if (dict && v->v.dict.attrs)
            r->v.dict.attrs = tn_value_retain(v->v.dict.attrs);
        return r;
    }
    if (opt.keys && fnmatch(opt.keys, path, 0) != 0)
        return NULL;
    m->selected++;
    if (v->kind != TN_VALUE_TENSOR)
        return tn_value_retain(v);
    struct tn_tensor *t = cast_one(m, v->v.tensor, !optim);
    r = tn_value_tensor(t);
    tn_release(t);
    return r;
}

static const char *format_of_name(const char *path)
{
    size_t n = strlen(path);
    if ((n && path[n - 1] == '/') || tn_dcp_is_dir(path))
        return "dcp";
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/'))
        return opt.shards ? "dcp" : NULL;
    if (!strcmp(dot, ".pt") || !strcmp(dot, ".pth") || !strcmp(dot, ".bin") || !strcmp(dot, ".ckpt"))
        return "torch";
    if (!strcmp(dot, ".safetensors"))
        return "safetensors";
    if (!strcmp(dot, ".npz"))
        return "npz";
    return opt.shards ? "dcp" : NULL;
}

static size_t count_values(const struct tn_value *v)
{
    size_t n = 0;
    switch (v->kind) {
    case TN_VALUE_TENSOR:
        return 0;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        for (size_t i = 0; i < v->v.seq.n; i++)
            n += count_values(v->v.seq.items[i]);
        return n;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        for (size_t i = 0; i < v->v.dict.n; i++)
            n += count_values(v->v.dict.vals[i]);
        return n;
    default:
        return 1;
    }
}


/* The bytes tn_save writes for v's tensors: each storage once. */
static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

static uint64_t output_bytes(const struct entries *l, bool by_storage)
{
    uint64_t total = 0;
    if (!by_storage) {
        for (size_t i = 0; i < l->n; i++)
            total += tn_nbytes(l->e[i].t);
        return total;
    }
    struct tn_storage **s = malloc((l->n + 1) * sizeof *s);
    if (!s)
        return 0;
    for (size_t i = 0; i < l->n; i++)
        s[i] = l->e[i].t->storage;
    qsort(s, l->n, sizeof *s, ptr_cmp);
    for (size_t i = 0; i < l->n; i++)
        if (!i || s[i] != s[i - 1])
            total += s[i]->nbytes;
    free(s);
    return total;
}


int cmd_convert(const char *in, const char *out)
{
    const char *to = opt.to ? opt.to : format_of_name(out);
    if (!to)
        usage_error("convert: cannot tell the format of '%s' from its name: use --to", out);
    if (strcmp(to, "torch") && strcmp(to, "safetensors") && strcmp(to, "npz") && strcmp(to, "dcp"))
        usage_error("--to: '%s' is not torch, safetensors, npz or dcp", to);
    if (opt.shards && strcmp(to, "dcp"))
        usage_error("--shards: '%s' is written as one file (--shards is for DCP folders)", out);
    struct input inp;
    input_load_or_die(&inp, in);
    struct tn_value *v = tn_value_retain(inp.v);
    if (opt.dtype != TN_DTYPE_UNSET || opt.keys) {
        struct progress cbar = {.what = "converting"};
        struct entries in_all = {0};
        collect_or_die(v, &in_all);
        cbar.total = opt.dtype != TN_DTYPE_UNSET ? output_bytes(&in_all, false) : 0;
        cbar.on = progress_wanted(cbar.total) && cbar.total;
        entries_free(&in_all);
        struct castmap m = {.bar = &cbar};
        char path[PATH_CAP] = "";
        struct tn_value *c = transform(&m, v, path, 0, false);
        progress_end(&cbar);
        for (size_t i = 0; i < m.n; i++)
            tn_release(m.to[i]);
        free(m.from);
        free(m.to);
        tn_value_release(v);
        if (!c || !m.selected) {
            fprintf(stderr, "tckpt: %s: no key matches --keys '%s'\n", in, opt.keys);
            tn_value_release(c);
            exit(2);
        }
        v = c;
    }
    int rc;
    struct progress bar = {.what = "writing"};
    {
        struct entries all = {0};
        collect_or_die(v, &all);
        bar.total = output_bytes(&all, !strcmp(to, "torch"));
        bar.on = progress_wanted(bar.total);
        entries_free(&all);
    }
    if (bar.on)
        tn_io_set_progress(progress_draw, &bar);
    if (!strcmp(to, "torch")) {
        struct tn_save_options so = {.layout = opt.layout};
        rc = tn_save(out, v, &so);
    } else if (!strcmp(to, "dcp")) {
        rc = tn_dcp_write(out, v, opt.shards ? opt.shards : 1);
    } else {
        /* Flat name -> tensor: what these formats can hold. */
        struct entries l = {0};
        collect_or_die(v, &l);
        struct tn_value *flat = tn_value_odict();
        size_t shared = 0;
        for (size_t i = 0; i < l.n; i++) {
            for (size_t j = 0; j < i; j++)
                if (l.e[j].t->storage == l.e[i].t->storage) {
                    shared++;
                    break;
                }
            tn_value_set(flat, tn_value_str(l.e[i].name), tn_value_tensor(l.e[i].t));
        }
        size_t dropped = count_values(v);
        char a[64];
        if (dropped)
            fprintf(stderr, "tckpt: note: %s holds only tensors: %s dropped\n", to,
                    plural(dropped, "other value", a, sizeof a));
        if (shared)
            fprintf(stderr, "tckpt: note: %s has no shared storage: %s that share%s "
                    "storage written as copies\n", to, plural(shared, "tensor", a, sizeof a),
                    shared == 1 ? "s" : "");
        if (!strcmp(to, "safetensors")) {
            struct tn_value *meta = tn_value_dict();
            tn_value_set(meta, tn_value_str("format"), tn_value_str("pt"));
            rc = tn_st_save(out, flat, meta);
            tn_value_release(meta);
        } else {
            rc = tn_npz_save(out, flat);
        }
        tn_value_release(flat);
        entries_free(&l);
    }
    tn_io_set_progress(NULL, NULL);
    progress_end(&bar);
    if (rc < 0)
        die_input();
    tn_value_release(v);
    input_free(&inp);
    return 0;
}

