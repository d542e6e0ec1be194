/*
 * io/scan_npy.c: an .npy header read as numpy reads it: ast.literal_eval of
 * a Python literal (strings with every escape, implicit concatenation,
 * prefixes and triple quotes, comments, line continuations, duplicate keys
 * where the last wins), then descr_to_dtype (a string numpy.dtype parses,
 * comma lists and subarray prefixes included; a (descr, shape) tuple; a list
 * of fields, titles and subarrays) to tell whether the array holds objects,
 * which numpy.load(allow_pickle=True) unpickles.  A header that is not the
 * literal numpy writes is reported, since another reader may see another
 * dtype in it.
 */
#include "io/scan_internal.h"

#include <stdlib.h>
#include <string.h>

enum { L_STR, L_BYTES, L_INT, L_NUM, L_CONST, L_TUPLE, L_LIST, L_DICT, L_SET, L_UNKNOWN_STR };

struct lit {
    int t;
    char *s; /* L_STR/L_BYTES: the value, UTF-8; L_INT: digits; L_CONST: True/False/None */
    size_t len;
    struct lit **k; /* items (dict: key, value, key, value, ...) */
    size_t nk;
};

struct lp {
    const char *p, *e;
    int depth;
    bool plain;    /* only what numpy writes: no escape, concatenation, comment, ... */
    bool oom;
    struct lit **all; /* every node, to free */
    size_t nall, capall;
};

/* A new literal node of type t, owned by the parser P (freed all at once at
 * the end); NULL with P->oom set without memory. */
static struct lit *lit_new(struct lp *P, int t)
{
    if (P->nall == P->capall) {
        size_t cap = P->capall ? P->capall * 2 : 32;
        struct lit **a = realloc(P->all, cap * sizeof *a);
        if (!a) {
            P->oom = true;
            return NULL;
        }
        P->all = a;
        P->capall = cap;
    }
    struct lit *l = calloc(1, sizeof *l);
    if (!l) {
        P->oom = true;
        return NULL;
    }
    l->t = t;
    P->all[P->nall++] = l;
    return l;
}

/* Appends item to container `to`'s children (growing at powers of two); false
 * with P->oom set without memory. */
static bool lit_push(struct lp *P, struct lit *to, struct lit *item)
{
    if ((to->nk & (to->nk - 1)) == 0) { /* grows at powers of two */
        struct lit **k = realloc(to->k, (to->nk ? to->nk * 2 : 4) * sizeof *k);
        if (!k) {
            P->oom = true;
            return false;
        }
        to->k = k;
    }
    to->k[to->nk++] = item;
    return true;
}

/* Whitespace, comments and backslash-newlines between tokens. */
static void skip(struct lp *P)
{
    while (P->p < P->e) {
        char ch = *P->p;
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f') {
            P->p++;
        } else if (ch == '#') {
            P->plain = false;
            while (P->p < P->e && *P->p != '\n')
                P->p++;
        } else if (ch == '\\' && P->e - P->p >= 2 && (P->p[1] == '\n' || P->p[1] == '\r')) {
            P->plain = false;
            P->p += 2;
        } else {
            return;
        }
    }
}

/* Writes code point cp as UTF-8 at o + *n (room for 4 bytes: the caller's)
 * and advances *n. */
static void put_utf8(char *o, size_t *n, unsigned long cp)
{
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xc0 | cp >> 6);
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xe0 | cp >> 12);
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*n)++] = (char)(0xf0 | cp >> 18);
        o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* A hex digit's value, or -1. */
static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One string token (prefix, quotes, escapes) appended to *out; returns
 * false on a syntax error.  *unknown: an escape whose value is not known
 * here (\N{...} of a name other than the letters). */
