/*
 * test_compile_decomp: every op of lib/compile's decomposition table
 * against PyTorch on the op fixtures (the JSON files of tests/fixtures/ops,
 * written by real PyTorch): each fixture case of a table op becomes a node of a
 * graph (its tensors graph inputs, in their layouts: transposed ones
 * too), the graph is compiled (strict: no interpreter) and every output is
 * compared with PyTorch's, within a tolerance per dtype for floats (the
 * fused code rounds once where the eager kernels round per op) and
 * exactly for integers and bools. Many cases share one graph, so one C
 * compile serves them.
 */
#include "tn_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/compile.h>

#include "compile/internal.h"

#define PER_OP 8        /* cases of one op kept (varied: the fixtures sweep dtypes) */
#define PER_GRAPH 160   /* nodes of one graph */

static const char *const files[] = {"unary", "binary", "ternary", "reduce",
                                    "softmax", "loss", "embedding", "norm", "conv", "pool",
                                    "dropout", "pad", "upsample", "misc", "shape", "movement",
                                    "split", "conv_v2", "unary_v2", "reduce_v2", "misc_v2",
                                    "pool_v2", "norm_v2"};

struct batch {
    json_t *inputs, *outputs, *nodes, *tv;   /* the graph being built */
    struct tn_value *in;                     /* its input tensors */
    json_t *want[PER_GRAPH];                 /* per node: PyTorch's output */
    char what[PER_GRAPH][96];
    int n;
};

static char cache[64];
static int ran, differ, fused;

static void batch_reset(struct batch *b)
{
    b->inputs = json_array();
    b->outputs = json_array();
    b->nodes = json_array();
    b->tv = json_object();
    b->in = tn_value_dict();
    b->n = 0;
}

static json_t *meta_of(const struct tn_tensor *t)
{
    json_t *sizes = json_array();
    for (int d = 0; d < t->ndim; d++)
        json_array_append_new(sizes, json_pack("{sI}", "as_int", (json_int_t)t->sizes[d]));
    return json_pack("{sisosb}", "dtype", tn_graph_scalar_type(t->dtype), "sizes", sizes,
                     "requires_grad", 0);
}

/* "aten::add.Tensor" -> "torch.ops.aten.add.Tensor"; no overload: .default */
static void target_of(const char *op, char *buf, size_t len)
{
    const char *name = strstr(op, "::") + 2;
    snprintf(buf, len, "torch.ops.aten.%s%s", name, strchr(name, '.') ? "" : ".default");
}

/* Case c as node i of the batch; false when it has an argument kind a
 * graph cannot say. */
