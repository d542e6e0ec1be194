/*
 * dispatch/dispatch.c: key sets, the op registry, and what the generated
 * entry points call (argument errors, structured outputs).
 */
#include <config.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/dispatch.h>

#include "core/internal.h"

/* ------------------------------------------------------------- key sets */

/* read by every call: initial-exec (core/internal.h) */
static _Thread_local tn_keyset tls_included TN_TLS_IE;
static _Thread_local tn_keyset tls_excluded TN_TLS_IE;

const char *tn_dispatch_key_name(enum tn_dispatch_key key)
{
    static const char *names[TN_NUM_KEYS] = {"CPU", "CUDA", "Meta", "Autograd"};
    TN_ASSERT(key >= 0 && key < TN_NUM_KEYS);
    return names[key];
}

static inline tn_keyset keyset_of(const struct tn_tensor *t)
{
    /* device types and backend keys share their numbers (CPU 0, CUDA 1, Meta 2) */
    return TN_KEYSET(t->device.type) | (tn_keyset)t->requires_grad << TN_KEY_AUTOGRAD;
}

tn_keyset tn_tensor_keyset(const struct tn_tensor *t) { return t ? keyset_of(t) : 0; }

tn_keyset tn_dispatch_set_included(tn_keyset keys)
{
    tn_keyset old = tls_included;
    tls_included = keys;
    return old;
}

tn_keyset tn_dispatch_set_excluded(tn_keyset keys)
{
    tn_keyset old = tls_excluded;
    tls_excluded = keys;
    return old;
}

tn_keyset tn_dispatch_included(void) { return tls_included; }
tn_keyset tn_dispatch_excluded(void) { return tls_excluded; }

/* The storage-only dtype behind the last TN_KEYSET_STORAGE_ONLY mark. */
static _Thread_local enum tn_dtype tls_storage_only TN_TLS_IE;

tn_keyset tn_dispatch_keyset(const struct tn_tensor *const *tensors, int n)
{
    tn_keyset ks = 0, mark = 0;
    for (int i = 0; i < n; i++) {
        const struct tn_tensor *t = tensors[i];
        if (!t)
            continue;
        ks |= keyset_of(t);
        if (__builtin_expect(tn_dtype_is_storage_only(t->dtype), 0)) {
            tls_storage_only = t->dtype;
            mark = TN_KEYSET_STORAGE_ONLY;
        }
    }
    if (!(ks & TN_KEYSET_BACKENDS))
        ks |= TN_KEYSET(TN_KEY_CPU);
    return ((ks | tls_included) & ~tls_excluded) | mark;
}

int tn_dispatch_storage_only(const struct tn_op *op)
{
    enum tn_dtype dt = tls_storage_only;
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op->name,
                        tn_dtype_is_storage_only(dt) ? tn_dtype_info(dt)->c10_name : "?");
}

int tn_dispatch_no_kernel(const struct tn_op *op, int key)
{
    if (key < 0)
        return tn_set_error(TN_EDEVICE, "Could not run '%s': every dispatch key of its "
                            "arguments is excluded", op->qualname);
    return tn_set_error(TN_EDEVICE, "Could not run '%s' with arguments from the '%s' backend.",
                        op->qualname, tn_dispatch_key_name((enum tn_dispatch_key)key));
}

int tn_dispatch_null_arg(const char *op, const char *arg, int position)
{
    return tn_set_error(TN_EINVAL, "%s(): argument '%s' (position %d) must be Tensor, not None",
                        op, arg, position);
}

int tn_dispatch_bad_list(const char *op, const char *arg, int position)
{
    return tn_set_error(TN_EINVAL, "%s(): argument '%s' (position %d) must be a list of "
                        "optional tensors", op, arg, position);
}

/* -------------------------------------------------------------- registry */

#define TN_OP_BUCKETS 1024

static struct tn_op *buckets[TN_OP_BUCKETS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % TN_OP_BUCKETS;
}

static struct tn_op *lookup_locked(const char *qualname)
{
    for (struct tn_op *op = buckets[name_hash(qualname)]; op; op = op->next)
        if (!strcmp(op->qualname, qualname))
            return op;
    return NULL;
}

static int register_locked(struct tn_op *op)
{
    if (lookup_locked(op->qualname))
        return tn_set_error(TN_EINVAL, "%s is already registered", op->qualname);
    unsigned h = name_hash(op->qualname);
    op->next = buckets[h];
    buckets[h] = op;
    return TN_OK;
}

/* Every built-in op, NULL-terminated: the table tgen generates with the ops
 * (lib/ops/ops_gen.c), registered on first use. */
extern struct tn_op *const tn__builtin_ops[];

static void register_builtins(void)
{
    pthread_mutex_lock(&registry_lock);
    for (struct tn_op *const *op = tn__builtin_ops; *op; op++)
        TN_ASSERT(register_locked(*op) == TN_OK);
    pthread_mutex_unlock(&registry_lock);
}

