/*
 * core/random.c: random numbers bit for bit as PyTorch's CPU generator
 * makes them (torch.manual_seed, rand, randn, randint, randperm, and the
 * in-place uniform_, normal_, bernoulli_, random_).
 *
 * The engine is mt19937 seeded the way PyTorch seeds it (init_genrand with
 * the low 32 bits of the 64-bit seed).  A 64-bit draw is two 32-bit draws,
 * the first one the high half.  Every distribution below follows PyTorch
 * 2.x's CPU kernels (ATen/core/DistributionsHelper.h and
 * ATen/native/cpu/DistributionTemplates.h); where 1.13 differs, the comment
 * says how, and a generator set to 1.13 (tn_generator_set_torch1) does it
 * that way.  PyTorch's AVX2 and AVX-512 kernels are compiled with FMA
 * contraction, so the places where its compiler fuses a multiply into an
 * add are fmaf()/fma() here (tn_macf/tn_mac, unfused for its DEFAULT
 * kernel: tn_generator_set_cpu).  This file must not contract anything
 * itself: GCC does not under -std=c11, clang is told below.
 *
 * Values are produced serially in the order PyTorch's TensorIterator visits
 * the elements (memory order), never on the thread pool: the stream of
 * draws must not depend on the thread count.
 */
#include "core/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define TN_MT_N 624
#define TN_MT_M 397
#define TN_DEFAULT_SEED 67280421310721ULL
#define TN_PI 3.14159265358979323846 /* c10::pi<double> */

struct tn_generator {
    pthread_mutex_t mu;   /* serialises every call on this generator */
    uint64_t seed;        /* as given, for tn_initial_seed */
    uint32_t state[TN_MT_N];
    int left;             /* draws left before the next twist, plus one */
    int next;             /* index of the next state word */
    bool has_normal;      /* the cached second Box-Muller value (double) */
    double next_normal;
    bool torch1;          /* PyTorch 1.13's algorithms where 2.x changed them */
    enum tn_rng_cpu cpu;  /* which of PyTorch's CPU kernels to follow */
};

/* a * b + c as PyTorch's kernel for g's CPU computes it: fused where its
 * compiler contracts (the AVX2 and AVX-512 kernels are built with FMA),
 * rounded twice in the DEFAULT kernel. */
static float tn_macf(const struct tn_generator *g, float a, float b, float c)
{
    return g->cpu == TN_RNG_CPU_DEFAULT ? a * b + c : fmaf(a, b, c);
}

static double tn_mac(const struct tn_generator *g, double a, double b, double c)
{
    return g->cpu == TN_RNG_CPU_DEFAULT ? a * b + c : fma(a, b, c);
}

/* ------------------------------------------------------------ the engine */

static void tn_mt_seed(struct tn_generator *g, uint64_t seed)
{
    g->seed = seed;
    g->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (int j = 1; j < TN_MT_N; j++)
        g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + (uint32_t)j;
    g->left = 1;
    g->next = 0;
    /* set_current_seed drops the cached normal as well */
    g->has_normal = false;
}

