/*
 * core/copy.c: copy_ with broadcasting and dtype conversion, contiguous,
 * clone, to(dtype), detach and fill_.
 */
#include "core/internal.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct tn_conv_ctx {
    enum tn_dtype ddt, sdt;
};

static void tn_copy_loop(char **p, const int64_t *st, int64_t n, void *arg)
{
    struct tn_conv_ctx *c = arg;
    size_t es = tn_dtype_size(c->ddt);
    if (c->ddt == c->sdt && st[0] == (int64_t)es && st[1] == (int64_t)es) {
        memcpy(p[0], p[1], (size_t)n * es);
        return;
    }
    tn__convert_strided(p[0], c->ddt, st[0], p[1], c->sdt, st[1], n);
}

/*
 * Transposing copies: when the source runs contiguously along the second
 * innermost dimension instead of the innermost, an element-by-element walk
 * reads one element per cache line, and power-of-two row lengths put all
 * the lines of a tile into one cache set.  Each tile is therefore gathered
 * row by row into a small buffer (contiguous reads), then written out
 * column by column from it (contiguous writes), every line touched once.
 */
#define TN_TILE 32 /* the least size of both dims that tiles */
/* A tile: 16 values along the destination's contiguous dim (one 64-byte
 * line of float32 per destination row), 128 along the source's (512-byte
 * runs of each source row: one source page a 128 values, not a 32) */
#define TN_TILE_I 16
#define TN_TILE_J 128

/* Tiles of 4-byte (and 8-byte) values between two layouts that are each
 * contiguous along one of the two dims: the tile's source rows gathered
 * into the buffer, then 4x4 (2x2) blocks of it transposed in 16-byte
 * registers into the destination's rows. The gather through a buffer and a per-value conversion call it
 * replaces ran at 0.2-0.3x memcpy's bandwidth (bench/core/bench_copy). */
typedef uint32_t tn_v4u __attribute__((vector_size(16)));
typedef uint64_t tn_v2u __attribute__((vector_size(16)));
#if defined(__clang__)
#define TN_SHUF4(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#define TN_SHUF2(a, b, i, j) __builtin_shufflevector(a, b, i, j)
#else
#define TN_SHUF4(a, b, i, j, k, l) __builtin_shuffle(a, b, (tn_v4u){i, j, k, l})
#define TN_SHUF2(a, b, i, j) __builtin_shuffle(a, b, (tn_v2u){i, j})
#endif

/* 16 bytes to d, past the caches when nt (d then 16-byte aligned) */
static inline void tn_put16(char *d, const void *v, bool nt)
{
#if defined(__SSE2__)
    if (nt) {
        __m128i x;
        memcpy(&x, v, 16);
        _mm_stream_si128((__m128i *)(void *)d, x);
        return;
    }
#endif
    (void)nt;
    memcpy(d, v, 16);
}

/* dst (ti x tj, value (i, j) at i * es + j * dld bytes) from src (value
 * (i, j) at i * sld + j * es), es 4 or 8; each block of b destination rows
 * is written whole before the next, so that rows a power of two apart
 * (one L1 set) are not evicted half-written. */