static bool string_token(struct lp *P, char *out, size_t *n, bool *bytes, bool *unknown)
{
    bool raw = false;
    *bytes = false;
    while (P->p < P->e && strchr("rRbBuU", *P->p) && *P->p) {
        if (*P->p == 'r' || *P->p == 'R')
            raw = true;
        if (*P->p == 'b' || *P->p == 'B')
            *bytes = true;
        P->plain = false;
        P->p++;
    }
    if (P->p >= P->e || (*P->p != '\'' && *P->p != '"'))
        return false;
    char q = *P->p;
    if (q == '"')
        P->plain = false;
    bool triple = P->e - P->p >= 3 && P->p[1] == q && P->p[2] == q;
    P->p += triple ? 3 : 1;
    if (triple)
        P->plain = false;
    for (;;) {
        if (P->p >= P->e)
            return false;
        char ch = *P->p;
        if (ch == q && (!triple || (P->e - P->p >= 3 && P->p[1] == q && P->p[2] == q))) {
            P->p += triple ? 3 : 1;
            return true;
        }
        if ((ch == '\n' || ch == '\r') && !triple)
            return false;
        if (ch != '\\' || raw) {
            if (ch == '\\') { /* raw: the backslash stays, and escapes the quote */
                P->plain = false;
                out[(*n)++] = ch;
                if (P->e - P->p >= 2)
                    out[(*n)++] = *++P->p;
                P->p++;
                continue;
            }
            out[(*n)++] = ch;
            P->p++;
            continue;
        }
        P->plain = false;
        if (P->e - P->p < 2)
            return false;
        char c = P->p[1];
        P->p += 2;
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *s = strchr(simple, c);
        if (c && s && (s - simple) % 2 == 0) {
            out[(*n)++] = s[1];
        } else if (c == '\n') {
            /* a continued line */
        } else if (c >= '0' && c <= '7') {
            unsigned v = (unsigned)(c - '0');
            for (int i = 0; i < 2 && P->p < P->e && *P->p >= '0' && *P->p <= '7'; i++)
                v = v * 8 + (unsigned)(*P->p++ - '0');
            put_utf8(out, n, v);
        } else if (c == 'x' || (!*bytes && (c == 'u' || c == 'U'))) {
            int k = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            unsigned long v = 0;
            for (int i = 0; i < k; i++) {
                int h = P->p < P->e ? hexval(*P->p) : -1;
                if (h < 0)
                    return false;
                v = v * 16 + (unsigned long)h;
                P->p++;
            }
            if (v > 0x10ffff)
                return false;
            put_utf8(out, n, v);
        } else if (c == 'N' && !*bytes) {
            const char *b = P->p, *e = b < P->e && *b == '{' ? memchr(b, '}', (size_t)(P->e - b)) : NULL;
            if (!e)
                return false;
            static const char letter[] = "{LATIN CAPITAL LETTER ";
            size_t l = (size_t)(e - b) + 1;
            if (l == sizeof letter && !memcmp(b, letter, sizeof letter - 1))
                out[(*n)++] = b[sizeof letter - 1]; /* {LATIN CAPITAL LETTER O} */
            else if (l == sizeof letter + 2 && !memcmp(b, "{LATIN SMALL LETTER ", 20))
                out[(*n)++] = b[20];
            else
                *unknown = true;
            P->p = e + 1;
        } else {
            out[(*n)++] = '\\'; /* an unknown escape keeps its backslash */
            out[(*n)++] = c;
        }
    }
}

static struct lit *value(struct lp *P);

/* Adjacent string tokens are one string (str and bytes do not mix). */
static struct lit *strings(struct lp *P)
{
    char *out = malloc((size_t)(P->e - P->p) * 4 + 1);
    if (!out) {
        P->oom = true;
        return NULL;
    }
    size_t n = 0;
    int kind = -1, tokens = 0;
    bool unknown = false;
    for (;;) {
        const char *at = P->p;
        bool bytes;
        if (!string_token(P, out, &n, &bytes, &unknown)) {
            P->p = at;
            break;
        }
        if (kind >= 0 && kind != bytes) {
            free(out);
            return NULL;
        }
        kind = bytes;
        tokens++;
        skip(P);
    }
    if (!tokens) {
        free(out);
        return NULL;
    }
    if (tokens > 1)
        P->plain = false;
    struct lit *l = lit_new(P, unknown ? L_UNKNOWN_STR : kind ? L_BYTES : L_STR);
    if (!l) {
        free(out);
        return NULL;
    }
    out[n] = 0;
    l->s = out;
    l->len = n;
    return l;
}

/* A Python int or float literal at P->p (a sign, underscores, any base
 * Python's literal_eval takes), marking the header not numpy's own (P->plain)
 * where numpy would never write it; NULL for no number. */
static struct lit *number(struct lp *P)
{
    const char *b = P->p;
    if (*P->p == '-' || *P->p == '+') {
        P->plain = false;
        P->p++;
        skip(P);
    }
    const char *d = P->p;
    bool isint = true;
    while (P->p < P->e && (strchr("0123456789_", *P->p) && *P->p))
        P->p++;
    while (P->p < P->e && *P->p && strchr("0123456789_.eEjJxXoObBaAcCdDfF+-", *P->p)) {
        if (P->p[0] == '+' || P->p[0] == '-') {
            if (!(P->p[-1] == 'e' || P->p[-1] == 'E'))
                break;
        }
        isint = false;
        P->p++;
    }
    if (P->p == d)
        return NULL;
    if (P->p < P->e && (*P->p == 'L' || *P->p == 'l')) { /* Python 2 (numpy filters it) */
        P->plain = false;
        P->p++;
    }
    struct lit *l = lit_new(P, isint && b == d ? L_INT : L_NUM);
    if (l) {
        l->s = NULL;
        l->len = (size_t)(P->p - d);
    }
    return l;
}

