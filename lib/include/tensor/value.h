/*
 * tensor/value.h: nested Python values (dict, OrderedDict, list, tuple, int,
 * float, str, bool, None, tensor) as checkpoints hold them and state_dicts
 * are built of.  Part of the core module (lib/core/value.c), so that nn and
 * optim build state_dicts and io reads and writes them without either
 * depending on the other (DESIGN.md's layers); tensor/io.h includes it.
 * Ownership and errors follow tensor/core.h.
 */
#ifndef TENSOR_VALUE_H
#define TENSOR_VALUE_H

#include <tensor/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A nested Python value as checkpoints hold it.  GLOBAL and STORAGE appear
 * only inside the pickle reader and writer, never in tn_load's result. */
enum tn_value_kind {
    TN_VALUE_NONE,
    TN_VALUE_BOOL,
    TN_VALUE_INT,
    TN_VALUE_FLOAT,
    TN_VALUE_STR,
    TN_VALUE_TUPLE,
    TN_VALUE_LIST,
    TN_VALUE_DICT,  /* dict, keys any hashable value */
    TN_VALUE_ODICT, /* collections.OrderedDict, with an optional attribute dict */
    TN_VALUE_TENSOR,/* a tensor; an nn.Parameter has TN_TENSOR_PARAMETER in its flags */
    TN_VALUE_GLOBAL,
    TN_VALUE_STORAGE,
    /* A value torch.load(weights_only=True) allows but tensorkit cannot
     * rebuild (torch.device, set, bytes, complex, a sparse or quantized
     * tensor): str holds its text as Python shows it ("device(type='cpu')",
     * "{1, 2}", "b'ab'") or, for the rest, the call the pickle makes
     * ("torch._utils._rebuild_sparse_tensor(...)").  Shown and compared,
     * never written back. */
    TN_VALUE_OPAQUE
};

/* Values are reference counted; a node shared by two parents is one Python
 * object (the pickle writer memoizes it, as pickle does, so a loaded and
 * re-saved checkpoint keeps its bytes). */
struct tn_value {
    long refcount;
    enum tn_value_kind kind;
    /* private to the library, in what was padding: a container's nesting height
     * and holder count as the unpickler keeps them, and how the value's
     * memory was allocated; 0 in what the constructors make */
    uint16_t priv_height;
    uint8_t priv_holders;
    uint8_t priv_mem;
    union {
        bool b;
        int64_t i;
        double f;
        struct { char *s; size_t len; } str;                 /* STR, GLOBAL ("module.name"), OPAQUE */
        struct { struct tn_value **items; size_t n, cap; } seq; /* TUPLE, LIST */
        struct {
            struct tn_value **keys, **vals;
            size_t n, cap;
            struct tn_value *attrs; /* ODICT only: a DICT set by pickle BUILD, or NULL */
            size_t *index;          /* private: the library's key lookup table */
            size_t index_cap;
        } dict;
        struct tn_tensor *tensor;                             /* owned reference */
        struct {
            struct tn_storage *storage;
            enum tn_dtype dtype;
            bool untyped;
            const char *quantized; /* "quint8", ... for a quantized class, else NULL */
        } storage;
    } v;
};

struct tn_value *tn_value_none(void);
struct tn_value *tn_value_bool(bool b);
struct tn_value *tn_value_int(int64_t i);
struct tn_value *tn_value_float(double f);
struct tn_value *tn_value_str(const char *s);
struct tn_value *tn_value_str_n(const char *s, size_t len);
struct tn_value *tn_value_tuple(void);
struct tn_value *tn_value_list(void);
struct tn_value *tn_value_dict(void);
struct tn_value *tn_value_odict(void);
/* Takes its own reference to t. */
struct tn_value *tn_value_tensor(struct tn_tensor *t);
struct tn_value *tn_value_retain(struct tn_value *v); /* returns v */
void tn_value_release(struct tn_value *v);            /* NULL is fine */

/* Appends `item` to a TUPLE or LIST, taking over the caller's reference to
 * it (also on failure).  Returns 0 or TN_ENOMEM. */
int tn_value_append(struct tn_value *seq, struct tn_value *item);
/* d[key] = val for a DICT or ODICT (an equal key keeps its place), taking
 * over both references (also on failure).  Returns 0 or an error. */
int tn_value_set(struct tn_value *d, struct tn_value *key, struct tn_value *val);
/* d[key] for a string key, borrowed; NULL when absent. */
struct tn_value *tn_value_get(const struct tn_value *d, const char *key);
/* Python's == for keys (None, bool, int, float, str, tuples of those);
 * tensors compare by identity. */
bool tn_value_key_equal(const struct tn_value *a, const struct tn_value *b);
/* "dict", "OrderedDict", "Tensor", ...: Python's type name. */
const char *tn_value_kind_name(enum tn_value_kind kind);

/* Visits every tensor in a nested value in order, with its key path
 * ("model.layers.0.weight": dict keys and sequence indices joined by dots).
 * Stops and returns fn's value when it is non-zero. */
typedef int (*tn_value_tensor_fn)(const char *path, struct tn_tensor *t, void *ctx);
int tn_value_walk_tensors(const struct tn_value *v, tn_value_tensor_fn fn, void *ctx);
/* The same over every leaf: tensors, scalars, strings, globals and empty
 * containers (a non-empty container is gone through, not visited; an
 * OrderedDict's attributes are not visited). */
typedef int (*tn_value_leaf_fn)(const char *path, const struct tn_value *v, void *ctx);
int tn_value_walk(const struct tn_value *v, tn_value_leaf_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