static void tn_tile_transpose(char *dst, int64_t dld, const char *src, int64_t sld, int64_t ti,
                              int64_t tj, int64_t es, bool nt)
{
    int64_t b = 16 / es, j = 0;
    for (; j + b <= tj; j += b) {
        int64_t i = 0;
        for (; i + b <= ti; i += b) {
            const char *s = src + i * sld + j * es;
            char *d = dst + i * es + j * dld;
            if (es == 4) {
                tn_v4u r0, r1, r2, r3;
                memcpy(&r0, s, 16);
                memcpy(&r1, s + sld, 16);
                memcpy(&r2, s + 2 * sld, 16);
                memcpy(&r3, s + 3 * sld, 16);
                tn_v4u t0 = TN_SHUF4(r0, r1, 0, 4, 1, 5), t1 = TN_SHUF4(r0, r1, 2, 6, 3, 7);
                tn_v4u t2 = TN_SHUF4(r2, r3, 0, 4, 1, 5), t3 = TN_SHUF4(r2, r3, 2, 6, 3, 7);
                tn_v4u c0 = TN_SHUF4(t0, t2, 0, 1, 4, 5), c1 = TN_SHUF4(t0, t2, 2, 3, 6, 7);
                tn_v4u c2 = TN_SHUF4(t1, t3, 0, 1, 4, 5), c3 = TN_SHUF4(t1, t3, 2, 3, 6, 7);
                tn_put16(d, &c0, nt);
                tn_put16(d + dld, &c1, nt);
                tn_put16(d + 2 * dld, &c2, nt);
                tn_put16(d + 3 * dld, &c3, nt);
            } else {
                tn_v2u r0, r1;
                memcpy(&r0, s, 16);
                memcpy(&r1, s + sld, 16);
                tn_v2u c0 = TN_SHUF2(r0, r1, 0, 2), c1 = TN_SHUF2(r0, r1, 1, 3);
                tn_put16(d, &c0, nt);
                tn_put16(d + dld, &c1, nt);
            }
        }
        for (; i < ti; i++) /* the last rows, under a block */
            for (int64_t k = j; k < j + b; k++)
                memcpy(dst + i * es + k * dld, src + i * sld + k * es, (size_t)es);
    }
    for (; j < tj; j++) /* the last columns */
        for (int64_t i = 0; i < ti; i++)
            memcpy(dst + i * es + j * dld, src + i * sld + j * es, (size_t)es);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TN_T16 1
/* 16 x 16 4-byte values from src (row i at src + i * sld) to dst (value
 * (i, j) at dst + j * dld + i * 4), transposed in zmm registers: every
 * destination row is one whole 64-byte store, past the caches when nt (dst
 * then 64-byte aligned, dld a multiple of 64). */
__attribute__((target("avx512f"))) void tn__t16(char *dst, int64_t dld, const char *src,
                                                int64_t sld, bool nt)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(src + i * sld);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    for (int i = 0; i < 16; i++) {
        if (nt)
            _mm512_stream_ps((float *)(void *)(dst + i * dld), r[i]);
        else
            _mm512_storeu_ps(dst + i * dld, r[i]);
    }
}
#endif

struct tn_tile_job {
    const struct tn_iter *it;
    struct tn_conv_ctx conv;
    int64_t nblocks1; /* tiles along dim 1 */
    bool nt;          /* stores past the caches (see tn_copy_tiled) */
    bool t16;         /* 4-byte values, same dtype, tn__t16 can run */
};

static void tn_tile_rows(int64_t begin, int64_t end, void *arg)
{
    const struct tn_tile_job *job = arg;
    const struct tn_iter *it = job->it;
    int64_t n0 = it->sizes[0], n1 = it->sizes[1];
    int64_t ses = (int64_t)tn_dtype_size(job->conv.sdt);
    _Alignas(64) unsigned char buf[TN_TILE_I * TN_TILE_J * 8];
    for (int64_t w = begin; w < end; w++) {
        /* w = outer * nblocks1 + block1: find the tile's base pointers */
        int64_t outer = w / job->nblocks1, j0 = (w % job->nblocks1) * TN_TILE_J;
        char *d = it->base[0], *s = it->base[1];
        for (int k = 2; k < it->ndim; k++) {
            int64_t i = outer % it->sizes[k];
            outer /= it->sizes[k];
            d += i * it->strides[0][k];
            s += i * it->strides[1][k];
        }
        int64_t tj = n1 - j0 < TN_TILE_J ? n1 - j0 : TN_TILE_J;
        for (int64_t i0 = 0; i0 < n0; i0 += TN_TILE_I) {
            int64_t ti = n0 - i0 < TN_TILE_I ? n0 - i0 : TN_TILE_I;
            const char *src = s + i0 * it->strides[1][0] + j0 * it->strides[1][1];
            char *dst = d + i0 * it->strides[0][0] + j0 * it->strides[0][1];
#ifdef TN_T16
            /* 4-byte values on AVX-512: the tile gathered as below (whole
             * 512-byte source runs; the blocks read straight from the
             * source, 64 bytes of 16 rows at a time, ran slower), then
             * whole 16 x 16 blocks, each destination row one 64-byte line
             * (bench_copy's 4096x4096 float32 transpose ran at 0.43x
             * memcpy with 4x4 blocks of 16-byte stores) */
            if (job->t16 && ti == 16 && tj % 16 == 0) {
                bool nt = job->nt && (uintptr_t)dst % 64 == 0;
                for (int64_t i = 0; i < ti; i++)
                    memcpy(buf + i * tj * ses, src + i * it->strides[1][0], (size_t)(tj * ses));
                for (int64_t j = 0; j < tj; j += 16)
                    tn__t16(dst + j * it->strides[0][1], it->strides[0][1], (char *)buf + j * 4,
                           tj * ses, nt);
                continue;
            }
#endif
            for (int64_t i = 0; i < ti; i++)
                memcpy(buf + i * tj * ses, src + i * it->strides[1][0], (size_t)(tj * ses));
            if (job->conv.ddt == job->conv.sdt && (ses == 4 || ses == 8) &&
                it->strides[0][0] == ses) {
                tn_tile_transpose(dst, it->strides[0][1], (char *)buf, tj * ses, ti, tj, ses,
                                  job->nt && (uintptr_t)dst % 16 == 0);
                continue;
            }
            for (int64_t j = 0; j < tj; j++)
                tn__convert_strided(dst + j * it->strides[0][1], job->conv.ddt, it->strides[0][0],
                                    (char *)buf + j * ses, job->conv.sdt, tj * ses, ti);
        }
    }
#if defined(__SSE2__)
    if (job->nt) /* this thread's streamed stores, before the pool reports done */
        _mm_sfence();
#endif
}

