/*
 * core/internal.h: helpers that libtensor's modules share and that are not
 * part of the public API (never installed).
 */
#ifndef TN_CORE_INTERNAL_H
#define TN_CORE_INTERNAL_H

#include <config.h>
#include <tensor/core.h>

/* The real dtype of a complex one's parts (complex64 -> float32, complex128
 * -> float64), any other dtype itself: c10's toRealValueType. */
static inline enum tn_dtype tn__dtype_real(enum tn_dtype dt)
{
    return dt == TN_COMPLEX64 ? TN_FLOAT32 : dt == TN_COMPLEX128 ? TN_FLOAT64 : dt;
}

/* The complex dtype whose parts are `dt` (float64 -> complex128, a complex
 * dtype itself, anything else complex64): c10's toComplexType for the
 * dtypes tensorkit has. */
static inline enum tn_dtype tn__dtype_complex(enum tn_dtype dt)
{
    return dt == TN_FLOAT64 || dt == TN_COMPLEX128 ? TN_COMPLEX128 : TN_COMPLEX64;
}

/* A complex number from its two parts, infinite and NaN parts kept as they
 * are (re + im * I would make an infinite part's partner NaN): C11 lays a
 * complex out as an array of its two parts (6.2.5), read here through a
 * union. What CMPLX and CMPLXF do, which glibc's complex.h gives gcc only. */
#define TN__COMPLEX_FROM_PARTS(NAME, T, R)                                                     \
    static inline T NAME(R re, R im)                                                           \
    {                                                                                          \
        union {                                                                                \
            R part[2];                                                                         \
            T z;                                                                               \
        } u = {.part = {re, im}};                                                              \
        return u.z;                                                                            \
    }
TN__COMPLEX_FROM_PARTS(tn__complex128, tn_complex128, double)
TN__COMPLEX_FROM_PARTS(tn__complex64, tn_complex64, float)

/* A scalar as a complex number: its two parts, or a real value and 0. */
static inline tn_complex128 tn__scalar_complex128(struct tn_scalar s)
{
    return s.kind == TN_SCALAR_COMPLEX ? tn__complex128(s.v.c.re, s.v.c.im)
                                       : tn__complex128(tn_scalar_to_double(s), 0);
}

#define TN_ATOMIC_INC(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)
#define TN_ATOMIC_DEC(p) __atomic_sub_fetch((p), 1, __ATOMIC_ACQ_REL)

/* Turns a tn_out that nothing was written to yet into a durable writer
 * (core/file.c): its bytes go to the disk through O_DIRECT in large aligned
 * blocks from two staging buffers (a thread writes one while the caller
 * fills the other), and tn_out_commit cuts the file to size and syncs it
 * once, then the folder after the rename.  Only for a temporary file of
 * ours; a file system that refuses O_DIRECT (tmpfs) leaves it buffered.
 * Returns 1 when switched, 0 when left as it was.  ftell still works. */
struct tn_out;
int tn__out_direct(struct tn_out *o);
/* Adds (or, add false, takes back) a temporary folder of flat files that
 * tn_out_remove_on_signals' handler removes with its content (a DCP
 * save's); at most 8 at once, more are not registered. */
void tn__out_live_dir(const char *dir, bool add);

/* dispatch/registry.c: queues ops' NULL-terminated table of built-in ops
 * (tgen's, in lib/ops/ops_gen.c, whose constructor calls this at load) for
 * registration on the next lookup, so that dispatch does not name ops.
 * The table is borrowed for the process's life. */
struct tn_op;
void tn__op_register_builtins(struct tn_op *const *table);

/* The allocator registered for a device type, or NULL when none is. */
const struct tn_allocator *tn__allocator(enum tn_device_type type);

/* The cache of large CPU blocks behind the CPU allocator (core/cpu_cache.c):
 * a block for a request of at least TN_CPU_CACHE_MIN bytes (64 KiB aligned),
 * or NULL when the request is smaller, the cache is off or the kernel
 * refuses (the caller then uses aligned_alloc); and the release of a block,
 * false when ptr is not the cache's. Both are thread-safe. */
#define TN_CPU_CACHE_MIN ((size_t)64 << 10)
void *tn__cpu_cache_alloc(size_t nbytes);
bool tn__cpu_cache_free(void *ptr);
/* The bytes held in idle blocks; the rereading of TN_CPU_CACHE_BYTES (which
 * the first large allocation reads), for the tests. */
