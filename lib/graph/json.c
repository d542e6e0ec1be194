/*
 * graph/json.c: JSON text -> jansson's tree, without jansson's lexer.
 * jansson reads a byte at a time through a callback, saving each token in
 * a string buffer and checking UTF-8 twice: for a 5 MB graph that was
 * two thirds of reading it. This parser walks the text in place and
 * builds the same tree with jansson's own constructors, accepting exactly
 * the texts json_loadb accepts with flags 0 or JSON_REJECT_DUPLICATES
 * (RFC 8259, strict: an object or array at the top, nothing after it but
 * blanks, UTF-8 without overlong forms or surrogates, \u escapes in pairs
 * for surrogates, no \u0000, integers that fit json_int_t, reals that do
 * not overflow, nesting up to jansson's 2048; and jansson's one quirk, a
 * NUL byte skipped after a number or a word). It has no error messages:
 * the caller asks jansson for those (tn__graph_json_load), so a message
 * and its line and column are jansson's word for word.
 * tests/fuzz/fuzz_graph.c compares its every answer with json_loadb's.
 */
#include "graph/internal.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JANSSON_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

struct parser {
    const unsigned char *p, *end;
    int depth, max_depth;
    bool deep;   /* refused for nesting deeper than the caller's limit */
    bool unique; /* JSON_REJECT_DUPLICATES */
    char *buf;   /* a string's bytes after its escapes, a real's text */
    size_t cap;
};

/* 1: a blank between tokens */
static const unsigned char blank[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

/* 1: a byte that stands for itself in a string (printable ASCII but '"'
 * and '\\') */
static const unsigned char plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static void skip_blanks(struct parser *ps)
{
    const unsigned char *p = ps->p, *e = ps->end;
    while (p < e && blank[*p])
        p++;
    ps->p = p;
}

static bool reserve(struct parser *ps, size_t n)
{
    if (n <= ps->cap)
        return true;
    size_t cap = ps->cap ? ps->cap : 256;
    while (cap < n) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    char *b = realloc(ps->buf, cap);
    if (!b)
        return false;
    ps->buf = b;
    ps->cap = cap;
    return true;
}

static int hex4(const unsigned char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* The length of the well-formed UTF-8 sequence at p (at most n bytes
 * there), 0 for none: no overlong forms, surrogates or code points past
 * U+10FFFF. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (len == 3 && v < 0x800) ||
        (len == 4 && v < 0x10000))
        return 0;
    return len;
}

