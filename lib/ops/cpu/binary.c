/*
 * ops/cpu/binary.c: elementwise binary kernels on the CPU (add, sub, mul,
 * div with its rounding modes, comparisons) for every dtype, and the
 * structured out= kernels the generated code calls.
 *
 * One inner loop per (op, dtype), from X-macros: a contiguous case the
 * compiler vectorises, a case for a broadcast (stride 0) operand, and a
 * strided one. float16/bfloat16 compute in float as PyTorch does; integer
 * arithmetic wraps (computed unsigned, so no C overflow).
 */
#include <config.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "ops/internal.h"
#include "ops/cpu/kernel.h"

/* the integer macros test signs, which is always false for uint8: right,
 * but gcc says so once per loop */
#pragma GCC diagnostic ignored "-Wtype-limits"

struct bctx {
    double af;           /* alpha for floating dtypes */
    uint64_t ai;         /* alpha for integers (two's complement) */
    bool ab;             /* alpha for bool */
    double _Complex ac;  /* alpha for complex */
    int zero_div;        /* an integer division by zero happened */
    bool stream;         /* the whole output is TN_STREAM_BYTES or more */
    bool nofence;        /* the caller fences the streamed stores (stream_rows) */
};

/* c10's floor division of floats (div_floor_floating). */
#define TN_DIV_FLOOR_F(T, FMOD, FLOOR, x, y)                                                   \
    ({                                                                                         \
        T a_ = (x), b_ = (y), r_;                                                              \
        if (b_ == 0) {                                                                         \
            r_ = a_ / b_;                                                                      \
        } else {                                                                               \
            T mod_ = FMOD(a_, b_);                                                             \
            T div_ = (a_ - mod_) / b_;                                                         \
            if (mod_ != 0 && (b_ < 0) != (mod_ < 0))                                           \
                div_ -= 1;                                                                     \
            if (div_ != 0) {                                                                   \
                r_ = FLOOR(div_);                                                              \
                if (div_ - r_ > (T)0.5)                                                        \
                    r_ += 1;                                                                   \
            } else {                                                                           \
                r_ = copysign(0.0, (double)(a_ / b_));                                         \
            }                                                                                  \
        }                                                                                      \
        r_;                                                                                    \
    })

/* One inner loop: out (OT) = EXPR(x, y) with x, y loaded from IT as CT. */
#define TN_LOOP(NAME, IT, OT, CT, LD, ST, EXPR)                                                \
    TN_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, void *vctx)                        \
    {                                                                                          \
        struct bctx *ctx = vctx;                                                               \
        (void)ctx;                                                                             \
        char *o = p[0];                                                                        \
        const char *a = p[1], *b = p[2];                                                       \
        if (s[0] == sizeof(OT) && s[1] == sizeof(IT) && s[2] == sizeof(IT)) {                  \
            OT *O = (OT *)o;                                                                   \
            const IT *A = (const IT *)a, *B = (const IT *)b;                                   \
            TN_IVDEP for (int64_t i = 0; i < n; i++) {                                                  \
                CT x = LD(A[i]), y = LD(B[i]);                                                 \
                ST(O[i], (EXPR));                                                              \
            }                                                                                  \
        } else if (s[0] == sizeof(OT) && s[1] == sizeof(IT) && s[2] == 0) {                    \
            OT *O = (OT *)o;                                                                   \
            const IT *A = (const IT *)a;                                                       \
            const CT y = LD(*(const IT *)b);                                                   \
            TN_IVDEP for (int64_t i = 0; i < n; i++) {                                                  \
                CT x = LD(A[i]);                                                               \
                ST(O[i], (EXPR));                                                              \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                  \
                CT x = LD(*(const IT *)(a + i * s[1])), y = LD(*(const IT *)(b + i * s[2]));   \
                ST(*(OT *)(o + i * s[0]), (EXPR));                                             \
            }                                                                                  \
        }                                                                                      \
    }

/* Runs whose output is at least this many bytes are written with
 * non-temporal stores (32 bytes at a time, as two SSE2 movntdq so that
 * every clone has them): an output that cannot stay in the last-level
 * cache is not read in before it is written, which saves a quarter of the
 * memory traffic of an add. By default 3/8 of the L3 that this CPU shares
 * (32 MiB when its size is unknown); TN_STREAM_BYTES sets it (0: never).
 * The L3's size is the kernel's (sysfs: one instance, the cache the core
 * sees), not glibc's sysconf, which on AMD EPYC VMs reports the whole
 * package's (256 MiB on this 2-core VM, whose L3 is 32 MiB): the threshold
 * was then 96 MiB, an add of 10^7 float32 (40 MB a tensor) wrote through
 * the cache and moved 21-25 GB/s against 31-34 streamed (issue 27). Outputs
 * past 3/8 of the L3 with their inputs fill it anyway, so an output the
 * next op reads is lost from the cache either way. */
static int64_t stream_bytes; /* 0: not read yet */

/* bytes of the level-3 cache of CPU 0 as sysfs gives it ("32768K"), 0
 * when it does not */
static uint64_t l3_bytes(void)
{
    char path[64], buf[32];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        bool l3 = fgets(buf, sizeof buf, f) && atoi(buf) == 3;
        fclose(f);
        if (!l3)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            return 0;
        char *end = buf;
        uint64_t v = fgets(buf, sizeof buf, f) ? strtoull(buf, &end, 10) : 0;
        fclose(f);
        return *end == 'K' ? v << 10 : *end == 'M' ? v << 20 : v;
    }
    return 0;
}