static bool add_case(struct batch *b, json_t *c, const char *op, const char *file, size_t ci)
{
    char target[128], name[32];
    target_of(op, target, sizeof target);
    const struct tn_op *sop = tn_graph_op(target);
    if (!sop)
        return false;
    json_t *args = json_object_get(c, "args"), *ins = json_array();
    size_t k;
    json_t *a;
    struct tn_tensor *made[16] = {0};
    int nmade = 0;
    json_array_foreach(args, k, a) {
        if (k >= (size_t)sop->nargs || nmade >= 16)
            goto refuse;
        json_t *v, *arg;
        if ((v = json_object_get(a, "tensor"))) {
            struct tn_tensor *t = tn_test_tensor(v);
            if (!t)
                goto refuse;
            if (json_is_true(json_object_get(a, "transpose"))) {
                struct tn_tensor *tt = tn_transpose(t, 0, 1);
                tn_release(t);
                t = tt;
            }
            made[nmade++] = t;
            snprintf(name, sizeof name, "n%d_a%zu", b->n, k);
            arg = json_pack("{s{ss}}", "as_tensor", "name", name);
        } else if ((v = json_object_get(a, "int"))) {
            arg = json_pack("{sI}", "as_int", json_integer_value(v));
        } else if ((v = json_object_get(a, "float"))) {
            arg = json_pack("{sf}", "as_float", json_real_value(v));
        } else if ((v = json_object_get(a, "bool"))) {
            arg = json_pack("{sb}", "as_bool", json_is_true(v));
        } else if ((v = json_object_get(a, "ints"))) {
            arg = json_pack("{sO}", "as_ints", v);
        } else if ((v = json_object_get(a, "dtype"))) {
            arg = json_pack("{si}", "as_scalar_type",
                            tn_graph_scalar_type(tn_test_dtype(json_string_value(v))));
        } else if ((v = json_object_get(a, "str"))) {
            arg = json_pack("{ss}", "as_string", json_string_value(v));
        } else if (json_object_get(a, "none")) {
            arg = json_pack("{sb}", "as_none", 1);
        } else {
            goto refuse; /* float_text (inf, nan), tensor lists, floats */
        }
        json_array_append_new(ins, json_pack("{sssosi}", "name", sop->args[k].name, "arg", arg,
                                             "kind", 1));
    }
    /* the inputs, now that the case is whole */
    for (int i = 0, t = 0; i < (int)json_array_size(args); i++) {
        if (!json_object_get(json_array_get(args, (size_t)i), "tensor"))
            continue;
        snprintf(name, sizeof name, "n%d_a%d", b->n, i);
        json_array_append_new(b->inputs, json_pack("{s{ss}}", "as_tensor", "name", name));
        json_object_set_new(b->tv, name, meta_of(made[t]));
        assert_int_equal(tn_value_set(b->in, tn_value_str(name), tn_value_tensor(made[t])), 0);
        tn_release(made[t++]);
    }
    snprintf(name, sizeof name, "n%d", b->n);
    json_array_append_new(b->nodes, json_pack("{sssssos[{s{ss}}]s{}}", "name", name, "target",
                                              target, "inputs", ins, "outputs", "as_tensor",
                                              "name", name, "metadata"));
    json_array_append_new(b->outputs, json_pack("{s{ss}}", "as_tensor", "name", name));
    /* the output's meta, for ops without a Meta kernel */
    struct tn_tensor *w = tn_test_tensor(json_object_get(c, "out"));
    if (w)
        json_object_set_new(b->tv, name, meta_of(w));
    tn_release(w);
    b->want[b->n] = json_incref(json_object_get(c, "out")); /* outlives its file */
    snprintf(b->what[b->n], sizeof b->what[b->n], "%s case %zu (%s)", file, ci, op);
    b->n++;
    return true;
refuse:
    json_decref(ins);
    for (int i = 0; i < nmade; i++)
        tn_release(made[i]);
    return false;
}

/* |a - b| <= atol + rtol |b| for floats (NaN with NaN, infinities
 * equal), exact otherwise */
static int close_to(const struct tn_tensor *t, json_t *want, const char *what)
{
    struct tn_tensor *w = tn_test_tensor(want);
    assert_non_null(w);
    int rc = 0;
    if (t->dtype != w->dtype || t->ndim != w->ndim || tn_numel(t) != tn_numel(w)) {
        print_message("# %s: %s with %d dims, PyTorch's %s with %d\n", what,
                      tn_dtype_name(t->dtype), t->ndim, tn_dtype_name(w->dtype), w->ndim);
        tn_release(w);
        return -1;
    }
    /* complex64 (run through libtensor: no kernel computes it) as its
     * float32 parts */
    bool cx = t->dtype == TN_COMPLEX64;
    double rtol = t->dtype == TN_FLOAT16 ? 2e-3 : t->dtype == TN_BFLOAT16 ? 1.6e-2
                  : t->dtype == TN_FLOAT32 || cx ? 2e-5 : 1e-10;
    double atol = tn_dtype_is_floating(t->dtype) || cx ? rtol / 4 : 0;
    struct tn_tensor *tc0 = tn_contiguous(t), *wc0 = tn_contiguous(w);
    int64_t n = tn_numel(t) * (cx ? 2 : 1);
    struct tn_tensor *x = cx ? tn_from_data(tn_data(tc0), (int64_t[]){n}, 1, TN_FLOAT32)
                             : tn_to_dtype(tc0, TN_FLOAT64);
    struct tn_tensor *y = cx ? tn_from_data(tn_data(wc0), (int64_t[]){n}, 1, TN_FLOAT32)
                             : tn_to_dtype(wc0, TN_FLOAT64);
    struct tn_tensor *xc = tn_to_dtype(x, TN_FLOAT64), *yc = tn_to_dtype(y, TN_FLOAT64);
    tn_release(tc0);
    tn_release(wc0);
    const double *p = tn_data(xc), *q = tn_data(yc);
    for (int64_t i = 0; i < tn_numel(xc) && !rc; i++) {
        bool same = p[i] == q[i] || (isnan(p[i]) && isnan(q[i])) ||
                    (isfinite(q[i]) && fabs(p[i] - q[i]) <= atol + rtol * fabs(q[i]));
        if (!same) {
            print_message("# %s: element %lld is %.9g, PyTorch's %.9g\n", what, (long long)i,
                          p[i], q[i]);
            rc = -1;
        }
    }
    tn_release(x);
    tn_release(y);
    tn_release(xc);
    tn_release(yc);
    tn_release(w);
    return rc;
}

