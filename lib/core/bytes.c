/*
 * core/bytes.c: a growable byte buffer (struct tn__bytes, core/internal.h),
 * for io's writers and the value walk's key paths.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends n bytes to b, doubling its capacity as needed; after a failed
 * allocation b->failed is set and every later put is a no-op, so callers
 * check once at the end. */
void tn__bytes_put(struct tn__bytes *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* Appends one byte (tn__bytes_put's rules). */
void tn__bytes_byte(struct tn__bytes *b, unsigned char c) { tn__bytes_put(b, &c, 1); }

/* Appends v little-endian in 2 bytes (tn__bytes_put's rules). */
void tn__bytes_u16(struct tn__bytes *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    tn__bytes_put(b, x, 2);
}

/* Appends v little-endian in 4 bytes (tn__bytes_put's rules). */
void tn__bytes_u32(struct tn__bytes *b, uint32_t v)
{
    unsigned char x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    tn__bytes_put(b, x, 4);
}

/* Appends v little-endian in 8 bytes (tn__bytes_put's rules). */
void tn__bytes_u64(struct tn__bytes *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    tn__bytes_put(b, x, 8);
}

/* Appends printf's output (no NUL) to b (tn__bytes_put's rules). */
void tn__bytes_printf(struct tn__bytes *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        tn__bytes_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tn__bytes_put(b, big, (size_t)n);
    free(big);
}
