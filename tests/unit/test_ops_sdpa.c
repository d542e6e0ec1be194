/*
 * Unit tests of scaled_dot_product_attention (lib/ops/attention.c,
 * cpu/attention.c): every case of tests/fixtures/ops/sdpa.json (PyTorch
 * 2.x: values, the flash pair, errors), gradients against PyTorch's
 * autograd, gradcheck in float64 (masks, causal, GQA, dropout with a fixed
 * seed, lengths that cross the kernel's blocks), the result's strides,
 * dropout against PyTorch's for a seed (its math path: values, a second
 * call's mask, gradients), dropout's statistics,
 * determinism across thread counts and the Meta shapes.
 */
#include "ops_cases.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/sdpa", true, true);
}

static void drop4(struct tn_tensor *a, struct tn_tensor *b, struct tn_tensor *c,
                  struct tn_tensor *d)
{
    tn_release(a);
    tn_release(b);
    tn_release(c);
    tn_release(d);
}

static struct tn_tensor *opt_tensor(json_t *j)
{
    return j && !json_is_null(j) ? tn_test_tensor(j) : NULL;
}

/* A gradient case of the fixture: q, k and v requiring grad, the mask,
 * grad_out. */
struct gcase {
    struct tn_tensor *in[3], *mask, *go;
};

static void gcase_load(json_t *c, struct gcase *g)
{
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        g->in[i] = tn_test_tensor(json_object_get(c, names[i]));
        assert_int_equal(tn_requires_grad_(g->in[i], true), 0);
    }
    g->mask = opt_tensor(json_object_get(c, "mask"));
    g->go = tn_test_tensor(json_object_get(c, "grad_out"));
}

/* How many of q, k and v (released) have gradients other than the case's
 * (what: "gradient case" or "dropout case") */
static int gcase_grads(json_t *c, struct gcase *g, const char *what, size_t ci)
{
    int failed = 0;
    for (int i = 0; i < 3; i++) {
        char w[64];
        snprintf(w, sizeof w, "%s %zu, grad of %c", what, ci, "qkv"[i]);
        assert_non_null(g->in[i]->grad);
        failed += compare(g->in[i]->grad, json_array_get(json_object_get(c, "grads"), (size_t)i),
                          w, true) != 0;
        tn_release(g->in[i]);
    }
    return failed;
}

/* sdpa of the case (dropout_p p) as PyTorch called it */
static struct tn_tensor *gcase_sdpa(json_t *c, const struct gcase *g, double p)
{
    json_t *js = json_object_get(c, "scale");
    double scale = json_is_null(js) ? 0 : json_number_value(js);
    return tn_scaled_dot_product_attention(g->in[0], g->in[1], g->in[2], g->mask, p,
                                           json_is_true(json_object_get(c, "is_causal")),
                                           json_is_null(js) ? NULL : &scale,
                                           json_is_true(json_object_get(c, "enable_gqa")));
}

/* The gradients of query, key and value through tn_backward equal those
 * of PyTorch's autograd. */
