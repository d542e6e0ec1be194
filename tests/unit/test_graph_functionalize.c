/*
 * test_graph_functionalize: lib/graph/functionalize.c, the rewrite of a
 * training-IR graph (in-place and out= ops) to its functional form that
 * tn_graph_check does first: the graph before and after (targets, which
 * value each node reads, the mutation outputs and their specs), the
 * values it computes, a functional graph left unchanged, and the nodes
 * it cannot rewrite, each named.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T(name) "{\"as_tensor\": {\"name\": \"" name "\"}}"
#define IN(name, arg) "{\"name\": \"" name "\", \"arg\": " arg ", \"kind\": 1}"
#define NODE(out, target, ins)                                                          \
    "{\"name\": \"" out "\", \"target\": \"torch.ops.aten." target "\", \"inputs\": [" ins \
    "], \"outputs\": [" T(out) "], \"metadata\": {}}"
#define F32(sizes) "{\"dtype\": 7, \"sizes\": [" sizes "]}"
#define N(n) "{\"as_int\": " #n "}"

/* A graph of inputs b_buf (a buffer, float32[2, 3]) and x (float32[2, 3]),
 * the nodes, tensor_values (beyond b_buf and x) and user outputs. */
static struct tn_graph *graph(const char *nodes, const char *values, const char *outs,
                              const char *out_specs)
{
    static const char fmt[] =
        "{\"graph_module\": {\"graph\": {"
        "\"inputs\": [" T("b_buf") ", " T("x") "], \"outputs\": [%s], \"nodes\": [%s],"
        "\"tensor_values\": {\"b_buf\": " F32(N(2) ", " N(3)) ", \"x\": " F32(N(2) ", " N(3)) "%s}},"
        "\"signature\": {\"input_specs\": ["
        "{\"buffer\": {\"arg\": {\"name\": \"b_buf\"}, \"buffer_name\": \"buf\", "
        "\"persistent\": true}}, {\"user_input\": {\"arg\": " T("x") "}}],"
        "\"output_specs\": [%s]}}}";
    size_t len = sizeof fmt + strlen(nodes) + strlen(values) + strlen(outs) + strlen(out_specs);
    char *text = malloc(len);
    snprintf(text, len, fmt, outs, nodes, values, out_specs);
    struct tn_graph *g = tn_graph_parse(text, strlen(text), "t.json", NULL);
    if (!g)
        print_message("# %s\n", tn_last_error());
    free(text);
    return g;
}

#define USER_OUT(name) "{\"user_output\": {\"arg\": " T(name) "}}"

struct seen {
    int n;
    char text[4096];
};

static void collect(const char *node, const char *msg, void *ctx)
{
    struct seen *s = ctx;
    size_t k = strlen(s->text);
    snprintf(s->text + k, sizeof s->text - k, "[%s] %s\n", node, msg);
    s->n++;
}

/* The graph's nodes as "out=op(arg,arg);" (op without torch.ops.aten.). */
static void describe(const struct tn_graph *g, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->nnodes && k < len; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        const char *t = strncmp(n->target, "torch.ops.aten.", 15) ? n->target : n->target + 15;
        k += (size_t)snprintf(buf + k, len - k, "%s=%s(",
                              n->nout && n->outs[0] >= 0 ? g->values[n->outs[0]].name : "-", t);
        for (int a = 0; a < n->nin && k < len; a++)
            for (int j = 0; j < n->in[a].arg.n && k < len; j++) {
                int v = n->in[a].arg.items[j].value;
                if (n->in[a].arg.kind == TN_GARG_TENSOR || n->in[a].arg.kind == TN_GARG_TENSORS)
                    k += (size_t)snprintf(buf + k, len - k, "%s,", v >= 0 ? g->values[v].name
                                                                          : "None");
            }
        if (k < len)
            k += (size_t)snprintf(buf + k, len - k, ");");
    }
}

/* g written as JSON and read back, checked: no problem. */
static struct tn_graph *reread(const struct tn_graph *g)
{
    struct seen s = {0};
    char *json = tn_graph_to_json(g);
    struct tn_graph *g2 = json ? tn_graph_parse(json, strlen(json), "t2.json", NULL) : NULL;
    free(json);
    assert_non_null(g2);
    assert_int_equal(tn_graph_check(g2, collect, &s), 0);
    return g2;
}

static struct tn_tensor *ramp(double from)
{
    struct tn_tensor *a = tn_arange(tn_float(from), tn_float(from + 6), tn_float(1), TN_FLOAT32);
    struct tn_tensor *v = tn_reshape(a, TN_SHAPE(2, 3));
    tn_release(a);
    return v;
}