static size_t utf8_put(char *out, uint32_t v)
{
    if (v < 0x80) {
        out[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (char)(0xC0 | v >> 6);
        out[1] = (char)(0x80 | (v & 0x3F));
        return 2;
    }
    if (v < 0x10000) {
        out[0] = (char)(0xE0 | v >> 12);
        out[1] = (char)(0x80 | (v >> 6 & 0x3F));
        out[2] = (char)(0x80 | (v & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | v >> 18);
    out[1] = (char)(0x80 | (v >> 12 & 0x3F));
    out[2] = (char)(0x80 | (v >> 6 & 0x3F));
    out[3] = (char)(0x80 | (v & 0x3F));
    return 4;
}

/* The string at ps->p (just past its opening quote): its bytes in *s and
 * *n (in the text where it has no escapes, else in ps->buf), ps->p past
 * its closing quote. false: not a string jansson reads. */
static bool scan_string(struct parser *ps, const char **s, size_t *n)
{
    const unsigned char *p = ps->p, *e = ps->end, *start = p;
    while (p < e && plain[*p])
        p++;
    if (p < e && *p == '"') { /* the common case: nothing to decode */
        *s = (const char *)start;
        *n = (size_t)(p - start);
        ps->p = p + 1;
        return true;
    }
    /* decoded into buf, a run of plain bytes at a time */
    size_t k = 0;
    const unsigned char *run = start;
    for (;;) {
        while (p < e && plain[*p])
            p++;
        size_t m = (size_t)(p - run);
        if (!reserve(ps, k + m + 4)) /* the run, and what one step below adds */
            return false;
        char *out = ps->buf;
        memcpy(out + k, run, m);
        k += m;
        if (p == e)
            return false;
        unsigned c = *p;
        if (c == '"')
            break;
        if (c < 0x20)
            return false;
        if (c >= 0x80) {
            size_t len = utf8_seq(p, (size_t)(e - p));
            if (!len)
                return false;
            memcpy(out + k, p, len);
            k += len;
            p += len;
            run = p;
            continue;
        }
        /* an escape */
        if (e - p < 2)
            return false;
        c = p[1];
        p += 2;
        run = p;
        switch (c) {
        case '"': case '\\': case '/': out[k++] = (char)c; continue;
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'n': out[k++] = '\n'; continue;
        case 'r': out[k++] = '\r'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'u': break;
        default: return false;
        }
        int v;
        if (e - p < 4 || (v = hex4(p)) < 0)
            return false;
        p += 4;
        run = p;
        if (v >= 0xD800 && v <= 0xDBFF) { /* a high surrogate: its low one next */
            int lo;
            if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || (lo = hex4(p + 2)) < 0 ||
                lo < 0xDC00 || lo > 0xDFFF)
                return false;
            p += 6;
            run = p;
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        } else if ((v >= 0xDC00 && v <= 0xDFFF) || v == 0) {
            return false; /* a lone low surrogate; NUL (JSON_ALLOW_NUL) */
        }
        /* 6 or 12 bytes of escape become at most 4 */
        k += utf8_put(out + k, (uint32_t)v);
    }
    *s = ps->buf;
    *n = k;
    ps->p = p + 1;
    return true;
}

static json_t *parse_value(struct parser *ps);

/* A number as jansson's lexer reads it: an integer (no fraction, no
 * exponent) that must fit json_int_t, else a real that must not
 * overflow. */
static json_t *parse_number(struct parser *ps)
{
    const unsigned char *p = ps->p, *e = ps->end, *start = p;
    bool neg = p < e && *p == '-';
    if (neg)
        p++;
    if (p == e || *p < '0' || *p > '9')
        return NULL;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    bool over = false;
    if (*p == '0') {
        p++;
        if (p < e && *p >= '0' && *p <= '9')
            return NULL; /* a leading zero */
    } else {
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            unsigned d = *p - '0';
            if (v > (limit - d) / 10)
                over = true;
            else
                v = v * 10 + d;
        }
    }
    if (p == e || (*p != '.' && *p != 'e' && *p != 'E')) {
        ps->p = p;
        if (over)
            return NULL;
        _Static_assert(sizeof(json_int_t) == sizeof(int64_t), "json_int_t is 64 bits");
        return json_integer(neg ? (json_int_t)(0 - v) : (json_int_t)v);
    }
    if (*p == '.') {
        p++;
        if (p == e || *p < '0' || *p > '9')
            return NULL;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p == e || *p < '0' || *p > '9')
            return NULL;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    ps->p = p;
    /* strtod on a copy ending at the token, with the locale's decimal
     * point as jansson passes it */
    size_t n = (size_t)(p - start);
    if (!reserve(ps, n + 1))
        return NULL;
    memcpy(ps->buf, start, n);
    ps->buf[n] = 0;
    const char *point = localeconv()->decimal_point;
    char *dot;
    if (*point != '.' && (dot = strchr(ps->buf, '.')))
        *dot = *point;
    errno = 0;
    double d = strtod(ps->buf, NULL);
    if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE)
        return NULL;
    return json_real(d);
}

/* Past an opening bracket (first) or an item of an array or object: 1
 * where the container closes there, 0 where an item comes next (past its
 * comma), -1 for anything else. */
static int next_item(struct parser *ps, unsigned char close, bool first)
{
    skip_blanks(ps);
    if (ps->p == ps->end)
        return -1;
    if (*ps->p == close) {
        ps->p++;
        return 1;
    }
    if (first)
        return 0;
    if (*ps->p++ != ',')
        return -1;
    skip_blanks(ps);
    return 0;
}

/* One member "key": value into object o: 0, or -1 where the text is not
 * one (or repeats a key under JSON_REJECT_DUPLICATES). */
