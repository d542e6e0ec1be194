/*
 * ops_plugin_host: what tests/cli/tgen.bats runs to check plugins end to
 * end. Loads the plugin PATH with tn_library_load(), finds OP by name, calls
 * it boxed on arange(N) (float32) with every other argument defaulted, and
 * prints the result as PyTorch would. Exit 0, or 1 with the error.
 *
 *   ops_plugin_host PATH OP N
 */
#include <stdio.h>
#include <stdlib.h>

#include <tensor/tensor.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fputs("usage: ops_plugin_host PATH OP N\n", stderr);
        return 2;
    }
    if (tn_library_load(argv[1]) < 0) {
        fprintf(stderr, "load: %s\n", tn_last_error());
        return 1;
    }
    const struct tn_op *op = tn_op_find(argv[2]);
    if (!op) {
        fprintf(stderr, "find: %s\n", tn_last_error());
        return 1;
    }
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(atoll(argv[3])), tn_int(1), TN_FLOAT32);
    struct tn_ivalue st[16] = {{.tag = TN_IV_TENSOR, .v.t = x}};
    int n = tn_op_call(op, st, 1);
    if (n < 0) {
        fprintf(stderr, "call: %s\n", tn_last_error());
        return 1;
    }
    printf("%s\n", op->schema);
    tn_print(stdout, st[0].v.t);
    tn_release(st[0].v.t);
    tn_release(x);
    return 0;
}
