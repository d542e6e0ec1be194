/*
 * test_pickle: the restricted unpickler refuses what
 * torch.load(weights_only=True) refuses and loads what it loads
 * (tests/fixtures/io_bad.py recorded PyTorch 1.13's and 2.x's outcomes),
 * with messages naming the opcode or global and its byte offset; the
 * decoder walks every opcode; the writer's output reads back.
 */
#include "tn_test.h"

#include "io/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static char *fixture_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/io/%s", TN_SRCDIR, name);
    return buf;
}

/* Cases where tensorkit is deliberately stricter than PyTorch. */
static bool stricter(const char *name)
{
    return !strcmp(name, "cycle") ||          /* self-holding containers are refused */
           !strcmp(name, "too_big_storage"); /* 1.13 let storages outgrow their record */
}

/* The cases whose message we give in PyTorch 2.x's words. */
static const char *const same_words[] = {"append_dict", "frame", "stack_global", "setitem_list",
                                         "global_os"};

static void test_against_pytorch(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/bad");
    const char *name;
    json_t *rec;
    int bad = 0;
    json_object_foreach(fx, name, rec) {
        if (!strcmp(name, "torch") || !strcmp(name, "deflated") || !strncmp(name, "refuse_", 7) ||
            !json_object_get(rec, "torch2"))
            continue;
        char file[128];
        snprintf(file, sizeof file, "bad_%s.pt", name);
        for (int a = 0; a < 2; a++) {
            const char *theirs = json_string_value(json_object_get(rec, a ? "torch1" : "torch2"));
            struct tn_load_options o = {.allowlist = a ? TN_ALLOW_TORCH1 : TN_ALLOW_CURRENT};
            struct tn_value *v = tn_load(fixture_path(file), &o);
            bool want_ok = !strcmp(theirs, "ok") && !stricter(name);
            if (want_ok != (v != NULL)) {
                print_message("# %s (%s): ours %s, PyTorch %s\n", name, a ? "1.13" : "2.x",
                              v ? "loads" : tn_last_error(), theirs);
                bad++;
            }
            if (!v) {
                /* Every refusal names the file and, for pickle errors, the byte. */
                if (!strstr(tn_last_error(), file)) {
                    print_message("# %s: message does not name the file: %s\n", name,
                                  tn_last_error());
                    bad++;
                }
                for (size_t k = 0; !a && k < sizeof same_words / sizeof same_words[0]; k++)
                    if (!strcmp(name, same_words[k]) && !strstr(tn_last_error(), theirs)) {
                        print_message("# %s: ours '%s', PyTorch '%s'\n", name, tn_last_error(),
                                      theirs);
                        bad++;
                    }
            }
            tn_value_release(v);
        }
    }
    json_decref(fx);
    assert_int_equal(bad, 0);
}

static void test_messages(void **state)
{
    (void)state;
    assert_null(tn_load(fixture_path("bad_global_builtins.pt"), NULL));
    assert_non_null(strstr(tn_last_error(), "data.pkl: GLOBAL at byte 2: Unsupported global: "
                                            "GLOBAL __builtin__.eval was not an allowed global"));
    assert_null(tn_load(fixture_path("bad_too_big_storage.pt"), NULL));
    assert_non_null(strstr(tn_last_error(), "data/0 holds 16 bytes but the storage needs 400"));
    assert_null(tn_load(fixture_path("bad_stride_out.pt"), NULL));
    assert_non_null(strstr(tn_last_error(), "REDUCE at byte"));
}

/* TorchScript archives and dtypes tensorkit lacks are refused with a
 * message saying why; float8 and legacy (pre-1.6) files, once refused,
 * load. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *file, *why;
    } cases[] = {
        {"refuse_torchscript.pt", "a TorchScript archive (it holds constants.pkl)"},
        {"dtypes_refuse_complex32.pt", "_rebuild_tensor_v3: dtype torch.complex32 is not "
                                       "supported by tensorkit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_null(tn_load(fixture_path(cases[i].file), NULL));
        if (!strstr(tn_last_error(), cases[i].why))
            print_message("# %s: %s\n", cases[i].file, tn_last_error());
        assert_non_null(strstr(tn_last_error(), cases[i].why));
    }
    struct tn_value *v = tn_load(fixture_path("refuse_float8.pt"), NULL);
    assert_non_null(v);
    assert_int_equal(tn_value_get(v, "a")->v.tensor->dtype, TN_FLOAT8_E4M3FN);
    tn_value_release(v);
    /* torch.save({"a": torch.ones(2)}, _use_new_zipfile_serialization=False) */
    v = tn_load(fixture_path("refuse_legacy.pt"), NULL);
    if (!v)
        print_message("# refuse_legacy.pt: %s\n", tn_last_error());
    assert_non_null(v);
    struct tn_tensor *a = tn_value_get(v, "a")->v.tensor;
    assert_int_equal(a->dtype, TN_FLOAT32);
    assert_int_equal(tn_numel(a), 2);
    assert_true(((const float *)tn_data(a))[0] == 1.0f && ((const float *)tn_data(a))[1] == 1.0f);
    tn_value_release(v);
}