int tn_op_register(struct tn_op *op)
{
    pthread_once(&builtin_once, register_builtins);
    pthread_mutex_lock(&registry_lock);
    int rc = register_locked(op);
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

const struct tn_op *tn_op_find(const char *name)
{
    pthread_once(&builtin_once, register_builtins);
    char buf[256];
    const char *q = name;
    if (!strstr(name, "::")) {
        snprintf(buf, sizeof buf, "aten::%s", name);
        q = buf;
    }
    pthread_mutex_lock(&registry_lock);
    struct tn_op *op = lookup_locked(q);
    pthread_mutex_unlock(&registry_lock);
    if (!op)
        tn_set_error(TN_EINVAL, "unknown operator '%s'", name);
    return op;
}

int tn_op_arg_index(const struct tn_op *op, const char *name)
{
    for (int i = 0; i < op->nargs; i++)
        if (!strcmp(op->args[i].name, name))
            return i;
    return -1;
}

int tn_op_call(const struct tn_op *op, struct tn_ivalue *stack, int nargs)
{
    if (nargs < 0 || nargs > op->nargs)
        return tn_set_error(TN_EINVAL, "%s takes %d arguments but %d were given", op->qualname,
                            op->nargs, nargs);
    return op->boxed(op, stack, nargs);
}

int tn_library_load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tn_set_error(TN_EIO, "%s", dlerror());
    int (*init)(void);
    *(void **)&init = dlsym(h, "tn_plugin_init");
    if (!init) {
        dlclose(h);
        return tn_set_error(TN_EFORMAT, "%s: no tn_plugin_init (not built from tgen --plugin "
                            "output?)", path);
    }
    int rc = init();
    /* never closed: its ops stay registered for the life of the process */
    return rc < 0 ? tn_error_prefix("%s", path) : TN_OK;
}

/* ------------------------------------------------- structured outputs */

/* A meta tensor has sizes and no bytes: its "data" is a pointer that
 * faults if anything reads it. */
static void *meta_alloc(size_t nbytes, int device_index, void *ctx)
{
    return (void *)(uintptr_t)TN_ALIGNMENT;
}
static void meta_free(void *ptr, int device_index, void *ctx) {}

__attribute__((constructor)) static void register_meta_allocator(void)
{
    static const struct tn_allocator a = {meta_alloc, meta_free, NULL};
    tn_register_allocator(TN_DEVICE_META, &a);
}

struct tn_tensor *tn_dispatch_meta_alloc(const struct tn_meta *m, struct tn_device device)
{
    if (m->dtype == TN_DTYPE_UNSET)
        return tn_empty_on(m->sizes, m->ndim, m->dtype, device);
    return tn__tensor_new(m->sizes, m->ndim, m->dtype, device);
}

/* c10::canCast: no complex to real, float to integer, or number to bool. */
static bool can_cast(enum tn_dtype from, enum tn_dtype to)
{
    if (tn_dtype_is_complex(from) && !tn_dtype_is_complex(to))
        return false;
    if (tn_dtype_is_floating(from) && tn_dtype_is_integral(to, true))
        return false;
    if (from != TN_BOOL && to == TN_BOOL)
        return false;
    return true;
}

static bool same_shape(const struct tn_meta *m, const struct tn_tensor *t)
{
    if (m->ndim != t->ndim)
        return false;
    for (int i = 0; i < m->ndim; i++)
        if (m->sizes[i] != t->sizes[i])
            return false;
    return true;
}

/* Gives out new storage of m's shape (PyTorch resizes out= tensors). */
static int resize_out(struct tn_tensor *out, const struct tn_meta *m)
{
    int64_t numel;
    if (tn__check_sizes(m->sizes, m->ndim, &numel) < 0)
        return tn_last_status();
    struct tn_storage *st = tn_storage_new((size_t)numel * tn_dtype_size(out->dtype), out->device);
    if (!st)
        return tn_last_status();
    tn_storage_release(out->storage);
    out->storage = st;
    out->offset = 0;
    out->ndim = m->ndim;
    memcpy(out->sizes, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    tn_contiguous_strides(out->sizes, out->ndim, out->strides);
    return TN_OK;
}

int tn_dispatch_prepare_out(const struct tn_meta *m, struct tn_tensor *out, bool inplace,
                            struct tn_tensor **target)
{
    *target = out;
    if (!can_cast(m->dtype, out->dtype))
        return tn_set_error(TN_EDTYPE, "result type %s can't be cast to the desired output type %s",
                            tn_dtype_info(m->dtype)->c10_name, tn_dtype_info(out->dtype)->c10_name);
    if (!same_shape(m, out)) {
        if (inplace) {
            char a[256], b[256];
            return tn_set_error(TN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s",
                                tn_shape_format(out->sizes, out->ndim, a, sizeof a),
                                tn_shape_format(m->sizes, m->ndim, b, sizeof b));
        }
        int rc = resize_out(out, m);
        if (rc < 0)
            return rc;
    }
    if (out->dtype != m->dtype && out->device.type != TN_DEVICE_META) {
        *target = tn_dispatch_meta_alloc(m, out->device);
        if (!*target)
            return tn_last_status();
    }
    out->storage->version++;
    return TN_OK;
}

int tn_dispatch_finish_out(int rc, struct tn_tensor *out, struct tn_tensor *target)
{
    if (target != out) {
        if (rc >= 0)
            rc = tn_copy_(out, target);
        tn_release(target);
    }
    return rc < 0 ? rc : TN_OK;
}
