/*
 * dispatch/errors.c: the errors the generated entry points raise for a call
 * they cannot run: no kernel for its key, a None where a tensor is needed, a
 * malformed tensor list. Each sets the thread's last error in PyTorch's
 * words and returns the (negative) status.
 */
#include <config.h>

#include <tensor/dispatch.h>

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

int tn_dispatch_bad_list(const char *op, const char *arg, int position)
{
    return tn_set_error(TN_EINVAL, "%s(): argument '%s' (position %d) must be a list of "
                        "optional tensors", op, arg, position);
}