static int add_member(struct parser *ps, json_t *o)
{
    const char *key;
    size_t klen;
    if (ps->p == ps->end || *ps->p != '"')
        return -1;
    ps->p++;
    if (!scan_string(ps, &key, &klen))
        return -1;
    /* the key NUL-terminated (it holds no NUL: \u0000 is refused), out of
     * ps->buf, which the value reuses; json_object_setn_nocheck would take
     * it as it is, but is new in jansson 2.14 */
    char small[64], *copy = small;
    if (klen >= sizeof small && !(copy = malloc(klen + 1)))
        return -1;
    memcpy(copy, key, klen);
    copy[klen] = 0;
    skip_blanks(ps);
    json_t *v = NULL;
    if (ps->p < ps->end && *ps->p == ':') {
        ps->p++;
        skip_blanks(ps);
        v = parse_value(ps);
    }
    size_t size = json_object_size(o);
    int rc = v ? json_object_set_new_nocheck(o, copy, v) : -1;
    if (copy != small)
        free(copy);
    /* a key seen before replaced its value: jansson refuses that with
     * JSON_REJECT_DUPLICATES */
    return rc < 0 || (ps->unique && json_object_size(o) == size) ? -1 : 0;
}

/* One element into array a: 0, or -1. */
static int add_element(struct parser *ps, json_t *a)
{
    json_t *v = parse_value(ps);
    return v ? json_array_append_new(a, v) : -1;
}

/* The object or array past its opening bracket. */
static json_t *parse_container(struct parser *ps, bool object)
{
    json_t *c = object ? json_object() : json_array();
    unsigned char close = object ? '}' : ']';
    if (!c)
        return NULL;
    int r = next_item(ps, close, true);
    while (r == 0 && (object ? add_member(ps, c) : add_element(ps, c)) == 0)
        r = next_item(ps, close, false);
    if (r > 0)
        return c;
    json_decref(c);
    return NULL;
}

static bool word(struct parser *ps, const char *w, size_t n)
{
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n))
        return false;
    ps->p += n;
    return true;
}

/* The value at ps->p (no blanks before it). */
static json_t *parse_value(struct parser *ps)
{
    if (ps->p == ps->end)
        return NULL;
    json_t *v;
    switch (*ps->p) {
    case '{':
    case '[':
        if (++ps->depth > ps->max_depth || ps->depth > JANSSON_MAX_DEPTH) {
            ps->deep = ps->depth > ps->max_depth;
            return NULL;
        }
        v = parse_container(ps, *ps->p++ == '{');
        ps->depth--;
        return v;
    case '"': {
        const char *s;
        size_t n;
        ps->p++;
        return scan_string(ps, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
    }
    case 't':
        v = word(ps, "true", 4) ? json_true() : NULL;
        break;
    case 'f':
        v = word(ps, "false", 5) ? json_false() : NULL;
        break;
    case 'n':
        v = word(ps, "null", 4) ? json_null() : NULL;
        break;
    default:
        v = parse_number(ps);
        break;
    }
    /* jansson's lexer reads one byte past a number or a word and puts it
     * back, and a NUL byte put back is lost: it reads "[1\0]" as [1] */
    if (v && ps->p < ps->end && *ps->p == 0)
        ps->p++;
    return v;
}

json_t *tn__graph_json_parse(const char *text, size_t len, size_t flags, int max_depth,
                             bool *deep)
{
    struct parser ps = {
        .p = (const unsigned char *)text, .end = (const unsigned char *)text + len,
        .max_depth = max_depth, .unique = flags & JSON_REJECT_DUPLICATES,
    };
    *deep = false;
    if (flags & ~(size_t)JSON_REJECT_DUPLICATES)
        return NULL;
    skip_blanks(&ps);
    json_t *root = NULL;
    if (ps.p < ps.end && (*ps.p == '{' || *ps.p == '['))
        root = parse_value(&ps);
    skip_blanks(&ps);
    if (root && ps.p != ps.end) { /* anything but blanks after the value */
        json_decref(root);
        root = NULL;
    }
    free(ps.buf);
    *deep = ps.deep;
    return root;
}
