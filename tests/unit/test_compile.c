/*
 * test_compile: lib/compile on the models of tests/fixtures/graph_models.py
 * as PyTorch exported them: compiled outputs equal PyTorch's and the
 * interpreter's; the fusion the plan promises (layer norm, softmax and a
 * pointwise chain each one kernel, linear's bias fused after the product);
 * guards (a new shape, new strides compile again; past the recompile
 * limit the interpreter runs, warned once); a missing C compiler falls back
 * to the interpreter with a warning, or fails under strict.
 */
#include "tn_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/compile.h>

#include "compile/internal.h"

static const char *fixture(const char *torch, const char *name)
{
    static char buf[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/fixtures/graph/%s/%s", TN_SRCDIR, torch, name);
    return buf[k];
}

static char cache[64];

/* a private cache for the whole test, removed at the end */
static int setup(void **state)
{
    (void)state;
    snprintf(cache, sizeof cache, "/tmp/tn-test-compile-XXXXXX");
    if (!mkdtemp(cache))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    return system(cmd) == 0 ? 0 : -1;
}

/* |a - b| <= atol + rtol |b| everywhere, same shape and dtype */
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
        if (a->sizes[d] != b->sizes[d])
            return -1;
    struct tn_tensor *x = tn_to_dtype(a, TN_FLOAT64), *y = tn_to_dtype(b, TN_FLOAT64);
    struct tn_tensor *xc = tn_contiguous(x), *yc = tn_contiguous(y);
    const double *p = tn_data(xc), *q = tn_data(yc);
    int rc = 0;
    for (int64_t i = 0; i < tn_numel(xc); i++)
        if (!(fabs(p[i] - q[i]) <= atol + rtol * fabs(q[i])) && !(isnan(p[i]) && isnan(q[i]))) {
            print_message("# %s: element %lld is %.9g, want %.9g\n", what, (long long)i, p[i],
                          q[i]);
            rc = -1;
            break;
        }
    tn_release(x);
    tn_release(y);
    tn_release(xc);
    tn_release(yc);
    return rc;
}

static void same_tensors(const struct tn_value *got, const struct tn_value *want, double tol)
{
    assert_int_equal(got->v.dict.n, want->v.dict.n);
    for (size_t i = 0; i < want->v.dict.n; i++) {
        const char *name = want->v.dict.keys[i]->v.str.s;
        struct tn_value *x = tn_value_get(got, name);
        assert_non_null(x);
        assert_int_equal(close_enough(x->v.tensor, want->v.dict.vals[i]->v.tensor, tol, tol * 10,
                                      name), 0);
    }
}

struct warnings {
    int n;
    char last[1024];
};

static void count_warning(const char *msg, void *ctx)
{
    struct warnings *w = ctx;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
    print_message("# warning: %s\n", msg);
}

static void ignore(const char *node, const char *msg, void *ctx)
{
    (void)node, (void)msg, (void)ctx;
}

struct model {
    struct tn_graph *g;
    struct tn_value *w, *in, *want;
};

static void load_model(const char *torch, const char *name, struct model *m)
{
    char f[4][64];
    snprintf(f[0], 64, "%s.json", name);
    snprintf(f[1], 64, "%s.pt", name);
    snprintf(f[2], 64, "%s_inputs.pt", name);
    snprintf(f[3], 64, "%s_expected.pt", name);
    m->g = tn_graph_load(fixture(torch, f[0]), NULL, NULL);
    assert_non_null(m->g);
    assert_int_equal(tn_graph_check(m->g, ignore, NULL), 0);
    m->w = tn_load(fixture(torch, f[1]), NULL);
    m->in = tn_load(fixture(torch, f[2]), NULL);
    m->want = tn_load(fixture(torch, f[3]), NULL);
    assert_non_null(m->w);
    assert_non_null(m->in);
    assert_non_null(m->want);
}

static void free_model(struct model *m)
{
    tn_value_release(m->w);
    tn_value_release(m->in);
    tn_value_release(m->want);
    tn_graph_free(m->g);
}

static struct tn_compile_options opts(struct warnings *w)
{
    struct tn_compile_options o = {.cache_dir = cache, .warn = count_warning, .warn_ctx = w};
    return o;
}

