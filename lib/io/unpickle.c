/*
 * io/unpickle.c: the restricted pickle machine behind tn_load.  It accepts
 * exactly the opcodes and globals torch.load(weights_only=True) accepts
 * (PyTorch 1.13's or the current allowlist), type-checks every container
 * opcode, caps the stack, memo and nesting, and never runs code: globals
 * are names, and only the rebuild functions tensorkit knows are applied.
 */
#include "io/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK (1u << 20)
#define MAX_MEMO (1u << 22)
#define MAX_MARKS 1000u
#define MAX_DEPTH 1000
/* Node visits allowed for the cycle checks of one load. */
#define MAX_VISITS 50000000L

static const struct {
    const char *name;
    bool torch1, current;
} allowlist[] = {
#define X(n, a, b) {n, a, b},
#include "io/allowlist.inc"
#undef X
};

/* Whether weights_only of that allowlist's PyTorch lets a pickle name global
 * module.name (the table of allowlist.inc, one column per PyTorch version). */
bool tn__pickle_global_allowed(const char *module, const char *name, enum tn_ckpt_allowlist allow)
{
    size_t ml = strlen(module);
    for (size_t i = 0; i < sizeof allowlist / sizeof allowlist[0]; i++) {
        const char *n = allowlist[i].name;
        if (!strncmp(n, module, ml) && n[ml] == '.' && !strcmp(n + ml + 1, name))
            return allow == TN_ALLOW_TORCH1 ? allowlist[i].torch1 : allowlist[i].current;
    }
    return false;
}

/* The dtype of a typed storage class name ("FloatStorage"; len bytes, not
 * NUL-terminated) from the dtype table, or TN_DTYPE_UNSET. */
enum tn_dtype tn__storage_class_dtype(const char *name, size_t len)
{
    for (int d = 0; d < TN_NUM_ALL_DTYPES; d++) {
        const char *st = tn_dtype_info((enum tn_dtype)d)->storage_class;
        if (st && len == strlen(st) && !memcmp(name, st, len))
            return (enum tn_dtype)d;
    }
    return TN_DTYPE_UNSET;
}

/* What a DCP .metadata holds: the dataclasses PyTorch 2.x pickles there
 * (checked against torch 2.15's files) and the few callables their
 * reductions name. */
const char *const tn__dcp_globals[] = {
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "torch.Size",
    "torch.serialization._get_layout",
    "pathlib.PosixPath",
    "pathlib._local.PosixPath",
};
const size_t tn__dcp_nglobals = sizeof tn__dcp_globals / sizeof tn__dcp_globals[0];

/* Whether a DCP .metadata may name module.name: one of tn__dcp_globals, or a
 * dtype under torch as TensorProperties names it. */
bool tn__dcp_global_allowed(const char *module, const char *name)
{
    size_t ml = strlen(module);
    for (size_t i = 0; i < tn__dcp_nglobals; i++)
        if (!strncmp(tn__dcp_globals[i], module, ml) && tn__dcp_globals[i][ml] == '.' &&
            !strcmp(tn__dcp_globals[i] + ml + 1, name))
            return true;
    /* a dtype, as TensorProperties names it (torch.float32) */
    if (!strcmp(module, "torch") && !strchr(name, '.')) {
        enum tn_dtype dt = tn_dtype_from_name(name);
        return dt != TN_DTYPE_UNSET && !strcmp(tn_dtype_name(dt), name);
    }
    return false;
}

struct machine {
    const char *label;
    enum tn_ckpt_allowlist allow;
    const struct tn_pickle_reader_hooks *hooks;
    struct tn_value **stack;
    size_t n, cap;
    size_t marks[MAX_MARKS];
    size_t nmarks;
    struct tn_value **memo;
    size_t memocap;
    long visits;
    size_t pos; /* the current opcode's offset, for messages */
    int opcode; /* the current opcode, named in messages */
    int proto; /* of the PROTO opcode: Py2 names are mapped below 3, as in CPython */
    bool dcp;  /* a DCP .metadata (hooks->dcp) */
    size_t memo_count; /* memo entries set: MEMOIZE's index, as len(memo) in CPython */
    bool walk; /* the nesting checks walk subtrees (see "Nesting" below) */
    /* NEWOBJ's strings, shared by the instances (strs are never changed):
     * "__class__", and the last class's name */
    struct tn_value *class_key, *class_name;
};

/* Sets an error naming the stream, the opcode and its byte offset with fmt's
 * reason (PyTorch's words where it has them) and returns st. */
static int fail(struct machine *m, enum tn_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct machine *m, enum tn_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tn_set_error(st, "%s: %s at byte %zu: %s", m->label,
                        tn__pickle_op_name(m->opcode), m->pos, msg);
}

/* Pushes v, taking over its reference (released on failure); NULL v passes
 * its constructor's error on. Past MAX_STACK items: TN_ENOMEM. 0 or an error. */
static int push(struct machine *m, struct tn_value *v)
{
    if (!v)
        return tn_last_status();
    if (m->n == m->cap) {
        if (m->cap >= MAX_STACK) {
            tn_value_release(v);
            return fail(m, TN_ENOMEM, "the stack holds more than %u items", MAX_STACK);
        }
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct tn_value **s = realloc(m->stack, cap * sizeof *s);
        if (!s) {
            tn_value_release(v);
            return fail(m, TN_ENOMEM, "out of memory");
        }
        m->stack = s;
        m->cap = cap;
    }
    m->stack[m->n++] = v;
    return 0;
}

/* Pops the topmost MARK into *base, the stack index of the first item
 * above it.  0, or TN_EFORMAT ("could not find MARK") on a stream that
 * pops a mark it never pushed. */
static int pop_mark(struct machine *m, size_t *base)
{
    if (!m->nmarks)
        return fail(m, TN_EFORMAT, "could not find MARK");
    *base = m->marks[--m->nmarks];
    return 0;
}

/* 0 when k items sit above the topmost MARK, else PyTorch's underflow error. */
static int need(struct machine *m, size_t k)
{
    size_t floor = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->n < floor + k)
        return fail(m, TN_EFORMAT, "the stack is empty (unpickling stack underflow)");
    return 0;
}

/* The stack index of the first item of the opcode's slice (its column in
 * the opcode table, io/internal.h) into *base: the MARK's, which is popped,
 * or the top k items', with k + 1 items above the floor when a container
 * sits below them.  0, or TN_EFORMAT as pop_mark and need. */
static int take(struct machine *m, int code, size_t *base)
{
    struct tn__pickle_slice sl = tn__pickle_op_slice(code);
    if (sl.items == TN_PICKLE_SLICE_MARK)
        return pop_mark(m, base);
    if (need(m, (size_t)sl.items + sl.into) < 0)
        return tn_last_status();
    *base = m->n - (size_t)sl.items;
    return 0;
}

/* Whether v can hold other values (list, tuple, dict, odict): what the cycle
 * and depth checks walk. */
static bool is_container(const struct tn_value *v)
{
    return v->kind == TN_VALUE_LIST || v->kind == TN_VALUE_TUPLE || v->kind == TN_VALUE_DICT ||
           v->kind == TN_VALUE_ODICT;
}

/* Nesting: no value may hold itself, and none may nest more than MAX_DEPTH
 * deep.  Python's pickler fills a container before it puts it into its
 * parent, so in a well-formed stream a container that something holds is
 * never changed again.  While that holds, each container carries its exact
 * height (priv_height, 0 meaning 1: an empty one), set when it is made and
 * raised as children go in, and its holder count (priv_holders, saturating);
 * a child can then close a cycle only by being the parent itself, and no
 * ancestor's height can go stale: every insert is O(1).  The first change
 * to a container that something else holds (possible only through the
 * memo) makes the load walk: from then on each insert walks the child's
 * subtree (depth_of) under the visit budget, as a hostile stream deserves.
 * Heights are upper bounds where a dict key was set twice. */

