/*
 * tests/unit/test_opcode_table.c: lib/io's one pickle opcode table
 * (TN_PICKLE_OPCODES in io/internal.h, which the decoder, the restricted
 * machine and the scanner share) against Python's pickletools, as
 * tests/fixtures/pickle_ops.py wrote it (tests/fixtures/io/pickle_ops.txt):
 * every byte Python names is ours under the same name and no other byte
 * is, and tn__pickle_decode takes as many bytes of each opcode's sample as
 * pickletools.genops does.
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
        assert_int_equal(sscanf(line, "%31s %x %199s %zu", w->name, &w->code, hex, &w->takes), 4);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_lengths),
    };
    return TN_RUN_TESTS(tests);
}
