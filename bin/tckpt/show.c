/*
 * bin/tckpt/show.c: tckpt show (the nested structure as a tree, or one
 * value: a tensor as PyTorch prints it, with statistics) and tckpt get
 * (one tensor as .npy bytes, or one value as text).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tckpt.h"

static void print_key(const struct tn_value *k)
{
    char buf[512];
    if (k->kind == TN_VALUE_STR || k->kind == TN_VALUE_INT)
        fputs(value_repr(k, buf, sizeof buf), stdout);
    else
        printf("<%s>", tn_value_kind_name(k->kind));
}

static void print_tree(const struct tn_value *v, int depth)
{
    char buf[1024];
    switch (v->kind) {
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        printf("%s (%s)\n", tn_value_kind_name(v->kind), plural(v->v.seq.n, "item", buf, sizeof buf));
        for (size_t i = 0; i < v->v.seq.n; i++) {
            printf("%*s[%zu]: ", 2 * (depth + 1), "", i);
            print_tree(v->v.seq.items[i], depth + 1);
        }
        return;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        printf("%s (%s)\n", tn_value_kind_name(v->kind), plural(v->v.dict.n, "item", buf, sizeof buf));
        for (size_t i = 0; i < v->v.dict.n; i++) {
            printf("%*s", 2 * (depth + 1), "");
            print_key(v->v.dict.keys[i]);
            printf(": ");
            print_tree(v->v.dict.vals[i], depth + 1);
        }
        if (v->v.dict.attrs)
            for (size_t i = 0; i < v->v.dict.attrs->v.dict.n; i++) {
                printf("%*s.", 2 * (depth + 1), "");
                print_key(v->v.dict.attrs->v.dict.keys[i]);
                printf(": ");
                print_tree(v->v.dict.attrs->v.dict.vals[i], depth + 1);
            }
        return;
    default:
        printf("%s\n", value_repr(v, buf, sizeof buf));
    }
}

/* Does `key` (a dotted path) start with this dict key or index?  Returns
 * what follows ("" for the whole key), or NULL. */
static const char *key_step(const char *key, const struct tn_value *k, size_t index, bool seq)
{
    char buf[512];
    const char *s = buf;
    if (seq)
        snprintf(buf, sizeof buf, "%zu", index);
    else if (k->kind == TN_VALUE_STR)
        s = k->v.str.s;
    else if (k->kind == TN_VALUE_INT)
        snprintf(buf, sizeof buf, "%lld", (long long)k->v.i);
    else
        return NULL;
    size_t n = strlen(s);
    if (strncmp(key, s, n))
        return NULL;
    if (!key[n])
        return "";
    return key[n] == '.' ? key + n + 1 : NULL;
}

/* The value at a dotted path ("model.0.weight", "epoch"), or NULL.  Dict
 * keys may hold dots themselves: every way of splitting is tried. */
static const struct tn_value *find_value(const struct tn_value *v, const char *key)
{
    bool seq = v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_LIST;
    if (!seq && v->kind != TN_VALUE_DICT && v->kind != TN_VALUE_ODICT)
        return NULL;
    size_t n = seq ? v->v.seq.n : v->v.dict.n;
    for (size_t i = 0; i < n; i++) {
        const char *rest = key_step(key, seq ? NULL : v->v.dict.keys[i], i, seq);
        if (!rest)
            continue;
        const struct tn_value *c = seq ? v->v.seq.items[i] : v->v.dict.vals[i];
        if (!*rest)
            return c;
        const struct tn_value *r = find_value(c, rest);
        if (r)
            return r;
    }
    return NULL;
}

static const struct tn_value *find_or_die(const struct input *in, const char *key)
{
    const struct tn_value *v = find_value(in->v, key);
    if (!v) {
        fprintf(stderr, "tckpt: %s: no key '%s'\n", in->path, key);
        exit(2);
    }
    return v;
}