static uint32_t tn_mt_twist(uint32_t u, uint32_t v)
{
    uint32_t y = (u & 0x80000000u) | (v & 0x7fffffffu);
    return (y >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

static void tn_mt_next_state(struct tn_generator *g)
{
    uint32_t *s = g->state;
    int k = 0;
    for (; k < TN_MT_N - TN_MT_M; k++)
        s[k] = s[k + TN_MT_M] ^ tn_mt_twist(s[k], s[k + 1]);
    for (; k < TN_MT_N - 1; k++)
        s[k] = s[k + TN_MT_M - TN_MT_N] ^ tn_mt_twist(s[k], s[k + 1]);
    s[k] = s[k + TN_MT_M - TN_MT_N] ^ tn_mt_twist(s[k], s[0]);
    g->left = TN_MT_N;
    g->next = 0;
}

static uint32_t tn_random32(struct tn_generator *g)
{
    if (--g->left == 0)
        tn_mt_next_state(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static uint64_t tn_random64(struct tn_generator *g)
{
    uint64_t hi = tn_random32(g);
    uint64_t lo = tn_random32(g);
    return (hi << 32) | lo;
}

/* uniform_real_distribution<float/double>(0, 1) before scaling. */
static float tn_unit_float(struct tn_generator *g)
{
    return (float)(tn_random32(g) & ((1u << 24) - 1)) * (1.0f / 16777216.0f);
}

static double tn_unit_double(struct tn_generator *g)
{
    return (double)(tn_random64(g) & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* ---------------------------------------------------------- generators */

static struct tn_generator tn_default_gen = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t tn_default_once = PTHREAD_ONCE_INIT;

static void tn_default_init(void)
{
    tn_mt_seed(&tn_default_gen, TN_DEFAULT_SEED);
}

struct tn_generator *tn_default_generator(void)
{
    pthread_once(&tn_default_once, tn_default_init);
    return &tn_default_gen;
}

static struct tn_generator *tn_gen(struct tn_generator *g)
{
    return g ? g : tn_default_generator();
}

void tn_generator_seed(struct tn_generator *g, uint64_t seed)
{
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    tn_mt_seed(g, seed);
    pthread_mutex_unlock(&g->mu);
}

void tn_generator_set_torch1(struct tn_generator *g, bool on)
{
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    g->torch1 = on;
    pthread_mutex_unlock(&g->mu);
}

void tn_generator_set_cpu(struct tn_generator *g, enum tn_rng_cpu cpu)
{
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    g->cpu = cpu;
    pthread_mutex_unlock(&g->mu);
}

void tn_manual_seed(uint64_t seed)
{
    tn_generator_seed(NULL, seed);
}

uint64_t tn_initial_seed(void)
{
    struct tn_generator *g = tn_default_generator();
    pthread_mutex_lock(&g->mu);
    uint64_t s = g->seed;
    pthread_mutex_unlock(&g->mu);
    return s;
}

struct tn_generator *tn_generator_new(uint64_t seed)
{
    struct tn_generator *g = calloc(1, sizeof *g);
    if (!g) {
        tn_set_error(TN_ENOMEM, "out of memory allocating a generator");
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    tn_mt_seed(g, seed);
    return g;
}

void tn_generator_free(struct tn_generator *g)
{
    if (!g || g == &tn_default_gen)
        return;
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* ------------------------------------------------------------- state */

/*
 * PyTorch's CPUGeneratorImplState as torch.get_rng_state() and
 * Generator.get_state() return it (x86-64 and aarch64 layout): the legacy
 * THGeneratorState (initial seed u64 at 0, left i32 at 8, seeded i32 at 12,
 * next u64 at 16, the 624 state words as u64 from 24, normal_x, normal_y
 * and normal_rho f64 at 5016, 5024, 5032, normal_is_valid i32 at 5040,
 * padded to 5048), then the cached float normal f32 at 5048 and its valid
 * flag at 5052, padded to 5056. The cached double normal is normal_y, as
 * PyTorch's get_state writes it; we cache no float normal.
 */
#define TN_STATE_LEGACY 5048

static void tn_put(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t tn_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

struct tn_tensor *tn_generator_get_state(struct tn_generator *g)
{
    int64_t n = TN_GENERATOR_STATE_BYTES;
    struct tn_tensor *t = tn_zeros(&n, 1, TN_UINT8);
    if (!t)
        return NULL;
    unsigned char *p = tn_data(t);
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    tn_put(p, g->seed, 8);
    tn_put(p + 8, (uint32_t)g->left, 4);
    tn_put(p + 12, 1, 4);
    tn_put(p + 16, (uint64_t)g->next, 8);
    for (int i = 0; i < TN_MT_N; i++)
        tn_put(p + 24 + 8 * i, g->state[i], 8);
    if (g->has_normal) {
        uint64_t bits;
        memcpy(&bits, &g->next_normal, sizeof bits);
        tn_put(p + 5024, bits, 8);
        tn_put(p + 5040, 1, 4);
    }
    pthread_mutex_unlock(&g->mu);
    return t;
}

int tn_generator_set_state(struct tn_generator *g, const struct tn_tensor *state)
{
    if (!state || state->dtype != TN_UINT8 || state->ndim != 1 ||
        (state->sizes[0] != TN_GENERATOR_STATE_BYTES && state->sizes[0] != TN_STATE_LEGACY))
        return tn_set_error(TN_EINVAL, "a generator's state is a uint8 tensor of %d (or %d) "
                            "bytes, as torch.get_rng_state() returns", TN_GENERATOR_STATE_BYTES,
                            TN_STATE_LEGACY);
    struct tn_tensor *c = tn_contiguous(state);
    if (!c)
        return -1;
    const unsigned char *p = tn_data(c);
    int64_t left = (int32_t)tn_get(p + 8, 4);
    uint64_t next = tn_get(p + 16, 8);
    if (left < 1 || left > TN_MT_N || next > TN_MT_N) {
        tn_release(c);
        return tn_set_error(TN_EINVAL, "a generator's state with left %lld and next %llu: "
                            "not PyTorch's CPU generator's", (long long)left,
                            (unsigned long long)next);
    }
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    g->seed = tn_get(p, 8);
    g->left = (int)left;
    g->next = (int)next;
    for (int i = 0; i < TN_MT_N; i++)
        g->state[i] = (uint32_t)tn_get(p + 24 + 8 * i, 8);
    g->has_normal = tn_get(p + 5040, 4) != 0;
    uint64_t bits = tn_get(p + 5024, 8);
    memcpy(&g->next_normal, &bits, sizeof bits);
    pthread_mutex_unlock(&g->mu);
    tn_release(c);
    return 0;
}

/* -------------------------------------------------------- element order */

/*
 * Calls fn(ptr, ctx) for every element of t in the order PyTorch's
 * TensorIterator visits the output of a nullary op: dims sorted by stride,
 * the largest outermost, size-1 dims ignored.
 */
typedef void (*tn_elem_fn)(char *ptr, void *ctx);

static void tn_walk(const struct tn_tensor *t, tn_elem_fn fn, void *ctx)
{
    int64_t size[TN_MAX_DIMS], stride[TN_MAX_DIMS], idx[TN_MAX_DIMS];
    int nd = 0;
    size_t es = tn_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0)
            return;
        if (t->sizes[d] == 1)
            continue;
        /* insertion keeps dims with equal strides in their logical order */
        int k = nd++;
        while (k > 0 && stride[k - 1] < t->strides[d]) {
            size[k] = size[k - 1];
            stride[k] = stride[k - 1];
            k--;
        }
        size[k] = t->sizes[d];
        stride[k] = t->strides[d];
    }
    char *base = tn_data(t);
    if (nd == 0) {
        fn(base, ctx);
        return;
    }
    memset(idx, 0, sizeof idx);
    int64_t inner = stride[nd - 1] * (int64_t)es;
    for (;;) {
        char *p = base;
        for (int d = 0; d < nd - 1; d++)
            p += idx[d] * stride[d] * (int64_t)es;
        for (int64_t i = 0; i < size[nd - 1]; i++, p += inner)
            fn(p, ctx);
        int d = nd - 2;
        while (d >= 0 && ++idx[d] == size[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

/* Stores a floating value computed in float (the op math of float32,
 * float16 and bfloat16). */
static void tn_store_float(char *p, enum tn_dtype dt, float v)
{
    switch (dt) {
    case TN_FLOAT32: memcpy(p, &v, 4); break;
    case TN_FLOAT16: { tn_half h = tn_half_from_float(v); memcpy(p, &h, 2); break; }
    case TN_BFLOAT16: { tn_bfloat16 b = tn_bfloat16_from_float(v); memcpy(p, &b, 2); break; }
    default: TN_ASSERT(!"float store of a non-float dtype");
    }
}

/* static_cast<scalar_t>(double) for every dtype the kernels write. */
static void tn_store_double(char *p, enum tn_dtype dt, double v)
{
    if (dt == TN_FLOAT64)
        memcpy(p, &v, 8);
    else
        tn_convert(p, dt, &v, TN_FLOAT64, 1);
}

/* The C++ type names PyTorch's bounds messages print. */
static const char *tn_cpp_type_name(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT32: return "float";
    case TN_FLOAT64: return "double";
    case TN_FLOAT16: return "c10::Half";
    case TN_BFLOAT16: return "c10::BFloat16";
    case TN_INT64: return "long";
    case TN_INT32: return "int";
    case TN_INT16: return "short int";
    case TN_INT8: return "signed char";
    case TN_UINT8: return "unsigned char";
    case TN_BOOL: return "bool";
    default: return "?";
    }
}

static int tn_not_implemented(const char *kernel, enum tn_dtype dt)
{
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", kernel,
                        tn_dtype_info(dt)->c10_name);
}

/* 0: draw; 1: a meta tensor, which has no values and draws nothing (as
 * PyTorch's meta kernels leave the generator alone, so a shape pass such
 * as tn_graph_check's does not move it); else an error. */
static int tn_check_cpu(const struct tn_tensor *t)
{
    if (t->device.type == TN_DEVICE_META)
        return 1;
    if (t->device.type != TN_DEVICE_CPU)
        return tn_set_error(TN_EDEVICE, "random numbers are only implemented on the CPU");
    if (tn_dtype_is_storage_only(t->dtype)) /* no sampling kernel knows them */
        return tn_not_implemented("random_", t->dtype);
    return 0;
}

/* The largest finite value of a floating dtype and its mantissa digits. */
static double tn_float_max(enum tn_dtype dt, int *digits)
{
    switch (dt) {
    case TN_FLOAT32: *digits = 24; return 3.4028234663852886e38;
    case TN_FLOAT64: *digits = 53; return 1.7976931348623157e308;
    case TN_FLOAT16: *digits = 11; return 65504.0;
    default: *digits = 8; return 3.3895313892515355e38; /* bfloat16 */
    }
}

/* -------------------------------------------------------------- uniform */

struct tn_uniform_ctx {
    struct tn_generator *g;
    enum tn_dtype dt;
    double from, to;
    float ffrom, fto, frange;
};

/* 1.13's float16/bfloat16 uniform_: as many random bits as the type has
 * digits, scaled by a range rounded to the type. */
static void tn_uniform_elem_torch1_16(char *p, struct tn_uniform_ctx *c)
{
    int digits = c->dt == TN_FLOAT16 ? 11 : 8;
    float from = tn__round16((float)c->from, c->dt);
    float to = tn__round16((float)c->to, c->dt);
    float range = tn__round16(to - from, c->dt);
    uint32_t mask = (1u << digits) - 1;
    float x = (float)(tn_random32(c->g) & mask) * (1.0f / (float)(1u << digits));
    tn_store_float(p, c->dt, tn_macf(c->g, x, range, from));
}

static void tn_uniform_elem(char *p, void *vctx)
{
    struct tn_uniform_ctx *c = vctx;
    if (c->dt == TN_FLOAT64) {
        double x = tn_unit_double(c->g);
        double v = tn_mac(c->g, x, c->to - c->from, c->from);
        /* PyTorch 2.x maps a value rounded up to `to` back to `from` */
        if (v == c->to && !c->g->torch1)
            v = c->from;
        memcpy(p, &v, 8);
        return;
    }
    if (c->g->torch1 && c->dt != TN_FLOAT32) {
        tn_uniform_elem_torch1_16(p, c);
        return;
    }
    float x = tn_unit_float(c->g);
    float v = tn_macf(c->g, x, c->frange, c->ffrom);
    /* the clamp compares after the cast to the tensor's dtype */
    float r = c->dt == TN_FLOAT32 ? v : tn__round16(v, c->dt);
    float rto = c->dt == TN_FLOAT32 ? c->fto : tn__round16(c->fto, c->dt);
    if (r == rto && !c->g->torch1)
        v = c->dt == TN_FLOAT32 ? c->ffrom : tn__round16(c->ffrom, c->dt);
    tn_store_float(p, c->dt, v);
}

/* view_as_real: a float32 tensor over a complex64 one, a last dim of 2
 * added. `out` borrows t's storage (no reference taken; it must not
 * outlive t). */
static int tn_real_view(const struct tn_tensor *t, struct tn_tensor *out)
{
    if (t->ndim >= TN_MAX_DIMS)
        return tn_set_error(TN_ESHAPE, "a complex tensor of %d dimensions has no real view",
                            t->ndim);
    *out = *t;
    out->dtype = tn__dtype_real(t->dtype);
    out->offset = t->offset * 2;
    for (int d = 0; d < t->ndim; d++)
        out->strides[d] = t->strides[d] * 2;
    out->sizes[t->ndim] = 2;
    out->strides[t->ndim] = 1;
    out->ndim = t->ndim + 1;
    return 0;
}

int tn_uniform_(struct tn_tensor *t, double from, double to, struct tn_generator *g)
{
    int meta = tn_check_cpu(t);
    if (meta)
        return meta < 0 ? tn_last_status() : 0;
    if (tn_dtype_is_complex(t->dtype)) {
        /* the real and imaginary parts, each uniform in [from, to) */
        struct tn_tensor re;
        return tn_real_view(t, &re) ? tn_last_status() : tn_uniform_(&re, from, to, g);
    }
    if (!tn_dtype_is_floating(t->dtype))
        return tn_not_implemented("check_uniform_bounds", t->dtype);
    int digits;
    double max = tn_float_max(t->dtype, &digits);
    const char *ty = tn_cpp_type_name(t->dtype);
    if (!(from >= -max && from <= max))
        return tn_set_error(TN_EINVAL, "from is out of bounds for %s", ty);
    if (!(to >= -max && to <= max))
        return tn_set_error(TN_EINVAL, "to is out of bounds for %s", ty);
    if (!(from <= to))
        return tn_set_error(TN_EINVAL,
                            "uniform_ expects to return a [from, to) range, but found from=%g > to=%g",
                            from, to);
    if (!(to - from <= max))
        return tn_set_error(TN_EINVAL,
                            "uniform_ expects to-from <= std::numeric_limits<%s>::max(), but found "
                            "to=%g and from=%g which result in to-from to exceed the limit",
                            tn_dtype_info(t->dtype)->c10_name, to, from);
    g = tn_gen(g);
    struct tn_uniform_ctx c = {.g = g, .dt = t->dtype, .from = from, .to = to};
    c.ffrom = (float)from;
    c.fto = (float)to;
    c.frange = c.fto - c.ffrom;
    pthread_mutex_lock(&g->mu);
    tn_walk(t, tn_uniform_elem, &c);
    pthread_mutex_unlock(&g->mu);
    t->storage->version++;
    return 0;
}

/* --------------------------------------------------------------- normal */

/* normal_distribution<double>: Box-Muller on two doubles, the second value
 * cached in the generator for the next call. (1.13: log(1 - u2) instead of
 * log1p(-u2).) */
static double tn_normal_double(struct tn_generator *g, double mean, double std)
{
    double ret;
    if (g->has_normal) {
        g->has_normal = false;
        ret = g->next_normal;
    } else {
        double u1 = tn_unit_double(g);
        double u2 = tn_unit_double(g);
        double r = sqrt(-2.0 * (g->torch1 ? log(1.0 - u2) : log1p(-u2)));
        double theta = 2.0 * TN_PI * u1;
        g->next_normal = r * sin(theta);
        g->has_normal = true;
        ret = r * cos(theta);
    }
    return tn_mac(g, ret, std, mean);
}

/* The float32 Box-Muller of PyTorch's AVX2 kernel: Cephes' logf and sincosf
 * as avx_mathfun.h writes them, with the compiler's FMA contractions. */
static float tn_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t tn_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float tn_cephes_logf(float x)
{
    bool invalid = x <= 0.0f;
    if (!(x >= tn_bits_float(0x00800000u))) /* max_ps keeps the bound for NaN too */
        x = tn_bits_float(0x00800000u);
    uint32_t u = tn_float_bits(x);
    float e = (float)((int32_t)(u >> 23) - 0x7f);
    e = e + 1.0f;
    x = tn_bits_float((u & ~0x7f800000u) | tn_float_bits(0.5f));
    bool below = x < 0.707106781186547524f;
    float tmp = below ? x : 0.0f;
    x = x - 1.0f;
    e = e - (below ? 1.0f : 0.0f);
    x = x + tmp;
    float z = x * x;
    float y = 7.0376836292E-2f;
    y = fmaf(y, x, -1.1514610310E-1f);
    y = fmaf(y, x, 1.1676998740E-1f);
    y = fmaf(y, x, -1.2420140846E-1f);
    y = fmaf(y, x, 1.4249322787E-1f);
    y = fmaf(y, x, -1.6668057665E-1f);
    y = fmaf(y, x, 2.0000714765E-1f);
    y = fmaf(y, x, -2.4999993993E-1f);
    y = fmaf(y, x, 3.3333331174E-1f);
    y = y * x;
    float eq1 = e * -2.12194440e-4f;
    y = fmaf(y, z, eq1);
    y = fmaf(-z, 0.5f, y);
    x = x + y;
    x = fmaf(e, 0.693359375f, x);
    return invalid ? tn_bits_float(0xffffffffu) : x;
}

static void tn_cephes_sincosf(float x, float *s, float *c)
{
    uint32_t sign_sin = tn_float_bits(x) & 0x80000000u;
    x = fabsf(x);
    float y = x * 1.27323954473516f;
    int32_t j = (int32_t)y; /* cvttps: truncation */
    j = (j + 1) & ~1;
    y = (float)j;
    uint32_t swap_sin = (uint32_t)(j & 4) << 29;
    bool poly = (j & 2) == 0;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    sign_sin ^= swap_sin;
    float z = x * x;
    float yc = 2.443315711809948E-005f;
    yc = fmaf(yc, z, -1.388731625493765E-003f);
    yc = fmaf(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = -1.9515295891E-4f;
    ys = fmaf(ys, z, 8.3321608736E-3f);
    ys = fmaf(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    float vs = poly ? ys : yc, vc = poly ? yc : ys;
    *s = tn_bits_float(tn_float_bits(vs) ^ sign_sin);
    *c = tn_bits_float(tn_float_bits(vc) ^ sign_cos);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TN_RNG_AVX2 __attribute__((target("avx2,fma")))

/* tn_cephes_logf on 8 lanes, operation for operation (fmaf the FMA
 * instruction, not a call of libm's): the same bits. */
TN_RNG_AVX2 static __m256 tn_cephes_logf8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 invalid = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ);
    x = _mm256_max_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000))); /* NaN: the bound */
    __m256i u = _mm256_castps_si256(x);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(u, 23),
                                                   _mm256_set1_epi32(0x7f)));
    e = _mm256_add_ps(e, one);
    x = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_andnot_si256(_mm256_set1_epi32(0x7f800000), u),
        _mm256_castps_si256(_mm256_set1_ps(0.5f))));
    __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
    __m256 tmp = _mm256_and_ps(below, x);
    x = _mm256_sub_ps(x, one);
    e = _mm256_sub_ps(e, _mm256_and_ps(below, one));
    x = _mm256_add_ps(x, tmp);
    __m256 z = _mm256_mul_ps(x, x);
    static const float c[] = {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f,
                              1.4249322787E-1f,  -1.6668057665E-1f, 2.0000714765E-1f,
                              -2.4999993993E-1f, 3.3333331174E-1f};
    __m256 y = _mm256_set1_ps(7.0376836292E-2f);
    for (int i = 0; i < 8; i++)
        y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(c[i]));
    y = _mm256_mul_ps(y, x);
    y = _mm256_fmadd_ps(y, z, _mm256_mul_ps(e, _mm256_set1_ps(-2.12194440e-4f)));
    y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y); /* fmaf(-z, 0.5f, y) */
    x = _mm256_add_ps(x, y);
    x = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), x);
    return _mm256_or_ps(x, invalid);
}

