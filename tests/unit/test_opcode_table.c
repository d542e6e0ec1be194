/*
 * tests/unit/test_opcode_table.c: lib/io's one pickle opcode table
 * (TN_PICKLE_OPCODES in io/internal.h, which the decoder, the restricted
 * machine and the scanner share) against Python's pickletools, as
 * tests/fixtures/pickle_ops.py wrote it (tests/fixtures/io/pickle_ops.txt):
 * every byte Python names is ours under the same name and no other byte
 * is, tn__pickle_decode takes as many bytes of each opcode's sample as
 * pickletools.genops does, and the table's slice column, which the
 * restricted machine and the scanner take their operands by, agrees with
 * pickletools' stack_before and stack_after.
 */
#include "tn_test.h"

#include "io/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row {
    char name[32];
    int code;
    unsigned char sample[64];
    size_t len, takes;
    char before[128], after[64]; /* "list,mark,stackslice"; "-" for none */
};

/* The fixture's rows (at most 256); fails the test when it is absent. */
static size_t rows(struct row *r)
{
    const char *path = TN_SRCDIR "/tests/fixtures/io/pickle_ops.txt";
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    char line[512], hex[200];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        assert_true(n < 256);
        struct row *w = &r[n];
        assert_int_equal(sscanf(line, "%31s %x %199s %zu %127s %63s", w->name, &w->code, hex,
                                &w->takes, w->before, w->after),
                         6);
        w->len = strlen(hex) / 2;
        assert_true(w->len <= sizeof w->sample);
        for (size_t i = 0; i < w->len; i++) {
            unsigned b;
            assert_int_equal(sscanf(hex + 2 * i, "%2x", &b), 1);
            w->sample[i] = (unsigned char)b;
        }
        n++;
    }
    fclose(f);
    return n;
}

static void test_names(void **state)
{
    (void)state;
    static struct row r[256];
    size_t n = rows(r);
    assert_true(n >= 68); /* protocol 5's */
    bool named[256] = {false};
    for (size_t i = 0; i < n; i++) {
        const char *ours = tn__pickle_op_name(r[i].code);
        if (!ours)
            fail_msg("%s (0x%02x): not in the table", r[i].name, r[i].code);
        assert_string_equal(ours, r[i].name);
        named[r[i].code] = true;
    }
    for (int c = 0; c < 256; c++)
        if (!named[c] && tn__pickle_op_name(c))
            fail_msg("0x%02x: ours names it %s, Python does not", c, tn__pickle_op_name(c));
}

static void test_lengths(void **state)
{
    (void)state;
    static struct row r[256];
    size_t n = rows(r);
    for (size_t i = 0; i < n; i++) {
        size_t pos = 0;
        struct tn_pickle_op op;
        if (tn__pickle_decode(r[i].sample, r[i].len, &pos, &op, "sample") != 0)
            fail_msg("%s: %s", r[i].name, tn_last_error());
        assert_int_equal(op.code, r[i].code);
        if (pos != r[i].takes)
            fail_msg("%s: decoded %zu bytes, pickletools %zu", r[i].name, pos, r[i].takes);
        /* one byte short of the argument: an error, not a read past it */
        if (r[i].takes > 1) {
            pos = 0;
            assert_int_not_equal(tn__pickle_decode(r[i].sample, r[i].takes - 1, &pos, &op, "cut"), 0);
        }
    }
}

/* The number of comma-separated names in s ("-": none); the index of
 * `name` among them in *at, or -1. */
static int names(const char *s, const char *name, int *at)
{
    int n = 0;
    *at = -1;
    if (!strcmp(s, "-"))
        return 0;
    for (const char *p = s;; n++) {
        size_t l = strcspn(p, ",");
        if (l == strlen(name) && !memcmp(p, name, l))
            *at = n;
        if (!p[l])
            return n + 1;
        p += l + 1;
    }
}

/* The slice column against Python's stack effects: a MARK slice for
 * exactly the opcodes that read a mark; `into` for exactly those whose
 * first item read is a list, dict or set (the container they fill); the
 * top k items for APPEND and SETITEM (1 and 2 under the container) and
 * for the opcodes that make a tuple of k > 0 items without a mark. */
static void test_slices(void **state)
{
    (void)state;
    static struct row r[256];
    size_t n = rows(r);
    int fixed = 0, marked = 0;
    for (size_t i = 0; i < n; i++) {
        struct tn__pickle_slice sl = tn__pickle_op_slice(r[i].code);
        int mark, unused;
        int len = names(r[i].before, "mark", &mark);
        bool container = len > 0 && (!strncmp(r[i].before, "list", 4) ||
                                     !strncmp(r[i].before, "dict", 4) ||
                                     !strncmp(r[i].before, "set", 3));
        bool tuple = names(r[i].after, "tuple", &unused) == 1 && unused == 0;
        if ((sl.items == TN_PICKLE_SLICE_MARK) != (mark >= 0))
            fail_msg("%s: reads %s, ours %s a MARK slice", r[i].name, r[i].before,
                     mark >= 0 ? "is not" : "is");
        if (sl.into != container)
            fail_msg("%s: reads %s, ours says into=%d", r[i].name, r[i].before, sl.into);
        int want = mark < 0 && (container || tuple) ? len - container : 0;
        if (sl.items != TN_PICKLE_SLICE_MARK && sl.items != want)
            fail_msg("%s: reads %s, ours takes the top %d", r[i].name, r[i].before, sl.items);
        fixed += sl.items > 0;
        marked += sl.items == TN_PICKLE_SLICE_MARK;
    }
    assert_int_equal(fixed, 5);   /* TUPLE1-3, APPEND, SETITEM */
    assert_int_equal(marked, 10); /* TUPLE, LIST, DICT, FROZENSET, POP_MARK, OBJ, INST, APPENDS, SETITEMS, ADDITEMS */
    assert_int_equal(tn__pickle_op_slice(0xff).items, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_slices),
    };
    return TN_RUN_TESTS(tests);
}