/* The height of v: 1 for a leaf or an empty container. */
static unsigned height(const struct tn_value *v)
{
    return is_container(v) && v->priv_height ? v->priv_height : 1;
}

/* Raises parent's height to hold child (capped past the limit). */
static void raise_height(struct tn_value *parent, const struct tn_value *child)
{
    unsigned h = height(child) + 1;
    if (h > MAX_DEPTH + 1)
        h = MAX_DEPTH + 1;
    if (h > height(parent))
        parent->priv_height = (uint16_t)h;
}

/* Records that `parent` holds `child` (called as it goes in; a failed
 * insert leaves counts too high, which is safe): the child's holder count
 * and the parent's height. */
static void adopt(struct tn_value *parent, struct tn_value *child)
{
    if (!is_container(child))
        return;
    if (child->priv_holders < UINT8_MAX)
        child->priv_holders++;
    raise_height(parent, child);
}

/* adopt() for each key and value of dict `src` that `parent` now holds. */
static void adopt_items(struct tn_value *parent, const struct tn_value *src)
{
    for (size_t i = 0; i < src->v.dict.n; i++) {
        adopt(parent, src->v.dict.keys[i]);
        adopt(parent, src->v.dict.vals[i]);
    }
}

/* Before container c changes: more than `holders` holders (0, or 1 for an
 * OrderedDict's attribute dict, held by its object) make the load walk. */
static void changing(struct machine *m, const struct tn_value *c, unsigned holders)
{
    if (c->priv_holders > holders)
        m->walk = true;
}

/* Depth of v (1 for a leaf); -1 when `target` is inside v (a cycle) or the
 * visit budget is spent (-2). */
static int depth_of(struct machine *m, const struct tn_value *v, const struct tn_value *target,
                    int level)
{
    if (v == target)
        return -1;
    if (!is_container(v))
        return 1;
    if (--m->visits < 0)
        return -2;
    if (level > MAX_DEPTH)
        return MAX_DEPTH + 1;
    int best = 0;
    size_t n = v->kind == TN_VALUE_LIST || v->kind == TN_VALUE_TUPLE ? v->v.seq.n : v->v.dict.n;
    for (size_t i = 0; i < n; i++) {
        const struct tn_value *c = v->kind == TN_VALUE_LIST || v->kind == TN_VALUE_TUPLE
                                       ? v->v.seq.items[i]
                                       : v->v.dict.vals[i];
        int d = depth_of(m, c, target, level + 1);
        if (d < 0 || d > MAX_DEPTH)
            return d;
        if (d > best)
            best = d;
    }
    /* keys are containers only in a DCP .metadata (instances as keys) */
    for (size_t i = 0; (v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT) && i < n; i++) {
        if (!is_container(v->v.dict.keys[i]))
            continue;
        int d = depth_of(m, v->v.dict.keys[i], target, level + 1);
        if (d < 0 || d > MAX_DEPTH)
            return d;
        if (d > best)
            best = d;
    }
    if ((v->kind == TN_VALUE_DICT || v->kind == TN_VALUE_ODICT) && v->v.dict.attrs) {
        int d = depth_of(m, v->v.dict.attrs, target, level + 1);
        if (d < 0 || d > MAX_DEPTH)
            return d;
        if (d > best)
            best = d;
    }
    return best + 1;
}

/* May `child` go into `parent` without a cycle or too deep a nesting? */
static int check_insert(struct machine *m, const struct tn_value *parent,
                        const struct tn_value *child)
{
    if (!is_container(child))
        return 0;
    int d = m->walk ? depth_of(m, child, parent, 0) : child == parent ? -1 : (int)height(child);
    if (d == -1)
        return fail(m, TN_EFORMAT, "a container that holds itself is not supported");
    if (d == -2)
        return fail(m, TN_ENOMEM, "the pickle is too complex to check (more than %ld visits)",
                    MAX_VISITS);
    if (d > MAX_DEPTH - 1)
        return fail(m, TN_EFORMAT, "values nested more than %d deep", MAX_DEPTH);
    return 0;
}

/* Whether Python could hash k as a dict key (tuples only of hashable items):
 * an unhashable key is refused as Python would. */
static bool hashable(const struct tn_value *k)
{
    switch (k->kind) {
    case TN_VALUE_NONE: case TN_VALUE_BOOL: case TN_VALUE_INT: case TN_VALUE_FLOAT:
    case TN_VALUE_STR: case TN_VALUE_TENSOR:
        return true;
    case TN_VALUE_TUPLE:
        for (size_t i = 0; i < k->v.seq.n; i++)
            if (!hashable(k->v.seq.items[i]))
                return false;
        return true;
    default:
        return false;
    }
}

/* Strict UTF-8 (what Python's decoder accepts: no surrogates, no overlong). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xc2 && c <= 0xdf) { k = 1; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { k = 2; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { k = 3; cp = c & 0x07; }
        else return false;
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += k + 1;
    }
    return true;
}

/* "<class 'dict'>": how Python prints a value's type in PyTorch's messages. */
static const char *pytype(enum tn_value_kind k)
{
    switch (k) {
    case TN_VALUE_ODICT: return "<class 'collections.OrderedDict'>";
    case TN_VALUE_TENSOR: return "<class 'torch.Tensor'>";
    case TN_VALUE_NONE: return "<class 'NoneType'>";
    case TN_VALUE_BOOL: return "<class 'bool'>";
    case TN_VALUE_INT: return "<class 'int'>";
    case TN_VALUE_FLOAT: return "<class 'float'>";
    case TN_VALUE_STR: return "<class 'str'>";
    case TN_VALUE_TUPLE: return "<class 'tuple'>";
    case TN_VALUE_LIST: return "<class 'list'>";
    case TN_VALUE_DICT: return "<class 'dict'>";
    case TN_VALUE_GLOBAL: return "<class 'type'>";
    default: return "<class 'torch.storage.TypedStorage'>";
    }
}

/* Whether g is the global named full ("torch._utils._rebuild_tensor_v2"). */
static bool global_is(const struct tn_value *g, const char *full)
{
    return g->kind == TN_VALUE_GLOBAL && !strcmp(g->v.str.s, full);
}

/* Whether v is an empty dict or OrderedDict (a Parameter's backward hooks
 * must be). */
static bool empty_odict(const struct tn_value *v)
{
    return (v->kind == TN_VALUE_ODICT || v->kind == TN_VALUE_DICT) && v->v.dict.n == 0;
}

/* Reads a tuple of non-negative ints into out (at most TN_MAX_DIMS). */
static int int_tuple(struct machine *m, const struct tn_value *t, int64_t *out, int *n,
                     const char *what)
{
    if (t->kind != TN_VALUE_TUPLE)
        return fail(m, TN_EFORMAT, "_rebuild_tensor_v2: %s must be a tuple, not %s", what,
                    tn_value_kind_name(t->kind));
    if (t->v.seq.n > TN_MAX_DIMS)
        return fail(m, TN_EFORMAT, "a tensor with %zu dimensions (tensorkit allows %d)",
                    t->v.seq.n, TN_MAX_DIMS);
    for (size_t i = 0; i < t->v.seq.n; i++) {
        const struct tn_value *x = t->v.seq.items[i];
        if (x->kind != TN_VALUE_INT || x->v.i < 0)
            return fail(m, TN_EFORMAT, "_rebuild_tensor_v2: %s[%zu] is not a non-negative int",
                        what, i);
        out[i] = x->v.i;
    }
    *n = (int)t->v.seq.n;
    return 0;
}

