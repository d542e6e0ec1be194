/*
 * test_graph: the JSON graph (lib/graph) on the models of
 * tests/fixtures/graph_models.py as PyTorch exported them (torch.export in
 * 2.x, torch.fx in 1.13, and .pt2 archives from torch.export.save): the
 * interpreter's outputs against PyTorch's, a symbolic batch run at another
 * size, write and read back; and malformed graphs, each refused with the
 * node's name and the reason, without a crash.
 */
#include "tn_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture(const char *torch, const char *name)
{
    static char buf[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/fixtures/graph/%s/%s", TN_SRCDIR, torch, name);
    return buf[k];
}

/* Whether every target of g is an op we have (the nn ops of lib/ops land
 * one by one: a model whose op is missing is skipped, not failed). */
static const char *missing_op(const struct tn_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (!tn_graph_op(g->nodes[i].target))
            return g->nodes[i].target;
    return NULL;
}

/* Largest |a - b| - rtol*|b| over the elements; prints the worst one. */
static int close_enough(const struct tn_tensor *a, const struct tn_tensor *b, double atol,
                        double rtol, const char *what)
{
    if (a->ndim != b->ndim || tn_numel(a) != tn_numel(b) || a->dtype != b->dtype) {
        print_message("# %s: %s[%d dims, %lld] against %s[%d dims, %lld]\n", what,
                      tn_dtype_name(a->dtype), a->ndim, (long long)tn_numel(a),
                      tn_dtype_name(b->dtype), b->ndim, (long long)tn_numel(b));
        return -1;
    }
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) {
            print_message("# %s: size %d is %lld, PyTorch's %lld\n", what, d,
                          (long long)a->sizes[d], (long long)b->sizes[d]);
            return -1;
        }
    struct tn_tensor *x = tn_to_dtype(a, TN_FLOAT64), *y = tn_to_dtype(b, TN_FLOAT64);
    struct tn_tensor *xc = tn_contiguous(x), *yc = tn_contiguous(y);
    const double *p = tn_data(xc), *q = tn_data(yc);
    int rc = 0;
    for (int64_t i = 0; i < tn_numel(xc); i++)
        if (!(fabs(p[i] - q[i]) <= atol + rtol * fabs(q[i]))) {
            print_message("# %s: element %lld is %.9g, PyTorch's %.9g\n", what, (long long)i,
                          p[i], q[i]);
            rc = -1;
            break;
        }
    tn_release(x);
    tn_release(y);
    tn_release(xc);
    tn_release(yc);
    return rc;
}

/* got holds every tensor of the dict want, by name, close to PyTorch's. */
static void same_tensors(const struct tn_value *got, const struct tn_value *want)
{
    assert_int_equal(got->v.dict.n, want->v.dict.n);
    for (size_t i = 0; i < want->v.dict.n; i++) {
        const char *name = want->v.dict.keys[i]->v.str.s;
        struct tn_value *x = tn_value_get(got, name);
        assert_non_null(x);
        assert_int_equal(close_enough(x->v.tensor, want->v.dict.vals[i]->v.tensor, 1e-5, 1e-4,
                                      name), 0);
    }
}

static void count_problem(const char *node, const char *msg, void *ctx)
{
    print_message("# problem: node '%s': %s\n", node, msg);
    ++*(int *)ctx;
}

/* Runs graph (with weights from its .pt2, or wfile) on inputs, and
 * compares every output with expected. Returns 1 when it ran, 0 when an
 * op is missing (skipped). */
static int run_model(const char *gpath, const char *wfile, const char *inputs,
                     const char *expected)
{
    struct tn_value *w = NULL;
    struct tn_graph *g = tn_graph_load(gpath, NULL, &w);
    if (!g)
        print_message("# %s\n", tn_last_error());
    assert_non_null(g);
    const char *miss = missing_op(g);
    if (miss) {
        print_message("# skipped %s: no operator for %s yet\n", gpath, miss);
        tn_graph_free(g);
        tn_value_release(w);
        return 0;
    }
    int problems = 0;
    assert_int_equal(tn_graph_check(g, count_problem, &problems), 0);
    if (wfile) {
        tn_value_release(w);
        w = tn_load(wfile, NULL);
        assert_non_null(w);
    }
    assert_non_null(w);
    struct tn_value *in = tn_load(inputs, NULL), *want = tn_load(expected, NULL), *out = NULL;
    assert_non_null(in);
    assert_non_null(want);
    int rc = tn_graph_run(g, w, in, &out, NULL);
    if (rc < 0)
        print_message("# %s\n", tn_last_error());
    assert_int_equal(rc, 0);
    same_tensors(out, want);
    tn_value_release(out);
    tn_value_release(in);
    tn_value_release(want);
    tn_value_release(w);
    tn_graph_free(g);
    return 1;
}