/* Copies tile by tile when that pays (see above); returns false otherwise. */
static bool tn_copy_tiled(const struct tn_iter *it, struct tn_conv_ctx conv)
{
    int64_t ses = (int64_t)tn_dtype_size(conv.sdt);
    if (it->ndim < 2 || it->sizes[0] < TN_TILE || it->sizes[1] < TN_TILE ||
        it->strides[1][1] != ses || it->strides[1][0] == ses)
        return false;
    struct tn_tile_job job = {it, conv, (it->sizes[1] + TN_TILE_J - 1) / TN_TILE_J, false, false};
    /* a destination of 8 MiB or more (past a core's share of the last
     * level cache) is stored past the caches when its rows are 16-byte
     * aligned: a store that missed read the line in first (RFO), and on
     * 4096x4096 float32 79% of the copy's time sat on those stores */
    job.nt = it->numel * (int64_t)tn_dtype_size(conv.ddt) >= ((int64_t)8 << 20) &&
             it->strides[0][1] % 16 == 0;
#ifdef TN_T16
    job.t16 = conv.ddt == conv.sdt && ses == 4 && it->strides[0][0] == 4 &&
              __builtin_cpu_supports("avx512f");
    if (job.t16 && it->strides[0][1] % 64)
        job.nt = false; /* tn__t16 streams whole lines only */
#endif
    int64_t outer = it->numel / (it->sizes[0] * it->sizes[1]);
    int64_t work = outer * job.nblocks1;
    /* one unit of work is a column of tiles: n0 * TN_TILE_J elements */
    int64_t grain = TN_PARALLEL_GRAIN / (it->sizes[0] * TN_TILE_J) + 1;
    tn_parallel_for(work, grain, tn_tile_rows, &job);
    return true;
}

/* The element range [lo, hi) of storage a tensor may touch, in bytes. */
static void tn_byte_extent(const struct tn_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es = (int64_t)tn_dtype_size(t->dtype);
    int64_t min = t->offset, max = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) {
            *lo = *hi = 0;
            return;
        }
        int64_t span = (t->sizes[d] - 1) * t->strides[d];
        if (span < 0)
            min += span;
        else
            max += span;
    }
    *lo = min * es;
    *hi = (max + 1) * es;
}

static bool tn_may_overlap(const struct tn_tensor *a, const struct tn_tensor *b)
{
    if (a->storage != b->storage)
        return false;
    int64_t alo, ahi, blo, bhi;
    tn_byte_extent(a, &alo, &ahi);
    tn_byte_extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* True when some element of t is written through more than one index
 * (PyTorch's has_internal_overlap: a non-overlapping and dense tensor, which
 * takes in every empty one, has none). */
static bool tn_has_internal_overlap(const struct tn_tensor *t)
{
    if (tn_is_non_overlapping_and_dense(t))
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] > 1 && t->strides[d] == 0)
            return true;
    return false;
}

