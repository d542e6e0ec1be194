#!/usr/bin/env bats
# tcompile run PACKAGE.pt2 for PyTorch's AOTInductor packages, through
# libtensor-aoti (lib/aoti): the packages of tests/fixtures/aoti_packages.py
# (made by PyTorch 2.x, minutes each, so kept out of git in a cache folder:
# those tests skip without it) give PyTorch's outputs; a package whose
# library calls shim functions libtensor-aoti lacks, or needs a libtorch
# it does not stand in for, is refused naming them before any of its code
# runs (those packages are built here with cc and zip); nothing is left in
# the temporary folder.

load helper

setup() {
    export TN_AOTI_LIBDIR="$TN_BUILDDIR/lib/aoti/.libs"
    CACHE=${TN_AOTI_CACHE:-$HOME/.cache/tensorkit/aoti}
    T=$BATS_TEST_TMPDIR
    mkdir -p "$T/tmp"
    export TMPDIR="$T/tmp"
}

# The cached package NAME (and its inputs and expected outputs), or skip.
require_package() {
    [ -f "$CACHE/$1.pt2" ] && [ -f "$CACHE/$1_expected.pt" ] ||
        skip "no $CACHE/$1.pt2 (make it: tests/fixtures/aoti_packages.py, with PyTorch 2.x)"
}

# fake_package NAME C-SOURCE [CC-ARGS...]: $T/NAME.pt2 holding a library
# built from C-SOURCE at NAME/data/aotinductor/model/NAME.wrapper.so, as
# aoti_compile_and_package lays a package out.
fake_package() {
    command -v cc >/dev/null && command -v zip >/dev/null || skip "no cc or zip"
    local name=$1 src=$2
    shift 2
    mkdir -p "$T/$name/data/aotinductor/model"
    printf '%s\n' "$src" >"$T/$name.c"
    cc -shared -fPIC -o "$T/$name/data/aotinductor/model/$name.wrapper.so" "$T/$name.c" "$@"
    echo '{"AOTI_DEVICE_KEY": "cpu"}' >"$T/$name/data/aotinductor/model/$name.wrapper_metadata.json"
    (cd "$T" && zip -qr "$name.pt2" "$name")
}

# package_matches NAME OUT NOUT: tcompile run of the cached package NAME on
# its inputs, written to OUT, gives PyTorch's NOUT outputs.
package_matches() {
    require_package "$1"
    run tcompile run "$CACHE/$1.pt2" -i "$CACHE/${1}_inputs.pt" -o "$2"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$2" "$CACHE/${1}_expected.pt"
    assert_success
    assert_output --regexp "[^0-9]$3 tensors? match"
}

# A library that would leave $T/ran behind if any of its code ran.
CTOR='#include <stdio.h>
static void __attribute__((constructor)) ran(void) { FILE *f = fopen(RAN, "w"); if (f) fclose(f); }'

@test "run PACKAGE.pt2: Linear+ReLU from AOTInductor gives PyTorch's outputs" {
    package_matches linear_relu "$T/out.pt" 1
}

@test "run PACKAGE.pt2: the MLP (SLEEF's exp, log and tanh), the CNN (channels-last convolutions), the transformer block (flash attention's layouts), a ResNet block" {
    for m in mlp cnn block resblock; do
        package_matches $m "$T/$m.npz" 1
    done
}

@test "run PACKAGE.pt2: two inputs bound in order or by name, two outputs" {
    package_matches two_inputs "$T/out.pt" 2
    # the inputs' names are the placeholders': a named one binds first,
    # wherever it stands; the others fill the inputs left, in order
    python3 -c 'import torch; d = torch.load("'"$CACHE"'/two_inputs_inputs.pt")
torch.save({"b": d["input1"]}, "'"$T"'/b.pt"); torch.save({"a": d["input0"]}, "'"$T"'/a.pt")'
    run tcompile run "$CACHE/two_inputs.pt2" -i "$T/b.pt" -i arg0_1="$T/a.pt" -o "$T/out2.pt"
    assert_success
    run tckpt diff "$T/out2.pt" "$T/out.pt"
    assert_success
    run tcompile run "$CACHE/two_inputs.pt2" -i arg1_1="$T/a.pt" -i arg1_1="$T/b.pt"
    assert_failure 2
    assert_output --partial "two_inputs.pt2's input 'arg1_1' is given twice"
    run tcompile run "$CACHE/two_inputs.pt2" -i x="$T/a.pt"
    assert_failure 2
    assert_output --partial "has no input 'x' (its inputs: arg0_1, arg1_1)"
}

@test "run PACKAGE.pt2: a package exported with a symbolic batch runs at two batch sizes, and refuses one outside its range" {
    require_package mlp_dyn
    for k in "" 2; do
        run tcompile run "$CACHE/mlp_dyn.pt2" -i "$CACHE/mlp_dyn_inputs$k.pt" -o "$T/out$k.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$T/out$k.pt" "$CACHE/mlp_dyn_expected$k.pt"
        assert_success
        assert_output --partial "1 tensor matches"
    done
    python3 -c 'import numpy; numpy.save("'"$T"'/big.npy", numpy.zeros((65, 64), "float32"))' ||
        skip "no numpy"
    run tcompile run "$CACHE/mlp_dyn.pt2" -i "$T/big.npy"
    assert_failure 2
    assert_output --partial "mlp_dyn.pt2: its model's run failed"
}

