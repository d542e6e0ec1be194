/*
 * dispatch/registry.c: the op registry, a hash table from qualified name
 * ("aten::add.Tensor") to struct tn_op, under one lock. The built-in ops
 * come from tgen's table, which lib/ops/ops_gen.c hands over at load
 * (tn__op_register_builtins), registered on first use; plugins and
 * programs add theirs with tn_op_register. Registered ops are borrowed for
 * the life of the process: nothing is ever removed.
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tensor/dispatch.h>

#include "core/internal.h"

#define TN_OP_BUCKETS 1024

static struct tn_op *buckets[TN_OP_BUCKETS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* The built-in table ops hands over (tn__op_register_builtins), registered
 * on the next lookup or registration; registry_lock guards it. */
static struct tn_op *const *builtins_pending;

/* The bucket of a qualified name (FNV-1a). */
static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % TN_OP_BUCKETS;
}

/* The op named qualname, or NULL; registry_lock is held. */
static struct tn_op *lookup_locked(const char *qualname)
{
    for (struct tn_op *op = buckets[name_hash(qualname)]; op; op = op->next)
        if (!strcmp(op->qualname, qualname))
            return op;
    return NULL;
}

/* Chains op in (borrowed for the process's life); TN_EINVAL when its name
 * is taken. registry_lock is held. */
static int register_locked(struct tn_op *op)
{
    if (lookup_locked(op->qualname))
        return tn_set_error(TN_EINVAL, "%s is already registered", op->qualname);
    unsigned h = name_hash(op->qualname);
    op->next = buckets[h];
    buckets[h] = op;
    return TN_OK;
}

/* Registers the pending built-in table, if any; a duplicate among them is
 * a bug in the generated table. registry_lock is held. */
static void register_builtins_locked(void)
{
    if (!builtins_pending)
        return;
    for (struct tn_op *const *op = builtins_pending; *op; op++)
        TN_ASSERT(register_locked(*op) == TN_OK);
    builtins_pending = NULL;
}

/* Contract in core/internal.h: table is borrowed for the process's life. */
void tn__op_register_builtins(struct tn_op *const *table)
{
    pthread_mutex_lock(&registry_lock);
    builtins_pending = table;
    pthread_mutex_unlock(&registry_lock);
}

/* Contract in tensor/dispatch.h: op is borrowed for the process's life. */
int tn_op_register(struct tn_op *op)
{
    pthread_mutex_lock(&registry_lock);
    register_builtins_locked();
    int rc = register_locked(op);
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

/* Contract in tensor/dispatch.h: name is the caller's (any length); the
 * op is borrowed; NULL with an error naming it. */
const struct tn_op *tn_op_find(const char *name)
{
    char buf[256];
    const char *q = name;
    if (!strstr(name, "::")) {
        /* A name too long for buf is unknown: truncated, it could match
         * a registered prefix. */
        if ((size_t)snprintf(buf, sizeof buf, "aten::%s", name) >= sizeof buf) {
            tn_set_error(TN_EINVAL, "unknown operator '%.64s...': name too long", name);
            return NULL;
        }
        q = buf;
    }
    pthread_mutex_lock(&registry_lock);
    register_builtins_locked();
    struct tn_op *op = lookup_locked(q);
    pthread_mutex_unlock(&registry_lock);
    if (!op)
        tn_set_error(TN_EINVAL, "unknown operator '%s'", name);
    return op;
}

/* Contract in tensor/dispatch.h: the argument's position, or -1. */
int tn_op_arg_index(const struct tn_op *op, const char *name)
{
    for (int i = 0; i < op->nargs; i++)
        if (!strcmp(op->args[i].name, name))
            return i;
    return -1;
}

/* Contract in tensor/dispatch.h: checks nargs, then the op's boxed
 * wrapper, or for a generated op the boxed engine with its signature's
 * typed call, reads the stack (untrusted tags, checked there). */
int tn_op_call(const struct tn_op *op, struct tn_ivalue *stack, int nargs)
{
    if (nargs < 0 || nargs > op->nargs)
        return tn_set_error(TN_EINVAL, "%s takes %d arguments but %d were given", op->qualname,
                            op->nargs, nargs);
    return op->boxed ? op->boxed(op, stack, nargs)
                     : tn_dispatch_boxed(op, stack, nargs, op->call, op->form);
}