static const char *const names[] = {"mlp", "cnn", "block", "text", "cat", "index", "misc"};

/* Every model, compiled: PyTorch's outputs, the interpreter's, no
 * fallback, and something fused. */
static void models(const char *torch)
{
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if (access(fixture(torch, "index.json"), F_OK) && k >= 5)
            continue; /* torch.fx has no index and misc models */
        struct model m;
        load_model(torch, names[k], &m);
        struct warnings w = {0};
        struct tn_compile_options o = opts(&w);
        o.strict = true;
        struct tn_compiled *c = tn_compile_new(m.g, &o);
        struct tn_value *out = NULL, *ref = NULL;
        int rc = tn_compile_run(c, m.w, m.in, &out);
        if (rc < 0)
            print_message("# %s/%s: %s\n", torch, names[k], tn_last_error());
        assert_int_equal(rc, 0);
        same_tensors(out, m.want, 1e-5);
        assert_int_equal(tn_graph_run(m.g, m.w, m.in, &ref, NULL), 0);
        same_tensors(out, ref, 1e-6);
        struct tn_compile_stats st;
        tn_compile_get_stats(c, &st);
        assert_int_equal(st.entries, 1);
        assert_int_equal(st.fallbacks, 0);
        assert_int_equal(w.n, 0);
        char *ex = tn_compile_explain(c);
        assert_non_null(ex);
        assert_non_null(strstr(ex, "kernel tn_k"));
        free(ex);
        tn_value_release(out);
        tn_value_release(ref);
        tn_compile_free(c);
        free_model(&m);
    }
}

static void test_models_torch2(void **state)
{
    (void)state;
    models("torch2");
}

static void test_models_torch1(void **state)
{
    (void)state;
    models("torch1");
}

/* The exps in the generated C of the cache's kernel whose label has
 * `label` (the first such kernel), -1 when none has. */
static int exps_in_kernel(const char *label)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "cat '%s'/*/*.c 2>/dev/null", cache);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t cap = 1 << 20, n = 0;
    char *src = malloc(cap + 1);
    while (src && (n += fread(src + n, 1, cap - n, f)) == cap && (src = realloc(src, 2 * cap + 1)))
        cap *= 2;
    pclose(f);
    if (!src)
        return -1;
    src[n] = 0;
    int count = -1;
    char *k = strstr(src, label);
    if (k) {
        char *end = strstr(k, "\n}\n");
        if (end)
            *end = 0;
        count = 0;
        for (const char *p = k; (p = strstr(p, "tn_expf(")); p++)
            count++;
    }
    free(src);
    return count;
}

/* The transformer block's plan: each layer norm and the softmax one kernel
 * with its reductions kept inside, every linear an extern product; the
 * softmax's exp computed once per element (the sum's pass keeps it in a
 * row for the normalising pass). */
static void test_block_fusion(void **state)
{
    (void)state;
    struct model m;
    load_model("torch2", "block", &m);
    struct warnings w = {0};
    struct tn_compile_options o = opts(&w);
    struct tn_compiled *c = tn_compile_new(m.g, &o);
    struct tn_value *out = NULL;
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    char *ex = tn_compile_explain(c);
    assert_non_null(ex);
    int kept = 0, mm = 0;
    for (const char *p = ex; (p = strstr(p, "sum (kept in the kernel)")); p++)
        kept++;
    for (const char *p = ex; (p = strstr(p, "extern mm")); p++)
        mm++;
    assert_true(kept >= 4); /* two layer norms, two sums each */
    assert_non_null(strstr(ex, "max (kept in the kernel)")); /* softmax */
    assert_int_equal(mm, 4);
    assert_null(strstr(ex, "aten::layer_norm"));
    assert_null(strstr(ex, "aten::softmax"));
    assert_int_equal(exps_in_kernel("softmax: 3 stages"), 1);
    free(ex);
    tn_value_release(out);
    tn_compile_free(c);
    free_model(&m);
}

/* amax and amin of rows (of 40: vectors and a remainder) with a NaN in
 * the middle, at the end and nowhere: the compiled reductions, vector
 * loops that note a NaN apart, give NaN where a row has one, as PyTorch
 * and the interpreter do, and the same values elsewhere. */
