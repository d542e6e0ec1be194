/* Little-endian readers shared by lib/io's zip reader (zip.c) and scanner
 * (scan.c) and lib/dist's store wire protocol and file store.  Internal to
 * libtensor; not installed.
 *
 * Each reads an unsigned integer stored least-significant byte first at p,
 * whatever the host's byte order.  They trust their input: the caller has
 * range-checked that p points at 2, 4 or 8 readable bytes. */
#ifndef TN_CORE_LE_H
#define TN_CORE_LE_H

#include <stdint.h>

static inline uint16_t tn__rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tn__rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tn__rd64(const unsigned char *p)
{
    return tn__rd32(p) | (uint64_t)tn__rd32(p + 4) << 32;
}

#endif