/* tn_cephes_sincosf on 8 lanes, the same way. */
TN_RNG_AVX2 static void tn_cephes_sincosf8(__m256 x, __m256 *s, __m256 *c)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    __m256 sign_sin = _mm256_and_ps(x, sign);
    x = _mm256_andnot_ps(sign, x);
    __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(1.27323954473516f)));
    j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
    __m256 y = _mm256_cvtepi32_ps(j);
    const __m256i four = _mm256_set1_epi32(4);
    __m256 swap_sin = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(j, four), 29));
    __m256 poly = _mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_and_si256(j, _mm256_set1_epi32(2)), _mm256_setzero_si256()));
    x = _mm256_fmadd_ps(y, _mm256_set1_ps(-0.78515625f), x);
    x = _mm256_fmadd_ps(y, _mm256_set1_ps(-2.4187564849853515625e-4f), x);
    x = _mm256_fmadd_ps(y, _mm256_set1_ps(-3.77489497744594108e-8f), x);
    __m256 sign_cos = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_andnot_si256(_mm256_sub_epi32(j, _mm256_set1_epi32(2)), four), 29));
    sign_sin = _mm256_xor_ps(sign_sin, swap_sin);
    __m256 z = _mm256_mul_ps(x, x);
    __m256 yc = _mm256_set1_ps(2.443315711809948E-005f);
    yc = _mm256_fmadd_ps(yc, z, _mm256_set1_ps(-1.388731625493765E-003f));
    yc = _mm256_fmadd_ps(yc, z, _mm256_set1_ps(4.166664568298827E-002f));
    yc = _mm256_mul_ps(yc, z);
    yc = _mm256_fmadd_ps(yc, z, _mm256_xor_ps(_mm256_mul_ps(z, _mm256_set1_ps(0.5f)), sign));
    yc = _mm256_add_ps(yc, _mm256_set1_ps(1.0f));
    __m256 ys = _mm256_set1_ps(-1.9515295891E-4f);
    ys = _mm256_fmadd_ps(ys, z, _mm256_set1_ps(8.3321608736E-3f));
    ys = _mm256_fmadd_ps(ys, z, _mm256_set1_ps(-1.6666654611E-1f));
    ys = _mm256_mul_ps(ys, z);
    ys = _mm256_fmadd_ps(ys, x, x);
    *s = _mm256_xor_ps(_mm256_blendv_ps(yc, ys, poly), sign_sin);
    *c = _mm256_xor_ps(_mm256_blendv_ps(ys, yc, poly), sign_cos);
}