/* PyTorch's overlap status: full when a and b are the same elements in the
 * same order (the same tensor, or dense in one storage over the same bytes
 * with the same strides), partial when dense in one storage with byte
 * ranges that otherwise meet; where either is not dense PyTorch cannot tell
 * (copy_ then goes through a temporary). */
static enum { TN_OVERLAP_NO, TN_OVERLAP_PARTIAL, TN_OVERLAP_FULL, TN_OVERLAP_TOO_HARD }
tn_overlap_status(const struct tn_tensor *a, const struct tn_tensor *b)
{
    if (a == b)
        return TN_OVERLAP_FULL;
    if (tn_numel(a) == 0 || tn_numel(b) == 0)
        return TN_OVERLAP_NO;
    if (!tn_is_non_overlapping_and_dense(a) || !tn_is_non_overlapping_and_dense(b))
        return TN_OVERLAP_TOO_HARD;
    if (a->storage != b->storage)
        return TN_OVERLAP_NO;
    int64_t ab = a->offset * (int64_t)tn_dtype_size(a->dtype), ae = ab + (int64_t)tn_nbytes(a);
    int64_t bb = b->offset * (int64_t)tn_dtype_size(b->dtype), be = bb + (int64_t)tn_nbytes(b);
    if (ab == bb && ae == be)
        return a->ndim == b->ndim &&
                       !memcmp(a->strides, b->strides, sizeof a->strides[0] * (size_t)a->ndim)
                   ? TN_OVERLAP_FULL
                   : TN_OVERLAP_PARTIAL;
    return ab < be && bb < ae ? TN_OVERLAP_PARTIAL : TN_OVERLAP_NO;
}

int tn__check_overlap(const struct tn_tensor *written, const struct tn_tensor *input, bool full)
{
    int st = tn_overlap_status(written, input);
    if (st == TN_OVERLAP_PARTIAL || (full && st == TN_OVERLAP_FULL))
        return tn_set_error(TN_EINVAL,
                            "unsupported operation: some elements of the input tensor and the "
                            "written-to tensor refer to a single memory location. Please clone() "
                            "the tensor before performing the operation.");
    return TN_OK;
}

/* Copies between devices through the device backend: the core moves whole
 * contiguous blocks of one dtype and shape; kernels for the rest come with
 * the device's ops. */
static int tn_copy_across(struct tn_tensor *dst, const struct tn_tensor *src)
{
    enum tn_device_type type =
        dst->device.type != TN_DEVICE_CPU ? dst->device.type : src->device.type;
    if (dst->device.type == TN_DEVICE_META && src->device.type == TN_DEVICE_META)
        return TN_OK; /* as PyTorch: shapes only, nothing to move (a reshape's copy) */
    if (type == TN_DEVICE_META || dst->device.type == TN_DEVICE_META ||
        src->device.type == TN_DEVICE_META)
        return tn_set_error(TN_EDEVICE, "copy_: meta tensors hold no data");
    const struct tn_device_backend *be = tn__device_backend(type);
    if (!be)
        return tn_last_status();
    bool same_shape = dst->ndim == src->ndim &&
                      !memcmp(dst->sizes, src->sizes, sizeof dst->sizes[0] * (size_t)dst->ndim);
    if (dst->dtype != src->dtype || !same_shape || !tn_is_contiguous(dst) ||
        !tn_is_contiguous(src))
        return tn_set_error(TN_EDEVICE, "copy_ between devices needs contiguous tensors of one "
                                        "dtype and shape");
    int rc = be->memcpy(tn_data(dst), dst->device, tn_data(src), src->device, tn_nbytes(dst));
    if (rc == TN_OK)
        __atomic_add_fetch(&dst->storage->version, 1, __ATOMIC_RELAXED);
    return rc;
}

