/*
 * lib/dist/pg_shm.c: the tcp process group's allreduce of large buffers
 * between ranks on one host, through a shared segment per rank made once
 * (memfd; the peers open it through /proc/PID/fd, which the cross-memory
 * attach probe already showed they may) and reused by every call.
 *
 * The buffer is cut into P blocks (rank r owns block r) and every block into
 * rounds of `chunk` bytes. In round c each rank stages its chunk c of every
 * other rank's block in its segment, reduces its own block's chunk c with the
 * peers' staged chunks and publishes the result in its segment, and copies
 * the peers' results of their blocks into its buffer. The three steps run
 * one round apart (stage c, reduce c - 1, gather c - 2), the segment holds
 * DEPTH rounds, so ranks work at once and a rank a little behind does not
 * stall the others; the chunks are small enough to stay in cache between
 * being written by one rank and read by another. Each rank's progress is
 * three counters in its segment's header; a rank waits for a peer's counter
 * spinning briefly, then on a futex, in slices that also look at the peer's
 * socket, so a peer that failed (and shut its sockets) or exited is seen
 * within a slice and the usual deadline and failure agreement apply.
 *
 * Block r is reduced only by rank r, in the order r, r + 1, ..., so every
 * rank ends with the same bits.
 */
#include "dist/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Rounds a segment holds. */
#define DEPTH 6
/* Spins on a counter before sleeping on it. */
#define SPINS 200
/* Bytes reduced and copied out at a time. */
#define TILE 16384
/* A sleeping wait wakes this often to look at the deadline and the peer. */
#define SLICE_MS 10

/* One counter and the number of peers sleeping on it, in a cache line. */
struct counter {
    _Atomic uint32_t value;
    _Atomic uint32_t waiters;
    char pad[56];
};

/* A segment's header: rounds staged, reduced and done (gathered) so far,
 * counted from the group's first. */
struct header {
    struct counter staged, reduced, done;
};

#define HEADER_BYTES ((size_t)256)

struct tn__pgshm {
    int P, rank;
    bool off;     /* setting up failed somewhere: the older path */
    size_t chunk; /* bytes of one block in one round */
    size_t bytes; /* of a segment */
    char **seg;   /* seg[p]: rank p's segment, mapped here */
    char *tile;   /* TILE bytes: a third operand for groups of 3 and more */
    uint32_t round; /* rounds run so far, the same on every rank */
};

/* Rank p's segment header (its counters). */
static struct header *hdr(const struct tn__pgshm *s, int p)
{
    return (struct header *)(void *)s->seg[p];
}

/* Rank p's area for block q in round g: p's staged chunk of q (q != p) or
 * p's result for its own block (q == p). */
static char *area(const struct tn__pgshm *s, int p, uint32_t g, int q)
{
    return s->seg[p] + HEADER_BYTES + ((size_t)(g % DEPTH) * (size_t)s->P + (size_t)q) * s->chunk;
}

/* Stores v in c and wakes the futex waiters, if any. */
static void publish(struct counter *c, uint32_t v)
{
    atomic_store(&c->value, v);
    if (atomic_load(&c->waiters))
        syscall(SYS_futex, &c->value, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Whether counter value v is at or past target (wrapping arithmetic). */
static bool reached(uint32_t v, uint32_t target)
{
    return (int32_t)(v - target) >= 0;
}

/* A spin-wait hint to the CPU. */
static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Whether peer's socket says it is gone (closed or shut down). */
static bool peer_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fd < 0 || poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
        return true;
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

/* Waits until peer's counter c reaches target. */
static int wait_for(struct tn_pg *pg, int peer, struct counter *c, uint32_t target)
{
    for (int i = 0; i < SPINS; i++) {
        if (reached(atomic_load_explicit(&c->value, memory_order_acquire), target))
            return 0;
        cpu_relax();
    }
    int64_t deadline = tn__now_ms() + tn__pg_timeout(pg);
    for (;;) {
        atomic_fetch_add(&c->waiters, 1);
        uint32_t v = atomic_load(&c->value);
        if (!reached(v, target)) {
            struct timespec ts = {0, SLICE_MS * 1000000L};
            syscall(SYS_futex, &c->value, FUTEX_WAIT, v, &ts, NULL, 0);
        }
        atomic_fetch_sub(&c->waiters, 1);
        if (reached(atomic_load_explicit(&c->value, memory_order_acquire), target))
            return 0;
        if (peer_gone(tn__pg_peer_fd(pg, peer))) {
            errno = ECONNRESET;
            return tn__pg_peer_error(pg, peer, "closed its connection");
        }
        if (tn__now_ms() >= deadline) {
            errno = 0;
            return tn__pg_peer_error(pg, peer, "did not send its data in time");
        }
    }
}

/* Unmaps every rank's segment and frees s (NULL: nothing). */
void tn__pgshm_free(struct tn__pgshm *s)
{
    if (!s)
        return;
    for (int p = 0; s->seg && p < s->P; p++)
        if (s->seg[p])
            munmap(s->seg[p], s->bytes);
    free(s->seg);
    free(s->tile);
    free(s);
}

/* Maps rank p's segment, published as fd number `fd` of process pid. */
static char *map_peer(int pid, uint64_t fd, size_t bytes)
{
    if (fd > INT_MAX)
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, (int)fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0)
        return NULL;
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(f, &st) == 0 && (size_t)st.st_size == bytes)
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    return m == MAP_FAILED ? NULL : m;
}