/* The AVX2 kernel's Box-Muller below on 8 lanes at once. */
TN_RNG_AVX2 static void tn_box_muller16_avx2(float *d, float mean, float std)
{
    __m256 u1 = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(d));
    __m256 u2 = _mm256_loadu_ps(d + 8);
    __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), tn_cephes_logf8(u1)));
    __m256 theta = _mm256_mul_ps(_mm256_set1_ps((float)(2.0f * TN_PI)), u2);
    __m256 sn, cs, vstd = _mm256_set1_ps(std), vmean = _mm256_set1_ps(mean);
    tn_cephes_sincosf8(theta, &sn, &cs);
    _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_mul_ps(radius, cs), vstd, vmean));
    _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sn), vstd, vmean));
}
#endif

/* Box-Muller on 16 uniforms in place: d[j] and d[j + 8] from (d[j], d[j + 8]). */
static void tn_normal_fill16_float(const struct tn_generator *g, float *d, float mean, float std)
{
    if (g->cpu != TN_RNG_CPU_AVX2) {
        /* the scalar kernel: libm's logf, cosf and sinf; 2.x fuses the last
         * step explicitly (std::fma), 1.13 as its compiler does */
        for (int j = 0; j < 8; j++) {
            float u1 = 1.0f - d[j];
            float u2 = d[j + 8];
            float radius = sqrtf(-2.0f * logf(u1));
            float theta = (float)(2.0 * TN_PI * (double)u2);
            float rc = radius * cosf(theta), rs = radius * sinf(theta);
            d[j] = g->torch1 ? tn_macf(g, rc, std, mean) : fmaf(rc, std, mean);
            d[j + 8] = g->torch1 ? tn_macf(g, rs, std, mean) : fmaf(rs, std, mean);
        }
        return;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    /* the lanes as PyTorch's kernel computes them, where this CPU can */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        tn_box_muller16_avx2(d, mean, std);
        return;
    }
#endif
    const float two_pi = (float)(2.0f * TN_PI);
    for (int j = 0; j < 8; j++) {
        float u1 = 1.0f - d[j];
        float u2 = d[j + 8];
        float radius = sqrtf(-2.0f * tn_cephes_logf(u1));
        float theta = two_pi * u2;
        float sn, cs;
        tn_cephes_sincosf(theta, &sn, &cs);
        d[j] = fmaf(radius * cs, std, mean);
        d[j + 8] = fmaf(radius * sn, std, mean);
    }
}

