/*
 * test_joint_coverage: every formula of schemas/derivatives.yaml's op
 * entries is expressible as ops in tcompile grad's joint graph (its calls
 * ops, lib/core functions or define: entries over them), or is listed in
 * tests/unit/joint_unexpressed.txt with its reason. The list only
 * shrinks: a listed formula that became expressible fails too, until its
 * line is removed.
 *
 * Each line of the list: OP<TAB>INPUTS<TAB>HELPER<TAB># reason, as
 * tn__joint_unexpressed names them; '#' lines are comments.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/internal.h"

#define MAX_LINES 256

struct expect {
    char *key[MAX_LINES]; /* "OP\tINPUTS\tHELPER" */
    bool seen[MAX_LINES];
    int n, unlisted;
};

static void found(const char *op, const char *inputs, const char *helper, void *ctx)
{
    struct expect *x = ctx;
    char key[512];
    snprintf(key, sizeof key, "%s\t%s\t%s", op, inputs, helper);
    for (int i = 0; i < x->n; i++)
        if (!strcmp(x->key[i], key)) {
            x->seen[i] = true;
            return;
        }
    print_message("# not expressible as ops and not listed: %s (its %s) calls %s\n", op, inputs,
                  helper);
    x->unlisted++;
}

static void every_formula_expressible_or_listed(void **state)
{
    (void)state;
    size_t len;
    char *text = (char *)tn_test_slurp(TN_SRCDIR "/tests/unit/joint_unexpressed.txt", &len);
    text[len] = 0;
    struct expect x = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (*line == '#' || !*line)
            continue;
        char *p = line;
        for (int tabs = 0; *p && tabs < 3; p++)
            if (*p == '\t' && ++tabs == 3)
                break;
        assert_true(*p == '\t' && strstr(p, "# ") == p + 1); /* a reason given */
        *p = 0;
        assert_true(x.n < MAX_LINES);
        x.key[x.n++] = line;
    }
    int n = tn__joint_unexpressed(found, &x);
    int stale = 0;
    for (int i = 0; i < x.n; i++)
        if (!x.seen[i]) {
            print_message("# expressible now, remove it from the list: %s\n", x.key[i]);
            stale++;
        }
    print_message("# %d formulas not expressible as ops, %d listed\n", n, x.n);
    free(text);
    assert_int_equal(x.unlisted, 0);
    assert_int_equal(stale, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_formula_expressible_or_listed),
    };
    return TN_RUN_TESTS(tests);
}