@test "run PACKAGE.pt2: a wrong input shape or dtype is refused by the model's checks, exit 2" {
    require_package linear_relu
    tcompile run "$CACHE/linear_relu.pt2" -i "$CACHE/linear_relu_inputs.pt" -o "$T/x.npy"
    run tcompile run "$CACHE/linear_relu.pt2" -i "$T/x.npy"  # [4, 8], not [4, 16]
    assert_failure 2
    assert_output --partial "unmatched dim value at 1, expected: 16, but got: 8"
    assert_output --partial "linear_relu.pt2: its model's run failed"
    run tcompile run "$CACHE/linear_relu.pt2" -i "$CACHE/cnn_inputs.pt"
    assert_failure 2
    run tcompile run "$CACHE/linear_relu.pt2"
    assert_failure 2
    assert_output --partial "no value for its input 0"
    run ls -A "$TMPDIR"
    assert_output ""
}

@test "run PACKAGE.pt2: a shim function libtensor-aoti lacks is refused with its name, before anything runs" {
    fake_package unknown "$CTOR
int aoti_torch_frobnicate(void *); int aoti_torch_get_dim(void *, long *);
int AOTInductorModelContainerRun(void *p) { long d; return aoti_torch_frobnicate(p) + aoti_torch_get_dim(p, &d); }" \
        -DRAN="\"$T/ran\""
    run tcompile run "$T/unknown.pt2"
    assert_failure 2
    assert_output "tcompile: $T/unknown.pt2: its model calls 1 function that libtensor-aoti does not provide: aoti_torch_frobnicate"
    [ ! -e "$T/ran" ]
    run ls -A "$TMPDIR"
    assert_output ""
}

@test "check PACKAGE.pt2: one line per function libtensor-aoti lacks, exit 1, nothing run; --json" {
    fake_package unknown "$CTOR
int aoti_torch_frobnicate(void *); int aoti_torch_zork(void); int aoti_torch_get_dim(void *, long *);
int AOTInductorModelContainerRun(void *p) { long d; return aoti_torch_frobnicate(p) + aoti_torch_zork() + aoti_torch_get_dim(p, &d); }" \
        -DRAN="\"$T/ran\""
    run tcompile check "$T/unknown.pt2"
    assert_failure 1
    assert_line "$T/unknown.pt2: calls aoti_torch_frobnicate, which libtensor-aoti does not provide"
    assert_line "$T/unknown.pt2: calls aoti_torch_zork, which libtensor-aoti does not provide"
    assert_equal "${#lines[@]}" 2
    run tcompile check --json "$T/unknown.pt2"
    assert_failure 1
    assert_output --partial '"ok": false, "shim_functions": 3, "problems": [{"function": "aoti_torch_'
    [ ! -e "$T/ran" ]
    run ls -A "$TMPDIR"
    assert_output ""
}

@test "a graph from a pipe is not read as a package (its first bytes stay for the graph reader)" {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    run tcompile check <(cat "$FX/mlp.pt2")
    assert_success
    run tcompile run <(cat "$FX/mlp.json") -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$T/o.npz"
    assert_success
}

@test "check PACKAGE.pt2: AOTInductor's packages need nothing libtensor-aoti lacks" {
    for m in linear_relu mlp cnn block resblock; do
        require_package $m
        run tcompile check "$CACHE/$m.pt2"
        assert_success
        assert_output --regexp "^$CACHE/$m.pt2: ok \(an AOTInductor package; its model calls [0-9]+ aoti_torch_\* functions, all in libtensor-aoti\)$"
    done
}

@test "run PACKAGE.pt2: a package needing libtorch_cuda.so is refused, naming it" {
    command -v cc >/dev/null || skip "no cc"
    mkdir -p "$T/lib"
    echo 'int tn_nothing;' >"$T/empty.c"
    cc -shared -fPIC -o "$T/lib/libtorch_cuda.so" "$T/empty.c"
    fake_package cuda "$CTOR
int AOTInductorModelContainerRun(void) { return 0; }" -DRAN="\"$T/ran\"" \
        -Wl,--no-as-needed -L"$T/lib" -ltorch_cuda
    run tcompile run "$T/cuda.pt2"
    assert_failure 2
    assert_output --partial "cuda.pt2: its model needs libtorch_cuda.so, which tensorkit does not stand in for"
    run tcompile check "$T/cuda.pt2"
    assert_failure 1
    assert_output "$T/cuda.pt2: needs libtorch_cuda.so, which tensorkit does not stand in for"
    [ ! -e "$T/ran" ]
}

@test "run PACKAGE.pt2: the model's container entry points are needed; options for graphs do not apply" {
    fake_package noentry "int tn_nothing;"
    run tcompile run "$T/noentry.pt2"
    assert_failure 2
    assert_output "tcompile: $T/noentry.pt2: its model library has no AOTInductorModelContainerCreateWithDevice"
    run tcompile run "$T/noentry.pt2" -w "$T/noentry.pt2"
    assert_failure 2
    assert_output --partial "--weights (the package holds its weights) does not apply to an AOTInductor package"
    run ls -A "$TMPDIR"
    assert_output ""
}

@test "bench/compile/aoti.sh: a run-time row with its ratio and the cold starts" {
    require_torch2
    require_package linear_relu
    cd "$TN_BUILDDIR"
    run "$TN_SRCDIR/bench/compile/aoti.sh" --cache "$CACHE" --models linear_relu --threads 1 \
        --repeat 3 --starts 1 --no-cpp
    assert_success
    assert_line --regexp '^linear_relu +1 +[0-9.]+ +[0-9.]+ +[0-9.]+x$'
    assert_line --regexp '^  tcompile run +[0-9.]+ ms$'
    assert_line --regexp '^  python -c import torch +[0-9.]+ ms +[0-9.]+x ours$'
}