/* The dtype a _rebuild_tensor_v3 argument names ("torch.float8_e4m3fn"). */
static enum tn_dtype dtype_global(const struct tn_value *g)
{
    if (g->kind != TN_VALUE_GLOBAL || strncmp(g->v.str.s, "torch.", 6) ||
        strchr(g->v.str.s + 6, '.'))
        return TN_DTYPE_UNSET;
    enum tn_dtype dt = tn_dtype_from_name(g->v.str.s + 6);
    /* aliases such as torch.float are attributes, not what PyTorch pickles */
    if (dt != TN_DTYPE_UNSET && strcmp(tn_dtype_name(dt), g->v.str.s + 6))
        dt = TN_DTYPE_UNSET;
    return dt;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks
 * [, metadata]), or with v3 (PyTorch 2.x's form for dtypes without a
 * storage class) an untyped storage and the dtype before the metadata. */
static struct tn_value *rebuild_tensor(struct machine *m, const struct tn_value *args, bool v3)
{
    size_t n = args->v.seq.n;
    struct tn_value **a = args->v.seq.items;
    if (n < 6u + v3 || n > 7u + v3) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v%d takes %d or %d arguments, not %zu", 2 + v3,
             6 + v3, 7 + v3, n);
        return NULL;
    }
    if (a[0]->kind != TN_VALUE_STORAGE) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: argument 1 must be a storage, not %s",
             tn_value_kind_name(a[0]->kind));
        return NULL;
    }
    if (a[0]->v.storage.quantized) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: a %s storage outside _rebuild_qtensor",
             a[0]->v.storage.quantized);
        return NULL;
    }
    if (a[1]->kind != TN_VALUE_INT || a[1]->v.i < 0) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: storage_offset must be a non-negative int");
        return NULL;
    }
    int64_t sizes[TN_MAX_DIMS], strides[TN_MAX_DIMS];
    int nd, ns;
    if (int_tuple(m, a[2], sizes, &nd, "size") < 0 || int_tuple(m, a[3], strides, &ns, "stride") < 0)
        return NULL;
    if (nd != ns) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: size has %d dimensions but stride has %d", nd, ns);
        return NULL;
    }
    if (a[4]->kind != TN_VALUE_BOOL) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: requires_grad must be a bool");
        return NULL;
    }
    if (!empty_odict(a[5]) && a[5]->kind != TN_VALUE_NONE) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v2: backward hooks are not supported");
        return NULL;
    }
    enum tn_dtype dt = a[0]->v.storage.dtype;
    if (v3) {
        dt = dtype_global(a[6]);
        if (dt == TN_DTYPE_UNSET) {
            fail(m, TN_EDTYPE, "_rebuild_tensor_v3: dtype %s is not supported by tensorkit",
                 a[6]->kind == TN_VALUE_GLOBAL ? a[6]->v.str.s : tn_value_kind_name(a[6]->kind));
            return NULL;
        }
        if (!a[0]->v.storage.untyped) {
            fail(m, TN_EFORMAT, "_rebuild_tensor_v3: argument 1 must be an untyped storage");
            return NULL;
        }
    }
    if (n == 7u + v3 && !(empty_odict(a[6 + v3]) || a[6 + v3]->kind == TN_VALUE_NONE)) {
        fail(m, TN_EFORMAT, "_rebuild_tensor_v%d: tensor metadata (conj/neg bits) is not "
             "supported", 2 + v3);
        return NULL;
    }
    struct tn_storage *s = a[0]->v.storage.storage;
    struct tn_tensor *t = tn_tensor_from_storage(s, a[1]->v.i, sizes, nd, strides, dt);
    if (!t) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", tn_last_error());
        fail(m, TN_EFORMAT, "%s", msg);
        return NULL;
    }
    t->requires_grad = a[4]->v.b;
    struct tn_value *v = tn_value_tensor(t);
    tn_release(t);
    return v;
}

/* torch._utils._rebuild_parameter(data, requires_grad, hooks[, state]): a
 * Parameter over data's tensor (a new reference), its hooks and state
 * required empty. NULL with an error. */
static struct tn_value *rebuild_parameter(struct machine *m, const struct tn_value *args,
                                          bool with_state)
{
    size_t n = args->v.seq.n;
    struct tn_value **a = args->v.seq.items;
    if (n != (with_state ? 4u : 3u) || a[0]->kind != TN_VALUE_TENSOR ||
        a[1]->kind != TN_VALUE_BOOL) {
        fail(m, TN_EFORMAT, "_rebuild_parameter: expected (tensor, requires_grad, hooks)");
        return NULL;
    }
    if (!empty_odict(a[2]) || (with_state && !empty_odict(a[3]) && a[3]->kind != TN_VALUE_NONE)) {
        fail(m, TN_EFORMAT, "_rebuild_parameter: hooks or parameter state are not supported");
        return NULL;
    }
    struct tn_tensor *d = a[0]->v.tensor;
    struct tn_tensor *t = tn_tensor_from_storage(d->storage, d->offset, d->sizes, d->ndim, d->strides,
                                                 d->dtype);
    if (!t)
        return NULL;
    t->requires_grad = a[1]->v.b;
    t->flags |= TN_TENSOR_PARAMETER;
    struct tn_value *v = tn_value_tensor(t);
    tn_release(t);
    return v;
}

/* Python's repr of a value, at most about 1,000 bytes, for the text of
 * an opaque value. */
static void repr(struct tn__bytes *b, const struct tn_value *v, int depth)
{
    if (b->len > 1000 || depth > 20) {
        tn__bytes_printf(b, "...");
        return;
    }
    switch (v->kind) {
    case TN_VALUE_NONE: tn__bytes_printf(b, "None"); break;
    case TN_VALUE_BOOL: tn__bytes_printf(b, v->v.b ? "True" : "False"); break;
    case TN_VALUE_INT: tn__bytes_printf(b, "%lld", (long long)v->v.i); break;
    case TN_VALUE_FLOAT: {
        char t[40];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v->v.f);
            if (strtod(t, NULL) == v->v.f)
                break;
        }
        tn__bytes_printf(b, "%s%s", t, strpbrk(t, ".eEni") ? "" : ".0");
        break;
    }
    case TN_VALUE_STR:
        tn__bytes_byte(b, '\'');
        for (size_t i = 0; i < v->v.str.len; i++) {
            unsigned char c = (unsigned char)v->v.str.s[i];
            if (c == '\'' || c == '\\')
                tn__bytes_printf(b, "\\%c", c);
            else if (c < 0x20 || c == 0x7f)
                tn__bytes_printf(b, "\\x%02x", c);
            else
                tn__bytes_byte(b, c);
        }
        tn__bytes_byte(b, '\'');
        break;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        tn__bytes_byte(b, v->kind == TN_VALUE_TUPLE ? '(' : '[');
        for (size_t i = 0; i < v->v.seq.n; i++) {
            if (i)
                tn__bytes_printf(b, ", ");
            repr(b, v->v.seq.items[i], depth + 1);
        }
        if (v->kind == TN_VALUE_TUPLE && v->v.seq.n == 1)
            tn__bytes_byte(b, ',');
        tn__bytes_byte(b, v->kind == TN_VALUE_TUPLE ? ')' : ']');
        break;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        tn__bytes_byte(b, '{');
        for (size_t i = 0; i < v->v.dict.n; i++) {
            if (i)
                tn__bytes_printf(b, ", ");
            repr(b, v->v.dict.keys[i], depth + 1);
            tn__bytes_printf(b, ": ");
            repr(b, v->v.dict.vals[i], depth + 1);
        }
        tn__bytes_byte(b, '}');
        break;
    case TN_VALUE_TENSOR: {
        char shape[256];
        tn__bytes_printf(b, "tensor(%s %s)", tn_dtype_name(v->v.tensor->dtype),
                          tn_shape_format(v->v.tensor->sizes, v->v.tensor->ndim, shape, sizeof shape));
        break;
    }
    case TN_VALUE_GLOBAL:
    case TN_VALUE_OPAQUE: tn__bytes_put(b, v->v.str.s, v->v.str.len); break;
    default: tn__bytes_printf(b, "<%s>", tn_value_kind_name(v->kind)); break;
    }
}

