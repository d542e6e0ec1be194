/*
 * dispatch/errors.c: the errors the generated entry points raise for a call
 * they cannot run: no kernel for its key, an out= call under autograd, a
 * None where a tensor is needed, a malformed tensor list. Each sets the thread's last error in PyTorch's
 * words and returns the (negative) status.
 */
#include <config.h>

#include <tensor/dispatch.h>

/* Contract in tensor/dispatch.h: TN_EDEVICE naming the op and the key
 * (key < 0: every key of the call was excluded). */
int tn_dispatch_no_kernel(const struct tn_op *op, int key)
{
    if (key < 0)
        return tn_set_error(TN_EDEVICE, "Could not run '%s': every dispatch key of its "
                            "arguments is excluded", op->qualname);
    return tn_set_error(TN_EDEVICE, "Could not run '%s' with arguments from the '%s' backend.",
                        op->qualname, tn_dispatch_key_name((enum tn_dispatch_key)key));
}

/* Contract in tensor/dispatch.h: TN_EINVAL, PyTorch's "must be Tensor,
 * not None" (position counts from 1). */
int tn_dispatch_null_arg(const char *op, const char *arg, int position)
{
    return tn_set_error(TN_EINVAL, "%s(): argument '%s' (position %d) must be Tensor, not None",
                        op, arg, position);
}

/* Contract in tensor/dispatch.h: the first NULL among ts that the schema
 * does not mark optional, walking the Tensor arguments in order; 0 when
 * every NULL is an optional one. */
int tn_dispatch_null_tensors(const struct tn_op *op, const struct tn_tensor *const *ts, int n)
{
    for (int i = 0, k = 0; i < op->nargs && k < n; i++) {
        if (op->args[i].tag != TN_IV_TENSOR)
            continue;
        if (!ts[k++] && !op->args[i].optional)
            return tn_dispatch_null_arg(op->name, op->args[i].name, i + 1);
    }
    return TN_OK;
}

/* Contract in tensor/dispatch.h: TN_EINVAL for a malformed Tensor?[]. */
int tn_dispatch_bad_list(const char *op, const char *arg, int position)
{
    return tn_set_error(TN_EINVAL, "%s(): argument '%s' (position %d) must be a list of "
                        "optional tensors", op, arg, position);
}

/* Contract in tensor/dispatch.h: TN_ERUNTIME in PyTorch's words (its
 * out= overloads check this in their Autograd kernel; here the dispatch
 * does, for every out= op, when the Autograd key is reached). */
int tn_dispatch_out_requires_grad(const struct tn_op *op)
{
    return tn_set_error(TN_ERUNTIME, "%s(): functions with out=... arguments don't support "
                        "automatic differentiation, but one of the arguments requires grad.",
                        op->name);
}