/* Makes this rank's segment and maps every peer's (a collective: every rank
 * calls it in the same allreduce). *sp stays NULL only on an error of the
 * group; a setup that failed on some rank leaves s->off on every rank. */
static int setup(struct tn_pg *pg, struct tn__pgshm **sp)
{
    int P = tn_pg_size(pg), r = tn_pg_rank(pg);
    struct tn__pgshm *s = calloc(1, sizeof *s);
    uint64_t *vals = calloc((size_t)P, sizeof *vals);
    if (!s || !vals || !(s->seg = calloc((size_t)P, sizeof *s->seg)) ||
        !(s->tile = aligned_alloc(64, TILE))) {
        tn__pgshm_free(s);
        free(vals);
        return tn_set_error(TN_ENOMEM, "allreduce: out of memory");
    }
    s->P = P;
    s->rank = r;
    /* about 1.5 MiB of chunks per round for the whole group, 64 KiB to
     * 256 KiB each, in pages */
    size_t chunk = ((size_t)3 << 19) / (size_t)P;
    chunk = chunk > ((size_t)256 << 10) ? (size_t)256 << 10 : chunk < 65536 ? 65536 : chunk;
    s->chunk = chunk & ~(size_t)4095;
    s->bytes = HEADER_BYTES + (size_t)DEPTH * (size_t)P * s->chunk;
    int fd = memfd_create("tensorkit-pg", MFD_CLOEXEC);
    bool ok = fd >= 0 && ftruncate(fd, (off_t)s->bytes) == 0;
    if (ok) {
        void *m = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ok = m != MAP_FAILED;
        s->seg[r] = ok ? m : NULL;
    }
    int rc = tn__pg_share(pg, ok ? (uint64_t)fd : UINT64_MAX, vals);
    for (int p = 0; rc == 0 && ok && p < P; p++)
        if (p != r && !(s->seg[p] = map_peer(tn__pg_peer_pid(pg, p), vals[p], s->bytes)))
            ok = false;
    /* every rank says whether it mapped every segment; after this no one
     * opens this rank's fd again */
    if (rc == 0)
        rc = tn__pg_share(pg, ok, vals);
    if (fd >= 0)
        close(fd);
    for (int p = 0; rc == 0 && p < P; p++)
        if (!vals[p])
            ok = false;
    if (rc < 0) {
        tn__pgshm_free(s);
        free(vals);
        return rc;
    }
    free(vals);
    if (!ok) {
        for (int p = 0; p < P; p++)
            if (s->seg[p])
                munmap(s->seg[p], s->bytes);
        free(s->seg);
        s->seg = NULL;
        s->off = true;
    }
    *sp = s;
    return 0;
}

/* Elements [*lo, *hi) of block q's part in round c. */
static void part(const int64_t *off, int q, int64_t c, int64_t ce, int64_t *lo, int64_t *hi)
{
    *lo = off[q] + c * ce;
    *hi = *lo + ce < off[q + 1] ? *lo + ce : off[q + 1];
    if (*lo > *hi)
        *lo = *hi;
}