static void ignore(const char *node, const char *msg, void *ctx)
{
    (void)ctx;
    print_message("# check: node '%s': %s\n", node, msg);
}

static void run_batch(struct batch *b)
{
    if (!b->n)
        return;
    json_t *g = json_pack("{so so so so s{} s{}}", "inputs", b->inputs, "outputs", b->outputs,
                          "nodes", b->nodes, "tensor_values", b->tv, "sym_int_values",
                          "sym_bool_values");
    char *text = json_dumps(g, JSON_COMPACT);
    json_decref(g);
    struct tn_graph *gr = tn_graph_parse(text, strlen(text), "decomp.json", NULL);
    free(text);
    if (!gr)
        print_message("# %s\n", tn_last_error());
    assert_non_null(gr);
    assert_int_equal(tn_graph_check(gr, ignore, NULL), 0);
    struct tn_compile_options o = {.cache_dir = cache, .strict = true};
    struct tn_compiled *c = tn_compile_new(gr, &o);
    struct tn_value *out = NULL;
    int rc = tn_compile_run(c, NULL, b->in, &out);
    if (rc < 0)
        print_message("# %s\n", tn_last_error());
    assert_int_equal(rc, 0);
    /* "decomp.json: N nodes: M fused into ..." */
    char *ex = tn_compile_explain(c);
    const char *p = ex ? strstr(ex, "nodes: ") : NULL;
    if (p)
        fused += atoi(p + 7);
    free(ex);
    for (int i = 0; i < b->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        struct tn_value *t = tn_value_get(out, name);
        assert_non_null(t);
        ran++;
        differ += close_to(t->v.tensor, b->want[i], b->what[i]) != 0;
        json_decref(b->want[i]);
    }
    tn_value_release(out);
    tn_value_release(b->in);
    tn_compile_free(c);
    tn_graph_free(gr);
    batch_reset(b);
}

static void test_decompositions(void **state)
{
    (void)state;
    struct batch b;
    batch_reset(&b);
    int per_op[256] = {0};
    int covered = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/fixtures/ops/%s.json", TN_SRCDIR, files[f]);
        json_error_t err;
        json_t *fx = json_load_file(path, 0, &err);
        if (!fx) /* a renamed fixture must not drop its cases silently */
            fail_msg("%s: %s", path, err.text);
        size_t ci;
        json_t *c;
        json_array_foreach(json_object_get(fx, "cases"), ci, c) {
            const char *op = json_string_value(json_object_get(c, "op"));
            json_t *out = json_object_get(c, "out");
            if (!op || !json_is_object(out) || !json_is_array(json_object_get(out, "shape")) ||
                json_object_get(c, "error"))
                continue;
            char q[128];
            snprintf(q, sizeof q, "%s", op);
            int idx = -1;
            for (int i = 0; i < tn__decomp_count() && idx < 0; i++)
                if (!strcmp(tn__decomp_name(i), q))
                    idx = i;
            if (idx < 0 || per_op[idx] >= PER_OP)
                continue;
            if (add_case(&b, c, op, files[f], ci)) {
                covered += per_op[idx]++ == 0;
                if (b.n == PER_GRAPH)
                    run_batch(&b);
            }
        }
        json_decref(fx);
    }
    run_batch(&b);
    json_decref(b.inputs);
    json_decref(b.outputs);
    json_decref(b.nodes);
    json_decref(b.tv);
    tn_value_release(b.in);
    print_message("# %d cases of %d table ops compiled (%d fused into kernels, the rest "
                  "through libtensor: dtypes the generated code does not compute, arguments "
                  "it does not take), %d differ from PyTorch\n", ran, covered, fused, differ);
    assert_true(covered >= 50);
    assert_true(fused * 10 >= ran * 7);
    assert_int_equal(differ, 0);
}

int main(void)
{
    snprintf(cache, sizeof cache, "/tmp/tn-test-decomp-XXXXXX");
    if (!mkdtemp(cache))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decompositions),
    };
    int rc = TN_RUN_TESTS(tests);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    return system(cmd) == 0 ? rc : 1;
}