size_t tn__cpu_cache_idle_bytes(void);
void tn__cpu_cache_configure(void);
/* Environment variable `name` as a byte count: digits with an optional k, M
 * or G (powers of 1024), at most max; false (bytes untouched) when unset or
 * anything else. */
bool tn__env_bytes(const char *name, uint64_t max, uint64_t *bytes);

/* What the core asks of a device backend loaded at run time (the CUDA one
 * lives in lib/ops/cuda and is a shared object of its own). */
struct tn_device_backend {
    /* Copies nbytes between any two devices; 0 or an error. */
    int (*memcpy)(void *dst, struct tn_device ddev, const void *src, struct tn_device sdev,
                  size_t nbytes);
    /* Sets nbytes of device memory at dst to zero bytes; 0 or an error. */
    int (*memzero)(void *dst, struct tn_device dev, size_t nbytes);
    int (*device_count)(void);
};

/* What a backend gets from the core that loaded it: it calls back through
 * these rather than linking libtensor, so a program linked statically with
 * libtensor and the backend see one and the same core. */
struct tn_backend_host {
    int (*set_error)(enum tn_status status, const char *fmt, ...);
    void (*register_allocator)(enum tn_device_type type, const struct tn_allocator *alloc);
};

/* The backend's entry point, looked up by name after dlopen. */
typedef int (*tn_backend_init_fn)(const struct tn_backend_host *host,
                                  struct tn_device_backend *out);

/* The backend for `type`, loading its shared object on first use: NULL with
 * TN_EDEVICE ("CUDA support is not available: ...") when it cannot load. The
 * CPU has no backend object: asking for it is a bug. */
const struct tn_device_backend *tn__device_backend(enum tn_device_type type);

/* Sets every byte of s to zero on its own device: memset on the CPU, the
 * backend's memzero on CUDA (the host cannot write device memory), nothing
 * on Meta (no bytes). 0 or an error. */
int tn__storage_zero(struct tn_storage *s);

/* Allocates the tensor struct around `storage` (a reference is taken) with
 * the given geometry; strides NULL means contiguous. No bounds check: the
 * caller guarantees the geometry fits. NULL with TN_ENOMEM. */
struct tn_tensor *tn__tensor_make(struct tn_storage *storage, int64_t offset, const int64_t *sizes,
                                  const int64_t *strides, int ndim, enum tn_dtype dtype);

/* An uninitialised tensor struct, from this thread's small-block cache when
 * it has one (core/storage.c), and its release back to the cache: every
 * tensor struct comes from tn__tensor_make, which sets every field, and goes
 * back through tn__tensor_free. NULL on out of memory. */
struct tn_tensor *tn__tensor_alloc(void);
void tn__tensor_free(struct tn_tensor *t);

/* A view of `base` with new geometry (the view keeps base's storage, dtype,
 * device and requires_grad, and records base); grad_fn: the name of the
 * node autograd records for it, PyTorch's (TransposeBackward0). */
struct tn_tensor *tn__view_make(const struct tn_tensor *base, int64_t offset, const int64_t *sizes,
                                const int64_t *strides, int ndim, const char *grad_fn);

/* Checks a sizes array (no negative size, numel fits in int64). Returns 0 or
 * an error naming `what`. Writes numel to *numel when not NULL. */
int tn__check_sizes(const int64_t *sizes, int ndim, int64_t *numel);

/* PyTorch's assert_no_partial_overlap (full false) and assert_no_overlap
 * (full true) of a tensor an op writes and one it reads: 0, or TN_EINVAL
 * "unsupported operation: some elements of the input tensor and the
 * written-to tensor refer to a single memory location. ..." when both are
 * dense in one storage and their bytes meet (partly, or, with full, also
 * wholly). */
int tn__check_overlap(const struct tn_tensor *written, const struct tn_tensor *input, bool full);

/* Computes strides for `newshape` viewing a tensor of (oldshape, oldstride)
 * without copying (PyTorch's computeStride). Returns false when impossible. */
bool tn__compute_view_strides(const int64_t *oldshape, const int64_t *oldstride, int oldndim,
                              const int64_t *newshape, int newndim, int64_t *newstride);

