/*
 * tensor/core.h: libtensor's core module: errors, dtypes, devices, storages,
 * tensors, constructors, views, copies, printing, random numbers, threads.
 *
 * Ownership, once for the whole library: every `struct tn_tensor *` (and
 * `struct tn_storage *`) a function returns is a new reference that the caller
 * releases with tn_release() (tn_storage_release()); arguments are borrowed.
 * A function that differs says so above its declaration.
 *
 * Errors: a function that can fail returns NULL, or an `int` that is 0 (TN_OK),
 * or a count where it says so, or a negative `enum tn_status` value (one
 * return type for every fallible function; the enum names the codes), and
 * leaves a message for tn_last_error() that names the input and the
 * reason, in PyTorch's words where PyTorch has words for it.  No function
 * prints or exits; broken invariants (bugs) abort with file and line.
 */
#ifndef TENSOR_CORE_H
#define TENSOR_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

enum tn_status {
    TN_OK = 0,
    TN_ENOMEM = -1,   /* an allocation failed or passed a limit */
    TN_EINVAL = -2,   /* a bad argument */
    TN_ESHAPE = -3,   /* shapes or strides that do not fit */
    TN_EDTYPE = -4,   /* a dtype an operation does not support */
    TN_EINDEX = -5,   /* an index or dimension out of range */
    TN_EIO = -6,      /* reading or writing a file or socket failed */
    TN_EFORMAT = -7,  /* malformed or unsafe input bytes */
    TN_EDEVICE = -8,  /* a device that is absent or not built */
    TN_ERUNTIME = -9, /* any other failure the caller can meet */
    TN_ETIMEOUT = -10 /* a wait ran past its deadline */
};

/* The message of the last failure in this thread ("" when none). The string
 * belongs to the library and stays valid until the next failure in this
 * thread. */
const char *tn_last_error(void);

/* The status of the last failure in this thread (TN_OK when none). */
int tn_last_status(void);

/* Records a failure for tn_last_error() and returns `status`, so a function
 * can `return tn_set_error(TN_EINVAL, "...", ...);`. printf-style. */