static void test_max_nan(void **state)
{
    (void)state;
#define RED(op, out)                                                                          \
    " {\"name\": \"" out "\", \"target\": \"torch.ops.aten." op ".default\", \"inputs\": ["  \
    "{\"name\": \"self\", \"arg\": {\"as_tensor\": {\"name\": \"x\"}}, \"kind\": 1},"         \
    "{\"name\": \"dim\", \"arg\": {\"as_ints\": [1]}, \"kind\": 1}],"                          \
    " \"outputs\": [{\"as_tensor\": {\"name\": \"" out "\"}}], \"metadata\": {}}"
#define ROWS "{\"dtype\": 7, \"sizes\": [{\"as_int\": 3}]}"
    static const char text[] =
        "{\"graph_module\": {\"graph\": {"
        "\"inputs\": [{\"as_tensor\": {\"name\": \"x\"}}],"
        "\"outputs\": [{\"as_tensor\": {\"name\": \"hi\"}}, {\"as_tensor\": {\"name\": \"lo\"}}],"
        "\"nodes\": [" RED("amax", "hi") "," RED("amin", "lo") "],"
        "\"tensor_values\": {"
        " \"x\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 3}, {\"as_int\": 40}]},"
        " \"hi\": " ROWS ", \"lo\": " ROWS "}},"
        "\"signature\": {\"input_specs\": [{\"user_input\": {\"arg\": {\"as_tensor\": "
        "{\"name\": \"x\"}}}}], \"output_specs\": ["
        "{\"user_output\": {\"arg\": {\"as_tensor\": {\"name\": \"hi\"}}}},"
        "{\"user_output\": {\"arg\": {\"as_tensor\": {\"name\": \"lo\"}}}}]}}}";
#undef RED
#undef ROWS
    struct tn_graph *g = tn_graph_parse(text, strlen(text), "max_nan.json", NULL);
    assert_non_null(g);
    assert_int_equal(tn_graph_check(g, NULL, NULL), 0);
    struct tn_tensor *x = tn_empty((int64_t[]){3, 40}, 2, TN_FLOAT32);
    float *p = tn_data(x);
    for (int i = 0; i < 120; i++)
        p[i] = (float)((i * 37) % 101) - 50.f;
    p[17] = NAN;      /* row 0: in the vector part */
    p[40 + 39] = NAN; /* row 1: the last element */
    struct tn_value *in = tn_value_dict();
    assert_int_equal(tn_value_set(in, tn_value_str("x"), tn_value_tensor(x)), 0);
    tn_release(x);
    struct warnings w = {0};
    struct tn_compile_options o = opts(&w);
    o.strict = true;
    struct tn_compiled *c = tn_compile_new(g, &o);
    struct tn_value *out = NULL, *ref = NULL;
    assert_int_equal(tn_compile_run(c, NULL, in, &out), 0);
    assert_int_equal(tn_graph_run(g, NULL, in, &ref, NULL), 0);
    same_tensors(out, ref, 0);
    for (int k = 0; k < 2; k++) {
        const float *r = tn_data(tn_value_get(out, k ? "lo" : "hi")->v.tensor);
        assert_true(isnan(r[0]) && isnan(r[1]) && !isnan(r[2]));
    }
    char *ex = tn_compile_explain(c);
    assert_non_null(ex);
    assert_null(strstr(ex, "aten::amax")); /* compiled, not left to libtensor */
    free(ex);
    tn_value_release(out);
    tn_value_release(ref);
    tn_value_release(in);
    tn_compile_free(c);
    tn_graph_free(g);
}

/* A new batch size of the symbolic batch reuses the entry (no kernel
 * depends on it); new strides compile again; a repeat of the first is
 * found. */
