/*
 * bin/ttest/select.c: -k expressions, as pytest has them.
 *
 *     expr := and ("or" and)*
 *     and  := not ("and" not)*
 *     not  := "not" not | "(" expr ")" | WORD
 *
 * A WORD is a run of characters other than blanks and parentheses; it
 * matches a test whose name holds it as a substring, case ignored (pytest
 * matches case-insensitively since 5.4).  "and", "or" and "not" are words of
 * the grammar, not of names.
 */
#include "ttest.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

struct kparse {
    const char *p;       /* the next character */
    const char *name;    /* NULL: only check the syntax */
    const char *error;
};

/* The next token: its start in *tok and its length (0 at the end). */
static size_t peek(struct kparse *k, const char **tok)
{
    while (isspace((unsigned char)*k->p))
        k->p++;
    *tok = k->p;
    if (*k->p == '(' || *k->p == ')')
        return 1;
    size_t n = 0;
    while (k->p[n] && !isspace((unsigned char)k->p[n]) && k->p[n] != '(' && k->p[n] != ')')
        n++;
    return n;
}

static bool is_word(const char *tok, size_t n, const char *w)
{
    return n == strlen(w) && strncmp(tok, w, n) == 0;
}

static bool has_substring(const char *name, const char *w, size_t n)
{
    for (const char *s = name; *s; s++)
        if (strncasecmp(s, w, n) == 0)
            return true;
    return n == 0;
}

static bool expr(struct kparse *k);

static bool not_expr(struct kparse *k)
{
    const char *tok;
    size_t n = peek(k, &tok);
    if (k->error)
        return false;
    if (n == 0) {
        k->error = "expected a word, 'not' or '(' at the end";
        return false;
    }
    k->p = tok + n;
    if (is_word(tok, n, "not"))
        return !not_expr(k);
    if (*tok == '(') {
        bool v = expr(k);
        if (peek(k, &tok) != 1 || *tok != ')') {
            if (!k->error)
                k->error = "a '(' is not closed";
            return false;
        }
        k->p = tok + 1;
        return v;
    }
    if (*tok == ')' || is_word(tok, n, "and") || is_word(tok, n, "or")) {
        k->error = "expected a word, 'not' or '(' where an operator or ')' is";
        return false;
    }
    return k->name && has_substring(k->name, tok, n);
}

/* operand (OP operand)*, folded with && for "and" and || for "or"; both
 * sides are always parsed, so a syntax error is never skipped over. */
static bool chain(struct kparse *k, const char *op, bool (*operand)(struct kparse *))
{
    bool v = operand(k);
    const char *tok;
    size_t n;
    while (!k->error && (n = peek(k, &tok)) && is_word(tok, n, op)) {
        k->p = tok + n;
        bool w = operand(k);
        v = op[0] == 'a' ? v && w : v || w;
    }
    return v;
}

static bool and_expr(struct kparse *k)
{
    return chain(k, "and", not_expr);
}

static bool expr(struct kparse *k)
{
    return chain(k, "or", and_expr);
}

static bool parse(struct kparse *k)
{
    const char *tok;
    if (peek(k, &tok) == 0)
        return true; /* an empty expression selects everything, as in pytest */
    bool v = expr(k);
    if (!k->error && peek(k, &tok))
        k->error = *tok == ')' ? "a ')' has no '('" : "two words without 'and' or 'or' between them";
    return v;
}

const char *tt_kexpr_check(const char *e)
{
    struct kparse k = {e, NULL, NULL};
    parse(&k);
    return k.error;
}

bool tt_kexpr_match(const char *e, const char *name)
{
    struct kparse k = {e, name, NULL};
    return parse(&k) && !k.error;
}