/* Resolves one -1 in `shape` against numel (PyTorch's infer_size); writes
 * the result to out. Returns 0 or an error ("shape '[3, 5]' is invalid for
 * input of size 12", "only one dimension can be inferred"). */
int tn__infer_size(const int64_t *shape, int ndim, int64_t numel, int64_t *out);

/* Checks that scalar `s` fits `dtype` as PyTorch's Scalar::to<T>() does
 * (fill_, full, linspace): 0, or TN_EINVAL with "value cannot be converted
 * to type uint8_t without overflow". */
int tn__scalar_check(struct tn_scalar s, enum tn_dtype dtype);

/* What lib/autograd lends the core, which sits above it and may not call
 * it: views, copy_ and fill_ record their backward through these (NULL
 * until lib/autograd loads; each is called only for tensors that require
 * grad). Each returns 0 or a negative tn_status. */
struct tn_autograd_hooks {
    /* `view` (sharing in's storage) was made from `in` by the op whose
     * node PyTorch names grad_fn */
    int (*on_view)(const struct tn_tensor *in, struct tn_tensor *view, const char *grad_fn);
    /* dst is about to be written in place: PyTorch's leaf checks */
    int (*check_inplace)(const struct tn_tensor *dst);
    /* dst was written in place from src (NULL for fill_) */
    int (*after_inplace)(struct tn_tensor *dst, const struct tn_tensor *src);
    /* t is being freed and holds autograd_meta */
    void (*free_meta)(struct tn_tensor *t);
};
extern const struct tn_autograd_hooks *tn__autograd_hooks;

/* --- strided loops ---------------------------------------------------- */

/* Iterates over up to TN_MAX_DIMS dims with byte strides for up to 4
 * operands, handing out the innermost run as (pointers, inner byte strides,
 * count). Dims of size 1 are dropped and contiguous dims are merged first so
 * the inner run is as long as possible. */
#define TN_ITER_MAX_OPS 4
struct tn_iter {
    int nops;
    int ndim;
    int64_t sizes[TN_MAX_DIMS];                    /* innermost first */
    int64_t strides[TN_ITER_MAX_OPS][TN_MAX_DIMS]; /* bytes, innermost first */
    char *base[TN_ITER_MAX_OPS];
    int64_t numel;
};

/* Sets up an iterator over `nops` operands of one shape (sizes, ndim) with
 * per-operand element strides and element sizes. */
void tn__iter_init(struct tn_iter *it, int nops, const int64_t *sizes, int ndim, char *const *base,
                   const int64_t *const *strides, const size_t *elsize);

/* The inner loop: called with data pointers for the run's first element,
 * the byte strides of the innermost dim, and the run length. */
typedef void (*tn_iter_fn)(char **ptrs, const int64_t *inner_strides, int64_t n, void *ctx);

/* Runs fn over every element, in parallel on the thread pool when numel is
 * at least `grain` (0: never in parallel). */
void tn__iter_run(const struct tn_iter *it, tn_iter_fn fn, void *ctx, int64_t grain);

/* The strided conversion loop between two dtypes (byte steps). */
void tn__convert_strided(char *d, enum tn_dtype ddt, int64_t dstep, const char *s,
                         enum tn_dtype sdt, int64_t sstep, int64_t n);

/* Rounds a float to float16 or bfloat16 (dtype) and back. */
float tn__round16(float x, enum tn_dtype dtype);

/* v rounded to dt as a c10 operator's result of that floating type would
 * be: float64 as it is, float32 to float, float16/bfloat16 through float. */
static inline double tn__round_to(double v, enum tn_dtype dt)
{
    if (dt == TN_FLOAT64)
        return v;
    if (dt == TN_FLOAT32)
        return (float)v;
    return tn__round16((float)v, dt);
}

/* How long (ns) a pool thread polls before it sleeps: the bound
 * OMP_WAIT_POLICY (PASSIVE 0, ACTIVE a second) and then TN_SPIN_US
 * (microseconds, which wins) ask for, -1 when neither does (values they
 * cannot read are ignored, as TN_NUM_THREADS's are); tn__thread_spin sets
 * the pool's bound in place of theirs (a negative ns leaves it) and returns
 * the one it had. */
int64_t tn__thread_spin_env(void);
int64_t tn__thread_spin(int64_t ns);