static void test_guards(void **state)
{
    (void)state;
    struct model m;
    load_model("torch2", "block", &m);
    struct warnings w = {0};
    struct tn_compile_options o = opts(&w);
    struct tn_compiled *c = tn_compile_new(m.g, &o);
    struct tn_value *out = NULL;
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    tn_value_release(out);
    /* batch 3 (the graph's batch is symbolic) */
    struct tn_value *in3 = tn_load(fixture("torch2", "block_b3_inputs.pt"), NULL);
    struct tn_value *want3 = tn_load(fixture("torch2", "block_b3_expected.pt"), NULL);
    assert_non_null(in3);
    assert_int_equal(tn_compile_run(c, m.w, in3, &out), 0);
    same_tensors(out, want3, 1e-5);
    tn_value_release(out);
    struct tn_compile_stats st;
    tn_compile_get_stats(c, &st);
    assert_int_equal(st.entries, 1);
    /* the same values in a transposed layout: other strides */
    struct tn_tensor *x = m.in->v.dict.vals[0]->v.tensor;
    struct tn_tensor *t = tn_transpose(x, 0, 1), *tc = tn_contiguous(t);
    struct tn_tensor *back = tn_transpose(tc, 0, 1);
    struct tn_value *inT = tn_value_dict();
    assert_int_equal(tn_value_set(inT, tn_value_str(m.in->v.dict.keys[0]->v.str.s),
                                  tn_value_tensor(back)), 0);
    assert_int_equal(tn_compile_run(c, m.w, inT, &out), 0);
    same_tensors(out, m.want, 1e-5);
    tn_value_release(out);
    tn_compile_get_stats(c, &st);
    assert_int_equal(st.entries, 2);
    /* the first again: no new entry */
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    tn_value_release(out);
    tn_compile_get_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(w.n, 0);
    tn_release(t);
    tn_release(tc);
    tn_release(back);
    tn_value_release(inT);
    tn_value_release(in3);
    tn_value_release(want3);
    tn_compile_free(c);
    free_model(&m);
}

/* The block's input in a transposed layout (other strides, same values). */
static struct tn_value *transposed(const struct tn_value *in)
{
    struct tn_tensor *t = tn_transpose(in->v.dict.vals[0]->v.tensor, 0, 1);
    struct tn_tensor *tc = tn_contiguous(t), *back = tn_transpose(tc, 0, 1);
    struct tn_value *d = tn_value_dict();
    assert_int_equal(tn_value_set(d, tn_value_str(in->v.dict.keys[0]->v.str.s),
                                  tn_value_tensor(back)), 0);
    tn_release(t);
    tn_release(tc);
    tn_release(back);
    return d;
}

/* Past the recompile limit: the interpreter, with one warning however
 * many runs. */
static void test_recompile_limit(void **state)
{
    (void)state;
    struct model m;
    load_model("torch2", "block", &m);
    struct warnings w = {0};
    struct tn_compile_options o = opts(&w);
    o.recompile_limit = 1;
    struct tn_compiled *c = tn_compile_new(m.g, &o);
    struct tn_value *out = NULL;
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    tn_value_release(out);
    struct tn_value *in3 = transposed(m.in);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tn_compile_run(c, m.w, in3, &out), 0);
        same_tensors(out, m.want, 1e-5);
        tn_value_release(out);
    }
    assert_int_equal(w.n, 1);
    assert_non_null(strstr(w.last, "recompile limit (1)"));
    struct tn_compile_stats st;
    tn_compile_get_stats(c, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.fallbacks, 3);
    /* under strict, the limit is an error */
    tn_compile_free(c);
    o.strict = true;
    c = tn_compile_new(m.g, &o);
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    tn_value_release(out);
    assert_true(tn_compile_run(c, m.w, in3, &out) < 0);
    assert_non_null(strstr(tn_last_error(), "recompile limit"));
    tn_value_release(in3);
    tn_compile_free(c);
    free_model(&m);
}

/* No C compiler: the interpreter with a warning naming why; strict: an
 * error. */