/* The ( ... ), [ ... ] or { ... } display of the untrusted header text at
 * P->p (its opener), up to the matching closer.  The literal, owned by P's
 * list; NULL when the text is no such display, runs out, or memory does
 * (P->oom). */
static struct lit *display(struct lp *P)
{
    char open = *P->p++, close = open == '(' ? ')' : open == '[' ? ']' : '}';
    struct lit *l = lit_new(P, open == '(' ? L_TUPLE : open == '[' ? L_LIST : L_DICT);
    if (!l)
        return NULL;
    bool comma = false, isdict = false;
    for (;;) {
        skip(P);
        if (P->p >= P->e)
            return NULL;
        if (*P->p == close) {
            P->p++;
            break;
        }
        if (l->nk && !comma)
            return NULL;
        struct lit *v = value(P);
        if (!v || !lit_push(P, l, v))
            return NULL;
        skip(P);
        if (open == '{' && l->nk == 1)
            isdict = P->p < P->e && *P->p == ':';
        if (open == '{' && isdict) {
            if (P->p >= P->e || *P->p != ':')
                return NULL;
            P->p++;
            skip(P);
            struct lit *w = value(P);
            if (!w || !lit_push(P, l, w))
                return NULL;
            skip(P);
        }
        comma = P->p < P->e && *P->p == ',';
        if (comma)
            P->p++;
    }
    if (open == '(' && l->nk == 1 && !comma)
        return l->k[0]; /* parentheses, not a tuple */
    if (open == '{' && !isdict && l->nk)
        l->t = L_SET;
    return l;
}

/* One Python literal at P->p of the untrusted header (dict, list, tuple, str
 * with its escapes and concatenation, number, True/False/None), nesting at
 * most 64 deep; NULL when it is none (or memory ran out: P->oom). */