/* bytes as Python shows them, from the latin-1 str that protocol 2 pickles
 * them as (each code point below 256, UTF-8 encoded). */
static void repr_latin1(struct tn__bytes *b, const struct tn_value *s)
{
    /* Python quotes with ' unless the bytes hold a ' and no " */
    bool sq = memchr(s->v.str.s, '\'', s->v.str.len), dq = memchr(s->v.str.s, '"', s->v.str.len);
    char q = sq && !dq ? '"' : '\'';
    tn__bytes_byte(b, 'b');
    tn__bytes_byte(b, (unsigned char)q);
    for (size_t i = 0; i < s->v.str.len; i++) {
        unsigned c = (unsigned char)s->v.str.s[i];
        if ((c & 0xe0) == 0xc0 && i + 1 < s->v.str.len)
            c = (c & 0x1f) << 6 | ((unsigned char)s->v.str.s[++i] & 0x3f);
        if (c == (unsigned char)q || c == '\\')
            tn__bytes_printf(b, "\\%c", c);
        else if (c == '\t' || c == '\n' || c == '\r')
            tn__bytes_printf(b, "\\%c", c == '\t' ? 't' : c == '\n' ? 'n' : 'r');
        else if (c < 0x20 || c >= 0x7f)
            tn__bytes_printf(b, "\\x%02x", c & 0xff);
        else
            tn__bytes_byte(b, (unsigned char)c);
    }
    tn__bytes_byte(b, (unsigned char)q);
}

/* The opaque value a call to an allowed global makes when tensorkit cannot
 * rebuild it: shown as Python shows the result where that is simple. */
static struct tn_value *opaque(const struct tn_value *fn, const struct tn_value *args)
{
    struct tn__bytes b = {0};
    size_t n = args->v.seq.n;
    const struct tn_value *a0 = n ? args->v.seq.items[0] : NULL;
    if (global_is(fn, "torch.device") && n >= 1 && a0->kind == TN_VALUE_STR) {
        const char *colon = strchr(a0->v.str.s, ':');
        tn__bytes_printf(&b, "device(type='%.*s'",
                          (int)(colon ? (size_t)(colon - a0->v.str.s) : a0->v.str.len), a0->v.str.s);
        if (colon)
            tn__bytes_printf(&b, ", index=%s", colon + 1);
        else if (n == 2 && args->v.seq.items[1]->kind == TN_VALUE_INT)
            tn__bytes_printf(&b, ", index=%lld", (long long)args->v.seq.items[1]->v.i);
        tn__bytes_byte(&b, ')');
    } else if (global_is(fn, "builtins.set") && n == 1 && a0->kind == TN_VALUE_LIST) {
        if (!a0->v.seq.n)
            tn__bytes_printf(&b, "set()");
        for (size_t i = 0; i < a0->v.seq.n; i++) {
            tn__bytes_printf(&b, i ? ", " : "{");
            repr(&b, a0->v.seq.items[i], 1);
        }
        if (a0->v.seq.n)
            tn__bytes_byte(&b, '}');
    } else if (global_is(fn, "builtins.complex") && n == 2 &&
               (a0->kind == TN_VALUE_FLOAT || a0->kind == TN_VALUE_INT) &&
               args->v.seq.items[1]->kind == TN_VALUE_FLOAT) {
        double re = a0->kind == TN_VALUE_FLOAT ? a0->v.f : (double)a0->v.i;
        double im = args->v.seq.items[1]->v.f;
        tn__bytes_printf(&b, "(%.17g%s%.17gj)", re, im < 0 || signbit(im) ? "" : "+", im);
    } else if (global_is(fn, "_codecs.encode") && n == 2 && a0->kind == TN_VALUE_STR) {
        repr_latin1(&b, a0);
    } else if (global_is(fn, "torch._utils._rebuild_qtensor") && n >= 5 &&
               a0->kind == TN_VALUE_STORAGE && a0->v.storage.quantized &&
               args->v.seq.items[2]->kind == TN_VALUE_TUPLE) {
        /* (storage, offset, size, stride, quantizer params, ...) */
        tn__bytes_printf(&b, "tensor(%s ", a0->v.storage.quantized);
        const struct tn_value *size = args->v.seq.items[2];
        for (size_t i = 0; i < size->v.seq.n; i++) {
            tn__bytes_printf(&b, i ? ", " : "[");
            repr(&b, size->v.seq.items[i], 1);
        }
        tn__bytes_printf(&b, size->v.seq.n ? "], quantizer=" : "[], quantizer=");
        repr(&b, args->v.seq.items[4], 1);
        tn__bytes_byte(&b, ')');
    } else if (global_is(fn, "builtins.bytearray") && n >= 1 &&
               (a0->kind == TN_VALUE_STR || (a0->kind == TN_VALUE_OPAQUE && a0->v.str.s[0] == 'b'))) {
        tn__bytes_printf(&b, "bytearray(");
        if (a0->kind == TN_VALUE_STR)
            repr_latin1(&b, a0);
        else /* bytes, already b'...' */
            tn__bytes_put(&b, a0->v.str.s, a0->v.str.len);
        tn__bytes_byte(&b, ')');
    } else {
        tn__bytes_printf(&b, "%s(", fn->v.str.s);
        for (size_t i = 0; i < n; i++) {
            if (i)
                tn__bytes_printf(&b, ", ");
            repr(&b, args->v.seq.items[i], 1);
        }
        tn__bytes_byte(&b, ')');
    }
    tn__bytes_byte(&b, 0);
    struct tn_value *r = b.failed ? NULL : tn_value_str((const char *)b.data);
    free(b.data);
    if (!r)
        tn_set_error(TN_ENOMEM, "out of memory");
    else
        r->kind = TN_VALUE_OPAQUE;
    return r;
}

/* A DCP instance: an ODICT whose attrs hold "__class__" (see internal.h). */
static bool dcp_object(const struct tn_value *v)
{
    return v->kind == TN_VALUE_ODICT && v->v.dict.attrs && tn_value_get(v->v.dict.attrs, "__class__");
}

/* cls.__new__(cls): only the dataclasses of torch.distributed.checkpoint. */
static int dcp_newobj(struct machine *m)
{
    if (need(m, 2) < 0)
        return tn_last_status();
    struct tn_value *args = m->stack[m->n - 1], *cls = m->stack[m->n - 2];
    if (cls->kind != TN_VALUE_GLOBAL || strncmp(cls->v.str.s, "torch.distributed.checkpoint.", 29))
        return fail(m, TN_EFORMAT, "NEWOBJ of %s: only DCP metadata classes are built",
                    cls->kind == TN_VALUE_GLOBAL ? cls->v.str.s : tn_value_kind_name(cls->kind));
    if (args->kind != TN_VALUE_TUPLE || args->v.seq.n)
        return fail(m, TN_EFORMAT, "NEWOBJ of %s: arguments are not supported", cls->v.str.s);
    if (!m->class_key && !(m->class_key = tn_value_str("__class__")))
        return tn_last_status();
    if (!m->class_name || strcmp(m->class_name->v.str.s, cls->v.str.s)) {
        tn_value_release(m->class_name);
        if (!(m->class_name = tn_value_str(cls->v.str.s)))
            return tn_last_status();
    }
    struct tn_value *o = tn_value_odict(), *a = tn_value_dict();
    if (!o || !a ||
        tn_value_set(a, tn_value_retain(m->class_key), tn_value_retain(m->class_name)) < 0) {
        tn_value_release(o);
        tn_value_release(a);
        return tn_last_status();
    }
    o->v.dict.attrs = a;
    adopt(o, a);
    m->n -= 2;
    tn_value_release(args);
    tn_value_release(cls);
    return push(m, o);
}