static void tn_normal_fill16_double(const struct tn_generator *g, double *d, double mean,
                                    double std)
{
    for (int j = 0; j < 8; j++) {
        double u1 = 1 - d[j];
        double u2 = d[j + 8];
        double radius = sqrt(-2 * log(u1));
        double theta = 2.0 * TN_PI * u2;
        double rc = radius * cos(theta), rs = radius * sin(theta);
        d[j] = g->torch1 ? tn_mac(g, rc, std, mean) : fma(rc, std, mean);
        d[j + 8] = g->torch1 ? tn_mac(g, rs, std, mean) : fma(rs, std, mean);
    }
}

/* 1.13's normal_fill_16 for float16 and bfloat16, on values held as floats
 * but rounded to the type after every step that c10's Half/BFloat16
 * operators round: Half keeps float math between its operators (log, cos
 * and sin are the float functions), BFloat16 rounds even those. */
static void tn_normal_fill16_torch1(const struct tn_generator *g, float *d, enum tn_dtype dt,
                                    float mean, float std)
{
#define R(v) tn__round16((v), dt)
    for (int j = 0; j < 8; j++) {
        float u1 = R(1.0f - d[j]);
        float u2 = d[j + 8];
        float theta = R((float)(2.0 * TN_PI * (double)u2));
        if (dt == TN_FLOAT16) {
            float radius = R(sqrtf(-2.0f * logf(u1)));
            d[j] = R(tn_macf(g, radius * cosf(theta), std, mean));
            d[j + 8] = R(tn_macf(g, radius * sinf(theta), std, mean));
        } else {
            float radius = R(sqrtf(R(-2.0f * R(logf(u1)))));
            d[j] = R(R(R(radius * R(cosf(theta))) * std) + mean);
            d[j + 8] = R(R(R(radius * R(sinf(theta))) * std) + mean);
        }
    }
#undef R
}