/* The models of tests/fixtures/graph_models.py, every one exported by
 * both PyTorch versions; "cat" holds lists of tensors (as_tensors:
 * torch.cat, torch.stack), whose ops get their shapes from the Meta pass
 * (a problem there fails run_model's check). */
static const char *const model_names[] = {"mlp", "cnn", "block", "text", "cat"};
#define NMODELS ((int)(sizeof model_names / sizeof *model_names))

static void models(const char *torch)
{
    const char *const *names = model_names;
    char g[64], w[64], i[64], e[64];
    int ran = 0;
    for (int k = 0; k < NMODELS; k++) {
        snprintf(g, sizeof g, "%s.json", names[k]);
        snprintf(w, sizeof w, "%s.pt", names[k]);
        snprintf(i, sizeof i, "%s_inputs.pt", names[k]);
        snprintf(e, sizeof e, "%s_expected.pt", names[k]);
        ran += run_model(fixture(torch, g), fixture(torch, w), fixture(torch, i),
                         fixture(torch, e));
    }
    assert_int_equal(ran, NMODELS); /* every op of the five models is there */
}

/* Graphs from torch.export (PyTorch 2.x): outputs equal PyTorch's. */
static void test_models_torch2(void **state)
{
    (void)state;
    models("torch2");
}

/* Graphs from torch.fx (PyTorch 1.13) through torch2graph's converter. */
static void test_models_torch1(void **state)
{
    (void)state;
    models("torch1");
}

/* Gradients of the sum of the outputs with respect to every parameter
 * equal PyTorch's (loss.backward() in torch2graph.py --grads), for every
 * model: the MLP, the CNN (conv2d, batch_norm, max_pool2d, avg_pool2d),
 * the transformer block (layer_norm, split, matmul, softmax, gelu), the
 * text classifier (embedding, mean) and the lists of tensors (cat, stack). */
static void grads(const char *torch)
{
    const char *const *names = model_names;
    char f[5][64];
    int ran = 0;
    for (int k = 0; k < NMODELS; k++) {
        snprintf(f[0], 64, "%s.json", names[k]);
        snprintf(f[1], 64, "%s.pt", names[k]);
        snprintf(f[2], 64, "%s_inputs.pt", names[k]);
        snprintf(f[3], 64, "%s_grads.pt", names[k]);
        struct tn_graph *g = tn_graph_load(fixture(torch, f[0]), NULL, NULL);
        assert_non_null(g);
        int problems = 0;
        assert_null(missing_op(g));
        assert_int_equal(tn_graph_check(g, count_problem, &problems), 0);
        struct tn_value *w = tn_load(fixture(torch, f[1]), NULL);
        struct tn_value *in = tn_load(fixture(torch, f[2]), NULL);
        struct tn_value *want = tn_load(fixture(torch, f[3]), NULL), *out = NULL, *got = NULL;
        assert_non_null(w);
        assert_non_null(in);
        assert_non_null(want);
        int rc = tn_graph_grad(g, w, in, &out, &got);
        if (rc < 0)
            print_message("# gradients of %s/%s: %s\n", torch, names[k], tn_last_error());
        assert_int_equal(rc, 0);
        same_tensors(got, want);
        ran++;
        tn_value_release(out);
        tn_value_release(got);
        tn_value_release(want);
        tn_value_release(in);
        tn_value_release(w);
        tn_graph_free(g);
    }
    assert_int_equal(ran, NMODELS);
}

static void test_grads_torch2(void **state)
{
    (void)state;
    grads("torch2");
}

static void test_grads_torch1(void **state)
{
    (void)state;
    grads("torch1");
}