int tn_set_error(enum tn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int tn_set_verror(enum tn_status status, const char *fmt, va_list ap);

/* Prefixes the current message with "prefix: " (for callers that add the
 * file or argument name to a lower layer's message). Returns the status. */
int tn_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void tn_clear_error(void);

/* Aborts with file and line: for broken invariants only, never for input. */
#define TN_ASSERT(cond)                                                        \
    ((cond) ? (void)0 : tn_assert_fail(#cond, __FILE__, __LINE__, __func__))
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void tn_assert_fail(const char *expr, const char *file, int line, const char *func);

/* ------------------------------------------------------------------ dtypes */

/*
 * X(ENUM, name, C type, size, PyTorch storage class, safetensors code, numpy
 *   code, c10::ScalarType number, kind, c10 name) for every dtype.  `kind`
 *   is one of b (bool), u/i (unsigned/signed integer), f (floating), c
 *   (complex); the c10 name is what PyTorch's messages call the dtype
 *   ("\"add_cpu\" not implemented for 'Bool'").
 */
#define TN_FOR_EACH_DTYPE(X)                                                                   \
    X(FLOAT32, float32, float, 4, "FloatStorage", "F32", "<f4", 6, f, "Float")                 \
    X(FLOAT64, float64, double, 8, "DoubleStorage", "F64", "<f8", 7, f, "Double")              \
    X(FLOAT16, float16, tn_half, 2, "HalfStorage", "F16", "<f2", 5, f, "Half")                 \
    X(BFLOAT16, bfloat16, tn_bfloat16, 2, "BFloat16Storage", "BF16", NULL, 15, f, "BFloat16")  \
    X(INT64, int64, int64_t, 8, "LongStorage", "I64", "<i8", 4, i, "Long")                     \
    X(INT32, int32, int32_t, 4, "IntStorage", "I32", "<i4", 3, i, "Int")                       \
    X(INT16, int16, int16_t, 2, "ShortStorage", "I16", "<i2", 2, i, "Short")                   \
    X(INT8, int8, int8_t, 1, "CharStorage", "I8", "|i1", 1, i, "Char")                         \
    X(UINT8, uint8, uint8_t, 1, "ByteStorage", "U8", "|u1", 0, u, "Byte")                      \
    X(BOOL, bool, bool, 1, "BoolStorage", "BOOL", "|b1", 11, b, "Bool")                        \
    X(COMPLEX64, complex64, tn_complex64, 8, "ComplexFloatStorage", "C64", "<c8", 9, c,        \
      "ComplexFloat")                                                                          \
    X(COMPLEX128, complex128, tn_complex128, 16, "ComplexDoubleStorage", NULL, "<c16", 10, c,  \
      "ComplexDouble")

/*
 * Storage-only dtypes, with the same columns: PyTorch 2.x's newer dtypes.
 * Tensors of them are created, viewed, copied, converted (tn_convert, with
 * PyTorch's rounding), printed, saved and loaded, but no kernel computes
 * on them: every dispatched op refuses them ("\"add\" not implemented for
 * 'Float8_e4m3fn'") and kernels index their tables by TN_FOR_EACH_DTYPE's
 * dtypes only. A NULL storage class means PyTorch pickles them as an
 * untyped storage rebuilt by _rebuild_tensor_v3.
 */
#define TN_FOR_EACH_STORAGE_DTYPE(X)                                                           \
    X(FLOAT8_E5M2, float8_e5m2, tn_float8, 1, NULL, "F8_E5M2", NULL, 23, f, "Float8_e5m2")     \
    X(FLOAT8_E4M3FN, float8_e4m3fn, tn_float8, 1, NULL, "F8_E4M3", NULL, 24, f,                \
      "Float8_e4m3fn")                                                                         \
    X(FLOAT8_E5M2FNUZ, float8_e5m2fnuz, tn_float8, 1, NULL, NULL, NULL, 25, f,                 \
      "Float8_e5m2fnuz")                                                                       \
    X(FLOAT8_E4M3FNUZ, float8_e4m3fnuz, tn_float8, 1, NULL, NULL, NULL, 26, f,                 \
      "Float8_e4m3fnuz")                                                                       \
    X(UINT16, uint16, uint16_t, 2, NULL, "U16", "<u2", 27, u, "UInt16")                         \
    X(UINT32, uint32, uint32_t, 4, NULL, "U32", "<u4", 28, u, "UInt32")                         \
    X(UINT64, uint64, uint64_t, 8, NULL, "U64", "<u8", 29, u, "UInt64")

/* Every dtype, computing and storage-only (tables of names and conversions). */
#define TN_FOR_EACH_ANY_DTYPE(X) TN_FOR_EACH_DTYPE(X) TN_FOR_EACH_STORAGE_DTYPE(X)

/* float16 and bfloat16 are kept as their bits; complex64/128 as C's complex. */
typedef struct { uint16_t bits; } tn_half;
typedef struct { uint16_t bits; } tn_bfloat16;
typedef float _Complex tn_complex64;
typedef struct { uint8_t bits; } tn_float8; /* any of the four float8 formats */
typedef double _Complex tn_complex128;

enum tn_dtype {
    TN_DTYPE_UNSET = -1, /* "not given": a default or an inferred dtype applies */
#define TN_X_ENUM(E, n, T, s, st, sf, np, sc, k, c10) TN_##E,
    TN_FOR_EACH_DTYPE(TN_X_ENUM)
    TN_NUM_DTYPES, /* the dtypes kernels compute on; storage-only ones follow */
    TN__STORAGE_DTYPES_BEFORE = TN_NUM_DTYPES - 1,
    TN_FOR_EACH_STORAGE_DTYPE(TN_X_ENUM)
#undef TN_X_ENUM
    TN_NUM_ALL_DTYPES
};

struct tn_dtype_info {
    enum tn_dtype dtype;
    const char *name;          /* "float32" (the name after "torch.") */
    size_t size;               /* bytes per element */
    const char *storage_class; /* "FloatStorage" as torch.save pickles it */
    const char *safetensors;   /* "F32" */
    const char *numpy;         /* "<f4"; NULL where numpy has no such dtype */
    int scalar_type;           /* c10::ScalarType number */
    char kind;                 /* 'b', 'u', 'i', 'f' or 'c' */
    const char *c10_name;      /* "Float", "Long": c10::ScalarType's name */
};

/* The table row of `dtype`; aborts on a value outside the enum (a bug). */
const struct tn_dtype_info *tn_dtype_info(enum tn_dtype dtype);
size_t tn_dtype_size(enum tn_dtype dtype);
const char *tn_dtype_name(enum tn_dtype dtype);

/* Parses "float32", "torch.float32" and PyTorch's aliases ("float", "half",
 * "long", "int", "double", "short", "cfloat", "bf16", "f32", ...). Returns
 * TN_DTYPE_UNSET (with an error) for anything else. */
enum tn_dtype tn_dtype_from_name(const char *name);

bool tn_dtype_is_floating(enum tn_dtype dtype); /* float16/bfloat16/float32/float64 */
bool tn_dtype_is_complex(enum tn_dtype dtype);
bool tn_dtype_is_integral(enum tn_dtype dtype, bool include_bool);
/* True for TN_FOR_EACH_STORAGE_DTYPE's dtypes, which no kernel computes on. */
static inline bool tn_dtype_is_storage_only(enum tn_dtype dtype)
{
    return dtype >= TN_NUM_DTYPES;
}

/* The default floating dtype (float32 until set), as torch.get_default_dtype. */
enum tn_dtype tn_get_default_dtype(void);
int tn_set_default_dtype(enum tn_dtype dtype); /* float32 or float64 only */

/* ---------------------------------------------------------------- scalars */

enum tn_scalar_kind { TN_SCALAR_BOOL, TN_SCALAR_INT, TN_SCALAR_FLOAT, TN_SCALAR_COMPLEX };

/* A Python number: the value of a `Scalar` argument. */
struct tn_scalar {
    enum tn_scalar_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct { double re, im; } c;
    } v;
};

#define tn_int(x) ((struct tn_scalar){.kind = TN_SCALAR_INT, .v.i = (x)})
#define tn_float(x) ((struct tn_scalar){.kind = TN_SCALAR_FLOAT, .v.f = (x)})
#define tn_bool(x) ((struct tn_scalar){.kind = TN_SCALAR_BOOL, .v.b = (x)})
#define tn_complex(r, i) ((struct tn_scalar){.kind = TN_SCALAR_COMPLEX, .v.c = {(r), (i)}})

double tn_scalar_to_double(struct tn_scalar s);   /* the real part for complex */
int64_t tn_scalar_to_int64(struct tn_scalar s);   /* truncates floats */

/* --------------------------------------------------- conversions and types */

tn_half tn_half_from_float(float f);       /* round to nearest even, NaN kept */
float tn_half_to_float(tn_half h);
tn_bfloat16 tn_bfloat16_from_float(float f); /* round to nearest even, NaN kept */
float tn_bfloat16_to_float(tn_bfloat16 b);

/* Converts `n` contiguous elements from `src` (of `sdt`) into `dst` (of
 * `ddt`) exactly as PyTorch's `.to(dtype)` does on the CPU: float to integer
 * truncates toward zero, float64 to float16/bfloat16 goes through float32,
 * complex to real keeps the real part. The buffers must not overlap. */
void tn_convert(void *dst, enum tn_dtype ddt, const void *src, enum tn_dtype sdt, size_t n);

/* Stores `s` as one element of `dtype` at `dst`, with tn_convert's rules. */
void tn_scalar_store(void *dst, enum tn_dtype dtype, struct tn_scalar s);
/* Reads one element of `dtype` at `src` as a scalar (int64, double, bool or
 * complex by the dtype's kind). */
struct tn_scalar tn_scalar_load(const void *src, enum tn_dtype dtype);

/* torch.promote_types(a, b). TN_DTYPE_UNSET with an error where PyTorch's
 * result (complex32) is not a dtype tensorkit has. */
enum tn_dtype tn_promote_types(enum tn_dtype a, enum tn_dtype b);

struct tn_tensor;

/* torch.result_type over tensors and Python scalars together: dimensioned
 * tensors outrank zero-dim tensors, which outrank scalars, unless a lower
 * rank brings a higher category (bool < integer < floating < complex).
 * Returns TN_DTYPE_UNSET with an error when there are no operands or the
 * result is not a dtype tensorkit has. */
enum tn_dtype tn_result_type(const struct tn_tensor *const *tensors, int ntensors,
                             const struct tn_scalar *scalars, int nscalars);

/* -------------------------------------------------------------- reductions */

/* The reduction of a loss (at::Reduction's values, the int that ATen's loss
 * ops take and torch.nn.functional's reduction= string names): a core type
 * because the loss ops, their backward formulas and lib/nn all use it. */
enum tn_reduction { TN_REDUCTION_NONE = 0, TN_REDUCTION_MEAN = 1, TN_REDUCTION_SUM = 2 };

/* ----------------------------------------------------------------- devices */

enum tn_device_type { TN_DEVICE_CPU = 0, TN_DEVICE_CUDA = 1, TN_DEVICE_META = 2 };

struct tn_device {
    enum tn_device_type type;
    int index; /* -1 for CPU and "the current device" */
};

#define TN_CPU ((struct tn_device){TN_DEVICE_CPU, -1})

/* "cpu", "cuda", "cuda:1", "meta". Returns 0, or TN_EINVAL with an error. */
int tn_device_parse(const char *text, struct tn_device *out);
/* Writes "cpu" or "cuda:0" into buf (at least 16 bytes); returns buf. */
char *tn_device_format(struct tn_device dev, char *buf, size_t len);
bool tn_device_equal(struct tn_device a, struct tn_device b);

/* How a device allocates memory. Device backends (the CUDA module) register
 * theirs on load; the CPU allocator is built in. */
struct tn_allocator {
    void *(*alloc)(size_t nbytes, int device_index, void *ctx); /* NULL on failure */
    void (*free)(void *ptr, int device_index, void *ctx);
    void *ctx;
};
void tn_register_allocator(enum tn_device_type type, const struct tn_allocator *alloc);

/* Byte alignment of every CPU allocation, as PyTorch's allocator uses. */
#define TN_ALIGNMENT 64

/* CPU blocks from 64 KiB up are kept when freed, for reuse by the next
 * request of about the same size, up to TN_CPU_CACHE_BYTES idle bytes
 * (default: an eighth of the RAM, at most 1 GiB; 0 turns the cache off).
 * tn_cpu_empty_cache() gives every idle block back to the system, as
 * torch.cuda.empty_cache() does for CUDA memory. Thread-safe. */
void tn_cpu_empty_cache(void);

/* ---------------------------------------------------------------- storages */

/* What frees an external storage's memory (munmap, a caller's buffer). */
typedef void (*tn_free_fn)(void *data, size_t nbytes, void *ctx);

/* A refcounted block of bytes that tensors view. */
struct tn_storage {
    long refcount;         /* atomic; use retain/release */
    void *data;            /* TN_ALIGNMENT-aligned when the library allocated it */
    size_t nbytes;
    struct tn_device device;
    tn_free_fn free_fn;    /* NULL: the device allocator owns data */
    void *free_ctx;
    uint64_t version;      /* bumped by in-place writes; shared by every view */
};

/* A new, uninitialised storage of nbytes on `device`. NULL with TN_ENOMEM. */
struct tn_storage *tn_storage_new(size_t nbytes, struct tn_device device);
/* A storage over memory the library does not own; `free_fn(data, nbytes,
 * ctx)` runs when the last reference goes (NULL: the memory is borrowed and
 * must outlive every tensor over it). */
struct tn_storage *tn_storage_from_external(void *data, size_t nbytes, struct tn_device device,
                                            tn_free_fn free_fn, void *ctx);
struct tn_storage *tn_storage_retain(struct tn_storage *s); /* returns s */
void tn_storage_release(struct tn_storage *s);              /* NULL is fine */

/* ----------------------------------------------------------------- tensors */

/* The most dimensions a tensor has (PyTorch allows more; checkpoints with
 * more are refused with a message). */
#define TN_MAX_DIMS 16

struct tn_node; /* an autograd node (lib/autograd); core only counts references */

/* The reference-counted header every autograd node starts with, so that the
 * core can release a tensor's grad_fn without knowing the node's type. */
struct tn_node_header {
    long refcount;                          /* atomic */
    void (*destroy)(struct tn_node *self);  /* frees the node when the count hits 0 */
    const char *name;                       /* "AddBackward0", as repr prints it */
};

enum tn_tensor_flags {
    TN_TENSOR_PARAMETER = 1 << 0, /* an nn.Parameter (kept through checkpoints) */
    /* a 0-dim tensor made from a Python number (add.Scalar's `other`): type
     * promotion counts it as a scalar, as PyTorch's wrapped numbers */
    TN_TENSOR_WRAPPED_NUMBER = 1 << 1
};

struct tn_tensor {
    long refcount;                   /* atomic; use tn_retain/tn_release */
    struct tn_storage *storage;      /* owned reference; views share it */
    int64_t offset;                  /* storage offset, in elements */
    int ndim;
    int64_t sizes[TN_MAX_DIMS];
    int64_t strides[TN_MAX_DIMS];    /* in elements, not bytes */
    enum tn_dtype dtype;
    struct tn_device device;
    bool requires_grad;
    unsigned flags;                  /* enum tn_tensor_flags */
    struct tn_tensor *grad;          /* owned; NULL until backward fills it */
    struct tn_node *grad_fn;         /* owned; NULL for leaves */
    uint32_t output_nr;              /* which output of grad_fn this is */
    struct tn_tensor *base;          /* owned; the tensor a view was made from */
    void *autograd_meta;             /* reserved for lib/autograd */
};

struct tn_tensor *tn_retain(struct tn_tensor *t); /* returns t; NULL is fine */
void tn_release(struct tn_tensor *t);             /* NULL is fine */

/* Builds a shape argument: tn_zeros(TN_SHAPE(2, 3), TN_FLOAT32). */
#define TN_SHAPE(...)                                                          \
    (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

int64_t tn_numel(const struct tn_tensor *t);
int tn_dim(const struct tn_tensor *t);
/* Size and stride of a dimension, negative dims counting from the end; the
 * dimension must be valid (a bug otherwise). */
int64_t tn_size(const struct tn_tensor *t, int dim);
int64_t tn_stride(const struct tn_tensor *t, int dim);
/* The address of the tensor's first element (storage data + offset). */
void *tn_data(const struct tn_tensor *t);
size_t tn_nbytes(const struct tn_tensor *t); /* numel * element size */
bool tn_is_contiguous(const struct tn_tensor *t);
/* True when the elements cover a block of memory exactly once in some
 * order (PyTorch's is_non_overlapping_and_dense). */
bool tn_is_non_overlapping_and_dense(const struct tn_tensor *t);
/* Wraps a possibly negative dim into [0, ndim) for a tensor of `ndim`
 * dimensions (0-dim tensors accept -1 and 0). Returns the dim, or -1 with
 * PyTorch's "Dimension out of range" error. */
int tn_wrap_dim(int64_t dim, int ndim);
/* Fills `strides` with the contiguous strides of `sizes`. */
void tn_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides);
/* Formats "[2, 3]" into buf; returns buf. */
char *tn_shape_format(const int64_t *sizes, int ndim, char *buf, size_t len);

/* The single value of a one-element tensor ("a Tensor with 2 elements cannot
 * be converted to Scalar" otherwise; then kind is INT and v.i is 0). */
struct tn_scalar tn_item(const struct tn_tensor *t);
double tn_item_double(const struct tn_tensor *t);

/* ------------------------------------------------------------ constructors */

/* Shapes are always (sizes, ndim) side by side, so TN_SHAPE fits them;
 * strides, where a function takes them, follow.
 * Every constructor takes `dtype` TN_DTYPE_UNSET for the default dtype
 * (float32) or, where PyTorch infers one from the arguments, the inferred
 * one. They allocate on the CPU unless they say otherwise. */
struct tn_tensor *tn_empty(const int64_t *sizes, int ndim, enum tn_dtype dtype);
struct tn_tensor *tn_empty_on(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                              struct tn_device device);
struct tn_tensor *tn_empty_strided(const int64_t *sizes, int ndim, const int64_t *strides,
                                   enum tn_dtype dtype);
struct tn_tensor *tn_zeros(const int64_t *sizes, int ndim, enum tn_dtype dtype);
struct tn_tensor *tn_ones(const int64_t *sizes, int ndim, enum tn_dtype dtype);
/* torch.full: dtype UNSET infers bool, int64, the default float or its complex
 * from the value's kind. */
struct tn_tensor *tn_full(const int64_t *sizes, int ndim, struct tn_scalar value,
                          enum tn_dtype dtype);
/* A 0-dim tensor holding `value` (torch.tensor(value)). */
struct tn_tensor *tn_scalar_tensor(struct tn_scalar value, enum tn_dtype dtype);
/* torch.arange(start, end, step): int64 when all three are integers and
 * dtype is UNSET, the default float otherwise. */
struct tn_tensor *tn_arange(struct tn_scalar start, struct tn_scalar end, struct tn_scalar step,
                            enum tn_dtype dtype);
struct tn_tensor *tn_linspace(struct tn_scalar start, struct tn_scalar end, int64_t steps,
                              enum tn_dtype dtype);
/* torch.logspace(start, end, steps, base): base^v over linspace's
 * progression, as PyTorch's CPU kernel computes it (real dtypes through
 * double from start and end converted to the dtype). */
struct tn_tensor *tn_logspace(struct tn_scalar start, struct tn_scalar end, int64_t steps,
                              double base, enum tn_dtype dtype);
/* torch.eye(n, m); m == -1 means m = n (other negative m fail as in PyTorch). */
struct tn_tensor *tn_eye(int64_t n, int64_t m, enum tn_dtype dtype);
/* torch.tril_indices / triu_indices(row, col, offset): the [2, N] coordinates
 * of the lower (c <= r + offset) or upper (c >= r + offset) triangle, row
 * by row; dtype int64 (UNSET) or int32, others fail as in PyTorch. */
struct tn_tensor *tn_tril_indices(int64_t row, int64_t col, int64_t offset, enum tn_dtype dtype);
struct tn_tensor *tn_triu_indices(int64_t row, int64_t col, int64_t offset, enum tn_dtype dtype);
/* A new contiguous tensor holding a copy of `data` (numel elements of dtype). */
struct tn_tensor *tn_from_data(const void *data, const int64_t *sizes, int ndim,
                               enum tn_dtype dtype);
/* A tensor over caller memory (torch.from_blob): no copy. `strides` NULL
 * means contiguous. `free_fn` as in tn_storage_from_external. */
struct tn_tensor *tn_from_blob(void *data, const int64_t *sizes, int ndim, const int64_t *strides,
                               enum tn_dtype dtype, tn_free_fn free_fn, void *ctx);
/* A tensor viewing `storage` (borrowed; the tensor takes its own reference)
 * with the given geometry, which must fit inside the storage. */
struct tn_tensor *tn_tensor_from_storage(struct tn_storage *storage, int64_t offset,
                                         const int64_t *sizes, int ndim, const int64_t *strides,
                                         enum tn_dtype dtype);

/* The *_like constructors keep t's shape, device and (dtype UNSET) dtype.
 * empty_like keeps t's strides when t is non-overlapping and dense, as
 * PyTorch's preserve_format does. */
struct tn_tensor *tn_empty_like(const struct tn_tensor *t, enum tn_dtype dtype);
struct tn_tensor *tn_zeros_like(const struct tn_tensor *t, enum tn_dtype dtype);
struct tn_tensor *tn_ones_like(const struct tn_tensor *t, enum tn_dtype dtype);
struct tn_tensor *tn_full_like(const struct tn_tensor *t, struct tn_scalar value,
                               enum tn_dtype dtype);

/* Fills t with `value` in place (tensor.fill_). Returns 0 or an error. */
int tn_fill_(struct tn_tensor *t, struct tn_scalar value);

/* ------------------------------------------------------------------- views */

/* Each returns a new tensor sharing t's storage (a view), with PyTorch's
 * rules and error messages. Negative dims count from the end. */
struct tn_tensor *tn_view(const struct tn_tensor *t, const int64_t *sizes, int ndim);
/* A view where the strides allow it, a contiguous copy otherwise. */
struct tn_tensor *tn_reshape(const struct tn_tensor *t, const int64_t *sizes, int ndim);
struct tn_tensor *tn_permute(const struct tn_tensor *t, const int64_t *dims, int ndim);
struct tn_tensor *tn_transpose(const struct tn_tensor *t, int64_t dim0, int64_t dim1);
struct tn_tensor *tn_t(const struct tn_tensor *t); /* 0-, 1- or 2-dim tensors only */
/* sizes may hold -1 for "keep this dimension"; new leading dims are added. */
struct tn_tensor *tn_expand(const struct tn_tensor *t, const int64_t *sizes, int ndim);
struct tn_tensor *tn_broadcast_to(const struct tn_tensor *t, const int64_t *sizes, int ndim);
struct tn_tensor *tn_narrow(const struct tn_tensor *t, int64_t dim, int64_t start, int64_t length);
/* t[start:end:step] along dim: out-of-range start/end clamp as in Python;
 * TN_END for "to the end". step must be positive. */
#define TN_END INT64_MAX
struct tn_tensor *tn_slice(const struct tn_tensor *t, int64_t dim, int64_t start, int64_t end,
                           int64_t step);
struct tn_tensor *tn_select(const struct tn_tensor *t, int64_t dim, int64_t index);
struct tn_tensor *tn_squeeze(const struct tn_tensor *t);
/* Removes the listed dims that have size 1 (others are left alone). */
struct tn_tensor *tn_squeeze_dims(const struct tn_tensor *t, const int64_t *dims, int ndims);
struct tn_tensor *tn_unsqueeze(const struct tn_tensor *t, int64_t dim);
/* A view when possible (reshape's rule), else a copy. */
struct tn_tensor *tn_flatten(const struct tn_tensor *t, int64_t start_dim, int64_t end_dim);
struct tn_tensor *tn_unflatten(const struct tn_tensor *t, int64_t dim, const int64_t *sizes,
                               int nsizes);
struct tn_tensor *tn_as_strided(const struct tn_tensor *t, const int64_t *sizes, int ndim,
                                const int64_t *strides, int64_t storage_offset);
struct tn_tensor *tn_diagonal(const struct tn_tensor *t, int64_t offset, int64_t dim1,
                              int64_t dim2);
struct tn_tensor *tn_unfold(const struct tn_tensor *t, int64_t dim, int64_t size, int64_t step);

/* Broadcasts two shapes (torch.broadcast_shapes). Writes the result to out
 * (TN_MAX_DIMS long) and returns its ndim, or -1 with PyTorch's error. */
int tn_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out);

/* ------------------------------------------------------------------ copies */

/* dst.copy_(src): src broadcast to dst's shape, converted to dst's dtype.
 * Returns 0 or an error; overlapping src and dst are handled. */
int tn_copy_(struct tn_tensor *dst, const struct tn_tensor *src);
/* t itself (a new reference) when contiguous, else a contiguous copy. */
struct tn_tensor *tn_contiguous(const struct tn_tensor *t);
/* A copy with new storage; strides kept when t is non-overlapping and dense. */
struct tn_tensor *tn_clone(const struct tn_tensor *t);
/* t itself (a new reference) when it already has `dtype`, else a converted copy. */
struct tn_tensor *tn_to_dtype(const struct tn_tensor *t, enum tn_dtype dtype);
/* t with requires_grad and grad_fn dropped, sharing storage (tensor.detach()). */
struct tn_tensor *tn_detach(const struct tn_tensor *t);

/* ---------------------------------------------------------------- printing */

/* repr(t) exactly as PyTorch prints it ("tensor([1., 2.])" with the same
 * number formatting, summarisation and suffixes). Returns a malloc'd string
 * the caller frees with free(), or NULL on allocation failure. */
char *tn_format(const struct tn_tensor *t);
/* Writes tn_format(t) and a newline to f. Returns 0 or TN_EIO/TN_ENOMEM. */
int tn_print(FILE *f, const struct tn_tensor *t);

/* torch.set_printoptions. A negative value leaves that option unchanged;
 * sci_mode: -1 automatic, 0 off, 1 on. Process-wide. NULL restores the
 * defaults (profile="default"). */
struct tn_printoptions {
    int precision;   /* 4 */
    int64_t threshold; /* 1000 */
    int edgeitems;   /* 3 */
    int linewidth;   /* 80 */
    int sci_mode;    /* -1 */
};
void tn_set_printoptions(const struct tn_printoptions *opts);
struct tn_printoptions tn_get_printoptions(void);

/* ----------------------------------------------------------------- random */

/* A Mersenne Twister generator with PyTorch's CPU generator's algorithms:
 * the same seed gives the same values as torch.manual_seed on the CPU. */
struct tn_generator;

/* The process-wide default generator (seeded with 67280421310721 until
 * tn_manual_seed, as a new torch.Generator is; PyTorch's own default
 * generator starts from a random seed). Calls on it are serialised. */
struct tn_generator *tn_default_generator(void);
void tn_manual_seed(uint64_t seed);
uint64_t tn_initial_seed(void);
struct tn_generator *tn_generator_new(uint64_t seed);
void tn_generator_free(struct tn_generator *g);
void tn_generator_seed(struct tn_generator *g, uint64_t seed);
/* Makes g (NULL: the default generator) reproduce PyTorch 1.13's values
 * where 2.x changed the algorithm (randint/random_ ranges from 2^28 to 2^32,
 * normal's log(1 - u), uniform_ without the clamp at `to`, float16/bfloat16
 * uniform_ and normal_ in 16-bit arithmetic, randperm's 32-bit swaps for
 * every n). Off (2.x) by default. */
void tn_generator_set_torch1(struct tn_generator *g, bool on);
/* Which of PyTorch's CPU kernels g reproduces (as
 * torch.backends.cpu.get_cpu_capability() names them): float32 normal_ on
 * 16 or more contiguous elements uses Cephes-style vector math in the AVX2
 * kernel and libm elsewhere, and only the DEFAULT kernel rounds a * b + c
 * twice. AVX2 (what most x86 machines run) by default. */
enum tn_rng_cpu { TN_RNG_CPU_AVX2 = 0, TN_RNG_CPU_DEFAULT, TN_RNG_CPU_AVX512 };
void tn_generator_set_cpu(struct tn_generator *g, enum tn_rng_cpu cpu);

/* g's state (NULL: the default generator's) as the bytes of PyTorch's
 * torch.get_rng_state() / Generator.get_state(): a uint8 tensor of
 * TN_GENERATOR_STATE_BYTES that torch.set_rng_state takes, and back (the
 * legacy 5048-byte form too); EINVAL for anything else. */
#define TN_GENERATOR_STATE_BYTES 5056
struct tn_tensor *tn_generator_get_state(struct tn_generator *g);
int tn_generator_set_state(struct tn_generator *g, const struct tn_tensor *state);

/* In the functions below `g` NULL means the default generator. */
struct tn_tensor *tn_rand(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                          struct tn_generator *g);
struct tn_tensor *tn_randn(const int64_t *sizes, int ndim, enum tn_dtype dtype,
                           struct tn_generator *g);
/* Integers in [low, high); dtype UNSET means int64. */
struct tn_tensor *tn_randint(int64_t low, int64_t high, const int64_t *sizes, int ndim,
                             enum tn_dtype dtype, struct tn_generator *g);
struct tn_tensor *tn_randperm(int64_t n, enum tn_dtype dtype, struct tn_generator *g);
int tn_uniform_(struct tn_tensor *t, double from, double to, struct tn_generator *g);
int tn_normal_(struct tn_tensor *t, double mean, double std, struct tn_generator *g);
int tn_bernoulli_(struct tn_tensor *t, double p, struct tn_generator *g);
/* bernoulli_.Tensor: t (written in memory order) is 1 where a draw in
 * [0, 1) falls below p broadcast to t's shape, a float64 p drawn at double
 * precision, any other floating p at float's 24 bits, as PyTorch's CPU
 * kernel draws them. */
int tn_bernoulli_tensor_(struct tn_tensor *t, const struct tn_tensor *p, struct tn_generator *g);
/* tensor.random_(from, to): integers in [from, to). */
int tn_random_(struct tn_tensor *t, int64_t from, int64_t to, struct tn_generator *g);

/* ---------------------------------------------------------------- threads */

/* Threads used by kernels: TN_NUM_THREADS when set, else the machine's
 * cores. */
int tn_get_num_threads(void);
void tn_set_num_threads(int n);

/* Runs fn(begin, end, ctx) over [0, n) split into chunks of at least `grain`
 * elements on the thread pool; a single call inline when n <= grain or one
 * thread is set. Calls from inside a pool task run inline. */
typedef void (*tn_range_fn)(int64_t begin, int64_t end, void *ctx);
void tn_parallel_for(int64_t n, int64_t grain, tn_range_fn fn, void *ctx);

/* ----------------------------------------------------------- output files */

/* An output file as a command-line user expects it.  "-" is standard
 * output.  A regular file, or a path with nothing there yet, is written to
 * a hidden temporary in the same folder (".NAME.tmp-XXXXXX") and renamed
 * over it by tn_out_commit, so a failure or a crash leaves the old file
 * whole; through a symlink, the link's target is replaced and the link
 * stays.  A device, a pipe, a socket and the names of a descriptor
 * (/dev/stdout, /dev/fd/N) are written directly.  A new file gets 0666
 * less the umask, a replaced one keeps its mode.  A folder is refused ("Is
 * a directory").  NULL on failure with tn_last_error() naming `path`. */
struct tn_out;
struct tn_out *tn_out_open(const char *path);
/* The stream to write to; it belongs to the tn_out. */
FILE *tn_out_file(const struct tn_out *o);
/* `path` as given, or "<stdout>" for "-": for messages. */
const char *tn_out_name(const struct tn_out *o);
/* Flushes (and with `sync`, fsyncs a file before renaming it into place),
 * reporting any write that failed, even an earlier one: TN_EIO with the
 * reason.  Releases `o` either way. */
int tn_out_commit(struct tn_out *o, bool sync);
/* Gives up: a temporary is removed and the target left as it was (what was
 * written to a device or a pipe stays written). Releases `o`; NULL is a
 * no-op. */
void tn_out_abort(struct tn_out *o);
/* `len` bytes as the whole of `path`, through tn_out_open. */
int tn_write_file(const char *path, const void *data, size_t len, bool sync);
/* Removes the temporaries that killed writers left beside `path` (through
 * its symlinks); returns how many, or a negative status. */
int tn_out_clean(const char *path);
/* For a program's main: SIGINT, SIGTERM and SIGHUP remove the temporaries
 * of the tn_out writers open at that moment, then take their default
 * action (the process dies of the signal).  A signal the program ignores
 * or handles itself is left alone.  Temporaries of a SIGKILL are found by
 * the next write to the same target and by tn_out_clean. */
void tn_out_remove_on_signals(void);
/* Flushes stdout; TN_EIO naming "<stdout>" when any write to it failed
 * (a full disk, a closed pipe): for a tool's exit status. */
int tn_stdout_flush(void);

/* ---------------------------------------------------------------- version */

const char *tn_version(void); /* "0.1.0" */

#ifdef __cplusplus
}
#endif
#endif