/* The decoder walks opcodes the machine refuses (protocol 4 and 5), so the
 * scanner can list them. */
static void test_decode_all(void **state)
{
    (void)state;
    static const unsigned char p[] = {
        0x80, 0x05, 0x95, 0x10, 0, 0, 0, 0, 0, 0, 0,  /* PROTO 5, FRAME */
        0x8c, 0x02, 'o', 's', 0x94,                 /* SHORT_BINUNICODE, MEMOIZE */
        0x8c, 0x06, 's', 'y', 's', 't', 'e', 'm', 0x93, /* STACK_GLOBAL */
        'I', '1', '2', '\n', 'L', '-', '9', 'L', '\n', 0x8a, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        'c', 'a', '\n', 'b', '\n', 0x8e, 1, 0, 0, 0, 0, 0, 0, 0, 'x', '.'};
    size_t pos = 0;
    struct tn_pickle_op op;
    int codes[32], n = 0;
    while (pos < sizeof p) {
        assert_int_equal(tn__pickle_decode(p, sizeof p, &pos, &op, "t"), 0);
        codes[n++] = op.code;
        if (op.code == TN_OP_INT)
            assert_int_equal(op.i, 12);
        if (op.code == TN_OP_LONG)
            assert_int_equal(op.i, -9);
        if (op.code == TN_OP_LONG1)
            assert_true(op.big);
        if (op.code == TN_OP_GLOBAL)
            assert_true(op.slen == 1 && op.s2len == 1 && op.s2[0] == 'b');
    }
    assert_int_equal(n, 12);
    assert_int_equal(codes[n - 1], TN_OP_STOP);
    pos = 0;
    static const unsigned char cut[] = {0x8c, 0x05, 'a'};
    assert_int_equal(tn__pickle_decode(cut, sizeof cut, &pos, &op, "cut"), TN_EFORMAT);
    assert_non_null(strstr(tn_last_error(), "SHORT_BINUNICODE at byte 0"));
}

static struct tn_storage *no_storage(const char *key, enum tn_dtype dt, int64_t numel, void *ctx)
{
    (void)key, (void)dt, (void)numel, (void)ctx;
    tn_set_error(TN_EFORMAT, "no storages here");
    return NULL;
}

/* Values built in C pickle and read back equal, including shared nodes. */
static void test_roundtrip(void **state)
{
    (void)state;
    struct tn_value *d = tn_value_dict();
    struct tn_value *shared = tn_value_tuple();
    tn_value_append(shared, tn_value_float(0.9));
    tn_value_append(shared, tn_value_int(-70000));
    tn_value_set(d, tn_value_str("a"), tn_value_retain(shared));
    tn_value_set(d, tn_value_str("b"), shared);
    tn_value_set(d, tn_value_int(INT64_MIN), tn_value_none());
    struct tn_value *l = tn_value_list();
    for (int i = 0; i < 2500; i++)
        tn_value_append(l, tn_value_int(i * 1000003LL));
    tn_value_set(d, tn_value_str("h\xc3\xa9"), l);
    struct tn__bytes out = {0};
    struct tn_pickle_storages st = {0};
    assert_int_equal(tn__pickle_dump(d, &out, &st), 0);
    assert_int_equal(st.n, 0);
    struct tn_pickle_reader_hooks h = {.storage = no_storage};
    struct tn_value *back = tn__pickle_load(out.data, out.len, "rt", TN_ALLOW_CURRENT, &h);
    assert_non_null(back);
    assert_int_equal(back->kind, TN_VALUE_DICT);
    assert_int_equal(back->v.dict.n, 4);
    assert_ptr_equal(tn_value_get(back, "a"), tn_value_get(back, "b"));
    assert_true(tn_value_get(back, "a")->v.seq.items[0]->v.f == 0.9);
    assert_int_equal(back->v.dict.keys[2]->v.i, INT64_MIN);
    struct tn_value *bl = tn_value_get(back, "h\xc3\xa9");
    assert_int_equal(bl->v.seq.n, 2500);
    assert_int_equal(bl->v.seq.items[2499]->v.i, 2499 * 1000003LL);
    tn_value_release(back);
    tn_value_release(d);
    free(out.data);
}

/* A constructor out of memory returns NULL, and callers pass its result on
 * (tn_value_set(d, tn_value_str(k), v)): the entry fails with TN_ENOMEM, the
 * other reference is released (ASan's leak check in CI sees it) and the
 * container is unchanged; it dereferenced the NULL key before. */
static void test_null_entry(void **state)
{
    (void)state;
    struct tn_value *d = tn_value_dict();
    assert_int_equal(tn_value_set(d, NULL, tn_value_int(1)), TN_ENOMEM);
    assert_int_equal(tn_value_set(d, tn_value_str("k"), NULL), TN_ENOMEM);
    assert_int_equal(d->v.dict.n, 0);
    assert_int_equal(tn_value_set(d, tn_value_str("k"), tn_value_int(2)), 0);
    assert_int_equal(d->v.dict.n, 1);
    struct tn_value *l = tn_value_list();
    assert_int_equal(tn_value_append(l, NULL), TN_ENOMEM);
    assert_int_equal(l->v.seq.n, 0);
    tn_value_release(l);
    tn_value_release(d);
}