/* .pt2 archives from torch.export.save, weights from the archive. */
static void test_pt2(void **state)
{
    (void)state;
    run_model(fixture("torch2", "mlp.pt2"), NULL, fixture("torch2", "mlp_inputs.pt"),
              fixture("torch2", "mlp_expected.pt"));
    run_model(fixture("torch2", "block.pt2"), NULL, fixture("torch2", "block_inputs.pt"),
              fixture("torch2", "block_expected.pt"));
}

/* The block's batch is symbolic (as_expr, range_constraints): traced at
 * 2, it runs at 3 and gives PyTorch's outputs; a batch outside the range
 * is refused by name. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    static const char *const torch[] = {"torch1", "torch2"};
    for (int k = 0; k < 2; k++) {
        run_model(fixture(torch[k], "block.json"), fixture(torch[k], "block.pt"),
                  fixture(torch[k], "block_b3_inputs.pt"), fixture(torch[k], "block_b3_expected.pt"));
        struct tn_graph *g = tn_graph_load(fixture(torch[k], "block.json"), NULL, NULL);
        assert_non_null(g);
        int v = tn_graph_find_value(g, "x");
        assert_true(v >= 0);
        assert_non_null(g->values[v].exprs[0]);
        assert_true(g->nsymbols >= 1);
        tn_graph_free(g);
    }
}

/* Written and read back, a graph checks and runs the same. */
static void test_roundtrip(void **state)
{
    (void)state;
    struct tn_graph *g = tn_graph_load(fixture("torch2", "block.json"), NULL, NULL);
    assert_non_null(g);
    int problems = 0;
    if (missing_op(g)) {
        tn_graph_free(g);
        TN_TEST_SKIP("the block's ops are not all there yet");
    }
    assert_int_equal(tn_graph_check(g, count_problem, &problems), 0);
    char *text = tn_graph_to_json(g);
    assert_non_null(text);
    struct tn_graph *h = tn_graph_parse(text, strlen(text), "written", NULL);
    free(text);
    assert_non_null(h);
    assert_int_equal(tn_graph_check(h, count_problem, &problems), 0);
    assert_int_equal(h->nnodes, g->nnodes);
    assert_int_equal(h->ninputs, g->ninputs);
    assert_int_equal(h->nsymbols, g->nsymbols);
    for (int i = 0; i < g->ninputs; i++) {
        assert_int_equal(h->inputs[i].kind, g->inputs[i].kind);
        if (g->inputs[i].target)
            assert_string_equal(h->inputs[i].target, g->inputs[i].target);
    }
    tn_graph_free(h);
    tn_graph_free(g);
}

/* ------------------------------------------------------- malformed graphs */

/* A small graph, as torch.export writes one: x -> relu -> neg (node
 * names r and n); %R and %N stand for the nodes' inputs, %T for relu's
 * target, %S for r's tensor_values sizes. */
static char *small_graph(const char *r_in, const char *n_in, const char *target,
                         const char *r_sizes)
{
    static const char fmt[] =
        "{\"graph_module\": {\"graph\": {"
        "\"inputs\": [{\"as_tensor\": {\"name\": \"x\"}}],"
        "\"outputs\": [{\"as_tensor\": {\"name\": \"n\"}}],"
        "\"nodes\": ["
        " {\"name\": \"r\", \"target\": \"%s\", \"inputs\": [%s],"
        "  \"outputs\": [{\"as_tensor\": {\"name\": \"r\"}}], \"metadata\": {}},"
        " {\"name\": \"n\", \"target\": \"torch.ops.aten.neg.default\", \"inputs\": [%s],"
        "  \"outputs\": [{\"as_tensor\": {\"name\": \"n\"}}], \"metadata\": {}}],"
        "\"tensor_values\": {"
        " \"x\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 2}, {\"as_int\": 3}]},"
        " \"r\": {\"dtype\": 7, \"sizes\": %s},"
        " \"n\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 2}, {\"as_int\": 3}]}}},"
        "\"signature\": {\"input_specs\": [{\"user_input\": {\"arg\": {\"as_tensor\": "
        "{\"name\": \"x\"}}}}], \"output_specs\": [{\"user_output\": {\"arg\": "
        "{\"as_tensor\": {\"name\": \"n\"}}}}]}}}";
    size_t len = sizeof fmt + strlen(r_in) + strlen(n_in) + strlen(target) + strlen(r_sizes);
    char *s = malloc(len);
    snprintf(s, len, fmt, target, r_in, n_in, r_sizes);
    return s;
}