/* BUILD on a DCP instance: a dict state sets attributes, a tuple one
 * (TensorProperties' __setstate__) is kept as "__state__". */
static int dcp_build(struct machine *m, struct tn_value *obj, struct tn_value *state)
{
    changing(m, obj, 0);
    changing(m, obj->v.dict.attrs, 1);
    if (check_insert(m, obj, state) < 0)
        return tn_last_status();
    if (state->kind == TN_VALUE_TUPLE) {
        if (tn_value_set(obj->v.dict.attrs, tn_value_str("__state__"), state) < 0)
            return tn_last_status();
        adopt(obj->v.dict.attrs, state);
        raise_height(obj, obj->v.dict.attrs);
        m->n--;
        return 0;
    }
    if (state->kind != TN_VALUE_DICT)
        return fail(m, TN_EFORMAT, "the state of a %s must be a dict or a tuple, not %s",
                    tn_value_get(obj->v.dict.attrs, "__class__")->v.str.s,
                    tn_value_kind_name(state->kind));
    for (size_t i = 0; i < state->v.dict.n; i++)
        if (tn_value_set(obj, tn_value_retain(state->v.dict.keys[i]),
                         tn_value_retain(state->v.dict.vals[i])) < 0)
            return tn_last_status();
    adopt_items(obj, state);
    m->n--;
    tn_value_release(state);
    return 0;
}

/* The calls a DCP .metadata makes: torch.Size(tuple), _get_layout(name),
 * _MEM_FORMAT_ENCODING(int) and PosixPath(str...), kept as the tuple, the
 * name, the int and the path's text.  NULL with an error. */
static struct tn_value *dcp_reduce(struct machine *m, const struct tn_value *fn,
                                   const struct tn_value *args)
{
    const char *f = fn->v.str.s;
    size_t n = args->v.seq.n;
    struct tn_value *const *a = args->v.seq.items;
    if (!strcmp(f, "torch.Size") && n == 1 && a[0]->kind == TN_VALUE_TUPLE)
        return tn_value_retain(a[0]);
    if (!strcmp(f, "torch.serialization._get_layout") && n == 1 && a[0]->kind == TN_VALUE_STR)
        return tn_value_retain(a[0]);
    if (!strcmp(f, "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING") && n == 1 &&
        a[0]->kind == TN_VALUE_INT)
        return tn_value_retain(a[0]);
    if (!strncmp(f, "pathlib.", 8)) {
        struct tn__bytes b = {0};
        for (size_t i = 0; i < n; i++) {
            if (a[i]->kind != TN_VALUE_STR) {
                free(b.data);
                break;
            }
            if (i)
                tn__bytes_byte(&b, '/');
            tn__bytes_put(&b, a[i]->v.str.s, a[i]->v.str.len);
            if (i + 1 == n) {
                struct tn_value *r = b.failed ? NULL : tn_value_str_n((const char *)b.data, b.len);
                free(b.data);
                if (!r)
                    fail(m, TN_ENOMEM, "out of memory");
                return r;
            }
        }
    }
    fail(m, TN_EFORMAT, "%s: arguments a DCP .metadata does not give", f);
    return NULL;
}

/* REDUCE: calls only the allowlisted rebuild functions (tensors, parameters,
 * OrderedDict, dtypes and such) with their argument tuple checked; any other
 * callable is refused, never run. 0 or an error. */
static int do_reduce(struct machine *m)
{
    if (need(m, 2) < 0)
        return tn_last_status();
    struct tn_value *args = m->stack[m->n - 1], *fn = m->stack[m->n - 2];
    if (fn->kind != TN_VALUE_GLOBAL)
        return fail(m, TN_EFORMAT, "Trying to call reduce for unrecognized function %s",
                    tn_value_kind_name(fn->kind));
    if (args->kind != TN_VALUE_TUPLE)
        return fail(m, TN_EFORMAT, "REDUCE arguments must be a tuple, not %s",
                    tn_value_kind_name(args->kind));
    struct tn_value *r = NULL;
    if (m->dcp) {
        r = dcp_reduce(m, fn, args);
    } else if (global_is(fn, "collections.OrderedDict")) {
        /* OrderedDict() or OrderedDict(iterable of pairs). */
        const struct tn_value *src = args->v.seq.n == 1 ? args->v.seq.items[0] : NULL;
        if (args->v.seq.n > 1 || (src && src->kind != TN_VALUE_LIST && src->kind != TN_VALUE_TUPLE))
            return fail(m, TN_EFORMAT, "OrderedDict takes at most one list of pairs");
        r = tn_value_odict();
        for (size_t i = 0; r && src && i < src->v.seq.n; i++) {
            const struct tn_value *p = src->v.seq.items[i];
            if ((p->kind != TN_VALUE_TUPLE && p->kind != TN_VALUE_LIST) || p->v.seq.n != 2 ||
                !hashable(p->v.seq.items[0])) {
                tn_value_release(r);
                return fail(m, TN_EFORMAT, "OrderedDict: item %zu is not a (hashable key, value) "
                            "pair", i);
            }
            if (tn_value_set(r, tn_value_retain(p->v.seq.items[0]),
                             tn_value_retain(p->v.seq.items[1])) < 0) {
                tn_value_release(r);
                return tn_last_status();
            }
        }
        if (r)
            adopt_items(r, r);
    } else if (global_is(fn, "torch._utils._rebuild_tensor_v2")) {
        r = rebuild_tensor(m, args, false);
    } else if (global_is(fn, "torch._utils._rebuild_tensor_v3")) {
        r = rebuild_tensor(m, args, true);
    } else if (global_is(fn, "torch._utils._rebuild_parameter")) {
        r = rebuild_parameter(m, args, false);
    } else if (global_is(fn, "torch._utils._rebuild_parameter_with_state")) {
        r = rebuild_parameter(m, args, true);
    } else if (global_is(fn, "torch.Size")) {
        if (args->v.seq.n != 1 || args->v.seq.items[0]->kind != TN_VALUE_TUPLE)
            return fail(m, TN_EFORMAT, "torch.Size takes one tuple");
        r = tn_value_retain(args->v.seq.items[0]);
    } else {
        /* allowed (the caller checked), not rebuilt: kept as its text */
        r = opaque(fn, args);
    }
    if (!r)
        return tn_last_status();
    m->n -= 2;
    tn_value_release(args);
    tn_value_release(fn);
    return push(m, r);
}

/* BINPERSID: a ('storage', class, key, location, numel) tuple resolved
 * through the hooks' storage callback, which checks numel against the record;
 * anything else is refused. 0 or an error. */