static void print_stats(const struct tn_tensor *t)
{
    struct tn_tensor *c = tn_contiguous(t);
    if (!c)
        die_input();
    int64_t n = tn_numel(c), nan = 0, inf = 0, finite = 0;
    double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
    size_t es = tn_dtype_size(c->dtype);
    const char *p = tn_data(c);
    for (int64_t i = 0; i < n; i++) {
        double x = tn_scalar_to_double(tn_scalar_load(p + (size_t)i * es, c->dtype));
        if (isnan(x)) {
            nan++;
            continue;
        }
        if (isinf(x))
            inf++;
        if (x < mn)
            mn = x;
        if (x > mx)
            mx = x;
        if (isfinite(x)) {
            finite++;
            sum += x;
        }
    }
    double mean = finite ? sum / (double)finite : NAN;
    for (int64_t i = 0; i < n; i++) {
        double x = tn_scalar_to_double(tn_scalar_load(p + (size_t)i * es, c->dtype));
        if (isfinite(x))
            sq += (x - mean) * (x - mean);
    }
    double sd = finite > 1 ? sqrt(sq / (double)(finite - 1)) : NAN;
    printf("numel=%lld min=%.8g max=%.8g mean=%.8g std=%.8g nan=%lld inf=%lld\n", (long long)n,
           n - nan ? mn : NAN, n - nan ? mx : NAN, mean, sd, (long long)nan, (long long)inf);
    tn_release(c);
}

int cmd_show(const char *path, const char *key)
{
    struct input in;
    input_load_or_die(&in, path);
    const struct tn_value *v = key ? find_or_die(&in, key) : in.v;
    if (opt.json) {
        printf("{\"file\":");
        json_string_out(stdout, path);
        printf(",\"format\":\"%s\",", in.format);
        if (key) {
            printf("\"key\":");
            json_string_out(stdout, key);
            putchar(',');
        }
        printf("\"value\":");
        json_value_out(v);
        if (in.meta && !key) {
            printf(",\"metadata\":");
            json_value_out(in.meta);
        }
        printf("}\n");
    } else if (v->kind == TN_VALUE_TENSOR) {
        if (tn_print(stdout, v->v.tensor) < 0)
            die_input();
        print_stats(v->v.tensor);
    } else {
        print_tree(v, 0);
        if (in.meta && !key) {
            printf("__metadata__: ");
            print_tree(in.meta, 0);
        }
    }
    input_free(&in);
    return 0;
}

/* ----------------------------------------------------------------- get */

int cmd_get(const char *path, const char *key)
{
    const char *out = opt.output ? opt.output : "-";
    struct input in;
    input_load_or_die(&in, path);
    const struct tn_value *v = find_or_die(&in, key);
    if (v->kind == TN_VALUE_TENSOR) {
        /* .npy bytes would garble a terminal */
        if (!strcmp(out, "-") && isatty(STDOUT_FILENO)) {
            fprintf(stderr, "tckpt: get: %s is a tensor and standard output is a terminal: "
                    "use -o FILE.npy or a pipe\n", key);
            exit(2);
        }
        if (tn_npy_save(out, v->v.tensor) < 0)
            die_input();
    } else if (v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT ||
               v->kind == TN_VALUE_LIST || v->kind == TN_VALUE_TUPLE) {
        fprintf(stderr, "tckpt: %s: '%s' is a %s: name a tensor or a value inside it "
                "(tckpt show lists them)\n", path, key, tn_value_kind_name(v->kind));
        exit(2);
    } else {
        /* a value as Python prints it, on one line */
        char buf[1024];
        const char *s = value_repr(v, buf, sizeof buf);
        if (v->kind == TN_VALUE_STR)
            s = v->v.str.s;
        size_t n = strlen(s);
        char *line = malloc(n + 2);
        if (!line)
            die_input();
        memcpy(line, s, n);
        line[n] = '\n';
        if (tn_write_file(out, line, n + 1, false) < 0)
            die_input();
        free(line);
    }
    input_free(&in);
    return 0;
}