/* Contract in internal.h: buf[0..n) of dt reduced with op (AVG's division
 * left to the caller) through shared segments made on the first call, a
 * collective (*sp owns them).  1 when a rank could not make them (every
 * rank then takes the socket path), else 0 or < 0 with the failure agreed. */
int tn__pgshm_allreduce(struct tn_pg *pg, struct tn__pgshm **sp, char *buf, int64_t n,
                        enum tn_dtype dt, enum tn_reduce_op op)
{
    if (!*sp) {
        int rc = setup(pg, sp);
        if (rc < 0)
            return rc;
    }
    struct tn__pgshm *s = *sp;
    if (s->off)
        return 1;
    int P = s->P, r = s->rank;
    int64_t es = (int64_t)tn_dtype_size(dt), ce = (int64_t)s->chunk / es, te = TILE / es;
    int64_t *off = malloc(sizeof *off * (size_t)(P + 1));
    if (!off)
        return tn_set_error(TN_ENOMEM, "allreduce: out of memory");
    for (int q = 0; q <= P; q++)
        off[q] = n * q / P;
    int64_t R = ((n + P - 1) / P + ce - 1) / ce; /* rounds: the largest block's */
    uint32_t base = s->round;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < R + 2; i++) {
        int64_t lo, hi;
        if (i < R) { /* stage round i, once every peer is done with its slot */
            uint32_t g = base + (uint32_t)i;
            for (int p = 0; rc == 0 && p < P; p++)
                if (p != r)
                    rc = wait_for(pg, p, &hdr(s, p)->done, g - DEPTH + 1);
            for (int q = 0; rc == 0 && q < P; q++) {
                part(off, q, i, ce, &lo, &hi);
                if (q != r && hi > lo)
                    memcpy(area(s, r, g, q), buf + lo * es, (size_t)((hi - lo) * es));
            }
            if (rc == 0)
                publish(&hdr(s, r)->staged, g + 1);
        }
        int64_t c = i - 1;
        if (rc == 0 && c >= 0 && c < R) { /* reduce this rank's block in round c */
            uint32_t g = base + (uint32_t)c;
            part(off, r, c, ce, &lo, &hi);
            for (int k = 1; rc == 0 && k < P; k++)
                rc = wait_for(pg, (r + k) % P, &hdr(s, (r + k) % P)->staged, g + 1);
            /* in tiles that stay in L1; the ring's operand order, so the
             * same bits: acc = x_r, then acc = x_p op acc for p = r + 1, ... */
            char *out = area(s, r, g, r);
            for (int64_t t = lo; rc == 0 && t < hi; t += te) {
                int64_t m = hi - t < te ? hi - t : te;
                size_t at = (size_t)((t - lo) * es), mb = (size_t)(m * es);
                memcpy(out + at, area(s, (r + 1) % P, g, r) + at, mb);
                tn__pg_reduce_into(out + at, buf + t * es, m, dt, op);
                for (int k = 2; k < P; k++) {
                    memcpy(s->tile, area(s, (r + k) % P, g, r) + at, mb);
                    tn__pg_reduce_into(s->tile, out + at, m, dt, op);
                    memcpy(out + at, s->tile, mb);
                }
                memcpy(buf + t * es, out + at, mb);
            }
            if (rc == 0)
                publish(&hdr(s, r)->reduced, g + 1);
        }
        c = i - 2;
        if (rc == 0 && c >= 0) { /* gather the peers' results of round c */
            uint32_t g = base + (uint32_t)c;
            for (int k = 1; rc == 0 && k < P; k++) {
                int p = (r + k) % P;
                rc = wait_for(pg, p, &hdr(s, p)->reduced, g + 1);
                part(off, p, c, ce, &lo, &hi);
                if (rc == 0 && hi > lo)
                    memcpy(buf + lo * es, area(s, p, g, p), (size_t)((hi - lo) * es));
            }
            if (rc == 0)
                publish(&hdr(s, r)->done, g + 1);
        }
    }
    free(off);
    if (rc == 0)
        s->round = base + (uint32_t)R;
    return rc;
}