static struct lit *value(struct lp *P)
{
    skip(P);
    if (P->p >= P->e || ++P->depth > 64)
        return NULL;
    struct lit *l = NULL;
    char ch = *P->p;
    if (ch == '(' || ch == '[' || ch == '{') {
        l = display(P);
    } else if (ch == '\'' || ch == '"' || strchr("rRbBuU", ch)) {
        l = strings(P);
    } else if ((ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.') {
        l = number(P);
    } else {
        static const char *const consts[] = {"True", "False", "None"};
        for (int i = 0; i < 3 && !l; i++) {
            size_t k = strlen(consts[i]);
            if ((size_t)(P->e - P->p) >= k && !memcmp(P->p, consts[i], k)) {
                P->p += k;
                if ((l = lit_new(P, L_CONST)))
                    l->s = (char *)(uintptr_t)consts[i];
            }
        }
    }
    P->depth--;
    return l;
}

/* The value of key in a dict literal: the last one (as Python builds it);
 * *dups gets whether it occurs more than once. */
static struct lit *dict_get(const struct lit *d, const char *key, bool *dups)
{
    struct lit *v = NULL;
    int seen = 0;
    for (size_t i = 0; i + 1 < d->nk; i += 2)
        if (d->k[i]->t == L_STR && d->k[i]->len == strlen(key) && !memcmp(d->k[i]->s, key, d->k[i]->len)) {
            v = d->k[i + 1];
            seen++;
        }
    *dups |= seen > 1;
    return v;
}

/* Does numpy.dtype(s) hold objects?  Comma lists are structured dtypes and
 * "(2,)O" or "2O" subarrays: any part of type O, O4, O8, object or object_. */
static bool string_object(const char *s, size_t n)
{
    const char *p = s, *e = s + n;
    while (p < e) {
        const char *q = memchr(p, ',', (size_t)(e - p));
        const char *pe = q ? q : e;
        while (p < pe && (*p == ' ' || *p == '\t'))
            p++;
        if (p < pe && *p == '(') {
            const char *c = memchr(p, ')', (size_t)(e - p));
            if (!c)
                return false;
            pe = (q = memchr(c, ',', (size_t)(e - c))) ? q : e;
            p = c + 1;
        }
        while (p < pe && *p >= '0' && *p <= '9')
            p++;
        while (p < pe && (*p == ' ' || *p == '\t'))
            p++;
        if (p < pe && strchr("<>|=", *p))
            p++;
        size_t l = (size_t)(pe - p);
        if ((l >= 1 && *p == 'O' && (l == 1 || (l == 2 && (p[1] == '4' || p[1] == '8')))) ||
            (l == 6 && !memcmp(p, "object", 6)) || (l == 7 && !memcmp(p, "object_", 7)))
            return true;
        p = q ? q + 1 : e;
    }
    return false;
}

/* descr_to_dtype's reading of descr: does the dtype hold objects?  A
 * string this reader cannot resolve counts as objects. */
static bool descr_object(const struct lit *d, int depth)
{
    if (!d || depth > 32)
        return false;
    switch (d->t) {
    case L_STR: return string_object(d->s, d->len);
    case L_UNKNOWN_STR: return true;
    case L_TUPLE: return d->nk >= 1 && descr_object(d->k[0], depth + 1);
    case L_LIST:
        for (size_t i = 0; i < d->nk; i++) {
            const struct lit *f = d->k[i];
            if ((f->t == L_TUPLE || f->t == L_LIST) && f->nk >= 2 && descr_object(f->k[1], depth + 1))
                return true;
        }
        return false;
    default: return false;
    }
}

/* Python's repr of what numpy writes (strings without quotes or
 * backslashes, ints, bools, tuples, lists): false for anything else. */
static bool repr_of(const struct lit *l, const char *h, size_t *at, size_t n, int depth)
{
#define EMIT(str, len)                                                                            \
    do {                                                                                          \
        if (*at + (len) > n || memcmp(h + *at, (str), (len)))                                     \
            return false;                                                                         \
        *at += (len);                                                                             \
    } while (0)
    if (depth > 32)
        return false;
    switch (l->t) {
    case L_STR:
        for (size_t i = 0; i < l->len; i++)
            if (l->s[i] == '\'' || l->s[i] == '\\' || (unsigned char)l->s[i] < 0x20 ||
                (unsigned char)l->s[i] >= 0x7f)
                return false;
        EMIT("'", 1);
        EMIT(l->s, l->len);
        EMIT("'", 1);
        return true;
    case L_INT: {
        /* the digits as written, with no leading zero, sign or underscore */
        size_t b = *at;
        while (*at < n && h[*at] >= '0' && h[*at] <= '9')
            (*at)++;
        return *at - b == l->len && (l->len == 1 || h[b] != '0');
    }
    case L_CONST: EMIT(l->s, strlen(l->s)); return true;
    case L_TUPLE: case L_LIST:
        EMIT(l->t == L_TUPLE ? "(" : "[", 1);
        for (size_t i = 0; i < l->nk; i++) {
            if (i)
                EMIT(", ", 2);
            if (!repr_of(l->k[i], h, at, n, depth + 1))
                return false;
        }
        if (l->t == L_TUPLE && l->nk == 1)
            EMIT(",", 1);
        EMIT(l->t == L_TUPLE ? ")" : "]", 1);
        return true;
    default: return false;
    }
#undef EMIT
}

/* Is h exactly numpy's "{'descr': D, 'fortran_order': F, 'shape': S, }"
 * padded with spaces and a newline? */
static bool canonical(const struct lit *d, const char *h, size_t n)
{
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    size_t at = 0;
    if (d->t != L_DICT || d->nk != 6 || !n || h[0] != '{')
        return false;
    at = 1;
    for (int i = 0; i < 3; i++) {
        const struct lit *k = d->k[2 * i];
        if (k->t != L_STR || k->len != strlen(keys[i]) || memcmp(k->s, keys[i], k->len) ||
            !repr_of(k, h, &at, n, 0) || at + 2 > n || memcmp(h + at, ": ", 2))
            return false;
        at += 2;
        if (!repr_of(d->k[2 * i + 1], h, &at, n, 0) || at + 2 > n || memcmp(h + at, ", ", 2))
            return false;
        at += 2;
    }
    if (at >= n || h[at++] != '}')
        return false;
    while (at < n && h[at] == ' ')
        at++;
    return at + 1 == n && h[at] == '\n';
}

/* An .npy header as numpy reads it (scan_internal.h): h (n bytes, borrowed,
 * untrusted) parsed with Python's literal rules and every node freed before
 * returning. 0 with *v filled, or TN_ENOMEM. */
int tn__npy_header_verdict(const char *h, size_t n, struct tn__npy_verdict *v)
{
    struct lp P = {.p = h, .e = h + n, .plain = true};
    memset(v, 0, sizeof *v);
    struct lit *d = value(&P);
    skip(&P);
    if (d && P.p == P.e && d->t == L_DICT) {
        bool dups = false;
        struct lit *descr = dict_get(d, "descr", &dups);
        v->parsed = descr != NULL;
        v->object = descr_object(descr, 0);
        v->canonical = !dups && P.plain && canonical(d, h, n);
    }
    for (size_t i = 0; i < P.nall; i++) {
        if (P.all[i]->t != L_CONST)
            free(P.all[i]->s);
        free(P.all[i]->k);
        free(P.all[i]);
    }
    free(P.all);
    return P.oom ? tn_set_error(TN_ENOMEM, "out of memory reading an .npy header") : 0;
}
