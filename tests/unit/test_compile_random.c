/*
 * test_compile_random: differential tests of the graph compiler on random
 * graphs (tests/unit/randgraph.c): for each seed, one graph of independent
 * chains (pointwise ops, broadcasts, views, reductions over random dims,
 * every dtype, non-contiguous and zero-size inputs) runs compiled and in
 * the interpreter, and every output must agree (integers and bools bit for
 * bit, floats within the drift of rounding once where eager rounds per op).
 *
 * TN_RANDGRAPH_SEED=S runs seed S alone and prints its graph;
 * TN_RANDGRAPH_N=N runs seeds 1..N (default 150, each graph one C compile).
 * TN_RANDGRAPH_DUMP=DIR writes a failing (or the one) seed's graph and
 * inputs there, for tcompile.
 * A failure prints the seed, the graph and the first differing element.
 */
#include "tn_test.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "randgraph.h"

#define DEFAULT_SEEDS 150

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

static char cache[4096];

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(cache, sizeof cache, "%s/tn-randgraph-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(cache) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(cache, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* text as TAP comments, line by line (print_message cuts long ones) */
static void comment(const char *text)
{
    fflush(stdout);
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        printf("# %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    fflush(stdout);
}

/* With TN_RANDGRAPH_DUMP=DIR: the graph and its inputs as DIR/seed-S.json
 * and DIR/seed-S.pt, for `tcompile run -i DIR/seed-S.pt DIR/seed-S.json`
 * (add --interpret or --explain). */
static void dump(uint64_t seed, const struct rg_graph *rg)
{
    const char *dir = getenv("TN_RANDGRAPH_DUMP");
    if (!dir || !*dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%llu.json", dir, (unsigned long long)seed);
    int rc = tn_write_file(path, rg->json, strlen(rg->json), false);
    snprintf(path, sizeof path, "%s/seed-%llu.pt", dir, (unsigned long long)seed);
    if (rc == 0)
        rc = tn_save(path, rg->inputs, NULL);
    print_message("# %s: %s\n", path, rc == 0 ? "written, with its .json" : tn_last_error());
}

/* The ops the generator writes that lib/compile leaves to libtensor by
 * design; any other node left out of the kernels is a lowering that did
 * not apply (a name, an argument or a dtype it missed). */
static const char *const by_design[] = {"aten::cumsum", "aten::cat"};

/* The lines of explain naming a node left to libtensor against the design
 * (a new string, or NULL when none). */
static char *unlowered(const char *explain)
{
    char *out = NULL;
    size_t len = 0;
    for (const char *p = explain ? strstr(explain, "extern aten::") : NULL; p;
         p = strstr(p + 1, "extern aten::")) {
        const char *op = p + strlen("extern "), *end = strchr(op, ':');
        end = end ? end + 2 : op; /* "aten::x: v1: why": past the name's "::" */
        end = strchr(end, ':');
        size_t n = end ? (size_t)(end - op) : strlen(op), k = strcspn(p, "\n");
        bool ok = false;
        for (size_t i = 0; i < sizeof by_design / sizeof *by_design; i++)
            ok |= strlen(by_design[i]) == n && !strncmp(op, by_design[i], n);
        if (ok)
            continue;
        char *q = realloc(out, len + k + 2);
        if (!q)
            break;
        out = q;
        memcpy(out + len, p, k);
        len += k;
        out[len++] = '\n';
        out[len] = 0;
    }
    return out;
}

/* Runs one seed; 0 when compiled and interpreted agree and every node
 * the compiler lowers was lowered. */
static int run_seed(uint64_t seed, bool show)
{
    struct rg_src src;
    rg_src_seed(&src, seed);
    struct rg_graph rg;
    int rc = rg_generate(&src, NULL, &rg);
    if (rc < 0) {
        print_message("# seed %llu: the generator failed: %s\n", (unsigned long long)seed,
                      tn_last_error());
        return -1;
    }
    if (show) {
        print_message("# seed %llu: %d nodes, %d outputs\n", (unsigned long long)seed, rg.nnodes,
                      rg.noutputs);
        comment(rg.json);
        dump(seed, &rg);
    }
    char *why = NULL, *explain = NULL;
    rc = rg_compare_explain(&rg, cache, &why, &explain);
    char *missed = rc ? NULL : unlowered(explain);
    if (missed) {
        why = malloc(strlen(missed) + 64);
        sprintf(why, "nodes the compiler lowers were left to libtensor:\n%s", missed);
        free(missed);
        rc = 1;
    }
    free(explain);
    if (rc) {
        print_message("# seed %llu (rerun: TN_RANDGRAPH_SEED=%llu):\n", (unsigned long long)seed,
                      (unsigned long long)seed);
        comment(why);
        if (!show) {
            comment(rg.json);
            dump(seed, &rg);
        }
    }
    free(why);
    rg_graph_free(&rg);
    return rc;
}

static void test_random_graphs(void **state)
{
    (void)state;
    const char *one = getenv("TN_RANDGRAPH_SEED"), *ns = getenv("TN_RANDGRAPH_N");
    if (one && *one) {
        assert_int_equal(run_seed(strtoull(one, NULL, 10), true), 0);
        return;
    }
    int n = ns && *ns ? atoi(ns) : DEFAULT_SEEDS, failed = 0;
    for (int s = 1; s <= n; s++)
        failed += run_seed((uint64_t)s, false) != 0;
    print_message("# %d of %d random graphs failed\n", failed, n);
    assert_int_equal(failed, 0);
}

/* The generator is deterministic: one seed, one graph, the same inputs. */
static void test_deterministic(void **state)
{
    (void)state;
    struct rg_graph a, b;
    struct rg_src s1, s2;
    rg_src_seed(&s1, 42);
    rg_src_seed(&s2, 42);
    assert_int_equal(rg_generate(&s1, NULL, &a), 0);
    assert_int_equal(rg_generate(&s2, NULL, &b), 0);
    assert_string_equal(a.json, b.json);
    assert_int_equal(a.inputs->v.dict.n, b.inputs->v.dict.n);
    for (size_t i = 0; i < a.inputs->v.dict.n; i++) {
        char *x = tn_test_hex(a.inputs->v.dict.vals[i]->v.tensor);
        char *y = tn_test_hex(b.inputs->v.dict.vals[i]->v.tensor);
        assert_string_equal(x, y);
        free(x);
        free(y);
    }
    rg_graph_free(&a);
    rg_graph_free(&b);
}

/* The comparison can fail: a graph the checker refuses, and an output
 * changed in one element (floats by more than the drift, integers and
 * bools by one), are reported. */
static void test_compare_fails(void **state)
{
    (void)state;
    struct rg_graph rg;
    struct rg_src s;
    rg_src_seed(&s, 7);
    assert_int_equal(rg_generate(&s, NULL, &rg), 0);
    char *why = NULL, *json = rg.json, *bad = strdup(json);
    char *at = strstr(bad, "torch.ops.aten.");
    assert_non_null(at);
    memcpy(at + strlen("torch.ops.aten."), "zz", 2); /* a target the registry lacks */
    rg.json = bad;
    assert_int_equal(rg_compare(&rg, cache, &why), 1);
    assert_non_null(strstr(why, "does not check"));
    free(why);
    rg.json = json;
    free(bad);

    struct tn_graph *g = tn_graph_parse(rg.json, strlen(rg.json), "r.json", NULL);
    assert_non_null(g);
    assert_int_equal(tn_graph_check(g, NULL, NULL), 0);
    struct tn_value *want = NULL, *got = NULL;
    assert_int_equal(tn_graph_run(g, NULL, rg.inputs, &want, NULL), 0);
    assert_int_equal(tn_graph_run(g, NULL, rg.inputs, &got, NULL), 0);
    assert_int_equal(rg_compare_outputs(&rg, got, want, &why), 0);
    int changed = 0;
    for (size_t i = 0; i < got->v.dict.n; i++) {
        struct tn_tensor *t = got->v.dict.vals[i]->v.tensor;
        const char *name = got->v.dict.keys[i]->v.str.s;
        if (tn_numel(t) == 0 || t->storage == tn_value_get(want, name)->v.tensor->storage)
            continue; /* empty, or a graph input both runs return */
        /* t's first element: NaN for a number (0 for a NaN), + 1 for an
         * integer, flipped for a bool */
        struct tn_tensor *first = tn_as_strided(t, (int64_t[1]){0}, 0, (int64_t[1]){0}, t->offset);
        struct tn_scalar v = tn_item(first);
        double x = tn_scalar_to_double(v);
        tn_fill_(first, t->dtype == TN_BOOL             ? tn_bool(x == 0)
                        : tn_dtype_is_floating(t->dtype) ? tn_float(isnan(x) ? 0 : NAN)
                                                         : tn_int(tn_scalar_to_int64(v) + 1));
        tn_release(first);
        assert_int_equal(rg_compare_outputs(&rg, got, want, &why), 1);
        assert_non_null(strstr(why, name));
        free(why);
        tn_fill_(first = tn_as_strided(t, (int64_t[1]){0}, 0, (int64_t[1]){0}, t->offset), v);
        tn_release(first);
        changed++;
    }
    assert_true(changed > 0);
    tn_value_release(want);
    tn_value_release(got);
    tn_graph_free(g);
    rg_graph_free(&rg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_compare_fails),
        cmocka_unit_test(test_random_graphs),
    };
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return _cmocka_run_group_tests("tests", tests, sizeof tests / sizeof *tests, setup, teardown);
}