int tn_copy_(struct tn_tensor *dst, const struct tn_tensor *src)
{
    if (dst->device.type != TN_DEVICE_CPU || src->device.type != TN_DEVICE_CPU)
        return tn_copy_across(dst, src);
    if (tn_has_internal_overlap(dst))
        return tn_set_error(TN_EINVAL,
                            "unsupported operation: more than one element of the written-to tensor "
                            "refers to a single memory location. Please clone() the tensor before "
                            "performing the operation.");
    if (tn__check_overlap(dst, src, false) < 0)
        return tn_last_status();
    int64_t shape[TN_MAX_DIMS];
    int nd = tn_broadcast_shapes(dst->sizes, dst->ndim, src->sizes, src->ndim, shape);
    if (nd < 0)
        return tn_last_status();
    bool same = nd == dst->ndim;
    for (int i = 0; same && i < nd; i++)
        same = shape[i] == dst->sizes[i];
    if (!same) {
        char a[256], b[256];
        return tn_set_error(TN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s",
                            tn_shape_format(dst->sizes, dst->ndim, a, sizeof a),
                            tn_shape_format(shape, nd, b, sizeof b));
    }
    /* autograd: leaf checks before the write, the new history after it */
    bool ad = (dst->requires_grad || src->requires_grad) && tn__autograd_hooks;
    if (ad && tn__autograd_hooks->check_inplace(dst) < 0)
        return tn_last_status();
    if (tn_numel(dst) == 0)
        return ad ? tn__autograd_hooks->after_inplace(dst, src) : TN_OK;
    struct tn_tensor *tmp = NULL;
    if (tn_may_overlap(dst, src)) {
        if (dst->offset == src->offset && dst->dtype == src->dtype && dst->ndim == src->ndim &&
            !memcmp(dst->sizes, src->sizes, sizeof dst->sizes[0] * (size_t)dst->ndim) &&
            !memcmp(dst->strides, src->strides, sizeof dst->strides[0] * (size_t)dst->ndim))
            return ad ? tn__autograd_hooks->after_inplace(dst, src) : TN_OK; /* onto itself */
        tmp = tn_clone(src);
        if (!tmp)
            return tn_last_status();
        src = tmp;
    }
    /* src's strides aligned to dst's dims, broadcast dims stepping by 0 */
    int64_t sstr[TN_MAX_DIMS];
    int lead = dst->ndim - src->ndim;
    for (int d = 0; d < dst->ndim; d++)
        sstr[d] = d < lead || src->sizes[d - lead] == 1 ? 0 : src->strides[d - lead];
    char *base[2] = {tn_data(dst), tn_data(src)};
    const int64_t *strides[2] = {dst->strides, sstr};
    size_t es[2] = {tn_dtype_size(dst->dtype), tn_dtype_size(src->dtype)};
    struct tn_iter it;
    tn__iter_init(&it, 2, dst->sizes, dst->ndim, base, strides, es);
    struct tn_conv_ctx ctx = {dst->dtype, src->dtype};
    if (!tn_copy_tiled(&it, ctx))
        tn__iter_run(&it, tn_copy_loop, &ctx, TN_PARALLEL_GRAIN);
    __atomic_add_fetch(&dst->storage->version, 1, __ATOMIC_RELAXED);
    tn_release(tmp);
    return ad ? tn__autograd_hooks->after_inplace(dst, src) : TN_OK;
}

/* Dense strides that keep the order of t's strides (PyTorch's
 * infer_dense_strides): dims sorted innermost first by stride, a larger size
 * going outside on equal strides, dims of stride 0 left where they are. */
static void tn_infer_dense_strides(const struct tn_tensor *t, int64_t *out)
{
    int n = t->ndim, perm[TN_MAX_DIMS];
    for (int i = 0; i < n; i++)
        perm[i] = n - 1 - i; /* innermost first */
    for (int i = 1; i < n; i++) {
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int64_t s0 = t->strides[perm[d0]], s1 = t->strides[perm[d1]];
            int cmp = 0; /* > 0: perm[d0] belongs outside perm[d1] */
            if (s0 != 0 && s1 != 0) {
                if (s0 < s1)
                    cmp = -1;
                else if (s0 > s1)
                    cmp = 1;
                else if (t->sizes[perm[d0]] > t->sizes[perm[d1]])
                    cmp = 1;
            }
            if (cmp > 0) {
                int tmp = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = tmp;
                d1 = d0;
            } else if (cmp < 0) {
                break;
            }
        }
    }
    int64_t stride = 1;
    for (int i = 0; i < n; i++) {
        out[perm[i]] = stride;
        if (t->sizes[perm[i]] > 1)
            stride *= t->sizes[perm[i]];
    }
}

