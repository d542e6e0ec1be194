/*
 * test_graph_json: the graph reader's JSON parser (lib/graph/json.c)
 * against jansson's json_loadb: every text below is read by both, with
 * and without JSON_REJECT_DUPLICATES, and both must refuse it or both read
 * equal trees; and each is accepted or refused as RFC 8259 (and jansson)
 * says: bad escapes, lone surrogates, invalid UTF-8, NUL bytes, numbers
 * out of range, nesting, trailing bytes, truncated text. A refused graph's
 * message is jansson's, at the line and column jansson names.  A program
 * that uses jansson with allocation functions of its own keeps them
 * across our parses (lib/graph/arena.c installs its arena's only during
 * one).
 */
#include "tn_test.h"

#include "graph/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REFUSED, READ, READ_DUPLICATES /* read only without JSON_REJECT_DUPLICATES */ };

/* Reads len bytes both ways with flags; returns whether they were read. */
static bool both(const char *text, size_t len, size_t flags)
{
    bool deep;
    json_error_t err;
    json_t *ours = tn__graph_json_parse(text, len, flags, INT_MAX, &deep);
    json_t *theirs = json_loadb(text, len, flags, &err);
    if (!ours != !theirs || (ours && !json_equal(ours, theirs)) || deep) {
        print_message("# %.60s: ours %s, jansson's %s (%s)\n", text, ours ? "read" : "refused",
                      theirs ? "read" : "refused", theirs ? "" : err.text);
        fail();
    }
    json_decref(ours);
    json_decref(theirs);
    return theirs != NULL;
}

static void expect_len(const char *text, size_t len, int want)
{
    bool plain = both(text, len, 0), strict = both(text, len, JSON_REJECT_DUPLICATES);
    int got = strict ? READ : plain ? READ_DUPLICATES : REFUSED;
    if (got != want) {
        print_message("# %.60s: got %d, want %d\n", text, got, want);
        fail();
    }
}

static void expect(const char *text, int want)
{
    expect_len(text, strlen(text), want);
}

static void test_good(void **state)
{
    (void)state;
    expect("{}", READ);
    expect("[]", READ);
    expect(" \t\r\n[ 1 , -0 , 0.5 , 1e2 , 1E+2, -1.5e-3 , true,false , null ]\n ", READ);
    expect("{\"a\" : {\"b\":[[], {}]}, \"\": \"\"}", READ);
    expect("[\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u0041\\uFFFF\"]", READ);
    expect("[\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \x7f\"]", READ);
    expect("[9223372036854775807, -9223372036854775808, 0, -0]", READ);
    expect("[1e-400, 1e308, -2.5E-308, 1.7976931348623157e308]", READ);
    expect("{\"a\": 1, \"a\": 2}", READ_DUPLICATES);
    expect("{\"a\": 1, \"b\": {\"a\": 2}}", READ);
    /* jansson's quirk: one NUL byte after a number or a word is lost */
    expect_len("[1\0]", 4, READ);
    expect_len("[true\0, null\0]", 14, READ);
    /* long strings with escapes (the decoding buffer grows), keys with
     * escapes longer than a short key's copy */
    size_t n = 20000;
    char *big = malloc(4 * n + 64);
    strcpy(big, "{\"");
    for (size_t i = 0; i < 100; i++)
        strcat(big, "k\\n");
    strcat(big, "\": \"");
    size_t k = strlen(big);
    memset(big + k, 'a', n);
    memcpy(big + k + n, "\\t\\u00e9", 8);
    memset(big + k + n + 8, 'b', n);
    strcpy(big + k + 2 * n + 8, "\", \"k\\n\": [\"x\\\"\"]}");
    expect(big, READ);
    /* a big array (it grows) */
    k = 0;
    for (size_t i = 0; i < 5000; i++) {
        big[k++] = i ? ',' : '[';
        big[k++] = '7';
    }
    strcpy(big + k, "]");
    expect(big, READ);
    free(big);
    /* jansson's own depth limit: 2048 */
    char deep[2 * 2049 + 1];
    memset(deep, '[', 2048);
    memset(deep + 2048, ']', 2048);
    deep[4096] = 0;
    expect(deep, READ);
    memset(deep, '[', 2049);
    memset(deep + 2049, ']', 2049);
    deep[4098] = 0;
    expect(deep, REFUSED);
}