void tn__stream_configure(void)
{
    uint64_t l3 = l3_bytes();
    if (!l3) {
        long c = sysconf(_SC_LEVEL3_CACHE_SIZE);
        l3 = c > 0 ? (uint64_t)c : 0;
    }
    uint64_t v = l3 ? l3 / 8 * 3 : (uint64_t)32 << 20;
    if (tn__env_bytes("TN_STREAM_BYTES", (uint64_t)1 << 62, &v) && v == 0)
        v = INT64_MAX;
    __atomic_store_n(&stream_bytes, v ? (int64_t)v : 1, __ATOMIC_RELAXED);
}

int64_t tn__stream_bytes(void)
{
    int64_t b = __atomic_load_n(&stream_bytes, __ATOMIC_RELAXED);
    if (!b) {
        tn__stream_configure();
        b = __atomic_load_n(&stream_bytes, __ATOMIC_RELAXED);
    }
    return b;
}

#ifdef __SSE2__
#define nt_bytes tn__stream_bytes
#define TN_STREAM32(dst, v)                                                                    \
    do {                                                                                       \
        union {                                                                                \
            __typeof__(v) v_;                                                                  \
            __m128i h_[2];                                                                     \
        } u_ = {.v_ = (v)};                                                                    \
        _mm_stream_si128((__m128i *)(void *)(dst), u_.h_[0]);                                  \
        _mm_stream_si128((__m128i *)(void *)(dst) + 1, u_.h_[1]);                              \
    } while (0)
#define TN_SFENCE() _mm_sfence()
#else /* no streaming stores: never taken */
#define nt_bytes() INT64_MAX
#define TN_STREAM32(dst, v) (*(__typeof__(v) *)(void *)(dst) = (v))
#define TN_SFENCE() ((void)0)
#endif

/* The same loop for float and double add (alpha 1), sub (alpha 1), mul and
 * div (EXPR over 32-byte vectors of T, the same operation element by
 * element, so the same bits): contiguous and scalar-broadcast runs go four
 * 32-byte vectors a step. gcc vectorises the plain loop with 64-byte
 * vectors in the x86-64-v4 clone, which run 10% slower than 32-byte ones
 * once the operands are in L2 rather than L1 (bench/ops/sweep.sh at 10^5,
 * issue 27; PyTorch's Vectorized<float> is 32 bytes there too). The SLP
 * vectoriser, left on, joins the four into two 64-byte vectors. */
#if defined(__GNUC__) && !defined(__clang__)
#define TN_NO_SLP __attribute__((optimize("no-tree-slp-vectorize", "no-tree-loop-vectorize")))
#else
#define TN_NO_SLP
#endif
#define TN_VLOOP(NAME, T, EXPR)                                                                \
    TN_KERNEL_CLONES TN_NO_SLP static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) \
    {                                                                                          \
        typedef T V __attribute__((vector_size(32), aligned(sizeof(T)), may_alias));         \
        enum { L = 32 / sizeof(T) };                                                           \
        const struct bctx *ctx = vctx;                                                         \
        T *O = (T *)(void *)p[0];                                                              \
        const T *A = (const T *)(const void *)p[1], *B = (const T *)(const void *)p[2];       \
        int64_t i = 0;                                                                         \
        if (s[0] == sizeof(T) && s[1] == sizeof(T) && (s[2] == sizeof(T) || s[2] == 0)) {      \
            const int64_t sb = s[2] ? 1 : 0; /* B's step: broadcast or not */                 \
            V yv;                                                                              \
            for (int k = 0; k < L; k++)                                                        \
                yv[k] = *B;                                                                    \
            if (ctx->stream || n * (int64_t)sizeof(T) >= nt_bytes()) {                         \
                for (; i < n && ((uintptr_t)(O + i) & 31); i++) {                              \
                    T x = A[i], y = B[i * sb];                                                 \
                    O[i] = (EXPR);                                                             \
                }                                                                              \
                for (; i + L <= n; i += L) {                                                   \
                    V x = *(const V *)(A + i), y = sb ? *(const V *)(B + i) : yv;              \
                    TN_STREAM32(O + i, (V)(EXPR));                                             \
                }                                                                              \
                if (!ctx->nofence)                                                             \
                    TN_SFENCE();                                                               \
            } else if (!sb) {                                                                  \
                for (; i + 4 * L <= n; i += 4 * L)                                             \
                    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                      \
                        V x = *(const V *)(A + i + k * L), y = yv;                             \
                        *(V *)(O + i + k * L) = (EXPR);                                        \
                    }                                                                          \
            } else {                                                                           \
                for (; i + 4 * L <= n; i += 4 * L)                                             \
                    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                      \
                        V x = *(const V *)(A + i + k * L), y = *(const V *)(B + i + k * L);    \
                        *(V *)(O + i + k * L) = (EXPR);                                        \
                    }                                                                          \
            }                                                                                  \
            for (; i < n; i++) {                                                               \
                T x = A[i], y = B[i * sb];                                                     \
                O[i] = (EXPR);                                                                 \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        for (; i < n; i++) {                                                                   \
            T x = *(const T *)(const void *)(p[1] + i * s[1]);                                 \
            T y = *(const T *)(const void *)(p[2] + i * s[2]);                                 \
            *(T *)(void *)(p[0] + i * s[0]) = (EXPR);                                          \
        }                                                                                      \
    }

/* div(rounding_mode='trunc') of bfloat16 and float16 rounds the quotient to
 * the dtype before truncating, as PyTorch's Vectorized<BFloat16> does */