#define ARG(name, value) "{\"name\": \"" name "\", \"arg\": {\"as_tensor\": {\"name\": \"" value "\"}}, \"kind\": 1}"
#define SIZES23 "[{\"as_int\": 2}, {\"as_int\": 3}]"
#define RELU "torch.ops.aten.relu.default"

struct seen {
    int n;
    char text[4096];
};

static void collect_problem(const char *node, const char *msg, void *ctx)
{
    struct seen *s = ctx;
    size_t k = strlen(s->text);
    snprintf(s->text + k, sizeof s->text - k, "[%s] %s\n", node, msg);
    s->n++;
}

/* Checks graph text: it reads, check finds problems, and their text holds
 * every string of want. */
static void expect_problem(char *text, const char *const *want, int nwant)
{
    struct tn_graph *g = tn_graph_parse(text, strlen(text), "bad.json", NULL);
    free(text);
    if (!g)
        print_message("# %s\n", tn_last_error());
    assert_non_null(g);
    struct seen s = {0};
    int rc = tn_graph_check(g, collect_problem, &s);
    print_message("# %s", s.text);
    assert_true(rc > 0);
    assert_int_equal(rc, s.n);
    for (int i = 0; i < nwant; i++)
        if (!strstr(s.text, want[i])) {
            print_message("# missing: %s\n", want[i]);
            fail();
        }
    tn_graph_free(g);
}

/* Reading fails, with an error holding every string of want. */
static void expect_refused(const char *text, const char *const *want, int nwant,
                           const struct tn_graph_limits *lim)
{
    struct tn_graph *g = tn_graph_parse(text, strlen(text), "bad.json", lim);
    if (g)
        tn_graph_free(g);
    assert_null(g);
    print_message("# refused: %s\n", tn_last_error());
    for (int i = 0; i < nwant; i++)
        if (!strstr(tn_last_error(), want[i])) {
            print_message("# missing: %s\n", want[i]);
            fail();
        }
}

static void test_good_small(void **state)
{
    (void)state;
    char *text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, SIZES23);
    struct tn_graph *g = tn_graph_parse(text, strlen(text), "ok.json", NULL);
    free(text);
    assert_non_null(g);
    struct seen s = {0};
    assert_int_equal(tn_graph_check(g, collect_problem, &s), 0);
    /* and it runs: neg(relu(x)) */
    struct tn_tensor *x = tn_arange(tn_int(-3), tn_int(3), tn_int(1), TN_FLOAT32);
    struct tn_tensor *x23 = tn_view(x, TN_SHAPE(2, 3));
    struct tn_value *in = tn_value_dict(), *out = NULL;
    assert_int_equal(tn_value_set(in, tn_value_str("x"), tn_value_tensor(x23)), 0);
    assert_int_equal(tn_graph_run(g, NULL, in, &out, NULL), 0);
    struct tn_tensor *n = tn_value_get(out, "n")->v.tensor;
    const float *p = tn_data(n);
    static const float want[] = {0, 0, 0, 0, -1, -2};
    for (int i = 0; i < 6; i++)
        assert_true(p[i] == want[i]);
    /* a wrong input shape is refused by name */
    struct tn_tensor *bad = tn_zeros(TN_SHAPE(3, 2), TN_FLOAT32);
    assert_int_equal(tn_value_set(in, tn_value_str("x"), tn_value_tensor(bad)), 0);
    tn_value_release(out);
    assert_true(tn_graph_run(g, NULL, in, &out, NULL) < 0);
    assert_non_null(strstr(tn_last_error(), "input 'x'"));
    tn_release(bad);
    tn_release(x);
    tn_release(x23);
    tn_value_release(in);
    tn_graph_free(g);
}

static void test_unknown_target(void **state)
{
    (void)state;
    const char *want[] = {"[r]", "unknown target 'torch.ops.aten.frobnicate.default'"};
    expect_problem(small_graph(ARG("self", "x"), ARG("self", "r"),
                               "torch.ops.aten.frobnicate.default", SIZES23), want, 2);
    const char *want2[] = {"[r]", "unsupported target 'builtins.print'"};
    expect_problem(small_graph(ARG("self", "x"), ARG("self", "r"), "builtins.print", SIZES23),
                   want2, 2);
}