/* Elements above which copies and fills go parallel. */
#define TN_PARALLEL_GRAIN 32768

/* The grain of tn_parallel_for over items of `work` elements each (planes
 * of a pool): one item a task once an item is TN_PARALLEL_GRAIN, else
 * enough items to make that much. */
static inline int64_t tn__grain_of(int64_t work)
{
    return work >= TN_PARALLEL_GRAIN ? 1 : TN_PARALLEL_GRAIN / (work + 1) + 1;
}

/* --- hot paths -----------------------------------------------------------
 * What a call on small tensors does many times, inline: the public
 * tn_numel, tn_is_contiguous, tn_data and tn_contiguous_strides are these
 * (an exported function called inside the library goes through the PLT). */

/* --- thread-local state (DESIGN.md, Threads) -----------------------------
 * DESIGN.md limits the state a thread carries to grad mode, the dispatch
 * key sets and the last error.  Every thread-local of the library is of one
 * of three kinds, each with its rule; the list below names each one under
 * its kind, with its reason:
 *   state  carried from one public call to the next, set and read back by
 *          the caller: DESIGN's three (grad mode is a key set), and one
 *          more only, the per-thread setting the public API documents
 *          (tn_io_set_progress).  Nothing else joins this kind.
 *   call   set inside one public call before anything in it reads the
 *          value, and back to its idle value (or never read again) when
 *          the call returns: an argument that a callback or an inner
 *          function cannot be passed.  It carries nothing between calls.
 *   cache  memory kept for reuse on this thread so that its fast path takes
 *          no lock: a call's results are the same with the cache empty.
 * state:
 *   dispatch/keyset.c tls_included, tls_excluded  the key sets (grad mode is
 *                                                Autograd in tls_excluded)
 *   core/error.c tn_error_buf, tn_error_status   the last error
 *   io/util.c progress_fn, progress_ctx          tn_io_set_progress's callback,
 *                                                per thread by its contract
 * call:
 *   dispatch/keyset.c tls_storage_only           the dtype behind the key set's
 *                                                storage-only mark, set by
 *                                                tn_dispatch_keyset and read by
 *                                                the error the same call raises
 *   core/thread.c tn_in_pool                     true inside a parallel region
 *                                                (and on a pool worker, which
 *                                                runs nothing else): a nested
 *                                                parallel_for runs inline
 *   core/value.c arena                           the running parse's arena,
 *                                                begun and ended by the parse
 *   graph/arena.c active                         jansson's hooks have no context
 *                                                argument: the running parse's
 *                                                arena, NULL after it
 *   graph/factory.c tn__graph_meta_factories,    set around tn_graph_check's and
 *     tn__graph_meta_devices                     tcompile's lowering's Meta
 *                                                passes, cleared after them
 * cache:
 *   core/storage.c tn_cache                      the freed-block cache (no lock)
 * tests/cli/threads.bats fails on a _Thread_local under lib/ missing here or
 * listed under no kind, on another kind, and on a state entry beyond the
 * six names above: a new thread-local joins this list under its kind, with
 * its reason, or is not added. */

/* Thread-locals on every op's path use the initial-exec model: an offset
 * from the thread pointer instead of a __tls_get_addr call. Only a few
 * bytes each (static TLS is scarce for a library loaded by dlopen). */
#define TN_TLS_IE __attribute__((tls_model("initial-exec")))

/* Drops one of the references *rc counts; true when it was the last. A
 * count of 1 is the caller's own reference, which nobody else can copy, so
 * the last one goes without a locked instruction (acquire: what other
 * threads wrote before dropping theirs is seen before the object goes). */
static inline bool tn__unref(long *rc)
{
    return __atomic_load_n(rc, __ATOMIC_ACQUIRE) == 1 || TN_ATOMIC_DEC(rc) == 0;
}

static inline int64_t tn__numel(const struct tn_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->sizes[i];
    return n;
}

/* t's element count when it is contiguous, else -1. As PyTorch: a tensor
 * without elements is contiguous whatever its strides; otherwise each dim
 * of size > 1 has the stride of the dims after it. */
static inline int64_t tn__contiguous_numel(const struct tn_tensor *t)
{
    /* unsigned: with a 0 size, the product of the others may overflow */
    uint64_t expected = 1;
    bool ok = true;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] != 1 && (uint64_t)t->strides[i] != expected)
            ok = false;
        expected *= (uint64_t)t->sizes[i];
    }
    return ok || expected == 0 ? (int64_t)expected : -1;
}