static void test_no_compiler(void **state)
{
    (void)state;
    struct model m;
    load_model("torch2", "mlp", &m);
    struct warnings w = {0};
    struct tn_compile_options o = opts(&w);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/empty", cache); /* a cache with nothing in it */
    o.cache_dir = dir;
    o.cc = "/nonexistent/cc";
    struct tn_compiled *c = tn_compile_new(m.g, &o);
    struct tn_value *out = NULL;
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    same_tensors(out, m.want, 1e-5);
    tn_value_release(out);
    assert_int_equal(tn_compile_run(c, m.w, m.in, &out), 0);
    tn_value_release(out);
    assert_int_equal(w.n, 1);
    assert_non_null(strstr(w.last, "interpreter"));
    struct tn_compile_stats st;
    tn_compile_get_stats(c, &st);
    assert_int_equal(st.fallbacks, 2);
    tn_compile_free(c);
    o.strict = true;
    c = tn_compile_new(m.g, &o);
    assert_true(tn_compile_run(c, m.w, m.in, &out) < 0);
    print_message("# strict: %s\n", tn_last_error());
    tn_compile_free(c);
    free_model(&m);
}

/* The decomposition table is sorted (it is searched by bisection) and
 * each of its ops is one the registry knows. */
static void test_decomp_table(void **state)
{
    (void)state;
    int n = tn__decomp_count();
    assert_true(n > 50);
    for (int i = 1; i < n; i++)
        assert_true(strcmp(tn__decomp_name(i - 1), tn__decomp_name(i)) < 0);
}

/* The few-row product of a compiled program's matmul step against
 * tn_mm, tails of k and columns included; NULL outside its case. */
static void test_skinny_mm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{2, 2048, 64}, {3, 2061, 67}, {5, 3072, 130},
                                        {8, 2050, 65}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t M = shapes[i][0], K = shapes[i][1], N = shapes[i][2];
        struct tn_tensor *a = tn_randn((int64_t[]){M, K}, 2, TN_FLOAT32, NULL);
        struct tn_tensor *w = tn_randn((int64_t[]){N, K}, 2, TN_FLOAT32, NULL);
        struct tn_tensor *wt = tn_transpose(w, 0, 1);
        struct tn_tensor *r = tn__skinny_mm(a, wt), *e = tn_mm(a, wt);
        assert_non_null(e);
        if (r) { /* NULL without AVX-512 */
            const float *x = tn_data(r), *y = tn_data(e);
            assert_true(tn_is_contiguous(r) && tn_is_contiguous(e));
            for (int64_t k = 0; k < M * N; k++)
                assert_true(fabsf(x[k] - y[k]) <= 1e-4f * (float)K / 64 + 1e-4f * fabsf(y[k]));
            tn_release(r);
        }
        tn_release(e);
        tn_release(wt);
        tn_release(w);
        tn_release(a);
    }
    /* one row (sgemv's), nine, a short k, a row-major b: not its case */
    static const int64_t others[][3] = {{1, 2048, 64}, {9, 2048, 64}, {4, 768, 64}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        struct tn_tensor *a = tn_zeros((int64_t[]){others[i][0], others[i][1]}, 2, TN_FLOAT32);
        struct tn_tensor *w = tn_zeros((int64_t[]){others[i][2], others[i][1]}, 2, TN_FLOAT32);
        struct tn_tensor *wt = tn_transpose(w, 0, 1);
        assert_null(tn__skinny_mm(a, wt));
        tn_release(wt);
        tn_release(w);
        tn_release(a);
    }
    struct tn_tensor *a = tn_zeros((int64_t[]){4, 2048}, 2, TN_FLOAT32);
    struct tn_tensor *b = tn_zeros((int64_t[]){2048, 64}, 2, TN_FLOAT32);
    assert_null(tn__skinny_mm(a, b));
    tn_release(a);
    tn_release(b);
}

/* A view of base's data for tn__bmm_run and the same as a tensor. */
static struct tn_tensor *bmm_view(const struct tn_tensor *base, int nd, const int64_t *sizes,
                                  const int64_t *strides, struct tn__view *w)
{
    *w = (struct tn__view){.nd = nd};
    memcpy(w->sizes, sizes, (size_t)nd * sizeof *sizes);
    memcpy(w->strides, strides, (size_t)nd * sizeof *strides);
    return tn_as_strided(base, sizes, nd, strides, 0);
}

/* bmm.c's batched product (one gemm per matrix, operands read in place)
 * against tn_matmul: contiguous, transposed matrices, a broadcast batch
 * (stride 0), attention's permuted heads, an empty k, one b for the whole
 * batch (folded into rows where a's matrices follow one another); float32
 * and 64. */
