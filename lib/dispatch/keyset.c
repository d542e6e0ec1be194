/*
 * dispatch/keyset.c: the dispatch key sets. A call's key set is the union of
 * its tensor arguments' keys, plus this thread's included keys, less its
 * excluded ones (no-grad mode excludes Autograd); the highest key runs.
 *
 * Thread-locals (DESIGN.md, Threads): the included and excluded sets, which
 * are the thread's dispatch state as in PyTorch's LocalDispatchKeySet, and
 * the storage-only dtype that tn_dispatch_keyset last met, kept only so the
 * error that follows it (tn_dispatch_storage_only) can name the dtype
 * without the keyset fast path carrying it.
 */
#include <config.h>

#include <tensor/dispatch.h>

#include "core/internal.h"

/* The include and exclude sets (grad mode is Autograd in tls_excluded):
 * per thread, as in PyTorch, so no_grad on one thread leaves the others
 * recording. Read by every call: initial-exec (core/internal.h). */
static _Thread_local tn_keyset tls_included TN_TLS_IE;
static _Thread_local tn_keyset tls_excluded TN_TLS_IE;

/* Contract in tensor/dispatch.h: a static name; key out of range is a bug. */
const char *tn_dispatch_key_name(enum tn_dispatch_key key)
{
    static const char *names[TN_NUM_KEYS] = {"CPU", "CUDA", "Meta", "Autograd"};
    TN_ASSERT(key >= 0 && key < TN_NUM_KEYS);
    return names[key];
}

/* t's own keys: its device's backend, and Autograd when it requires grad. */
static inline tn_keyset keyset_of(const struct tn_tensor *t)
{
    /* device types and backend keys share their numbers (CPU 0, CUDA 1, Meta 2) */
    return TN_KEYSET(t->device.type) | (tn_keyset)t->requires_grad << TN_KEY_AUTOGRAD;
}

tn_keyset tn_tensor_keyset(const struct tn_tensor *t) { return t ? keyset_of(t) : 0; }

/* Contract in tensor/dispatch.h: this thread's included keys; the old set. */
tn_keyset tn_dispatch_set_included(tn_keyset keys)
{
    tn_keyset old = tls_included;
    tls_included = keys;
    return old;
}

/* Contract in tensor/dispatch.h: this thread's excluded keys; the old set. */
tn_keyset tn_dispatch_set_excluded(tn_keyset keys)
{
    tn_keyset old = tls_excluded;
    tls_excluded = keys;
    return old;
}

tn_keyset tn_dispatch_included(void) { return tls_included; }
tn_keyset tn_dispatch_excluded(void) { return tls_excluded; }

/* The storage-only dtype behind the last TN_KEYSET_STORAGE_ONLY mark: per
 * thread, as the error it feeds (tn_dispatch_storage_only) follows the
 * mark on the same thread. */
static _Thread_local enum tn_dtype tls_storage_only TN_TLS_IE;

/* Contract in tensor/dispatch.h: the call's key set, with the
 * TN_KEYSET_STORAGE_ONLY mark (and tls_storage_only set) when a tensor
 * has a storage-only dtype. */
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

/* Contract in tensor/dispatch.h: TN_EDTYPE naming the dtype this thread's
 * last tn_dispatch_keyset marked. */
int tn_dispatch_storage_only(const struct tn_op *op)
{
    enum tn_dtype dt = tls_storage_only;
    return tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", op->name,
                        tn_dtype_is_storage_only(dt) ? tn_dtype_info(dt)->c10_name : "?");
}