static inline bool tn__is_contiguous(const struct tn_tensor *t)
{
    return tn__contiguous_numel(t) >= 0;
}

/* t's first element, for an element size es (tn_dtype_size(t->dtype)). */
static inline char *tn__data(const struct tn_tensor *t, size_t es)
{
    return (char *)t->storage->data + t->offset * (int64_t)es;
}

/* tn_dtype_size without a call: a switch over the dtype table's X-macro
 * (an unknown dtype goes to tn_dtype_size, which asserts). */
static inline size_t tn__dtype_size(enum tn_dtype dtype)
{
    switch (dtype) {
#define TN_X_SIZE(E, n, T, s, ...) case TN_##E: return s;
        TN_FOR_EACH_ANY_DTYPE(TN_X_SIZE)
#undef TN_X_SIZE
    default: return tn_dtype_size(dtype);
    }
}

/* tn__check_sizes's verdict without the call when the sizes are good (its
 * message otherwise): no negative size, numel in int64. */
static inline int tn__sizes_numel(const int64_t *sizes, int ndim, int64_t *numel)
{
    int64_t n = 1;
    bool bad = ndim < 0 || ndim > TN_MAX_DIMS;
    for (int i = 0; i < ndim && !bad; i++)
        bad = sizes[i] < 0 || __builtin_mul_overflow(n, sizes[i], &n);
    if (bad)
        return tn__check_sizes(sizes, ndim, numel);
    *numel = n;
    return TN_OK;
}

static inline void tn__contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= sizes[i] > 1 ? sizes[i] : 1;
    }
}

/* A new contiguous tensor of (sizes, ndim) and dtype (not UNSET) over
 * fresh, uninitialised storage on `device`: tn_empty_on's work after the
 * default dtype. NULL with an error (a bad size, TN_ENOMEM, no backend). */
struct tn_tensor *tn__tensor_new(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                                 struct tn_device device);

#if defined(__x86_64__) && defined(__GNUC__)
/* 16 x 16 4-byte values from src (row i at src + i * sld bytes) to dst
 * (value (i, j) at dst + j * dld + i * 4), transposed in AVX-512 registers
 * (callers check the CPU has it); each destination row one 64-byte store,
 * streamed past the caches when nt (dst and dld then multiples of 64). */
void tn__t16(char *dst, int64_t dld, const char *src, int64_t sld, bool nt);
#endif

/* ------------------------------------------- byte buffers (core/bytes.c) */

/* A growable byte buffer: io's writers (pickle, zip, npy, checkpoints)
 * and the value walk's dotted paths. */
struct tn__bytes {
    unsigned char *data;
    size_t len, cap;
    int failed; /* an allocation failed: every later put is ignored */
};
void tn__bytes_put(struct tn__bytes *b, const void *p, size_t n);
void tn__bytes_byte(struct tn__bytes *b, unsigned char c);
void tn__bytes_u16(struct tn__bytes *b, uint16_t v);
void tn__bytes_u32(struct tn__bytes *b, uint32_t v);
void tn__bytes_u64(struct tn__bytes *b, uint64_t v);
void tn__bytes_printf(struct tn__bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --------------------------------------------- values (core/value.c) */

struct tn_value;
/* d[key] = val for a string key (d a DICT or ODICT); consumes val, also on
 * failure, and takes a NULL val as the failure to build it.  Returns 0 or
 * TN_ENOMEM.  For the state_dict builders of lib/nn and lib/optim. */
int tn__value_set_str(struct tn_value *d, const char *key, struct tn_value *val);
/* core/value.c: an arena for the many small values one load makes.  Between
 * begin and end (nested: the innermost wins) the calling thread's new
 * values are carved from blocks the arena owns; they are released as any
 * value and may outlive the arena, which ends (on the same thread) while
 * they live.  The caller owns the struct, on its stack. */
struct tn__value_arena {
    void *block; /* the block being carved, or NULL */
    size_t size, used; /* its size, and the bytes carved from it */
    struct tn__value_arena *outer;
};
void tn__value_arena_begin(struct tn__value_arena *a);
void tn__value_arena_end(struct tn__value_arena *a);

#endif