static int do_persid(struct machine *m)
{
    if (need(m, 1) < 0)
        return tn_last_status();
    struct tn_value *pid = m->stack[m->n - 1];
    if (pid->kind != TN_VALUE_TUPLE)
        return fail(m, TN_EFORMAT, "persistent_load id must be tuple or int, but got %s",
                    tn_value_kind_name(pid->kind));
    struct tn_value **a = pid->v.seq.items;
    if (pid->v.seq.n < 1 || a[0]->kind != TN_VALUE_STR || strcmp(a[0]->v.str.s, "storage"))
        return fail(m, TN_EFORMAT, "Only persistent_load of storage is allowed");
    /* a legacy (pre-1.6) file's ids have a sixth item: a view's
     * (key, offset, size), None for a whole storage */
    bool legacy = m->hooks && m->hooks->legacy;
    if (legacy && pid->v.seq.n == 6 && a[5]->kind != TN_VALUE_NONE)
        return fail(m, TN_EFORMAT, "storage views of pre-0.4 files are not supported");
    if (pid->v.seq.n != (legacy ? 6u : 5u) || a[1]->kind != TN_VALUE_GLOBAL ||
        a[2]->kind != TN_VALUE_STR || a[3]->kind != TN_VALUE_STR || a[4]->kind != TN_VALUE_INT ||
        a[4]->v.i < 0)
        return fail(m, TN_EFORMAT, "a storage id must be ('storage', class, key, location, numel)");
    const char *cls = a[1]->v.str.s;
    enum tn_dtype dt = TN_DTYPE_UNSET;
    if (!strncmp(cls, "torch.", 6) && !strchr(cls + 6, '.'))
        dt = tn__storage_class_dtype(cls + 6, strlen(cls + 6));
    /* an untyped storage (PyTorch 2.x's form for float8, uint16, ...) counts
     * bytes; _rebuild_tensor_v3 gives its tensor the dtype */
    bool untyped = dt == TN_DTYPE_UNSET && !strcmp(cls, "torch.storage.UntypedStorage");
    if (untyped)
        dt = TN_UINT8;
    /* a quantized tensor's storage: its raw integers, for an opaque value */
    static const struct { const char *cls, *name; enum tn_dtype raw; } quant[] = {
        {"torch.QUInt8Storage", "quint8", TN_UINT8}, {"torch.QInt8Storage", "qint8", TN_INT8},
        {"torch.QInt32Storage", "qint32", TN_INT32}, {"torch.QUInt4x2Storage", "quint4x2", TN_UINT8},
        {"torch.QUInt2x4Storage", "quint2x4", TN_UINT8}};
    const char *quantized = NULL;
    for (size_t i = 0; dt == TN_DTYPE_UNSET && i < sizeof quant / sizeof quant[0]; i++)
        if (!strcmp(cls, quant[i].cls)) {
            dt = quant[i].raw;
            quantized = quant[i].name;
        }
    if (dt == TN_DTYPE_UNSET)
        return fail(m, TN_EDTYPE, "storage class %s is not supported by tensorkit", cls);
    if (!m->hooks || !m->hooks->storage)
        return fail(m, TN_EFORMAT, "a persistent id where no storages can be loaded");
    struct tn_storage *s = m->hooks->storage(a[2]->v.str.s, dt, a[4]->v.i, m->hooks->ctx);
    if (!s)
        return tn_last_status();
    struct tn_value *v = calloc(1, sizeof *v);
    if (!v) {
        tn_storage_release(s);
        return fail(m, TN_ENOMEM, "out of memory");
    }
    v->refcount = 1;
    v->kind = TN_VALUE_STORAGE;
    v->v.storage.storage = s;
    v->v.storage.dtype = dt;
    v->v.storage.untyped = untyped;
    v->v.storage.quantized = quantized;
    m->n--;
    tn_value_release(pid);
    return push(m, v);
}

/* PUT/BINPUT/MEMOIZE: memoizes the top item (a new reference) under idx, an
 * index past MAX_MEMO refused before anything is allocated. 0 or an error. */
static int memo_set(struct machine *m, int64_t idx)
{
    if (need(m, 1) < 0)
        return tn_last_status();
    if (idx < 0 || idx >= (int64_t)MAX_MEMO)
        return fail(m, TN_ENOMEM, "memo index %lld is beyond the limit of %u", (long long)idx,
                    MAX_MEMO);
    if ((size_t)idx >= m->memocap) {
        size_t cap = m->memocap ? m->memocap : 64;
        while (cap <= (size_t)idx)
            cap *= 2;
        struct tn_value **p = realloc(m->memo, cap * sizeof *p);
        if (!p)
            return fail(m, TN_ENOMEM, "out of memory");
        memset(p + m->memocap, 0, (cap - m->memocap) * sizeof *p);
        m->memo = p;
        m->memocap = cap;
    }
    if (!m->memo[idx])
        m->memo_count++;
    tn_value_release(m->memo[idx]);
    m->memo[idx] = tn_value_retain(m->stack[m->n - 1]);
    return 0;
}

/* GET/BINGET: pushes a new reference to the item under idx, or PyTorch's
 * error for an unset key. */
static int memo_get(struct machine *m, int64_t idx)
{
    if (idx < 0 || (size_t)idx >= m->memocap || !m->memo[idx])
        return fail(m, TN_EFORMAT, "memo key %lld is not set", (long long)idx);
    return push(m, tn_value_retain(m->memo[idx]));
}

/* Replaces the items from stack index base up with one tuple of them (the
 * tuple takes their references). 0 or an error. */
static int make_tuple(struct machine *m, size_t base)
{
    struct tn_value *t = tn_value_tuple();
    if (!t)
        return tn_last_status();
    for (size_t i = base; i < m->n; i++) {
        if (tn_value_append(t, m->stack[i]) < 0) {
            for (size_t j = i + 1; j < m->n; j++)
                tn_value_release(m->stack[j]);
            m->n = base;
            tn_value_release(t);
            return tn_last_status();
        }
        adopt(t, m->stack[i]);
    }
    m->n = base;
    return push(m, t);
}

/* SETITEM(S): the items from base up, in key/value pairs, set into the dict
 * just below them, each key checked hashable and each value checked not to
 * make a cycle or nest too deep. 0 or an error. */
static int do_setitems(struct machine *m, size_t base)
{
    if (base < 1 || (m->nmarks && base - 1 < m->marks[m->nmarks - 1]))
        return fail(m, TN_EFORMAT, "the stack is empty (unpickling stack underflow)");
    struct tn_value *d = m->stack[base - 1];
    if (d->kind != TN_VALUE_DICT && d->kind != TN_VALUE_ODICT)
        return fail(m, TN_EFORMAT, "Can only SETITEM for dict, collections.OrderedDict, "
                    "collections.Counter, but got %s", pytype(d->kind));
    if ((m->n - base) % 2)
        return fail(m, TN_EFORMAT, "odd number of items for SETITEMS");
    changing(m, d, 0);
    for (size_t i = base; i < m->n; i += 2) {
        if (!hashable(m->stack[i]) && !(m->dcp && dcp_object(m->stack[i])))
            return fail(m, TN_EFORMAT, "unhashable type: '%s'", tn_value_kind_name(m->stack[i]->kind));
        if (check_insert(m, d, m->stack[i]) < 0 || check_insert(m, d, m->stack[i + 1]) < 0)
            return tn_last_status();
    }
    size_t top = m->n;
    m->n = base;
    int rc = 0;
    for (size_t i = base; i < top; i += 2) {
        if (rc) {
            tn_value_release(m->stack[i]);
            tn_value_release(m->stack[i + 1]);
        } else {
            /* before the set, which may free a key equal to one d has */
            adopt(d, m->stack[i]);
            adopt(d, m->stack[i + 1]);
            rc = tn_value_set(d, m->stack[i], m->stack[i + 1]);
        }
    }
    return rc;
}

/* APPEND(S): the items from base up appended to the list just below them
 * (only a list, as PyTorch's unpickler), each checked like do_setitems'
 * values. 0 or an error. */