static void test_bad_strings(void **state)
{
    (void)state;
    static const char *const bad[] = {
        /* escapes */
        "[\"\\x\"]", "[\"\\u12\"]", "[\"\\u12G4\"]", "[\"\\U0041\"]", "[\"\\", "[\"\\u",
        "[\"\\'\"]",
        /* lone or mismatched surrogates */
        "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\uDBFF\\u0041\"]", "[\"\\ud800x\"]",
        "[\"\\ud800\\ud800\"]", "[\"\\ud800\\\"]", "[\"\\ud800\\u12\"]", "[\"\\udfff\\udc00\"]",
        /* invalid UTF-8: truncated, overlong, a surrogate, past U+10FFFF,
         * a lone continuation byte, bytes never used, outside a string */
        "[\"\xc3\"]", "[\"\xe2\x82\"]", "[\"\xc0\x80\"]", "[\"\xc1\xbf\"]", "[\"\xe0\x9f\xbf\"]",
        "[\"\xf0\x8f\xbf\xbf\"]", "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]",
        "[\"\x80\"]", "[\"\xff\"]", "[\"\xf5\x80\x80\x80\"]", "[\xc3\xa9]", "\xef\xbb\xbf[]",
        /* control characters, raw */
        "[\"\x01\"]", "[\"a\tb\"]", "[\"a\nb\"]", "[\"\x1f\"]",
        /* NUL escaped (jansson needs JSON_ALLOW_NUL), in a key too */
        "[\"\\u0000\"]", "{\"a\\u0000\": 1}",
        /* unterminated */
        "[\"abc", "{\"abc", "{\"a\": \"b",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect(bad[i], REFUSED);
    /* raw NUL bytes: in a string, where a token starts, after the text, two after a number */
    expect_len("[\"a\0b\"]", 7, REFUSED);
    expect_len("[\0]", 3, REFUSED);
    expect_len("[]\0", 3, REFUSED);
    expect_len("[1\0\0]", 5, REFUSED);
    expect_len("{\"a\0\": 1}", 9, REFUSED);
}

static void test_bad_numbers(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[01]", "[-01]", "[-]", "[+1]", "[.5]", "[1.]", "[1.e5]", "[1e]", "[1e+]", "[1E-]",
        "[0x10]", "[9223372036854775808]", "[-9223372036854775809]",
        "[99999999999999999999999999999]", "[1e400]", "[-1e400]", "[NaN]", "[Infinity]",
        "[-Infinity]", "[1 2]", "[1-2]", "[1.5.5]", "[--1]", "[1e5e5]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect(bad[i], REFUSED);
}

static void test_bad_structure(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "   ", "1", "\"a\"", "true", "null", "[1,]", "[,1]", "[1,,2]", "{\"a\":1,}",
        "{,}", "{\"a\"}", "{\"a\" 1}", "{\"a\":}", "{1:2}", "{a:1}", "{'a':1}", "[", "{",
        "{\"a\":", "[1", "[1]x", "[1] [2]", "[1]]", "{}}", "[tru]", "[truee]", "[nul]",
        "[True]", "[false1]", "{\"a\":1 \"b\":2}", "[1}", "{\"a\":1]", "[/* c */]",
        "{\"a\":1,\"a\":2,}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect(bad[i], REFUSED);
}

/* Every prefix of a document is refused, and only the whole reads. */
static void test_truncated(void **state)
{
    (void)state;
    const char *doc = "{\"graph\": {\"nodes\": [{\"name\": \"r\\u00e9\\ud83d\\ude00\", "
                      "\"x\": [1, -2.5e3, true, false, null, \"\xc3\xa9\"]}], \"y\": {}}}";
    size_t len = strlen(doc);
    for (size_t cut = 0; cut < len; cut++)
        expect_len(doc, cut, REFUSED);
    expect_len(doc, len, READ);
}

/* Nesting past the caller's limit is refused as such; the graph reader
 * names the depth. */
static void test_depth(void **state)
{
    (void)state;
    bool deep;
    json_t *j = tn__graph_json_parse("[[[]]]", 6, 0, 2, &deep);
    assert_null(j);
    assert_true(deep);
    j = tn__graph_json_parse("[[[]]]", 6, 0, 3, &deep);
    assert_non_null(j);
    assert_false(deep);
    json_decref(j);
    /* refused for its syntax before the depth counts */
    j = tn__graph_json_parse("[1 [[]]]", 8, 0, 2, &deep);
    assert_null(j);
    assert_false(deep);
}

/* A refused graph's message: jansson's words at jansson's line and column. */
static void test_messages(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "{\"graph_module\":\n  [\"\\ud800\"]}",
        "{\n\"a\": [1, 2,\n 01]}",
        "{\"a\": \"\xc3\x28\"}",
        "{\"a\": 1, \"a\": 2}",
        "{\"a\": 1e400}",
        "{\"a\": [1]} x",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        json_error_t err;
        json_t *j = json_loadb(texts[i], strlen(texts[i]), JSON_REJECT_DUPLICATES, &err);
        assert_null(j);
        char want[256];
        snprintf(want, sizeof want, "bad.json:%d:%d: %s", err.line, err.column, err.text);
        struct tn_graph *g = tn_graph_parse(texts[i], strlen(texts[i]), "bad.json", NULL);
        assert_null(g);
        print_message("# %s\n", tn_last_error());
        assert_string_equal(tn_last_error(), want);
    }
}

/* The program's own jansson allocation functions, counting their calls. */
static int host_mallocs, host_frees;
static void *host_malloc(size_t n)
{
    host_mallocs++;
    return malloc(n);
}
static void host_free(void *p)
{
    if (p)
        host_frees++;
    free(p);
}

static void test_host_allocator(void **state)
{
    (void)state;
    json_malloc_t m0, m;
    json_free_t f0, f;
    json_get_alloc_funcs(&m0, &f0);
    json_set_alloc_funcs(host_malloc, host_free);
    json_t *before = json_pack("{s:[i,i]}", "kept", 1, 2); /* the program's, across ours */
    const char *text = "{\"a\": [1, 2, {\"b\": \"c\"}], \"d\": null}";
    for (int round = 0; round < 2; round++) {
        json_t *root;
        struct tn__json_arena *arena;
        int mallocs = host_mallocs;
        assert_int_equal(tn__graph_json_load(text, strlen(text), "t.json", 64, 0, &root, &arena),
                         0);
        assert_non_null(arena); /* the tree came from our arena, not the program's malloc */
        assert_int_equal(host_mallocs, mallocs);
        assert_non_null(json_object_get(root, "a"));
        tn__graph_json_drop(root, arena);
        /* after the parse the program's functions are jansson's again */
        json_get_alloc_funcs(&m, &f);
        assert_ptr_equal(m, host_malloc);
        assert_ptr_equal(f, host_free);
        json_t *after = json_string("the program's");
        assert_true(host_mallocs > mallocs);
        json_decref(after);
    }
    int frees = host_frees;
    json_decref(before);
    assert_true(host_frees > frees);
    json_set_alloc_funcs(m0, f0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad_strings),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_bad_structure),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_host_allocator),
    };
    return TN_RUN_TESTS(tests);
}