static void test_bmm_run(void **state)
{
    (void)state;
    /* per case: a's base sizes and view strides, b's; batch [2, 3], m 5, k 4, n 6 */
    static const struct {
        int64_t an, as[4], bn, bs[4];
        int64_t k;
    } cases[] = {
        {120, {60, 20, 4, 1}, 144, {72, 24, 6, 1}, 4},   /* contiguous */
        {120, {60, 20, 1, 5}, 144, {72, 24, 1, 4}, 4},   /* both transposed (k^T) */
        {120, {60, 20, 4, 1}, 72, {0, 24, 6, 1}, 4},     /* b's batch broadcast */
        {120, {60, 4, 12, 1}, 144, {72, 6, 18, 1}, 4},   /* [B, S, H, D] permuted */
        {0, {0, 0, 0, 1}, 0, {0, 0, 6, 1}, 0},           /* k = 0: zeros */
        {120, {60, 20, 4, 1}, 24, {0, 0, 6, 1}, 4},      /* one b: the batch as rows */
        {120, {60, 20, 4, 1}, 24, {0, 0, 1, 4}, 4},      /* one linear's weight, transposed */
        {140, {72, 24, 4, 1}, 24, {0, 0, 1, 4}, 4},      /* one b, a's matrices apart */
    };
    for (int f = 0; f < 2; f++) {
        enum tn_dtype dt = f ? TN_FLOAT64 : TN_FLOAT32;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int64_t k = cases[i].k, asz[4] = {2, 3, 5, k}, bsz[4] = {2, 3, k, 6};
            struct tn_tensor *ab = tn_randn((int64_t[]){cases[i].an + 1}, 1, dt, NULL);
            struct tn_tensor *bb = tn_randn((int64_t[]){cases[i].bn + 1}, 1, dt, NULL);
            struct tn__view va, vb;
            struct tn_tensor *a = bmm_view(ab, 4, asz, cases[i].as, &va);
            struct tn_tensor *b = bmm_view(bb, 4, bsz, cases[i].bs, &vb);
            struct tn_tensor *r = tn__bmm_run(&va, tn_data(ab), &vb, tn_data(bb), dt);
            struct tn_tensor *e = tn_matmul(a, b), *ec = e ? tn_contiguous(e) : NULL;
            assert_non_null(r);
            assert_non_null(ec);
            assert_true(tn_is_contiguous(r) && tn_numel(r) == 180 && tn_numel(ec) == 180);
            for (int64_t j = 0; j < 180; j++) {
                double x = f ? ((double *)tn_data(r))[j] : ((float *)tn_data(r))[j];
                double y = f ? ((double *)tn_data(ec))[j] : ((float *)tn_data(ec))[j];
                assert_true(fabs(x - y) <= 1e-5 + 1e-5 * fabs(y));
            }
            tn_release(r);
            tn_release(ec);
            tn_release(e);
            tn_release(a);
            tn_release(b);
            tn_release(ab);
            tn_release(bb);
        }
    }
    /* neither dimension contiguous: not a layout BLAS reads */
    struct tn__view w = {.nd = 3, .sizes = {2, 3, 4}, .strides = {24, 8, 2}};
    bool t;
    int64_t ld;
    assert_false(tn__gemm_layout(&w, &t, &ld));
    w.strides[2] = 1;
    assert_true(tn__gemm_layout(&w, &t, &ld) && !t && ld == 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_torch2),
        cmocka_unit_test(test_models_torch1),
        cmocka_unit_test(test_block_fusion),
        cmocka_unit_test(test_max_nan),
        cmocka_unit_test(test_guards),
        cmocka_unit_test(test_recompile_limit),
        cmocka_unit_test(test_no_compiler),
        cmocka_unit_test(test_decomp_table),
        cmocka_unit_test(test_skinny_mm),
        cmocka_unit_test(test_bmm_run),
    };
    if (setup(NULL) < 0)
        return 1;
    int rc = TN_RUN_TESTS(tests);
    return teardown(NULL) < 0 ? 1 : rc;
}
