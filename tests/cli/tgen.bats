#!/usr/bin/env bats
# tgen: listing, schema errors with file:line:column, and a user's plugin
# built with the system compiler and called through the dispatcher.

load helper

setup() {
    YAML=$TN_SRCDIR/schemas/native_functions.yaml
    cd "$BATS_TEST_TMPDIR"
}

@test "--list prints each op with its C name and schema" {
    run tgen --list "$YAML"
    assert_success
    assert_line --partial $'aten::add.Tensor\ttn_add\tadd.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor'
    assert_line --partial $'aten::div.out_mode\ttn_div_mode_out\t'
    assert_line --partial $'aten::add_.Scalar\ttn_add_scalar_\t'
}

@test "an overload whose name without its Tensor token is taken keeps the token" {
    run tgen --list "$YAML"
    assert_success
    assert_line --partial $'aten::clamp\ttn_clamp\t'
    assert_line --partial $'aten::clamp.Tensor\ttn_clamp_tensor\t'
    # whichever comes first; a name still taken is refused
    printf -- '- func: foo.Tensor(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n- func: foo(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n' > first.yaml
    run tgen --list first.yaml
    assert_success
    assert_line --partial $'aten::foo.Tensor\ttn_foo_tensor\t'
    assert_line --partial $'aten::foo\ttn_foo\t'
    printf -- '- func: foo(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n- func: foo_tensor(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n- func: foo.Tensor(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n' > taken.yaml
    run tgen --list taken.yaml
    assert_failure 2
    assert_output "taken.yaml:7:9: C name tn_foo_tensor is taken by line 4"
}

@test "--list --json is one JSON object with the documented fields" {
    run tgen --list --json "$YAML"
    assert_success
    printf '%s' "$output" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ops = {o["name"]: o for o in d["ops"]}
a = ops["aten::add.out"]
assert a["kind"] == "out" and a["structured"] and a["dispatch"] == {"CPU": "tn__cpu_add_out"}, a
assert ops["aten::add.Tensor"]["structured_delegate"] == "add.out"
assert ops["aten::add.Tensor"]["tags"] == ["core", "pointwise"]
assert ops["aten::add_.Tensor"]["kind"] == "inplace"
'
}

@test "a bad schema is reported as file:line:column and exit 2" {
    printf -- '- func: foo(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n- func: bar(Tensr self) -> Tensor\n  dispatch:\n    CPU: k\n' > bad.yaml
    run tgen --list bad.yaml
    assert_failure 2
    assert_output "bad.yaml:4:13: unknown type: Tensr"
    printf -- '- func: foo(Tensor self) -> Tensor\n  dispatch:\n    GPU: k\n' > bad2.yaml
    run tgen --list bad2.yaml
    assert_failure 2
    assert_output --partial "bad2.yaml:3:5: dispatch: unknown dispatch key 'GPU'"
    printf -- '- func: foo(Tensor self) -> Tensor\n  dispatch: [\n' > bad3.yaml
    run tgen --list bad3.yaml
    assert_failure 2
    assert_output --regexp '^bad3\.yaml:[0-9]+:[0-9]+: '
    printf -- '- func: foo.out(Tensor self, Tensor(a!) out) -> Tensor(a!)\n  dispatch:\n    CPU: k\n' > bad4.yaml
    run tgen --list bad4.yaml
    assert_failure 2
    assert_output "bad4.yaml:1:9: a Tensor(a!) argument is the self of an in-place op (name_) or a keyword-only out= argument: out"
}

@test "tuple returns come back through out-pointers; other return types are refused" {
    printf -- '- func: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  dispatch:\n    CPU: k\n' > tuple.yaml
    run tgen --list tuple.yaml
    assert_success
    assert_output --partial $'aten::max.dim\ttn_max_dim\t'
    run tgen --header t.h --source t.c tuple.yaml
    assert_success
    run grep -F 'int tn_max_dim(const struct tn_tensor *self, int64_t dim, bool keepdim, struct tn_tensor **values, struct tn_tensor **indices);' t.h
    assert_success
    printf -- '- func: is_nonzero(Tensor self) -> bool\n  dispatch:\n    CPU: k\n' > scalar.yaml
    run tgen --header s.h --source s.c scalar.yaml
    assert_failure 2
    assert_output "scalar.yaml:1:9: tn_is_nonzero: only operators returning Tensors (one, a tuple of them from arguments, or a Tensor[]) can be generated yet (--list shows them all)"
    [ ! -e s.h ]
}

@test "a Tensor[] return is a count and an array of new references" {
    printf -- '- func: split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]\n  dispatch:\n    CompositeImplicitAutograd: k\n' > list.yaml
    run tgen --header l.h --source l.c list.yaml
    assert_success
    run grep -F 'int tn_split(const struct tn_tensor *self, int64_t split_size, int64_t dim, struct tn_tensor ***result);' l.h
    assert_success
    run grep -F 'TN_BOX_LIST' l.c
    assert_success
    printf -- '- func: foo_(Tensor(a!) self) -> Tensor[]\n  dispatch:\n    CPU: k\n' > inplace.yaml
    run tgen --header i.h --source i.c inplace.yaml
    assert_failure 2
}

@test "usage errors exit 2 with a hint" {
    run tgen
    assert_failure 2
    assert_line --index 1 "Try 'tgen --help' for more information."
    run tgen --json "$YAML"
    assert_failure 2
    run tgen --bogus "$YAML"
    assert_failure 2
}

@test "a plugin built from a user's YAML dispatches like a built-in op" {
    command -v cc >/dev/null || skip "no C compiler"
    need_built tests/unit/ops_plugin_host
    cat > myops.yaml <<'YAML'
- func: myops::scale(Tensor self, float factor=2.5) -> Tensor
  dispatch:
    CPU: my_scale_cpu
  tags: pointwise
YAML
    cat > kernels.c <<'C'
#include <tensor/tensor.h>
#include "myops.h"
struct tn_tensor *my_scale_cpu(tn_keyset ks, const struct tn_tensor *self, double factor)
{
    return tn_mul_scalar(self, tn_float(factor));
}
C
    run tgen --plugin --output=myops myops.yaml
    assert_success
    head -1 myops.c | grep -q 'Generated by tgen from myops.yaml'
    cc -std=c11 -shared -fPIC -I"$TN_SRCDIR/lib/include" -I"$TN_BUILDDIR/lib/include" -I. \
        myops.c kernels.c -o libmyops.so
    run "$TN_BUILDDIR/tests/unit/ops_plugin_host" ./libmyops.so myops::scale 4
    assert_success
    assert_line --index 0 "myops::scale(Tensor self, float factor=2.5) -> Tensor"
    assert_line --index 1 "tensor([0.0000, 2.5000, 5.0000, 7.5000])"
    run "$TN_BUILDDIR/tests/unit/ops_plugin_host" ./nonesuch.so myops::scale 4
    assert_failure 1
}