/* Loads the pickle `p` (len bytes; protocol 2, as torch.save writes)
 * and expects a refusal whose message holds `want`. */
static void expect_refused(const char *p, size_t len, const char *want)
{
    struct tn_value *v = tn__pickle_load((const unsigned char *)p, len, "nest", TN_ALLOW_CURRENT,
                                         NULL);
    if (v || !strstr(tn_last_error(), want))
        print_message("# wanted '%s', got %s\n", want, v ? "a value" : tn_last_error());
    assert_null(v);
    assert_non_null(strstr(tn_last_error(), want));
}

/* Q = [R], R = [A] (A memo 0, R memo 1); A.append(a chain of k nested
 * lists); Q.append(A); Q.append(R): the pickle's length. */
static size_t deep_pickle(char *p, int k)
{
    size_t n = 0;
    static const char head[] = "\x80\x02]]q\x01]q\x00" "aah\x00";
    memcpy(p, head, sizeof head - 1);
    n = sizeof head - 1;
    for (int i = 0; i < k; i++)
        p[n++] = ']';
    for (int i = 0; i < k - 1 + 2; i++) /* the chain, A.append, Q.append(A) */
        p[n++] = 'a';
    memcpy(p + n, "h\x01" "a.", 4);
    return n + 4;
}

/* The nesting checks stay right when a container is changed after
 * something took it in (only the memo allows it): a cycle closed through
 * a container already held, and a height that grows under a holder. */
static void test_nesting_after_insert(void **state)
{
    (void)state;
    /* L1 = []; L2 = [L1]; L1.append(L2) */
    static const char cyc_list[] = "\x80\x02]q\x00]q\x01h\x00" "aa.";
    expect_refused(cyc_list, sizeof cyc_list - 1, "a container that holds itself");
    /* D = {}; L = [D]; D['k'] = L */
    static const char cyc_dict[] = "\x80\x02}q\x00X\x01\x00\x00\x00" "k]q\x01h\x00" "as.";
    expect_refused(cyc_dict, sizeof cyc_dict - 1, "a container that holds itself");
    /* Q = [R], R = [A]; then A gets a chain of 998 lists (999 deep, as a
     * child may be) and Q takes A; R, 1000 deep now, must not go into Q */
    char deep[4096];
    size_t n = deep_pickle(deep, 998);
    expect_refused(deep, n, "nested more than 1000 deep");
    /* with a chain one shorter, R is 999 deep and goes in */
    n = deep_pickle(deep, 997);
    struct tn_value *v = tn__pickle_load((const unsigned char *)deep, n, "nest", TN_ALLOW_CURRENT,
                                         NULL);
    if (!v)
        print_message("# %s\n", tn_last_error());
    assert_non_null(v);
    assert_int_equal(v->v.seq.n, 3); /* R, A, R */
    tn_value_release(v);
}

/* Values made in an arena (value.c) outlive it, are released in any
 * order and on any thread, and containers keep growing after it ends. */
static void *release_on_thread(void *v)
{
    tn_value_release(v);
    return NULL;
}

static void test_arena(void **state)
{
    (void)state;
    struct tn__value_arena a;
    tn__value_arena_begin(&a);
    struct tn_value *l = tn_value_list(), *d = tn_value_dict();
    assert_non_null(l);
    assert_non_null(d);
    char name[64];
    for (int i = 0; i < 20000; i++) { /* past one block */
        snprintf(name, sizeof name, "key number %d", i);
        assert_int_equal(tn_value_append(l, tn_value_str(name)), 0);
        if (i < 100)
            assert_int_equal(tn_value_set(d, tn_value_str(name), tn_value_int(i)), 0);
    }
    tn__value_arena_end(&a);
    struct tn_value *kept = tn_value_retain(l->v.seq.items[12345]);
    tn_value_release(l);
    assert_string_equal(kept->v.str.s, "key number 12345");
    for (int i = 100; i < 300; i++) { /* grows out of its block */
        snprintf(name, sizeof name, "key number %d", i);
        assert_int_equal(tn_value_set(d, tn_value_str(name), tn_value_int(i)), 0);
    }
    for (int i = 0; i < 300; i += 37) {
        snprintf(name, sizeof name, "key number %d", i);
        assert_non_null(tn_value_get(d, name));
        assert_int_equal(tn_value_get(d, name)->v.i, i);
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_on_thread, d), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(kept->v.str.s, "key number 12345");
    tn_value_release(kept);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_pytorch),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_decode_all),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_null_entry),
        cmocka_unit_test(test_nesting_after_insert),
        cmocka_unit_test(test_arena),
    };
    return TN_RUN_TESTS(tests);
}