static void test_rewrite(void **state)
{
    (void)state;
    /* r = relu_(neg(x)); s = r[:, 0:2]; s.mul_(2); b_buf.add_(1);
     * o = r + b_buf, with v = r[:, 1:3] taken before the mul_ and read after */
    struct tn_graph *g = graph(
        NODE("a", "neg.default", IN("self", T("x"))) ","
        NODE("r", "relu_.default", IN("self", T("a"))) ","
        NODE("v", "slice.Tensor", IN("self", T("r")) "," IN("dim", N(1)) "," IN("start", N(1))
             "," IN("end", N(3))) ","
        NODE("s", "slice.Tensor", IN("self", T("r")) "," IN("dim", N(1)) "," IN("start", N(0))
             "," IN("end", N(2))) ","
        NODE("m", "mul_.Tensor", IN("self", T("s")) "," IN("other", "{\"as_float\": 2.0}")) ","
        NODE("ad", "add_.Tensor", IN("self", T("b_buf")) "," IN("other", N(1))) ","
        NODE("o", "add.Tensor", IN("self", T("a")) "," IN("other", T("ad"))) ","
        NODE("w", "mul.Tensor", IN("self", T("v")) "," IN("other", N(1))),
        ", \"a\": " F32(N(2) ", " N(3)) ", \"r\": " F32(N(2) ", " N(3)) ", \"s\": " F32(N(2) ", " N(2))
        ", \"v\": " F32(N(2) ", " N(2)) ", \"m\": " F32(N(2) ", " N(2)) ", \"ad\": " F32(N(2) ", " N(3))
        ", \"o\": " F32(N(2) ", " N(3)) ", \"w\": " F32(N(2) ", " N(2)),
        T("o") ", " T("w") ", " T("a"), USER_OUT("o") ", " USER_OUT("w") ", " USER_OUT("a"));
    assert_non_null(g);
    char before[4096], after[4096];
    describe(g, before, sizeof before);
    print_message("# before: %s\n", before);
    assert_string_equal(before, "a=neg.default(x,);r=relu_.default(a,);v=slice.Tensor(r,);"
                                "s=slice.Tensor(r,);m=mul_.Tensor(s,);ad=add_.Tensor(b_buf,);"
                                "o=add.Tensor(a,ad,);w=mul.Tensor(v,);");
    struct seen s = {0};
    int rc = tn_graph_check(g, collect, &s);
    print_message("# %s", s.text);
    assert_int_equal(rc, 0);
    describe(g, after, sizeof after);
    print_message("# after: %s\n", after);
    /* relu_ is relu; the mul through the slice is written back into r by
     * a cat with the rest of r; the buffer's add becomes its mutation
     * output; o reads r as it is after both writes; v is taken again; the
     * output a, written after neg made it, keeps its name on the last value */
    assert_string_equal(after,
        "a_3=neg.default(x,);r=relu.default(a_3,);v=slice.Tensor(r,);s=slice.Tensor(r,);"
        "m=mul.Tensor(s,);a_1=slice.Tensor(r,);a=cat.default(m,a_1,);"
        "b_buf_mutated=add.Tensor(b_buf,);o=add.Tensor(a,b_buf_mutated,);"
        "v_1=slice.Tensor(a,);w=mul.Tensor(v_1,);");
    assert_int_equal(g->noutputs, 4);
    assert_string_equal(g->values[g->outputs[3].value].name, "a");
    assert_int_equal(g->outputs[0].kind, TN_GOUT_BUFFER_MUTATION);
    assert_string_equal(g->outputs[0].target, "buf");
    assert_string_equal(g->values[g->outputs[0].value].name, "b_buf_mutated");
    assert_int_equal(g->outputs[1].kind, TN_GOUT_USER_OUTPUT);
    assert_string_equal(g->values[g->outputs[1].value].name, "o");
    /* checking again changes nothing */
    assert_int_equal(tn_graph_check(g, collect, &s), 0);
    describe(g, before, sizeof before);
    assert_string_equal(before, after);
    /* written and read back: the same functional graph and signature */
    struct tn_graph *g2 = reread(g);
    describe(g2, before, sizeof before);
    assert_string_equal(before, after);
    assert_int_equal(g2->noutputs, 4);
    assert_int_equal(g2->outputs[0].kind, TN_GOUT_BUFFER_MUTATION);
    assert_string_equal(g2->outputs[0].target, "buf");
    tn_graph_free(g2);

    /* the values: x = [[0 1 2] [3 4 5]] - 3, buf = [[10 ..]] */
    struct tn_tensor *x = ramp(-3), *b = ramp(10);
    struct tn_value *w = tn_value_dict(), *in = tn_value_dict(), *out = NULL;
    assert_int_equal(tn_value_set(w, tn_value_str("buf"), tn_value_tensor(b)), 0);
    assert_int_equal(tn_value_set(in, tn_value_str("x"), tn_value_tensor(x)), 0);
    assert_int_equal(tn_graph_run(g, w, in, &out, NULL), 0);
    /* neg(x) = [[3 2 1] [0 -1 -2]], relu_, cols 0-1 doubled: [[6 4 1] [0 0 0]];
     * o = that + buf + 1; w = cols 1-2 of it */
    static const float want_o[] = {17, 16, 14, 14, 15, 16}, want_w[] = {4, 1, 0, 0};
    static const float want_b[] = {11, 12, 13, 14, 15, 16};
    const float *po = tn_data(tn_value_get(out, "o")->v.tensor);
    struct tn_tensor *wc = tn_contiguous(tn_value_get(out, "w")->v.tensor);
    const float *pw = tn_data(wc), *pb = tn_data(tn_value_get(out, "b_buf_mutated")->v.tensor);
    for (int i = 0; i < 6; i++) {
        assert_true(po[i] == want_o[i]);
        assert_true(pb[i] == want_b[i]);
    }
    for (int i = 0; i < 4; i++)
        assert_true(pw[i] == want_w[i]);
    /* a: neg(x) with relu_ and the doubled columns */
    static const float want_a[] = {6, 4, 1, 0, 0, 0};
    const float *pa = tn_data(tn_value_get(out, "a")->v.tensor);
    for (int i = 0; i < 6; i++)
        assert_true(pa[i] == want_a[i]);
    /* the caller's buffer is not written */
    assert_true(((const float *)tn_data(b))[0] == 10);
    tn_release(wc);
    tn_value_release(out);
    tn_value_release(w);
    tn_value_release(in);
    tn_release(x);
    tn_release(b);
    tn_graph_free(g);
}