/* A new tensor like t: with preserve (PyTorch's preserve_format) t's own
 * strides when t is non-overlapping and dense, else dense strides in the
 * order of t's; without, contiguous. */
static struct tn_tensor *tn_empty_preserve(const struct tn_tensor *t, enum tn_dtype dtype,
                                           bool preserve)
{
    if (preserve && t->ndim > 0) {
        int64_t strides[TN_MAX_DIMS];
        if (tn_is_non_overlapping_and_dense(t))
            memcpy(strides, t->strides, sizeof strides[0] * (size_t)t->ndim);
        else
            tn_infer_dense_strides(t, strides);
        int64_t numel = tn_numel(t);
        struct tn_storage *s = tn_storage_new((size_t)numel * tn_dtype_size(dtype), t->device);
        if (!s)
            return NULL;
        /* dense strides start at the lowest address: offset 0 */
        struct tn_tensor *r = tn__tensor_make(s, 0, t->sizes, strides, t->ndim, dtype);
        tn_storage_release(s);
        return r;
    }
    return tn_empty_on(t->sizes, t->ndim, dtype, t->device);
}

struct tn_tensor *tn_empty_like(const struct tn_tensor *t, enum tn_dtype dtype)
{
    return tn_empty_preserve(t, dtype == TN_DTYPE_UNSET ? t->dtype : dtype, true);
}