static void test_use_before_definition(void **state)
{
    (void)state;
    /* r reads n, which comes later and does not depend on r: */
    const char *want[] = {"[r]", "uses 'n' before its definition", "[n]", "no node defines 'q'"};
    expect_problem(small_graph(ARG("self", "n"), ARG("self", "q"), RELU, SIZES23), want, 2);
    const char *want2[] = {"[n]", "uses 'q', which no node defines"};
    expect_problem(small_graph(ARG("self", "x"), ARG("self", "q"), RELU, SIZES23), want2, 2);
}

static void test_cycle(void **state)
{
    (void)state;
    /* r reads n and n reads r */
    const char *want[] = {"[r]", "a cycle", "node 'n'"};
    expect_problem(small_graph(ARG("self", "n"), ARG("self", "r"), RELU, SIZES23), want, 3);
    const char *want2[] = {"[r]", "a cycle: the node reads its own output 'r'"};
    expect_problem(small_graph(ARG("self", "r"), ARG("self", "x"), RELU, SIZES23), want2, 2);
}

static void test_wrong_arguments(void **state)
{
    (void)state;
    const char *want[] = {"[r]", "aten::relu has no argument named 'input'",
                          "aten::relu needs argument 'self'"};
    expect_problem(small_graph(ARG("input", "x"), ARG("self", "r"), RELU, SIZES23), want, 3);
    const char *want2[] = {"[r]", "argument 'dim' of aten::softmax.int must be int, not a tensor"};
    expect_problem(small_graph(ARG("self", "x") ", " ARG("dim", "x"), ARG("self", "r"),
                               "torch.ops.aten.softmax.int", SIZES23), want2, 2);
    const char *want3[] = {"[r]", "argument 'self' of aten::relu must be Tensor, not a string"};
    expect_problem(small_graph("{\"name\": \"self\", \"arg\": {\"as_string\": \"x\"}}",
                               ARG("self", "r"), RELU, SIZES23), want3, 2);
}

static void test_shape_disagrees(void **state)
{
    (void)state;
    const char *want[] = {"[r]", "output 'r'", "float32[2, 3]", "declares float32[3, 2]"};
    expect_problem(small_graph(ARG("self", "x"), ARG("self", "r"), "torch.ops.aten.neg.default",
                               "[{\"as_int\": 3}, {\"as_int\": 2}]"), want, 4);
    /* softmax's dim out of range: the Meta kernel's error, with the shapes */
    const char *want2[] = {"[r]", "self=float32[2, 3]"};
    expect_problem(small_graph(ARG("self", "x") ", {\"name\": \"dim\", \"arg\": {\"as_int\": 7}}",
                               ARG("self", "r"), "torch.ops.aten.softmax.int", SIZES23), want2, 2);
}