static int do_appends(struct machine *m, size_t base)
{
    if (base < 1 || (m->nmarks && base - 1 < m->marks[m->nmarks - 1]))
        return fail(m, TN_EFORMAT, "the stack is empty (unpickling stack underflow)");
    struct tn_value *l = m->stack[base - 1];
    if (l->kind != TN_VALUE_LIST)
        return fail(m, TN_EFORMAT, "Can only append to lists, but got %s", pytype(l->kind));
    changing(m, l, 0);
    for (size_t i = base; i < m->n; i++)
        if (check_insert(m, l, m->stack[i]) < 0)
            return tn_last_status();
    size_t top = m->n;
    m->n = base;
    int rc = 0;
    for (size_t i = base; i < top; i++) {
        if (rc)
            tn_value_release(m->stack[i]);
        else if (!(rc = tn_value_append(l, m->stack[i])))
            adopt(l, l->v.seq.items[l->v.seq.n - 1]);
    }
    return rc;
}

/* BUILD: the state only an OrderedDict (its items), a Parameter (empty) or,
 * in a DCP .metadata, one of its dataclasses may take; anything else is
 * refused. 0 or an error. */
static int do_build(struct machine *m)
{
    if (need(m, 2) < 0)
        return tn_last_status();
    struct tn_value *state = m->stack[m->n - 1], *obj = m->stack[m->n - 2];
    if (m->dcp && dcp_object(obj))
        return dcp_build(m, obj, state);
    if (obj->kind == TN_VALUE_ODICT) {
        if (state->kind != TN_VALUE_DICT)
            return fail(m, TN_EFORMAT, "OrderedDict state must be a dict, not %s",
                        tn_value_kind_name(state->kind));
        changing(m, obj, 0);
        if (obj->v.dict.attrs)
            changing(m, obj->v.dict.attrs, 1);
        if (check_insert(m, obj, state) < 0)
            return tn_last_status();
        if (obj->v.dict.attrs) {
            /* __dict__.update(state): a second BUILD adds to the first. */
            for (size_t i = 0; i < state->v.dict.n; i++)
                if (tn_value_set(obj->v.dict.attrs, tn_value_retain(state->v.dict.keys[i]),
                                 tn_value_retain(state->v.dict.vals[i])) < 0)
                    return tn_last_status();
            adopt_items(obj->v.dict.attrs, state);
            raise_height(obj, obj->v.dict.attrs);
            tn_value_release(state);
        } else {
            obj->v.dict.attrs = state;
            adopt(obj, state);
        }
        m->n--;
        return 0;
    }
    if (obj->kind == TN_VALUE_TENSOR && empty_odict(state)) {
        m->n--;
        tn_value_release(state);
        return 0;
    }
    return fail(m, TN_EFORMAT, "Can only build Tensor, parameter or dict objects, but got %s",
                pytype(obj->kind));
}

/* A new GLOBAL value naming module.name (each part already checked below
 * 256 bytes by push_global).  NULL with TN_ENOMEM set through fail. */
static struct tn_value *global_value(struct machine *m, const char *mod, const char *name)
{
    char full[512]; /* each part is below 256 bytes (push_global) */
    snprintf(full, sizeof full, "%s.%s", mod, name);
    struct tn_value *g = tn_value_str(full);
    if (!g) {
        fail(m, TN_ENOMEM, "out of memory");
        return NULL;
    }
    g->kind = TN_VALUE_GLOBAL;
    return g;
}

/* GLOBAL/STACK_GLOBAL: pushes module.name (each at most 255 bytes, no NUL) if
 * the allowlist (or the DCP list) has it, else PyTorch's "Unsupported global"
 * error. */
static int push_global(struct machine *m, const char *ms, size_t mslen, const char *ns,
                       size_t nslen)
{
    char mod[256], name[256];
    if (mslen >= sizeof mod || nslen >= sizeof name)
        return fail(m, TN_EFORMAT, "a global name longer than 255 bytes");
    memcpy(mod, ms, mslen);
    mod[mslen] = 0;
    memcpy(name, ns, nslen);
    name[nslen] = 0;
    if (memchr(ms, 0, mslen) || memchr(ns, 0, nslen))
        return fail(m, TN_EFORMAT, "a global name with a NUL byte");
    if (m->dcp) {
        if (!tn__dcp_global_allowed(mod, name))
            return fail(m, TN_EFORMAT, "Unsupported global: GLOBAL %s.%s is not a class a DCP "
                        ".metadata holds", mod, name);
        return push(m, global_value(m, mod, name));
    }
    /* The scanner's resolution and verdict (scan.c), so that tn_load
     * refuses exactly the globals `tckpt scan` flags. */
    struct tn_scan_options so = {.policy = m->allow == TN_ALLOW_TORCH1 ? TN_ALLOW_TORCH1
                                                                      : TN_ALLOW_CURRENT};
    bool refused = tn_scan_global_severity(mod, name, m->proto, &so) != 0;
    if (m->allow != TN_ALLOW_TORCH1 &&
        (!strcmp(mod, "sys") || !strcmp(mod, "os") || !strcmp(mod, "posix") ||
         !strcmp(mod, "nt")))
        return fail(m, TN_EFORMAT, "Trying to load unsupported GLOBAL %s.%s whose module %s "
                    "is blocked.", mod, name, mod);
    if (refused) {
        if (m->allow == TN_ALLOW_TORCH1)
            return fail(m, TN_EFORMAT, "Unsupported class %s.%s", mod, name);
        return fail(m, TN_EFORMAT,
                    "Unsupported global: GLOBAL %s.%s was not an allowed global by default",
                    mod, name);
    }
    /* The value names the global as the Python 3 loader resolves it
     * (the messages above keep the file's own names, as PyTorch). */
    const char *rm, *rn;
    tn__scan_resolve(mod, name, m->allow == TN_ALLOW_TORCH1 ? 3 : m->proto, &rm, &rn);
    if (rm != mod) /* a static string of the Py2 tables */
        snprintf(mod, sizeof mod, "%s", rm);
    if (rn != name)
        snprintf(name, sizeof name, "%s", rn);
    return push(m, global_value(m, mod, name));
}

/* Runs one decoded opcode of an allowed kind on the restricted machine
 * (tn__pickle_load checked the opcode first); every pop is checked against
 * the stack and its topmost MARK. 0 or an error naming the opcode and its
 * offset. */