static void test_functional_unchanged(void **state)
{
    (void)state;
    struct tn_graph *g = graph(
        NODE("a", "neg.default", IN("self", T("x"))) ","
        NODE("o", "add.Tensor", IN("self", T("a")) "," IN("other", T("b_buf"))),
        ", \"a\": " F32(N(2) ", " N(3)) ", \"o\": " F32(N(2) ", " N(3)), T("o"), USER_OUT("o"));
    assert_non_null(g);
    char *before = tn_graph_to_json(g);
    assert_int_equal(tn_graph_check(g, NULL, NULL), 0);
    char *after = tn_graph_to_json(g);
    assert_string_equal(before, after);
    assert_int_equal(g->noutputs, 1);
    free(before);
    free(after);
    tn_graph_free(g);
}

static void test_user_input_and_out(void **state)
{
    (void)state;
    /* add.out(x, b_buf, out=x): x is written, and returned */
    struct tn_graph *g = graph(
        NODE("o", "add.out", IN("self", T("x")) "," IN("other", T("b_buf")) "," IN("out", T("x"))),
        ", \"o\": " F32(N(2) ", " N(3)), T("o"), USER_OUT("o"));
    assert_non_null(g);
    struct seen s = {0};
    assert_int_equal(tn_graph_check(g, collect, &s), 0);
    char after[1024];
    describe(g, after, sizeof after);
    assert_string_equal(after, "x_mutated=add.Tensor(x,b_buf,);");
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(g->outputs[0].kind, TN_GOUT_USER_INPUT_MUTATION);
    assert_string_equal(g->outputs[0].target, "x");
    assert_int_equal(g->outputs[1].value, g->outputs[0].value);
    /* user_input_mutation {arg, user_input_name} written and read back */
    struct tn_graph *g2 = reread(g);
    assert_int_equal(g2->outputs[0].kind, TN_GOUT_USER_INPUT_MUTATION);
    assert_string_equal(g2->outputs[0].target, "x");
    tn_graph_free(g2);
    tn_graph_free(g);
}

static void test_refused(void **state)
{
    (void)state;
    struct seen s = {0};
    /* no functional form */
    struct tn_graph *g = graph(NODE("r", "frobnicate_.default", IN("self", T("x"))),
                               ", \"r\": " F32(N(2) ", " N(3)), T("r"), USER_OUT("r"));
    assert_non_null(g);
    assert_int_equal(tn_graph_check(g, collect, &s), 1);
    print_message("# %s", s.text);
    assert_non_null(strstr(s.text, "[r] unknown target 'torch.ops.aten.frobnicate_.default' "
                                   "(an in-place op, and tensorkit has no functional "
                                   "torch.ops.aten.frobnicate.default)"));
    tn_graph_free(g);
    /* a write through an expanded view */
    memset(&s, 0, sizeof s);
    g = graph(NODE("e", "expand.default", IN("self", T("x")) ","
                   IN("size", "{\"as_ints\": [2, 2, 3]}")) ","
              NODE("m", "mul_.Tensor", IN("self", T("e")) "," IN("other", N(2))),
              ", \"e\": " F32(N(2) ", " N(2) ", " N(3)) ", \"m\": " F32(N(2) ", " N(2) ", " N(3)), T("m"),
              USER_OUT("m"));
    assert_non_null(g);
    assert_int_equal(tn_graph_check(g, collect, &s), 1);
    print_message("# %s", s.text);
    assert_non_null(strstr(s.text, "[m] writes in place through 'e', a view made by expand, "
                                   "which cannot be written back to its base 'x'"));
    tn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewrite),
        cmocka_unit_test(test_functional_unchanged),
        cmocka_unit_test(test_user_input_and_out),
        cmocka_unit_test(test_refused),
    };
    return TN_RUN_TESTS(tests);
}