#define RND_f32(v) (v)
#define RND_f64(v) (v)
#define RND_bf16(v) tn_bfloat16_to_float(tn_bfloat16_from_float(v))
#define RND_f16(v) tn_half_to_float(tn_half_from_float(v))

/* floating dtypes: suffix, storage type, compute type, load, store, fma, fmod, floor */
#define TN_FLOAT_LOOPS(LOOP, SFX, IT, CT, LD, ST, FMA, FMOD, FLOOR, TRUNC, POW, ATAN2)        \
    TN_LOOP(add_##SFX, IT, IT, CT, LD, ST, FMA(y, (CT)ctx->af, x))                             \
    TN_LOOP(sub_##SFX, IT, IT, CT, LD, ST, FMA(y, -(CT)ctx->af, x))                            \
    LOOP(add1_##SFX, IT, IT, CT, LD, ST, x + y)                                                \
    LOOP(sub1_##SFX, IT, IT, CT, LD, ST, x - y)                                                \
    LOOP(mul_##SFX, IT, IT, CT, LD, ST, x * y)                                                 \
    LOOP(div_##SFX, IT, IT, CT, LD, ST, x / y)                                                 \
    TN_LOOP(divt_##SFX, IT, IT, CT, LD, ST, TRUNC(RND_##SFX(x / y)))                           \
    TN_LOOP(divf_##SFX, IT, IT, CT, LD, ST, TN_DIV_FLOOR_F(CT, FMOD, FLOOR, x, y))             \
    TN_LOOP(eq_##SFX, IT, bool, CT, LD, ST_ID, x == y)                                         \
    TN_LOOP(ne_##SFX, IT, bool, CT, LD, ST_ID, x != y)                                         \
    TN_LOOP(lt_##SFX, IT, bool, CT, LD, ST_ID, x < y)                                          \
    TN_LOOP(le_##SFX, IT, bool, CT, LD, ST_ID, x <= y)                                         \
    TN_LOOP(gt_##SFX, IT, bool, CT, LD, ST_ID, x > y)                                          \
    TN_LOOP(ge_##SFX, IT, bool, CT, LD, ST_ID, x >= y)                                         \
    TN_LOOP(max_##SFX, IT, IT, CT, LD, ST, x != x ? x : y != y ? y : (x < y ? y : x))          \
    TN_LOOP(min_##SFX, IT, IT, CT, LD, ST, x != x ? x : y != y ? y : (y < x ? y : x))          \
    TN_LOOP(rem_##SFX, IT, IT, CT, LD, ST, TN_REM_F(CT, FMOD, x, y))                           \
    TN_LOOP(fmod_##SFX, IT, IT, CT, LD, ST, FMOD(x, y))                                        \
    TN_LOOP(pow_##SFX, IT, IT, CT, LD, ST, POW(x, y))                                          \
    TN_LOOP(atan2_##SFX, IT, IT, CT, LD, ST, ATAN2(x, y))                                      \
    TN_LOOP(land_##SFX, IT, bool, CT, LD, ST_ID, x != 0 && y != 0)                             \
    TN_LOOP(lor_##SFX, IT, bool, CT, LD, ST_ID, x != 0 || y != 0)                              \
    TN_LOOP(lxor_##SFX, IT, bool, CT, LD, ST_ID, (x != 0) != (y != 0))

/* c10's remainder of floats: the sign of the divisor */
#define TN_REM_F(T, FMOD, x, y)                                                                \
    ({                                                                                         \
        T m_ = FMOD(x, y);                                                                     \
        (m_ != 0 && ((y) < 0) != (m_ < 0)) ? m_ + (y) : m_;                                    \
    })

/* the LOOP of the four plain arithmetic ops: vectors of 32 bytes where
 * storage and compute types are one */
#define VLOOP(NAME, IT, OT, CT, LD, ST, EXPR) TN_VLOOP(NAME, IT, EXPR)
TN_FLOAT_LOOPS(VLOOP, f32, float, float, LD_ID, ST_ID, fmaf, fmodf, floorf, truncf, powf, atan2f)
TN_FLOAT_LOOPS(VLOOP, f64, double, double, LD_ID, ST_ID, fma, fmod, floor, trunc, pow, atan2)
TN_FLOAT_LOOPS(TN_LOOP, f16, tn_half, float, LD_H, ST_H, fmaf, fmodf, floorf, truncf, powf, atan2f)
TN_FLOAT_LOOPS(TN_LOOP, bf16, tn_bfloat16, float, LD_BF, ST_BF, fmaf, fmodf, floorf, truncf, powf,
               atan2f)

/* integer division: zero divisors are flagged (PyTorch raises), and
 * MIN / -1 wraps as two's complement */
#define TN_IDIV_TRUNC(T, x, y)                                                                 \
    ((y) == 0 ? (__atomic_store_n(&ctx->zero_div, 1, __ATOMIC_RELAXED), (T)0)                  \
     : (y) == (T)-1 && (T)-1 < 0 ? (T)(0 - (uint64_t)(x))                                      \
     : (T)((x) / (y)))
#define TN_IDIV_FLOOR(T, x, y)                                                                 \
    ((y) == 0 ? (__atomic_store_n(&ctx->zero_div, 1, __ATOMIC_RELAXED), (T)0)                  \
     : (y) == (T)-1 && (T)-1 < 0 ? (T)(0 - (uint64_t)(x))                                      \
     : (T)((x) / (y) - (((x) % (y) != 0) && (((x) < 0) != ((y) < 0)))))

#define TN_INT_LOOPS(SFX, T)                                                                   \
    TN_LOOP(add_##SFX, T, T, T, LD_ID, ST_ID, (T)((uint64_t)x + ctx->ai * (uint64_t)y))        \
    TN_LOOP(sub_##SFX, T, T, T, LD_ID, ST_ID, (T)((uint64_t)x - ctx->ai * (uint64_t)y))        \
    TN_LOOP(mul_##SFX, T, T, T, LD_ID, ST_ID, (T)((uint64_t)x * (uint64_t)y))                  \
    TN_LOOP(divt_##SFX, T, T, T, LD_ID, ST_ID, TN_IDIV_TRUNC(T, x, y))                         \
    TN_LOOP(divf_##SFX, T, T, T, LD_ID, ST_ID, TN_IDIV_FLOOR(T, x, y))                         \
    TN_LOOP(eq_##SFX, T, bool, T, LD_ID, ST_ID, x == y)                                        \
    TN_LOOP(ne_##SFX, T, bool, T, LD_ID, ST_ID, x != y)                                        \
    TN_LOOP(lt_##SFX, T, bool, T, LD_ID, ST_ID, x < y)                                         \
    TN_LOOP(le_##SFX, T, bool, T, LD_ID, ST_ID, x <= y)                                        \
    TN_LOOP(gt_##SFX, T, bool, T, LD_ID, ST_ID, x > y)                                         \
    TN_LOOP(ge_##SFX, T, bool, T, LD_ID, ST_ID, x >= y)                                        \
    TN_LOOP(max_##SFX, T, T, T, LD_ID, ST_ID, x < y ? y : x)                                   \
    TN_LOOP(min_##SFX, T, T, T, LD_ID, ST_ID, y < x ? y : x)                                   \
    TN_LOOP(rem_##SFX, T, T, T, LD_ID, ST_ID, TN_IREM(T, x, y, 1))                             \
    TN_LOOP(fmod_##SFX, T, T, T, LD_ID, ST_ID, TN_IREM(T, x, y, 0))                            \
    TN_LOOP(pow_##SFX, T, T, T, LD_ID, ST_ID, (T)ipow((int64_t)x, (int64_t)y))                 \
    TN_LOOP(land_##SFX, T, bool, T, LD_ID, ST_ID, x != 0 && y != 0)                            \
    TN_LOOP(lor_##SFX, T, bool, T, LD_ID, ST_ID, x != 0 || y != 0)                             \
    TN_LOOP(lxor_##SFX, T, bool, T, LD_ID, ST_ID, (x != 0) != (y != 0))                        \
    TN_LOOP(band_##SFX, T, T, T, LD_ID, ST_ID, x & y)                                          \
    TN_LOOP(bor_##SFX, T, T, T, LD_ID, ST_ID, x | y)                                           \
    TN_LOOP(bxor_##SFX, T, T, T, LD_ID, ST_ID, x ^ y)

/* remainder (floor: the divisor's sign) and fmod (truncating) of integers;
 * a zero divisor is flagged, -1 gives 0 without C's MIN % -1 overflow */
#define TN_IREM(T, x, y, floor_)                                                               \
    ((y) == 0 ? (__atomic_store_n(&ctx->zero_div, 1, __ATOMIC_RELAXED), (T)0)                  \
     : (y) == (T)-1 && (T)-1 < 0 ? (T)0                                                        \
     : (T)((floor_) && (x) % (y) != 0 && (((x) % (y) < 0) != ((y) < 0)) ? (x) % (y) + (y)      \
                                                                          : (x) % (y)))

/* Integer powers by squaring, wrapping; negative exponents give 0 except
 * for bases 1 and -1 (PyTorch's powi). */
static inline int64_t ipow(int64_t base, int64_t exp)
{
    if (exp < 0)
        return base == 1 ? 1 : base == -1 ? ((exp & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (exp) {
        if (exp & 1)
            r *= b;
        b *= b;
        exp >>= 1;
    }
    return (int64_t)r;
}

TN_INT_LOOPS(i64, int64_t)
TN_INT_LOOPS(i32, int32_t)
TN_INT_LOOPS(i16, int16_t)
TN_INT_LOOPS(i8, int8_t)
TN_INT_LOOPS(u8, uint8_t)

/* unsigned: the sign tests above are always false, which is right */
TN_LOOP(add_b, bool, bool, bool, LD_ID, ST_ID, x || (ctx->ab && y))
TN_LOOP(mul_b, bool, bool, bool, LD_ID, ST_ID, x && y)
TN_LOOP(eq_b, bool, bool, bool, LD_ID, ST_ID, x == y)
TN_LOOP(ne_b, bool, bool, bool, LD_ID, ST_ID, x != y)
TN_LOOP(lt_b, bool, bool, bool, LD_ID, ST_ID, x < y)
TN_LOOP(le_b, bool, bool, bool, LD_ID, ST_ID, x <= y)
TN_LOOP(gt_b, bool, bool, bool, LD_ID, ST_ID, x > y)
TN_LOOP(ge_b, bool, bool, bool, LD_ID, ST_ID, x >= y)

TN_LOOP(max_b, bool, bool, bool, LD_ID, ST_ID, x || y)
TN_LOOP(min_b, bool, bool, bool, LD_ID, ST_ID, x && y)
TN_LOOP(land_b, bool, bool, bool, LD_ID, ST_ID, x && y)
TN_LOOP(lor_b, bool, bool, bool, LD_ID, ST_ID, x || y)
TN_LOOP(lxor_b, bool, bool, bool, LD_ID, ST_ID, x != y)
TN_LOOP(band_b, bool, bool, bool, LD_ID, ST_ID, x && y)
TN_LOOP(bor_b, bool, bool, bool, LD_ID, ST_ID, x || y)
TN_LOOP(bxor_b, bool, bool, bool, LD_ID, ST_ID, x != y)
/* complex: alpha is ctx->ac in T; pow is C's cpowf or cpow (CPOW), the
 * exp(y * log(x)) of the part type that std::pow of c10's complex calls */
#define TN_CPX_LOOPS(SFX, T, CPOW)                                                             \
    TN_LOOP(land_##SFX, T, bool, T, LD_ID, ST_ID, x != 0 && y != 0)                            \
    TN_LOOP(lor_##SFX, T, bool, T, LD_ID, ST_ID, x != 0 || y != 0)                             \
    TN_LOOP(lxor_##SFX, T, bool, T, LD_ID, ST_ID, (x != 0) != (y != 0))                        \
    TN_LOOP(add_##SFX, T, T, T, LD_ID, ST_ID, x + (T)ctx->ac * y)                              \
    TN_LOOP(sub_##SFX, T, T, T, LD_ID, ST_ID, x - (T)ctx->ac * y)                              \
    TN_LOOP(mul_##SFX, T, T, T, LD_ID, ST_ID, x * y)                                           \
    TN_LOOP(div_##SFX, T, T, T, LD_ID, ST_ID, cdiv_##SFX(x, y))                                \
    TN_LOOP(eq_##SFX, T, bool, T, LD_ID, ST_ID, x == y)                                        \
    TN_LOOP(ne_##SFX, T, bool, T, LD_ID, ST_ID, x != y)                                        \
    TN_LOOP(pow_##SFX, T, T, T, LD_ID, ST_ID, CPOW(x, y))
TN_CPX_LOOPS(c64, tn_complex64, cpowf)
TN_CPX_LOOPS(c128, tn_complex128, cpow)

/* [op][dtype]; NULL: PyTorch has no such kernel either */
#define ROW_F(op) [TN_FLOAT32] = op##_f32, [TN_FLOAT64] = op##_f64, [TN_FLOAT16] = op##_f16,  \
                  [TN_BFLOAT16] = op##_bf16
#define ROW_I(op) [TN_INT64] = op##_i64, [TN_INT32] = op##_i32, [TN_INT16] = op##_i16,         \
                  [TN_INT8] = op##_i8, [TN_UINT8] = op##_u8
#define ROW_C(op) [TN_COMPLEX64] = op##_c64, [TN_COMPLEX128] = op##_c128
static const tn_iter_fn loops[TN_NUM_BINOPS][TN_NUM_DTYPES] = {
    [TN_BINOP_ADD] = {ROW_F(add), ROW_I(add), [TN_BOOL] = add_b, ROW_C(add)},
    [TN_BINOP_SUB] = {ROW_F(sub), ROW_I(sub), ROW_C(sub)},
    [TN_BINOP_MUL] = {ROW_F(mul), ROW_I(mul), [TN_BOOL] = mul_b, ROW_C(mul)},
    [TN_BINOP_DIV] = {ROW_F(div), ROW_C(div)},
    [TN_BINOP_DIV_TRUNC] = {ROW_F(divt), ROW_I(divt)},
    [TN_BINOP_DIV_FLOOR] = {ROW_F(divf), ROW_I(divf)},
    [TN_BINOP_EQ] = {ROW_F(eq), ROW_I(eq), [TN_BOOL] = eq_b, ROW_C(eq)},
    [TN_BINOP_NE] = {ROW_F(ne), ROW_I(ne), [TN_BOOL] = ne_b, ROW_C(ne)},
    [TN_BINOP_LT] = {ROW_F(lt), ROW_I(lt), [TN_BOOL] = lt_b},
    [TN_BINOP_LE] = {ROW_F(le), ROW_I(le), [TN_BOOL] = le_b},
    [TN_BINOP_GT] = {ROW_F(gt), ROW_I(gt), [TN_BOOL] = gt_b},
    [TN_BINOP_GE] = {ROW_F(ge), ROW_I(ge), [TN_BOOL] = ge_b},
    [TN_BINOP_MAXIMUM] = {ROW_F(max), ROW_I(max), [TN_BOOL] = max_b},
    [TN_BINOP_MINIMUM] = {ROW_F(min), ROW_I(min), [TN_BOOL] = min_b},
    [TN_BINOP_REMAINDER] = {ROW_F(rem), ROW_I(rem)},
    [TN_BINOP_FMOD] = {ROW_F(fmod), ROW_I(fmod)},
    [TN_BINOP_POW] = {ROW_F(pow), ROW_I(pow), ROW_C(pow)},
    [TN_BINOP_ATAN2] = {ROW_F(atan2)},
    [TN_BINOP_LAND] = {ROW_F(land), ROW_I(land), [TN_BOOL] = land_b, ROW_C(land)},
    [TN_BINOP_LOR] = {ROW_F(lor), ROW_I(lor), [TN_BOOL] = lor_b, ROW_C(lor)},
    [TN_BINOP_LXOR] = {ROW_F(lxor), ROW_I(lxor), [TN_BOOL] = lxor_b, ROW_C(lxor)},
    [TN_BINOP_BAND] = {ROW_I(band), [TN_BOOL] = band_b},
    [TN_BINOP_BOR] = {ROW_I(bor), [TN_BOOL] = bor_b},
    [TN_BINOP_BXOR] = {ROW_I(bxor), [TN_BOOL] = bxor_b},
    [TN_BINOP_ADD1] = {ROW_F(add1), ROW_I(add), [TN_BOOL] = add_b, ROW_C(add)},
    [TN_BINOP_SUB1] = {ROW_F(sub1), ROW_I(sub), ROW_C(sub)},
};

/* PyTorch's kernel names, for "not implemented for" messages. */
static const char *const kernel_names[TN_NUM_BINOPS] = {
    "add_cpu", "sub_cpu", "mul_cpu", "div_true_cpu", "div_trunc_cpu", "div_floor_cpu",
    "eq_cpu", "ne_cpu", "lt_cpu", "le_cpu", "gt_cpu", "ge_cpu", "maximum_cpu", "minimum_cpu",
    "remainder_cpu", "fmod_cpu", "pow", "atan2_cpu", "logical_and_cpu", "logical_or_cpu",
    "logical_xor_cpu", "bitwise_and_cpu", "bitwise_or_cpu", "bitwise_xor_cpu", "add_cpu",
    "sub_cpu"};

/* t's strides aligned to the right of an ndim-dim shape it broadcasts to
 * (the meta function checked that it does): 0 where t has size 1 or no
 * such dim. */
static void broadcast_strides(const struct tn_tensor *t, int ndim, int64_t *out)
{
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        out[i] = j < 0 || t->sizes[j] == 1 ? 0 : t->strides[j];
    }
}

/* alpha as add's and sub's loops read it */
static void alpha_ctx(struct bctx *ctx, struct tn_scalar alpha)
{
    if (alpha.kind == TN_SCALAR_INT) { /* the usual alpha: no conversion calls */
        ctx->af = (double)alpha.v.i;
        ctx->ai = (uint64_t)alpha.v.i;
    } else {
        ctx->af = tn_scalar_to_double(alpha);
        ctx->ai = (uint64_t)tn_scalar_to_int64(alpha);
    }
    ctx->ab = ctx->af != 0;
    ctx->ac = tn__scalar_complex128(alpha);
}

/* Runs fn in one inner run when out, a and b (in the compute dtype, of
 * element size es) are small, contiguous and of out's element count (a
 * broadcast that only adds dims of size 1): no iterator set-up. False when
 * they are not. */
static bool run_dense(tn_iter_fn fn, struct tn_tensor *out, const struct tn_tensor *a,
                      const struct tn_tensor *b, int64_t n, size_t es, struct bctx *ctx)
{
    if (n >= TN_PARALLEL_GRAIN || tn__contiguous_numel(a) != n || tn__contiguous_numel(b) != n ||
        !tn__is_contiguous(out))
        return false;
    size_t oes = out->dtype == a->dtype ? es : tn__dtype_size(out->dtype);
    char *p[3] = {tn__data(out, oes), tn__data(a, es), tn__data(b, es)};
    int64_t st[3] = {(int64_t)oes, (int64_t)es, (int64_t)es};
    fn(p, st, n, ctx);
    return true;
}

/* A streamed output of rows (a broadcast add of a row to a matrix): fn
 * once per row, the rows split over the pool, and one store fence per
 * task rather than one per row. A fence a row of 1024 float32 drained the
 * write-combining buffers every 4 KiB: badd at 10^7 moved 21-25 GB/s, with
 * a fence at the end 30-34 (1 thread, issue 27). */
struct row_job {
    const struct tn_iter *it;
    tn_iter_fn fn;
    struct bctx *ctx;
};

static void stream_rows(int64_t begin, int64_t end, void *arg)
{
    const struct row_job *j = arg;
    const struct tn_iter *it = j->it;
    int64_t st[3] = {it->strides[0][0], it->strides[1][0], it->strides[2][0]};
    for (int64_t r = begin; r < end; r++) {
        char *p[3];
        for (int op = 0; op < 3; op++)
            p[op] = it->base[op] + r * it->strides[op][1];
        j->fn(p, st, it->sizes[0], j->ctx);
    }
    TN_SFENCE();
}

int tn__cpu_binary(enum tn_binop op, const struct tn_tensor *a, const struct tn_tensor *b,
                   struct tn_scalar alpha, enum tn_dtype compute, struct tn_tensor *out)
{
    struct bctx ctx = {.zero_div = 0};
    if (op == TN_BINOP_ADD || op == TN_BINOP_SUB) {
        alpha_ctx(&ctx, alpha);
        /* fmaf is a libm call unless the target has FMA: alpha 1 needs none
         * (fma(y, 1, x) and x + y round the same) */
        if (alpha.kind != TN_SCALAR_COMPLEX && ctx.af == 1.0)
            op = op == TN_BINOP_ADD ? TN_BINOP_ADD1 : TN_BINOP_SUB1;
    }
    tn_iter_fn fn = loops[op][compute];
    if (!fn)
        return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel_names[op],
                            tn_dtype_info(compute)->c10_name);
    int64_t n = tn__numel(out);
    if (n == 0)
        return TN_OK;
    size_t es = tn__dtype_size(compute);
    /* a broadcast add of rows runs row by row: the whole output decides */
    ctx.stream = n * (int64_t)es >= tn__stream_bytes();
    int rc = TN_OK;
    struct tn_tensor *ca = NULL, *cb = NULL;
    /* operands already in the compute dtype are used as they are */
    if (a->dtype == compute && b->dtype == compute && run_dense(fn, out, a, b, n, es, &ctx))
        goto done;
    if (!(ca = tn_to_dtype(a, compute)) || !(cb = tn_to_dtype(b, compute))) {
        rc = tn_last_status();
        goto done;
    }
    if (!run_dense(fn, out, ca, cb, n, es, &ctx)) {
        /* broadcast by stride 0, without allocating views */
        int64_t sa[TN_MAX_DIMS], sb[TN_MAX_DIMS];
        broadcast_strides(ca, out->ndim, sa);
        broadcast_strides(cb, out->ndim, sb);
        struct tn_iter it;
        size_t oes = tn_dtype_size(out->dtype);
        char *base[3] = {tn__data(out, oes), tn__data(ca, es), tn__data(cb, es)};
        const int64_t *strides[3] = {out->strides, sa, sb};
        size_t el[3] = {oes, es, es};
        tn__iter_init(&it, 3, out->sizes, out->ndim, base, strides, el);
        if (ctx.stream && it.ndim == 2) {
            struct row_job job = {&it, fn, &ctx};
            int64_t g = TN_PARALLEL_GRAIN / it.sizes[0];
            ctx.nofence = true;
            tn_parallel_for(it.sizes[1], g > 0 ? g : 1, stream_rows, &job);
        } else {
            tn__iter_run(&it, fn, &ctx, TN_PARALLEL_GRAIN);
        }
    }
done:
    if (rc == TN_OK && ctx.zero_div)
        rc = tn_set_error(TN_ERUNTIME, "ZeroDivisionError");
    if (ca) {
        tn_release(ca);
        tn_release(cb);
    }
    return rc;
}

/* ------------------------------------------- structured out= kernels */

int tn__cpu_add_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *other,
                    struct tn_scalar alpha, struct tn_tensor *out)
{
    return tn__cpu_binary(TN_BINOP_ADD, self, other, alpha, out->dtype, out);
}

int tn__cpu_sub_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *other,
                    struct tn_scalar alpha, struct tn_tensor *out)
{
    return tn__cpu_binary(TN_BINOP_SUB, self, other, alpha, out->dtype, out);
}

/* mul and div (every rounding mode) of a float16 or bfloat16 result by a
 * one-element other (a wrapped Python number, a 0-dim tensor): PyTorch
 * reads that number in float32 from its own dtype (BinaryOpsKernel.cpp's
 * original_scalar_value<opmath_t>(2)), where add and sub round it into the
 * result's dtype first: bf16 * 0.3 multiplies by 0.3f, not by 0.30078125.
 * Computed in float32 and rounded once into out, as PyTorch's is. */
static bool by_scalar16(const struct tn_tensor *other, const struct tn_tensor *out)
{
    return (out->dtype == TN_FLOAT16 || out->dtype == TN_BFLOAT16) && tn__numel(other) == 1;
}

static int binary_by_scalar16(enum tn_binop op, const struct tn_tensor *self,
                              const struct tn_tensor *other, struct tn_tensor *out)
{
    float v = (float)tn_scalar_to_double(tn_item(other));
    struct tn_tensor *a = tn_to_dtype(self, TN_FLOAT32);
    struct tn_tensor *b = a ? tn_scalar_tensor(tn_float(v), TN_FLOAT32) : NULL;
    struct tn_tensor *r = b ? tn_empty(out->sizes, out->ndim, TN_FLOAT32) : NULL;
    int rc = r ? tn__cpu_binary(op, a, b, tn_int(1), TN_FLOAT32, r) : tn_last_status();
    if (rc == TN_OK)
        rc = tn_copy_(out, r);
    tn_release(a);
    tn_release(b);
    tn_release(r);
    return rc;
}

int tn__cpu_mul_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *other,
                    struct tn_tensor *out)
{
    if (by_scalar16(other, out))
        return binary_by_scalar16(TN_BINOP_MUL, self, other, out);
    return tn__cpu_binary(TN_BINOP_MUL, self, other, tn_int(1), out->dtype, out);
}

int tn__cpu_div_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *other,
                    struct tn_tensor *out)
{
    if (by_scalar16(other, out))
        return binary_by_scalar16(TN_BINOP_DIV, self, other, out);
    return tn__cpu_binary(TN_BINOP_DIV, self, other, tn_int(1), out->dtype, out);
}

int tn__cpu_div_mode_out(tn_keyset ks, const struct tn_tensor *self, const struct tn_tensor *other,
                         const char *rounding_mode, struct tn_tensor *out)
{
    enum tn_binop op = !rounding_mode ? TN_BINOP_DIV
                       : rounding_mode[0] == 't' ? TN_BINOP_DIV_TRUNC : TN_BINOP_DIV_FLOOR;
    if (by_scalar16(other, out))
        return binary_by_scalar16(op, self, other, out);
    return tn__cpu_binary(op, self, other, tn_int(1), out->dtype, out);
}

#define TN_CMP_KERNEL(name, OP)                                                                \
    int tn__cpu_##name##_out(tn_keyset ks, const struct tn_tensor *self,                       \
                             const struct tn_tensor *other, struct tn_tensor *out)             \
    {                                                                                          \
        enum tn_dtype dt = tn__binary_dtype(self, other);                                      \
        if (dt == TN_DTYPE_UNSET)                                                              \
            return tn_last_status();                                                           \
        return tn__cpu_binary(OP, self, other, tn_int(1), dt, out);                            \
    }
TN_CMP_KERNEL(eq, TN_BINOP_EQ)
TN_CMP_KERNEL(ne, TN_BINOP_NE)
TN_CMP_KERNEL(lt, TN_BINOP_LT)
TN_CMP_KERNEL(le, TN_BINOP_LE)
TN_CMP_KERNEL(gt, TN_BINOP_GT)
TN_CMP_KERNEL(ge, TN_BINOP_GE)

/* out= kernels computing in out's dtype (the meta function's common or
 * float dtype) */
#define TN_SAME_KERNEL(name, OP)                                                               \
    int tn__cpu_##name##_out(tn_keyset ks, const struct tn_tensor *self,                       \
                             const struct tn_tensor *other, struct tn_tensor *out)             \
    {                                                                                          \
        return tn__cpu_binary(OP, self, other, tn_int(1), out->dtype, out);                    \
    }
TN_SAME_KERNEL(maximum, TN_BINOP_MAXIMUM)
TN_SAME_KERNEL(minimum, TN_BINOP_MINIMUM)
TN_SAME_KERNEL(remainder, TN_BINOP_REMAINDER)
TN_SAME_KERNEL(fmod, TN_BINOP_FMOD)
TN_SAME_KERNEL(pow, TN_BINOP_POW)
TN_SAME_KERNEL(atan2, TN_BINOP_ATAN2)
TN_SAME_KERNEL(bitwise_and, TN_BINOP_BAND)
TN_SAME_KERNEL(bitwise_or, TN_BINOP_BOR)
TN_SAME_KERNEL(bitwise_xor, TN_BINOP_BXOR)
/* logical ops compute in the common dtype and write bool */
TN_CMP_KERNEL(logical_and, TN_BINOP_LAND)
TN_CMP_KERNEL(logical_or, TN_BINOP_LOR)
TN_CMP_KERNEL(logical_xor, TN_BINOP_LXOR)

/* --- where ----------------------------------------------------------------
 * A select moves bytes: one loop per element size serves every dtype. */

#define TN_SELECT(BITS, T)                                                                     \
    static void select##BITS(char **p, const int64_t *s, int64_t n, void *ctx)                 \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                        \
            *(T *)(p[0] + i * s[0]) = *(const uint8_t *)(p[1] + i * s[1])                      \
                                          ? *(const T *)(p[2] + i * s[2])                      \
                                          : *(const T *)(p[3] + i * s[3]);                     \
    }
/* complex128's 16 bytes, aligned as its 8-byte parts */
struct tn__bytes16 { uint64_t w[2]; };
TN_SELECT(8, uint8_t)
TN_SELECT(16, uint16_t)
TN_SELECT(32, uint32_t)
TN_SELECT(64, uint64_t)
TN_SELECT(128, struct tn__bytes16)

/* where(condition, self, other): the three broadcast together (condition
 * first, so the error names the sizes in PyTorch's order), self and other
 * promoted to their result type; condition bool, or uint8 as PyTorch still
 * accepts. */
struct tn_tensor *tn__cpu_where(tn_keyset ks, const struct tn_tensor *condition,
                                const struct tn_tensor *self, const struct tn_tensor *other)
{
    if (condition->dtype != TN_BOOL && condition->dtype != TN_UINT8)
        return tn_set_error(TN_EDTYPE, "where expected condition to be a boolean tensor, but got "
                            "a tensor with dtype %s", tn_dtype_info(condition->dtype)->c10_name),
               NULL;
    int64_t s1[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    int n1 = tn_broadcast_shapes(condition->sizes, condition->ndim, self->sizes, self->ndim, s1);
    if (n1 < 0)
        return NULL;
    int nd = tn_broadcast_shapes(s1, n1, other->sizes, other->ndim, shape);
    if (nd < 0)
        return NULL;
    const struct tn_tensor *ops[2] = {self, other};
    enum tn_dtype dt = tn_result_type(ops, 2, NULL, 0);
    if (dt == TN_DTYPE_UNSET)
        return NULL;
    bool meta = condition->device.type == TN_DEVICE_META ||
                self->device.type == TN_DEVICE_META || other->device.type == TN_DEVICE_META;
    /* laid out as TensorIterator lays out where's result (the condition first) */
    struct tn_meta m = {.ndim = nd, .dtype = dt};
    memcpy(m.sizes, shape, sizeof(int64_t) * (size_t)nd);
    const struct tn_tensor *in[3] = {condition, self, other};
    tn__meta_iter_layout(&m, in, 3);
    struct tn_tensor *out = tn_dispatch_meta_alloc(
        &m, meta ? (struct tn_device){TN_DEVICE_META, 0} : self->device);
    struct tn_tensor *a = NULL, *b = NULL, *ea = NULL, *eb = NULL, *ec = NULL;
    if (!out || tn_numel(out) == 0 || meta) /* Meta: the shape and dtype only */
        return out;
    if (!(a = tn_to_dtype(self, dt)) || !(b = tn_to_dtype(other, dt)) ||
        !(ea = tn_expand(a, shape, nd)) || !(eb = tn_expand(b, shape, nd)) ||
        !(ec = tn_expand(condition, shape, nd))) {
        tn_release(out);
        out = NULL;
        goto done;
    }
    size_t es = tn_dtype_size(dt);
    tn_iter_fn fn = es == 1 ? select8 : es == 2 ? select16 : es == 4 ? select32
                  : es == 8 ? select64 : select128;
    struct tn_iter it;
    char *base[4] = {tn_data(out), tn_data(ec), tn_data(ea), tn_data(eb)};
    const int64_t *strides[4] = {out->strides, ec->strides, ea->strides, eb->strides};
    size_t el[4] = {es, 1, es, es};
    tn__iter_init(&it, 4, shape, nd, base, strides, el);
    tn__iter_run(&it, fn, NULL, TN_PARALLEL_GRAIN);
done:
    tn_release(a);
    tn_release(b);
    tn_release(ea);
    tn_release(eb);
    tn_release(ec);
    return out;
}