static int step(struct machine *m, const struct tn_pickle_op *op)
{
    size_t base = 0;
    switch (op->code) {
    /* PROTO n: the protocol version (up to 5) */
    case TN_OP_PROTO:
        if (op->i > 5)
            return fail(m, TN_EFORMAT, "unsupported pickle protocol: %lld", (long long)op->i);
        m->proto = (int)op->i;
        return 0;
    /* GLOBAL "mod\nname\n": pushes the global if allowed */
    case TN_OP_GLOBAL:
        return push_global(m, op->s, op->slen, op->s2, op->s2len);
    /* STACK_GLOBAL: mod, name (two strs) -> the global, if allowed */
    case TN_OP_STACK_GLOBAL: {
        /* only a DCP .metadata gets here (tn__pickle_op_dcp) */
        if (need(m, 2) < 0)
            return tn_last_status();
        struct tn_value *nm = m->stack[m->n - 1], *md = m->stack[m->n - 2];
        if (md->kind != TN_VALUE_STR || nm->kind != TN_VALUE_STR)
            return fail(m, TN_EFORMAT, "STACK_GLOBAL requires str");
        int rc = push_global(m, md->v.str.s, md->v.str.len, nm->v.str.s, nm->v.str.len);
        if (rc < 0)
            return rc;
        m->stack[m->n - 3] = m->stack[m->n - 1];
        m->n -= 2;
        tn_value_release(md);
        tn_value_release(nm);
        return 0;
    }
    /* SHORT_BINUNICODE: pushes a UTF-8 str; MEMOIZE: memo[count] = top;
     * FRAME: no effect (its length is a reader's hint) */
    case TN_OP_SHORT_BINUNICODE:
    case TN_OP_MEMOIZE:
    case TN_OP_FRAME:
        if (op->code == TN_OP_MEMOIZE)
            return memo_set(m, (int64_t)m->memo_count);
        if (op->code == TN_OP_FRAME)
            return 0;
        if (!utf8_ok((const unsigned char *)op->s, op->slen))
            return fail(m, TN_EFORMAT, "'utf-8' codec can't decode the string");
        return push(m, tn_value_str_n(op->s, op->slen));
    /* REDUCE: callable, args -> callable(*args), for allowed callables only */
    case TN_OP_REDUCE:
        return do_reduce(m);
    /* BUILD: obj, state -> obj with state set (see do_build for which) */
    case TN_OP_BUILD:
        return do_build(m);
    /* NEWOBJ: cls, args -> cls.__new__(cls, *args) (DCP .metadata classes only) */
    case TN_OP_NEWOBJ:
        if (m->dcp)
            return dcp_newobj(m);
        return fail(m, TN_EFORMAT, "NEWOBJ (a class instance) is not supported by tensorkit");
    /* MARK: remembers the stack height for the next MARK-consuming opcode */
    case TN_OP_MARK:
        if (m->nmarks == MAX_MARKS)
            return fail(m, TN_ENOMEM, "more than %u nested MARKs", MAX_MARKS);
        m->marks[m->nmarks++] = m->n;
        return 0;
    /* TUPLE, TUPLE1..3: the items above the topmost MARK, or the top 1..3
     * -> one tuple */
    case TN_OP_TUPLE: case TN_OP_TUPLE1: case TN_OP_TUPLE2: case TN_OP_TUPLE3:
        return take(m, op->code, &base) < 0 ? tn_last_status() : make_tuple(m, base);
    /* EMPTY_TUPLE, EMPTY_LIST, EMPTY_DICT: push an empty container;
     * EMPTY_SET is refused */
    case TN_OP_EMPTY_TUPLE: return push(m, tn_value_tuple());
    case TN_OP_EMPTY_LIST: return push(m, tn_value_list());
    case TN_OP_EMPTY_DICT: return push(m, tn_value_dict());
    case TN_OP_EMPTY_SET:
        return fail(m, TN_EFORMAT, "sets are allowed by weights_only but not supported by tensorkit");
    /* APPEND: list, x -> list with x appended; APPENDS: list, MARK, items
     * -> list extended by the items */
    case TN_OP_APPEND: case TN_OP_APPENDS:
        return take(m, op->code, &base) < 0 ? tn_last_status() : do_appends(m, base);
    /* SETITEM: dict, k, v -> dict with dict[k] = v; SETITEMS: dict, MARK,
     * k1, v1, ... -> dict with each pair set */
    case TN_OP_SETITEM: case TN_OP_SETITEMS:
        return take(m, op->code, &base) < 0 ? tn_last_status() : do_setitems(m, base);
    /* NONE, NEWTRUE, NEWFALSE: push the constant */
    case TN_OP_NONE: return push(m, tn_value_none());
    case TN_OP_NEWTRUE: return push(m, tn_value_bool(true));
    case TN_OP_NEWFALSE: return push(m, tn_value_bool(false));
    /* BININT, BININT1, BININT2, LONG1: push the decoded int (a LONG1 past 64
     * bits is refused) */
    case TN_OP_BININT: case TN_OP_BININT1: case TN_OP_BININT2:
        return push(m, tn_value_int(op->i));
    case TN_OP_LONG1:
        if (op->big)
            return fail(m, TN_EFORMAT, "an integer of %zu bytes does not fit in 64 bits", op->slen);
        return push(m, tn_value_int(op->i));
    /* BINFLOAT: pushes the big-endian double */
    case TN_OP_BINFLOAT:
        return push(m, tn_value_float(op->f));
    /* BINUNICODE: pushes a str (valid UTF-8 only); SHORT_BINSTRING: an ASCII
     * str */
    case TN_OP_BINUNICODE:
        if (!utf8_ok((const unsigned char *)op->s, op->slen))
            return fail(m, TN_EFORMAT, "'utf-8' codec can't decode the string");
        return push(m, tn_value_str_n(op->s, op->slen));
    case TN_OP_SHORT_BINSTRING:
        for (size_t i = 0; i < op->slen; i++)
            if ((unsigned char)op->s[i] >= 0x80)
                return fail(m, TN_EFORMAT, "'ascii' codec can't decode the string");
        return push(m, tn_value_str_n(op->s, op->slen));
    /* BINPERSID: pid -> the storage the hooks load for it */
    case TN_OP_BINPERSID:
        return do_persid(m);
    /* BINGET, LONG_BINGET: push memo[i] (a set index only);
     * BINPUT, LONG_BINPUT: memo[i] = top */
    case TN_OP_BINGET: case TN_OP_LONG_BINGET:
        return memo_get(m, op->i);
    case TN_OP_BINPUT: case TN_OP_LONG_BINPUT:
        return memo_set(m, op->i);
    default:
        return fail(m, TN_EFORMAT, "Unsupported operand %d", op->code);
    }
}

/* The restricted unpickler (io/internal.h) over len untrusted bytes: only the
 * opcodes and globals of `allow`'s weights_only list (or a DCP .metadata's,
 * with hooks->dcp) run, storages come through hooks (NULL: a pickle without
 * them), and the stack, memo, nesting and visit counts are bounded. A new
 * value, or NULL with an error naming label and the byte. */
struct tn_value *tn__pickle_load(const unsigned char *buf, size_t len, const char *label,
                                 enum tn_ckpt_allowlist allow,
                                 const struct tn_pickle_reader_hooks *hooks)
{
    struct machine m = {.label = label, .allow = allow, .hooks = hooks, .visits = MAX_VISITS};
    m.dcp = hooks && hooks->dcp;
    struct tn__value_arena arena;
    tn__value_arena_begin(&arena);
    struct tn_value *result = NULL;
    size_t pos = 0;
    for (;;) {
        struct tn_pickle_op op;
        if (tn__pickle_decode(buf, len, &pos, &op, label) < 0)
            break;
        m.pos = op.pos;
        m.opcode = op.code;
        if (!(m.dcp ? tn__pickle_op_dcp(op.code) : tn__pickle_op_allowed(op.code, allow))) {
            fail(&m, TN_EFORMAT, "Unsupported operand %d", op.code);
            break;
        }
        if (op.code == TN_OP_STOP) {
            if (m.n != 1 || m.nmarks) {
                fail(&m, TN_EFORMAT, "the stack holds %zu items at STOP", m.n);
                break;
            }
            result = m.stack[--m.n];
            if (result->kind == TN_VALUE_GLOBAL || result->kind == TN_VALUE_STORAGE) {
                fail(&m, TN_EFORMAT, "the pickle's value is a bare %s",
                     tn_value_kind_name(result->kind));
                tn_value_release(result);
                result = NULL;
            }
            break;
        }
        if (step(&m, &op) < 0)
            break;
    }
    for (size_t i = 0; i < m.n; i++)
        tn_value_release(m.stack[i]);
    free(m.stack);
    for (size_t i = 0; i < m.memocap; i++)
        tn_value_release(m.memo[i]);
    free(m.memo);
    tn_value_release(m.class_key);
    tn_value_release(m.class_name);
    tn__value_arena_end(&arena);
    return result;
}