struct tn_tensor *tn_contiguous(const struct tn_tensor *t)
{
    if (tn_is_contiguous(t))
        return tn_retain((struct tn_tensor *)t);
    struct tn_tensor *r = tn_empty_preserve(t, t->dtype, false);
    if (r && tn_copy_(r, t) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    return r;
}

struct tn_tensor *tn_clone(const struct tn_tensor *t)
{
    struct tn_tensor *r = tn_empty_preserve(t, t->dtype, true);
    if (r && tn_copy_(r, t) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    if (r && r->grad_fn) /* the copy's node, r's alone: PyTorch's name for it */
        ((struct tn_node_header *)r->grad_fn)->name = "CloneBackward0";
    return r;
}

struct tn_tensor *tn_to_dtype(const struct tn_tensor *t, enum tn_dtype dtype)
{
    if (dtype == TN_DTYPE_UNSET || dtype == t->dtype)
        return tn_retain((struct tn_tensor *)t);
    struct tn_tensor *r = tn_empty_preserve(t, dtype, true);
    if (r && tn_copy_(r, t) != TN_OK) {
        tn_release(r);
        return NULL;
    }
    if (r && r->grad_fn) /* the copy's node, r's alone: PyTorch's name for it */
        ((struct tn_node_header *)r->grad_fn)->name = "ToCopyBackward0";
    return r;
}

struct tn_tensor *tn_detach(const struct tn_tensor *t)
{
    struct tn_tensor *r =
        tn__tensor_make(t->storage, t->offset, t->sizes, t->strides, t->ndim, t->dtype);
    if (r)
        r->flags = 0;
    return r;
}

struct tn_fill_ctx {
    unsigned char value[16];
    size_t es;
};

static void tn_fill_loop(char **p, const int64_t *st, int64_t n, void *arg)
{
    struct tn_fill_ctx *c = arg;
    char *d = p[0];
    if (c->es == 4) {
        uint32_t v;
        memcpy(&v, c->value, 4);
        for (int64_t i = 0; i < n; i++, d += st[0])
            memcpy(d, &v, 4);
        return;
    }
    for (int64_t i = 0; i < n; i++, d += st[0])
        memcpy(d, c->value, c->es);
}

/* Does double `f` overflow the real type of `dtype` (c10's overflows<>)?
 * Infinities fit types that have them, NaN only floating types. */
static bool tn_double_overflows(double f, enum tn_dtype dtype)
{
    double lo, hi;
    switch (dtype) {
    case TN_FLOAT32: case TN_COMPLEX64: lo = -3.4028234663852886e38; hi = -lo; break;
    case TN_FLOAT64: return false;
    case TN_FLOAT16: lo = -65504.0; hi = 65504.0; break;
    case TN_BFLOAT16: lo = -3.3895313892515355e38; hi = -lo; break;
    case TN_INT64: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;
    case TN_INT32: lo = -2147483648.0; hi = 2147483647.0; break;
    case TN_INT16: lo = -32768.0; hi = 32767.0; break;
    case TN_INT8: lo = -128.0; hi = 127.0; break;
    case TN_UINT8: lo = 0.0; hi = 255.0; break;
    default: return false;
    }
    if (tn_dtype_is_floating(dtype) || tn_dtype_is_complex(dtype)) {
        if (isinf(f) || isnan(f))
            return false;
    } else if (isnan(f)) {
        return true;
    }
    return f < lo || f > hi;
}

int tn__scalar_check(struct tn_scalar s, enum tn_dtype dtype)
{
    bool over = false;
    switch (s.kind) {
    case TN_SCALAR_BOOL:
        break;
    case TN_SCALAR_INT:
        /* unsigned targets let negative values wrap as two's complement */
        if (dtype == TN_UINT8)
            over = s.v.i > 255 || (s.v.i < 0 && -(uint64_t)s.v.i > 255);
        else if (tn_dtype_is_integral(dtype, false))
            over = tn_double_overflows((double)s.v.i, dtype);
        break;
    case TN_SCALAR_FLOAT:
        over = dtype != TN_BOOL && tn_double_overflows(s.v.f, dtype);
        break;
    case TN_SCALAR_COMPLEX:
        over = dtype != TN_BOOL && ((!tn_dtype_is_complex(dtype) && s.v.c.im != 0) ||
                                    tn_double_overflows(s.v.c.re, dtype) ||
                                    tn_double_overflows(s.v.c.im, dtype));
        break;
    }
    if (!over)
        return TN_OK;
    /* the C++ type names PyTorch 2.x prints (1.13: at::Half, at::BFloat16) */
    static const char *const names[TN_NUM_ALL_DTYPES] = {
        [TN_FLOAT32] = "float", [TN_FLOAT64] = "double", [TN_FLOAT16] = "c10::Half",
        [TN_BFLOAT16] = "c10::BFloat16", [TN_INT64] = "int64_t", [TN_INT32] = "int",
        [TN_INT16] = "int16_t", [TN_INT8] = "int8_t", [TN_UINT8] = "uint8_t",
        [TN_BOOL] = "bool", [TN_COMPLEX64] = "c10::complex<float>",
        [TN_COMPLEX128] = "c10::complex<double>",
    };
    return tn_set_error(TN_EINVAL, "value cannot be converted to type %s without overflow",
                        names[dtype] ? names[dtype] : tn_dtype_info(dtype)->c10_name);
}

int tn_fill_(struct tn_tensor *t, struct tn_scalar value)
{
    if (t->device.type != TN_DEVICE_CPU)
        return tn_set_error(TN_EDEVICE, "fill_: kernels for %s tensors come with the device's ops",
                            t->device.type == TN_DEVICE_CUDA ? "CUDA" : "meta");
    if (tn__scalar_check(value, t->dtype) != TN_OK)
        return tn_last_status();
    /* autograd: leaf checks before the write, the new history after it */
    bool ad = t->requires_grad && tn__autograd_hooks;
    if (ad && tn__autograd_hooks->check_inplace(t) < 0)
        return tn_last_status();
    struct tn_fill_ctx ctx;
    ctx.es = tn_dtype_size(t->dtype);
    tn_scalar_store(ctx.value, t->dtype, value);
    char *base[1] = {tn_data(t)};
    const int64_t *strides[1] = {t->strides};
    struct tn_iter it;
    tn__iter_init(&it, 1, t->sizes, t->ndim, base, strides, &ctx.es);
    tn__iter_run(&it, tn_fill_loop, &ctx, TN_PARALLEL_GRAIN);
    __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED);
    return ad ? tn__autograd_hooks->after_inplace(t, NULL) : TN_OK;
}