static void test_grads_against_pytorch(void **state)
{
    json_t *fx = tn_test_fixture("../ops/sdpa");
    json_t *cases = json_object_get(fx, "grads"), *c;
    size_t ci;
    int failed = 0;
    assert_true(json_array_size(cases) >= 8);
    json_array_foreach(cases, ci, c) {
        struct gcase g;
        gcase_load(c, &g);
        struct tn_tensor *mask = g.mask, *go = g.go;
        json_t *gm = json_array_get(json_object_get(c, "grads"), 3);
        if (!json_is_null(gm))
            assert_int_equal(tn_requires_grad_(mask, true), 0);
        struct tn_tensor *out = gcase_sdpa(c, &g, 0);
        assert_non_null(out);
        char what[64];
        snprintf(what, sizeof what, "gradient case %zu output", ci);
        failed += compare(out, json_object_get(c, "out"), what, true) != 0;
        assert_int_equal(tn_backward(&out, 1, &go, false, false), 0);
        failed += gcase_grads(c, &g, "gradient case", ci);
        if (!json_is_null(gm)) {
            snprintf(what, sizeof what, "gradient case %zu, grad of the mask", ci);
            assert_non_null(mask->grad);
            failed += compare(mask->grad, gm, what, true) != 0;
        }
        tn_release(out);
        tn_release(go);
        tn_release(mask);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* a fixture base tensor permuted by its "NAME_perm" (null: as it is) */
static struct tn_tensor *permuted(json_t *c, const char *name)
{
    char key[16];
    snprintf(key, sizeof key, "%s_perm", name);
    struct tn_tensor *b = tn_test_tensor(json_object_get(c, name));
    json_t *p = json_object_get(c, key);
    assert_non_null(b);
    if (json_is_null(p))
        return b;
    int64_t dims[TN_MAX_DIMS];
    int n = tn_test_ints(p, dims);
    struct tn_tensor *t = tn_permute(b, dims, n);
    tn_release(b);
    return t;
}

/* The result's strides are PyTorch's: the query's layout where PyTorch
 * runs its CPU flash kernel, contiguous where it runs the math path. */
static void test_layouts(void **state)
{
    json_t *fx = tn_test_fixture("../ops/sdpa");
    json_t *cases = json_object_get(fx, "layouts"), *c;
    size_t ci;
    int failed = 0;
    assert_true(json_array_size(cases) >= 8);
    json_array_foreach(cases, ci, c) {
        struct tn_tensor *q = permuted(c, "q"), *k = permuted(c, "k"), *v = permuted(c, "v");
        struct tn_tensor *mask = opt_tensor(json_object_get(c, "mask"));
        double p = json_number_value(json_object_get(c, "dropout_p"));
        struct tn_tensor *out = tn_scaled_dot_product_attention(
            q, k, v, mask, p, json_is_true(json_object_get(c, "is_causal")), NULL,
            json_is_true(json_object_get(c, "enable_gqa")));
        assert_non_null(out);
        int64_t want[TN_MAX_DIMS];
        int n = tn_test_ints(json_object_get(c, "stride"), want);
        char what[64], a[128], b[128];
        snprintf(what, sizeof what, "layout case %zu", ci);
        if (n != out->ndim || memcmp(want, out->strides, sizeof(int64_t) * (size_t)n) != 0) {
            print_message("# %s: strides %s, PyTorch's %s\n", what,
                          tn_shape_format(out->strides, out->ndim, a, sizeof a),
                          tn_shape_format(want, n, b, sizeof b));
            failed++;
        } else if (p == 0) {
            failed += compare(out, json_object_get(c, "out"), what, true) != 0;
        }
        drop4(q, k, v, mask);
        tn_release(out);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* _scaled_dot_product_flash_attention_for_cpu lays out its output and
 * logsumexp as PyTorch's CPU kernel does, whatever the query's layout
 * (compiled code reads them with those strides). */
static void test_flash_layouts(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../ops/sdpa");
    json_t *cases = json_object_get(fx, "flash_layouts"), *c;
    size_t ci;
    int failed = 0;
    assert_true(json_array_size(cases) >= 4);
    json_array_foreach(cases, ci, c) {
        struct tn_tensor *q = permuted(c, "q"), *k = permuted(c, "k"), *v = permuted(c, "v");
        struct tn_tensor *out = NULL, *lse = NULL;
        assert_int_equal(tn_underscore_scaled_dot_product_flash_attention_for_cpu(
                             q, k, v, 0.0, false, NULL, NULL, &out, &lse),
                         0);
        int64_t want[TN_MAX_DIMS], lwant[TN_MAX_DIMS];
        int n = tn_test_ints(json_object_get(c, "stride"), want);
        int ln = tn_test_ints(json_object_get(c, "lse_stride"), lwant);
        char what[64], a[128], b[128];
        snprintf(what, sizeof what, "flash layout case %zu", ci);
        if (n != out->ndim || memcmp(want, out->strides, sizeof(int64_t) * (size_t)n) ||
            ln != lse->ndim || memcmp(lwant, lse->strides, sizeof(int64_t) * (size_t)ln)) {
            print_message("# %s: strides %s and %s, PyTorch's %s and %s\n", what,
                          tn_shape_format(out->strides, out->ndim, a, sizeof a),
                          tn_shape_format(lse->strides, lse->ndim, b, sizeof b),
                          json_dumps(json_object_get(c, "stride"), 0),
                          json_dumps(json_object_get(c, "lse_stride"), 0));
            failed++;
        } else {
            failed += compare(out, json_object_get(c, "out"), what, true) != 0;
        }
        drop4(q, k, v, NULL);
        tn_release(out);
        tn_release(lse);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

struct gc {
    const struct tn_tensor *mask;
    double p, scale;
    bool causal, gqa, has_scale, mask_in; /* mask_in: the mask is input 3 */
    int64_t seed;
};

/* dropout: sdpa (its math path) after tn_manual_seed(seed), a fixed
 * function; else the kernel, _tn_attention */
static struct tn_tensor *attn_fn(struct tn_tensor *const *in, void *ctx)
{
    const struct gc *g = ctx;
    struct tn_tensor *out, *lse;
    const struct tn_tensor *m = g->mask_in ? in[3] : g->mask;
    if (g->p > 0) {
        tn_manual_seed((uint64_t)g->seed);
        return tn_scaled_dot_product_attention(in[0], in[1], in[2], m, g->p, g->causal,
                                               g->has_scale ? &g->scale : NULL, g->gqa);
    }
    if (tn_underscore_tn_attention(in[0], in[1], in[2], m, g->causal,
                                   g->has_scale ? &g->scale : NULL, g->gqa, &out, &lse) < 0)
        return NULL;
    tn_release(lse);
    return out;
}

static void gradcheck_case(const int64_t *qs, const int64_t *ks, const int64_t *vs, int nd,
                           struct gc *g)
{
    int n = g->mask_in ? 4 : 3;
    struct tn_tensor *in[4] = {tn_randn(qs, nd, TN_FLOAT64, NULL), tn_randn(ks, nd, TN_FLOAT64, NULL),
                               tn_randn(vs, nd, TN_FLOAT64, NULL),
                               g->mask_in ? tn_detach(g->mask) : NULL};
    for (int i = 0; i < n; i++)
        assert_int_equal(tn_requires_grad_(in[i], true), 0);
    int r = tn_gradcheck(attn_fn, in, n, g, 1e-6, 1e-6, 1e-4);
    if (r != 1)
        print_message("# gradcheck: %s\n", tn_last_error());
    assert_int_equal(r, 1);
    for (int i = 0; i < n; i++)
        tn_release(in[i]);
}

static void test_gradcheck(void **state)
{
    const int64_t q[] = {2, 3, 5, 4}, k[] = {2, 3, 7, 4}, v[] = {2, 3, 7, 3};
    struct gc plain = {0}, causal = {.causal = true, .has_scale = true, .scale = 0.7};
    gradcheck_case(q, k, v, 4, &plain);
    gradcheck_case(q, k, v, 4, &causal);
    /* a float mask and a bool mask with a row that attends nothing */
    struct tn_tensor *fm = tn_randn(TN_SHAPE(2, 1, 5, 7), TN_FLOAT64, NULL);
    struct gc fmask = {.mask = fm}, fmask_in = {.mask = fm, .mask_in = true, .p = 0.2, .seed = 3};
    gradcheck_case(q, k, v, 4, &fmask);
    gradcheck_case(q, k, v, 4, &fmask_in); /* the mask's gradient, under dropout too */
    struct tn_tensor *bm = tn_rand(TN_SHAPE(5, 7), TN_FLOAT32, NULL), *bmb = tn_gt_scalar(bm, tn_float(0.4));
    struct tn_tensor *row = tn_select(bmb, 0, 2);
    assert_int_equal(tn_fill_(row, tn_int(0)), 0);
    struct gc bmask = {.mask = bmb};
    gradcheck_case(q, k, v, 4, &bmask);
    /* grouped-query heads: 6 query heads on 2 key/value heads */
    const int64_t gq[] = {1, 6, 4, 3}, gk[] = {1, 2, 5, 3}, gv[] = {1, 2, 5, 2};
    struct gc gqa = {.gqa = true};
    gradcheck_case(gq, gk, gv, 4, &gqa);
    /* dropout is a fixed function of its seed */
    struct gc drop = {.p = 0.3, .seed = 42};
    gradcheck_case(q, k, v, 4, &drop);
    /* more rows and keys than one block of each (64 and 128) */
    const int64_t bq[] = {1, 70, 2}, bk[] = {1, 140, 2}, bv[] = {1, 140, 1};
    struct gc bigc = {.causal = true, .p = 0.2, .seed = 7};
    gradcheck_case(bq, bk, bv, 3, &bigc);
    tn_release(fm);
    tn_release(bm);
    tn_release(bmb);
    tn_release(row);
}

/* Dropout as PyTorch's math path: for the fixture's seed the same output,
 * a second call the same other mask, and the gradients of the first. */
static void test_dropout_against_pytorch(void **state)
{
    json_t *fx = tn_test_fixture("../ops/sdpa");
    json_t *cases = json_object_get(fx, "dropout"), *c;
    size_t ci;
    int failed = 0;
    assert_true(json_array_size(cases) >= 12);
    json_array_foreach(cases, ci, c) {
        struct gcase g;
        gcase_load(c, &g);
        struct tn_tensor *mask = g.mask, *go = g.go;
        double p = json_number_value(json_object_get(c, "dropout_p"));
        tn_manual_seed((uint64_t)json_integer_value(json_object_get(c, "seed")));
        struct tn_tensor *o[2];
        for (int r = 0; r < 2; r++) {
            o[r] = gcase_sdpa(c, &g, p);
            assert_non_null(o[r]);
            char what[64];
            snprintf(what, sizeof what, "dropout case %zu, call %d", ci, r + 1);
            failed += compare(o[r], json_object_get(c, r ? "out2" : "out"), what, true) != 0;
        }
        assert_int_equal(tn_backward(&o[0], 1, &go, false, false), 0);
        failed += gcase_grads(c, &g, "dropout case", ci);
        drop4(o[0], o[1], go, mask);
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* Dropout with q = 0 (uniform attention over S keys) and value the
 * identity: out[i][j] is 1/(S (1-p)) where the mask keeps (i, j), else 0,
 * so the output shows the mask. */
static void test_dropout_statistics(void **state)
{
    const int64_t n = 256;
    const double p = 0.3;
    struct tn_tensor *q = tn_zeros(TN_SHAPE(1, n, 8), TN_FLOAT32);
    struct tn_tensor *k = tn_randn(TN_SHAPE(1, n, 8), TN_FLOAT32, NULL);
    struct tn_tensor *eye = tn_eye(n, n, TN_FLOAT32), *v = tn_unsqueeze(eye, 0);
    tn_manual_seed(5);
    struct tn_tensor *a = tn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, false);
    struct tn_tensor *b = tn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, false);
    tn_manual_seed(5);
    struct tn_tensor *c = tn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, false);
    struct tn_tensor *d0 = tn_scaled_dot_product_attention(q, k, v, NULL, 0, false, NULL, false);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    const float *pa = tn_data(a), *pb = tn_data(b), *pc = tn_data(c), *pd = tn_data(d0);
    int64_t kept = 0, same = 0, bad = 0;
    float want = (float)(1. / ((double)n * (1 - p)));
    for (int64_t i = 0; i < n * n; i++) {
        kept += pa[i] != 0;
        same += (pa[i] != 0) == (pb[i] != 0);
        bad += pa[i] != 0 && fabsf(pa[i] - want) > 1e-6f * want * 10;
        bad += pc[i] != pa[i];
        bad += fabsf(pd[i] - 1.f / (float)n) > 1e-7f;
    }
    double frac = (double)kept / (double)(n * n);
    print_message("# kept %.4f of the probabilities (1 - p = %.2f)\n", frac, 1 - p);
    assert_int_equal(bad, 0);
    /* 65536 draws: the standard deviation of the fraction is 0.0018 */
    assert_true(fabs(frac - (1 - p)) < 0.01);
    /* a second call draws another mask: about p^2 + (1-p)^2 agree */
    assert_true(same < n * n * 0.62);
    drop4(q, k, eye, v);
    drop4(a, b, c, d0);
}

/* Blocks on the thread pool: the same bits at 1 and 3 threads, forward and
 * backward (at 2 heads, one backward pass a head at 1 thread, two passes at
 * 3), causal, or with a float mask that takes a gradient. */
static void deterministic(bool causal)
{
    struct tn_tensor *r[2][5];
    struct tn_tensor *q = tn_randn(TN_SHAPE(2, 2, 150, 16), TN_FLOAT32, NULL);
    struct tn_tensor *k = tn_randn(TN_SHAPE(2, 1, 300, 16), TN_FLOAT32, NULL);
    struct tn_tensor *v = tn_randn(TN_SHAPE(2, 1, 300, 16), TN_FLOAT32, NULL);
    struct tn_tensor *m = causal ? NULL : tn_randn(TN_SHAPE(2, 1, 150, 300), TN_FLOAT32, NULL);
    int nt = tn_get_num_threads(), n = causal ? 4 : 5;
    for (int t = 0; t < 2; t++) {
        tn_set_num_threads(t ? 3 : 1);
        tn_manual_seed(1); /* the same dropout mask in both runs */
        struct tn_tensor *in[4] = {tn_detach(q), tn_detach(k), tn_detach(v),
                                   m ? tn_detach(m) : NULL};
        for (int i = 0; i < n - 1; i++)
            assert_int_equal(tn_requires_grad_(in[i], true), 0);
        r[t][0] = tn_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.1, causal, NULL,
                                                  true);
        assert_non_null(r[t][0]);
        struct tn_tensor *s = tn_sum(r[t][0], TN_DTYPE_UNSET);
        assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
        for (int i = 0; i < n - 1; i++) {
            r[t][i + 1] = tn_retain(in[i]->grad);
            tn_release(in[i]);
        }
        tn_release(s);
    }
    tn_set_num_threads(nt);
    for (int i = 0; i < n; i++) {
        assert_int_equal(tn_numel(r[0][i]), tn_numel(r[1][i]));
        assert_memory_equal(tn_data(r[0][i]), tn_data(r[1][i]),
                            (size_t)tn_numel(r[0][i]) * sizeof(float));
        tn_release(r[0][i]);
        tn_release(r[1][i]);
    }
    drop4(q, k, v, m);
}

static void test_deterministic(void **state)
{
    deterministic(true);
    deterministic(false);
}

/* Meta tensors: the shapes alone, for tcompile check. */
static void test_meta(void **state)
{
    const struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *q = tn_empty_on(TN_SHAPE(3, 8, 1000, 64), TN_FLOAT16, meta);
    struct tn_tensor *k = tn_empty_on(TN_SHAPE(3, 2, 5000, 64), TN_FLOAT16, meta);
    struct tn_tensor *v = tn_empty_on(TN_SHAPE(3, 2, 5000, 32), TN_FLOAT16, meta);
    struct tn_tensor *o = tn_scaled_dot_product_attention(q, k, v, NULL, 0, true, NULL, true), *lse;
    assert_non_null(o);
    assert_int_equal(o->device.type, TN_DEVICE_META);
    assert_int_equal(o->dtype, TN_FLOAT16);
    assert_int_equal(o->ndim, 4);
    assert_int_equal(o->sizes[2], 1000);
    assert_int_equal(o->sizes[3], 32);
    tn_release(o);
    assert_int_equal(tn_underscore_tn_attention(q, k, v, NULL, false, NULL, true, &o, &lse), 0);
    assert_int_equal(lse->dtype, TN_FLOAT32);
    assert_int_equal(lse->ndim, 3);
    assert_int_equal(lse->sizes[2], 1000);
    drop4(q, k, v, o);
    tn_release(lse);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_grads_against_pytorch),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_flash_layouts),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_dropout_against_pytorch),
        cmocka_unit_test(test_dropout_statistics),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_meta),
    };
    return TN_RUN_TESTS(tests);
}