/* Runs tn_normal_fill16_torch1 on 16 elements of a float16/bfloat16 array. */
static void tn_fill16_torch1_at(const struct tn_generator *g, char *d, enum tn_dtype dt,
                                float mean, float std)
{
    float buf[16];
    for (int j = 0; j < 16; j++) {
        uint16_t bits;
        memcpy(&bits, d + 2 * j, 2);
        buf[j] = dt == TN_FLOAT16 ? tn_half_to_float((tn_half){bits})
                                  : tn_bfloat16_to_float((tn_bfloat16){bits});
    }
    tn_normal_fill16_torch1(g, buf, dt, mean, std);
    for (int j = 0; j < 16; j++)
        tn_store_float(d + 2 * j, dt, buf[j]);
}

static void tn_normal_fill_torch1_16(struct tn_tensor *t, int64_t n, double mean, double std,
                                     struct tn_generator *g)
{
    enum tn_dtype dt = t->dtype;
    int digits = dt == TN_FLOAT16 ? 11 : 8;
    uint32_t mask = (1u << digits) - 1;
    float scale = 1.0f / (float)(1u << digits);
    float fmean = tn__round16((float)mean, dt), fstd = tn__round16((float)std, dt);
    char *d = tn_data(t);
    /* the uniforms have no more bits than the type: stored exactly */
    for (int64_t i = 0; i < n; i++)
        tn_store_float(d + 2 * i, dt, (float)(tn_random32(g) & mask) * scale);
    for (int64_t i = 0; i + 16 <= n; i += 16)
        tn_fill16_torch1_at(g, d + 2 * i, dt, fmean, fstd);
    if (n % 16) {
        char *e = d + 2 * (n - 16);
        for (int i = 0; i < 16; i++)
            tn_store_float(e + 2 * i, dt, (float)(tn_random32(g) & mask) * scale);
        tn_fill16_torch1_at(g, e, dt, fmean, fstd);
    }
}

/* normal_fill: contiguous tensors of 16 or more elements. */
static void tn_normal_fill(struct tn_tensor *t, int64_t n, double mean, double std,
                           struct tn_generator *g)
{
    if (t->dtype == TN_FLOAT64) {
        double *d = tn_data(t);
        for (int64_t i = 0; i < n; i++)
            d[i] = tn_unit_double(g);
        for (int64_t i = 0; i + 16 <= n; i += 16)
            tn_normal_fill16_double(g, d + i, mean, std);
        if (n % 16) {
            d += n - 16;
            for (int i = 0; i < 16; i++)
                d[i] = tn_unit_double(g);
            tn_normal_fill16_double(g, d, mean, std);
        }
    } else if (t->dtype == TN_FLOAT32) {
        float *d = tn_data(t);
        for (int64_t i = 0; i < n; i++)
            d[i] = tn_unit_float(g);
        for (int64_t i = 0; i + 16 <= n; i += 16)
            tn_normal_fill16_float(g, d + i, (float)mean, (float)std);
        if (n % 16) {
            /* the tail's uniforms are drawn again and the last 16 redone */
            d += n - 16;
            for (int i = 0; i < 16; i++)
                d[i] = tn_unit_float(g);
            tn_normal_fill16_float(g, d, (float)mean, (float)std);
        }
    } else if (g->torch1) {
        tn_normal_fill_torch1_16(t, n, mean, std, g);
    } else {
        /* float16/bfloat16 (2.x): float op math, 16 draws per block, so the
         * partial block draws nothing before the last 16 are redone.  (1.13
         * computed in the 16-bit type itself.) */
        char *d = tn_data(t);
        float buf[16];
        for (int64_t i = 0; i + 16 <= n; i += 16) {
            for (int j = 0; j < 16; j++)
                buf[j] = tn_unit_float(g);
            tn_normal_fill16_float(g, buf, (float)mean, (float)std);
            for (int j = 0; j < 16; j++)
                tn_store_float(d + (i + j) * 2, t->dtype, buf[j]);
        }
        if (n % 16) {
            for (int j = 0; j < 16; j++)
                buf[j] = tn_unit_float(g);
            tn_normal_fill16_float(g, buf, (float)mean, (float)std);
            for (int j = 0; j < 16; j++)
                tn_store_float(d + (n - 16 + j) * 2, t->dtype, buf[j]);
        }
    }
}

struct tn_normal_ctx {
    struct tn_generator *g;
    enum tn_dtype dt;
    double mean, std;
};

static void tn_normal_elem(char *p, void *vctx)
{
    struct tn_normal_ctx *c = vctx;
    tn_store_double(p, c->dt, tn_normal_double(c->g, c->mean, c->std));
}

int tn_normal_(struct tn_tensor *t, double mean, double std, struct tn_generator *g)
{
    int meta = tn_check_cpu(t);
    if (meta)
        return meta < 0 ? tn_last_status() : 0;
    if (!(std >= 0.0))
        return tn_set_error(TN_EINVAL, "normal expects std >= 0.0, but found std %g", std);
    if (tn_dtype_is_complex(t->dtype)) {
        /* each part carries half the variance */
        struct tn_tensor re;
        return tn_real_view(t, &re) ? tn_last_status() : tn_normal_(&re, mean, std / sqrt(2.0), g);
    }
    if (!tn_dtype_is_floating(t->dtype))
        return tn_not_implemented("normal_kernel_cpu", t->dtype);
    g = tn_gen(g);
    int64_t n = tn_numel(t);
    pthread_mutex_lock(&g->mu);
    if (n >= 16 && tn_is_contiguous(t)) {
        tn_normal_fill(t, n, mean, std, g);
    } else {
        struct tn_normal_ctx c = {g, t->dtype, mean, std};
        tn_walk(t, tn_normal_elem, &c);
    }
    pthread_mutex_unlock(&g->mu);
    t->storage->version++;
    return 0;
}

/* ------------------------------------------------------------ bernoulli */

struct tn_bernoulli_ctx {
    struct tn_generator *g;
    enum tn_dtype dt;
    double p;
};

static void tn_bernoulli_elem(char *p, void *vctx)
{
    struct tn_bernoulli_ctx *c = vctx;
    tn_store_double(p, c->dt, tn_unit_double(c->g) < c->p ? 1.0 : 0.0);
}