static void test_refused(void **state)
{
    (void)state;
    char *text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU,
                             "[{\"as_int\": 1099511627776}, {\"as_int\": 1099511627776}]");
    const char *want[] = {"tensor_values 'r'", "more than 1099511627776 elements"};
    expect_refused(text, want, 2, NULL);
    free(text);
    text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, "[{\"as_int\": -4}]");
    const char *want2[] = {"tensor_values 'r'", "negative"};
    expect_refused(text, want2, 2, NULL);
    free(text);
    text = small_graph("{\"name\": \"self\", \"arg\": {\"as_graph\": {}}, \"kind\": 1}",
                       ARG("self", "r"), RELU, SIZES23);
    const char *want3[] = {"node 'r'", "'as_graph' is not supported", "control flow"};
    expect_refused(text, want3, 3, NULL);
    free(text);
    text = small_graph("{\"name\": \"self\", \"arg\": {\"as_int\": 1, \"as_float\": 2}}",
                       ARG("self", "r"), RELU, SIZES23);
    const char *want4[] = {"node 'r'", "exactly one key"};
    expect_refused(text, want4, 2, NULL);
    free(text);
    /* limits: nodes, depth */
    text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, SIZES23);
    struct tn_graph_limits lim = {.max_nodes = 1};
    const char *want5[] = {"2 nodes (the limit is 1)"};
    expect_refused(text, want5, 1, &lim);
    struct tn_graph_limits lim2 = {.max_depth = 4};
    const char *want6[] = {"nested", "the limit is 4"};
    expect_refused(text, want6, 2, &lim2);
    free(text);
    const char *want7[] = {"bad.json:1:"};
    expect_refused("{\"graph_module\": [", want7, 1, NULL);
    /* deep nesting within the default limit's reach */
    size_t n = 200000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = 0;
    const char *want8[] = {"nested 200000 deep"};
    expect_refused(deep, want8, 1, NULL);
    free(deep);
    /* SSA: one name defined twice */
    text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, SIZES23);
    char *p = strstr(text, "\"outputs\": [{\"as_tensor\": {\"name\": \"n\"}}], \"metadata\"");
    memcpy(p + strlen("\"outputs\": [{\"as_tensor\": {\"name\": \""), "r", 1);
    const char *want9[] = {"'r' is defined twice"};
    expect_refused(text, want9, 1, NULL);
    free(text);
    /* a bad argument after a good one: the reader once freed the good one's
     * items again (found by tests/fuzz/graph.sh) */
    text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, SIZES23);
    p = strstr(text, "\"inputs\": [{\"as_tensor\": {\"name\": \"x\"}}]");
    const char *two = "\"inputs\": [{\"as_tensor\": {\"name\": \"x\"}}, {\"as_x\": 1, \"as_y\": 2}]";
    size_t head = (size_t)(p - text), tail = strlen(p) - strlen("\"inputs\": [{\"as_tensor\": {\"name\": \"x\"}}]");
    char *text2 = malloc(head + strlen(two) + tail + 1);
    memcpy(text2, text, head);
    strcpy(text2 + head, two);
    strcat(text2, p + strlen(p) - tail);
    const char *want10[] = {"graph inputs", "exactly one key"};
    expect_refused(text2, want10, 2, NULL);
    free(text2);
    free(text);
}

/* The reader's JSON parser (lib/graph/json.c) skips the blanks between
 * tokens itself: tokens that blanks separate stay apart ("[1 2]" is
 * refused, not read as [12]), an error names its line and column in the
 * text as given, and blanks within strings stay. */
static void test_blanks(void **state)
{
    (void)state;
    const char *want[] = {"bad.json:3:", "expected near '2'"};
    expect_refused("{\n  \"graph_module\": {\n\t\"graph\": [1 2]\n  }\n}\n", want, 2, NULL);
    const char *want2[] = {"bad.json:1:", "invalid token near 'tr'"};
    expect_refused("{\"graph_module\": tr ue}", want2, 2, NULL);
    char *text = small_graph(ARG("self", "x"), ARG("self", "r"), RELU, SIZES23);
    const char *from = "{\"name\": \"r\", \"target\"";
    const char *to = "{ \"name\" :\t\"r  \\\" [1 2] \" ,\n\"target\"";
    char *p = strstr(text, from);
    assert_non_null(p);
    char *text2 = malloc(strlen(text) + strlen(to) + 1);
    memcpy(text2, text, (size_t)(p - text));
    strcpy(text2 + (p - text), to);
    strcat(text2, p + strlen(from));
    struct tn_graph *g = tn_graph_parse(text2, strlen(text2), "blanks.json", NULL);
    if (!g)
        print_message("# %s\n", tn_last_error());
    assert_non_null(g);
    assert_string_equal(g->nodes[0].name, "r  \" [1 2] ");
    tn_graph_free(g);
    free(text2);
    free(text);
}

/* Every prefix of a real exported graph fails cleanly (or reads). */
static void test_truncated(void **state)
{
    (void)state;
    size_t len;
    unsigned char *text = tn_test_slurp(fixture("torch2", "mlp.json"), &len);
    for (size_t cut = 0; cut < len; cut += 7) {
        struct tn_graph *g = tn_graph_parse((const char *)text, cut, "cut.json", NULL);
        if (g) {
            int problems = 0;
            tn_graph_check(g, count_problem, &problems);
            tn_graph_free(g);
        }
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_torch2),
        cmocka_unit_test(test_models_torch1),
        cmocka_unit_test(test_grads_torch2),
        cmocka_unit_test(test_grads_torch1),
        cmocka_unit_test(test_pt2),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_good_small),
        cmocka_unit_test(test_unknown_target),
        cmocka_unit_test(test_use_before_definition),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_wrong_arguments),
        cmocka_unit_test(test_shape_disagrees),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_blanks),
        cmocka_unit_test(test_truncated),
    };
    return TN_RUN_TESTS(tests);
}