int tn_bernoulli_(struct tn_tensor *t, double p, struct tn_generator *g)
{
    int meta = tn_check_cpu(t);
    if (meta)
        return meta < 0 ? tn_last_status() : 0;
    if (!(p >= 0 && p <= 1))
        return tn_set_error(TN_EINVAL, "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
    g = tn_gen(g);
    /* 1.13 had no float16 kernel either */
    if (tn_dtype_is_complex(t->dtype) || (t->dtype == TN_FLOAT16 && g->torch1))
        return tn_not_implemented("bernoulli_scalar_cpu_", t->dtype);
    struct tn_bernoulli_ctx c = {g, t->dtype, p};
    pthread_mutex_lock(&g->mu);
    tn_walk(t, tn_bernoulli_elem, &c);
    pthread_mutex_unlock(&g->mu);
    t->storage->version++;
    return 0;
}

/* bernoulli_.Tensor: PyTorch's bernoulli_tensor_cpu kernel, one draw per
 * element of t in memory order (t contiguous here, so in the order of p
 * expanded to t's shape), double draws for a float64 p and float ones for
 * the others. */
int tn_bernoulli_tensor_(struct tn_tensor *t, const struct tn_tensor *p, struct tn_generator *g)
{
    int meta = tn_check_cpu(t);
    if (meta)
        return meta < 0 ? tn_last_status() : 0;
    if (!tn_dtype_is_floating(p->dtype))
        return tn_set_error(TN_EDTYPE, "expected probabilities tensor to have floating type, "
                            "got %s", tn_dtype_info(p->dtype)->c10_name);
    if (tn_dtype_is_complex(t->dtype))
        return tn_not_implemented("bernoulli_tensor_cpu_self_", t->dtype);
    if (!tn_is_contiguous(t))
        return tn_set_error(TN_EINVAL, "bernoulli_ with a tensor of probabilities writes a "
                            "contiguous tensor only");
    struct tn_tensor *e = tn_expand(p, t->sizes, t->ndim);
    struct tn_tensor *c = e ? tn_contiguous(e) : NULL;
    tn_release(e);
    int64_t n = tn_numel(t);
    double *pv = c ? malloc((size_t)(n ? n : 1) * sizeof *pv) : NULL;
    if (!pv) {
        tn_release(c);
        return c ? tn_set_error(TN_ENOMEM, "out of memory") : tn_last_status();
    }
    tn_convert(pv, TN_FLOAT64, tn_data(c), c->dtype, (size_t)n);
    bool dbl = p->dtype == TN_FLOAT64;
    tn_release(c);
    g = tn_gen(g);
    char *d = tn_data(t);
    size_t es = tn_dtype_size(t->dtype);
    pthread_mutex_lock(&g->mu);
    for (int64_t i = 0; i < n; i++) {
        /* a float p compares with a float draw: exact in float as in double */
        bool one = dbl ? tn_unit_double(g) < pv[i] : (double)tn_unit_float(g) < pv[i];
        tn_store_double(d + (size_t)i * es, t->dtype, one ? 1.0 : 0.0);
    }
    pthread_mutex_unlock(&g->mu);
    free(pv);
    t->storage->version++;
    return 0;
}

/* --------------------------------------------------------------- random */

/* update_from/update_to: moves a bound that the floating dtype cannot hold
 * inward to one it can. */
static int64_t tn_float_cast_int(int64_t v, enum tn_dtype dt)
{
    double f;
    switch (dt) {
    case TN_FLOAT64: f = (double)v; break;
    case TN_FLOAT32: f = (float)v; break;
    default: f = tn__round16((float)v, dt); break;
    }
    /* v near INT64_MAX rounds up to 2^63: x86's conversion gives INT64_MIN */
    return f >= 9223372036854775808.0 ? INT64_MIN : (int64_t)f;
}

static int tn_log2_floor(int64_t v)
{
    int n = 0;
    while (v >>= 1)
        n++;
    return n;
}

static int64_t tn_update_from(int64_t from, enum tn_dtype dt, int digits)
{
    int64_t from_plus_1 = tn_float_cast_int(from + 1, dt);
    if (from_plus_1 < from) {
        int n = tn_log2_floor(llabs(from + 1));
        from = from_plus_1 + (INT64_C(1) << (n - digits + 1));
    }
    return from;
}

static int64_t tn_update_to(int64_t to, enum tn_dtype dt, int digits)
{
    int64_t to_minus_1 = tn_float_cast_int(to - 1, dt);
    if (to_minus_1 >= to) {
        int n = tn_log2_floor(llabs(to - 1));
        to = to_minus_1 - (INT64_C(1) << (n - digits + 1));
    }
    return to;
}

struct tn_random_ctx {
    struct tn_generator *g;
    enum tn_dtype dt;
    uint64_t range;
    int64_t base;
};

static void tn_random_elem(char *p, void *vctx)
{
    struct tn_random_ctx *c = vctx;
    /* 2.x draws 64 bits once the range reaches 2^28 (1.13: 2^32, and only
     * for int64, float64, float32 and bfloat16) */
    bool wide;
    if (c->g->torch1)
        wide = c->range >= (UINT64_C(1) << 32) &&
               (c->dt == TN_INT64 || c->dt == TN_FLOAT64 || c->dt == TN_FLOAT32 ||
                c->dt == TN_BFLOAT16);
    else
        wide = c->range >= (UINT64_C(1) << 28);
    uint64_t r = wide ? tn_random64(c->g) : tn_random32(c->g);
    int64_t v = (int64_t)(r % c->range + (uint64_t)c->base);
    tn_convert(p, c->dt, &v, TN_INT64, 1);
}

int tn_random_(struct tn_tensor *t, int64_t from, int64_t to, struct tn_generator *g)
{
    int meta = tn_check_cpu(t);
    if (meta)
        return meta < 0 ? tn_last_status() : 0;
    if (from >= to)
        return tn_set_error(TN_EINVAL,
                            "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                            (long long)from, (long long)to);
    enum tn_dtype dt = t->dtype;
    const char *ty = tn_cpp_type_name(dt);
    if (tn_dtype_is_complex(dt))
        return tn_set_error(TN_EDTYPE, "check_random_bounds handles only integral, floating-point "
                                       "and boolean types");
    if (tn_dtype_is_floating(dt)) {
        int digits;
        double max = tn_float_max(dt, &digits);
        from = tn_update_from(from, dt, digits);
        to = tn_update_to(to, dt, digits);
        if (from >= to)
            return tn_set_error(TN_EINVAL,
                                "random_ expects 'from' casted to dtype to be less than 'to' casted "
                                "to dtype, but got from=%lld >= to=%lld",
                                (long long)from, (long long)to);
        if (!((double)from >= -max && (double)from <= max))
            return tn_set_error(TN_EINVAL, "from is out of bounds for %s", ty);
        if (!((double)(to - 1) >= -max && (double)(to - 1) <= max))
            return tn_set_error(TN_EINVAL, "to - 1 is out of bounds for %s", ty);
    } else {
        int64_t lo, hi;
        switch (dt) {
        case TN_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
        case TN_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
        case TN_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
        case TN_UINT8: lo = 0; hi = UINT8_MAX; break;
        case TN_BOOL: lo = 0; hi = 1; break;
        default: lo = INT64_MIN; hi = INT64_MAX; break;
        }
        if (from < lo || from > hi)
            return tn_set_error(TN_EINVAL, "from is out of bounds for %s", ty);
        if (to - 1 < lo || to - 1 > hi)
            return tn_set_error(TN_EINVAL, "to - 1 is out of bounds for %s", ty);
    }
    g = tn_gen(g);
    struct tn_random_ctx c = {g, dt, (uint64_t)to - (uint64_t)from, from};
    pthread_mutex_lock(&g->mu);
    tn_walk(t, tn_random_elem, &c);
    pthread_mutex_unlock(&g->mu);
    t->storage->version++;
    return 0;
}

/* ---------------------------------------------------------- constructors */

static enum tn_dtype tn_float_or_default(enum tn_dtype dtype)
{
    return dtype == TN_DTYPE_UNSET ? tn_get_default_dtype() : dtype;
}

struct tn_tensor *tn_rand(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                          struct tn_generator *g)
{
    dtype = tn_float_or_default(dtype);
    if (!tn_dtype_is_floating(dtype) && !tn_dtype_is_complex(dtype)) {
        tn_not_implemented("check_uniform_bounds", dtype);
        return NULL;
    }
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && tn_uniform_(t, 0.0, 1.0, g) != 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

struct tn_tensor *tn_randn(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                           struct tn_generator *g)
{
    dtype = tn_float_or_default(dtype);
    if (!tn_dtype_is_floating(dtype) && !tn_dtype_is_complex(dtype)) {
        tn_not_implemented("normal_kernel_cpu", dtype);
        return NULL;
    }
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && tn_normal_(t, 0.0, 1.0, g) != 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

struct tn_tensor *tn_randint(int64_t low, int64_t high, const int64_t *sizes, int ndim,
                             enum tn_dtype dtype, struct tn_generator *g)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = TN_INT64;
    if (low >= high) {
        tn_set_error(TN_EINVAL,
                     "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                     (long long)low, (long long)high);
        return NULL;
    }
    struct tn_tensor *t = tn_empty(sizes, ndim, dtype);
    if (t && tn_random_(t, low, high, g) != 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

/* PyTorch 2.x shuffles with 32-bit draws below this n and with the
 * inside-out Fisher-Yates on 64-bit draws from it on (1.13 always used the
 * 32-bit swaps). */
#define TN_RANDPERM_SMALL (UINT32_MAX / 20)

struct tn_tensor *tn_randperm(int64_t n, enum tn_dtype dtype, struct tn_generator *g)
{
    if (dtype == TN_DTYPE_UNSET)
        dtype = TN_INT64;
    if (n < 0) {
        tn_set_error(TN_EINVAL, "Trying to create tensor with negative dimension %lld: [%lld]",
                     (long long)n, (long long)n);
        return NULL;
    }
    if (dtype == TN_BOOL || tn_dtype_is_complex(dtype)) {
        tn_not_implemented("randperm", dtype);
        return NULL;
    }
    if (tn_dtype_is_floating(dtype)) {
        int digits;
        tn_float_max(dtype, &digits);
        int64_t limit = (INT64_C(1) << digits) + 1;
        if (n > limit) {
            tn_set_error(TN_EINVAL, "n cannot be greater than %lld for %s type.",
                         (long long)limit, tn_dtype_info(dtype)->c10_name);
            return NULL;
        }
    } else if (dtype != TN_INT64) {
        int64_t hi = dtype == TN_INT32 ? INT32_MAX : dtype == TN_INT16 ? INT16_MAX
                     : dtype == TN_INT8 ? INT8_MAX : UINT8_MAX;
        const char *cname = dtype == TN_INT32 ? "int32_t" : dtype == TN_INT16 ? "int16_t"
                            : dtype == TN_INT8 ? "int8_t" : "uint8_t";
        if (n - 1 > hi) {
            tn_set_error(TN_EINVAL, "value cannot be converted to type %s without overflow", cname);
            return NULL;
        }
    }
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    if (!perm) {
        tn_set_error(TN_ENOMEM, "out of memory for randperm(%lld)", (long long)n);
        return NULL;
    }
    g = tn_gen(g);
    pthread_mutex_lock(&g->mu);
    if (n < (int64_t)TN_RANDPERM_SMALL || g->torch1) {
        for (int64_t i = 0; i < n; i++)
            perm[i] = i;
        for (int64_t i = 0; i < n - 1; i++) {
            int64_t z = (int64_t)(tn_random32(g) % (uint64_t)(n - i));
            int64_t tmp = perm[i];
            perm[i] = perm[z + i];
            perm[z + i] = tmp;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            int64_t z = (int64_t)(tn_random64(g) % (uint64_t)(i + 1));
            perm[i] = perm[z];
            perm[z] = i;
        }
    }
    pthread_mutex_unlock(&g->mu);
    struct tn_tensor *t = tn_empty(TN_SHAPE(n), dtype);
    if (t)
        tn_convert(tn_data(t), dtype, perm, TN_INT64, (size_t)n);
    free(perm);
    return t;
}
