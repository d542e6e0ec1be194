#!/usr/bin/env bats
# tcompile compiles (issue 16): every graph fixture gives the
# interpreter's outputs when compiled, --explain shows the plan, compile
# fills the cache and writes the C and library into a folder, a missing
# C compiler falls back to the interpreter with a warning (--strict: exit
# 2), the options of compiling are checked.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    TMP=$BATS_TEST_TMPDIR
}

# compiled_as_interpreted NAME: run compiled and interpreted, equal within
# float32's rounding of a fused computation
compiled_as_interpreted() {
    run tcompile run --strict "$FX/$1.json" -w "$FX/$1.pt" -i "$FX/$1_inputs.pt" -o "$TMP/c.npz"
    assert_success
    refute_output --partial warning
    run tcompile run --interpret "$FX/$1.json" -w "$FX/$1.pt" -i "$FX/$1_inputs.pt" -o "$TMP/i.npz"
    assert_success
    run tckpt diff --atol=1e-6 --rtol=1e-5 "$TMP/c.npz" "$TMP/i.npz"
    assert_success
}

@test "compiled MLP, CNN, block, text, cat, index and misc graphs: the interpreter's outputs" {
    for m in mlp cnn block text cat index misc; do
        compiled_as_interpreted "$m"
    done
}

@test "compiled outputs equal PyTorch's (the block's expected file)" {
    run tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" -o "$TMP/c.pt"
    assert_success
    run tckpt diff --atol=1e-5 --rtol=1e-4 "$TMP/c.pt" "$FX/block_expected.pt"
    assert_success
}

@test "--explain names the kernels, what stayed extern and why, and the generated C" {
    run tcompile run --explain "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --partial "kernel tn_k"
    assert_output --partial "batch_norm, relu"
    assert_output --partial "extern aten::conv2d: conv2d: no lowering for aten::conv2d"
    assert_output --regexp "generated C: /.*\.c"
    c=$(printf '%s\n' "$output" | sed -n 's/^  generated C: //p')
    [ -s "$c" ]
    grep -q "void tn_k" "$c"
}

@test "--time says compile time and run time apart; a second process finds the cache" {
    export TN_COMPILE_CACHE=$TMP/cache
    run tcompile run --time "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --regexp 'compile took [0-9.]+ ms \(the C compiler ran\)'
    assert_output --regexp 'run took [0-9.]+ ms'
    run tcompile run --time "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --regexp 'compile took [0-9.]+ ms \(from the cache\)'
}

@test "a symbolic batch: another batch size finds the entry its first size compiled" {
    export TN_COMPILE_CACHE=$TMP/cache
    run tcompile run --time "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" -o "$TMP/b2.npz"
    assert_success
    assert_output --partial "the C compiler ran"
    run tcompile run --time "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_b3_inputs.pt" -o "$TMP/b3.npz"
    assert_success
    assert_output --partial "from the cache"
    run tckpt diff --atol=1e-5 --rtol=1e-4 "$TMP/b3.npz" "$FX/block_b3_expected.pt"
    assert_success
}

@test "no C compiler: a warning naming why, the interpreter's outputs; --strict exits 2" {
    export TN_COMPILE_CACHE=$TMP/empty-cache
    CC=/nonexistent/cc run tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/c.npz"
    assert_success
    assert_output --regexp "tcompile: warning: .*mlp.json: not compiled, running in the interpreter: "
    [ "$(printf '%s\n' "$output" | grep -c warning)" = 1 ]
    run tcompile run --interpret "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/i.npz"
    run tckpt diff "$TMP/c.npz" "$TMP/i.npz"
    assert_success
    CC=/nonexistent/cc run tcompile run --strict "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/s.npz"
    assert_failure 2
    [ "${#lines[@]}" = 1 ]
    [ ! -e "$TMP/s.npz" ]
}

@test "compile -o DIR writes kernel.c, kernel.so and manifest.json without running" {
    run tcompile compile "$FX/block.json" -o "$TMP/out"
    assert_success
    [ -s "$TMP/out/kernel.c" ]
    [ -s "$TMP/out/kernel.so" ]
    [ -s "$TMP/out/manifest.json" ]
    grep -q "void tn_k" "$TMP/out/kernel.c"
    # it filled the cache: a run of the declared shapes does not compile
    run tcompile run --time "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" -o "$TMP/o.npz"
    assert_output --partial "from the cache"
}

@test "compile options: checked values, and where they do not apply" {
    run tcompile run --recompile-limit=0 "$FX/mlp.json"
    assert_failure 2
    assert_output --partial "--recompile-limit: '0' is not a count"
    run tcompile check --strict "$FX/mlp.json"
    assert_failure 2
    assert_output --partial "--strict does not apply to 'check'"
    run tcompile run --interpret --explain "$FX/mlp.json"
    assert_failure 2
    run tcompile compile --repeat=3 "$FX/mlp.json"
    assert_failure 2
}

@test "--explain and --profile name a fused kernel by the nodes it computes" {
    # the kernels of mlp: the mm epilogues fused with relu, tanh, and
    # log_softmax; "output" is no node, and flatten (a view the mm reads)
    # is in no kernel of cnn
    run tcompile run --explain "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --partial "float32: linear, relu"
    assert_output --partial "float32: linear_1, tanh"
    assert_output --partial "float32: linear_2, log_softmax"
    refute_output --partial "log_softmax, output"
    run tcompile run --explain "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --partial "pointwise over [2, 5] float32: linear"$'\n'
    refute_output --partial "flatten, linear"
    run tcompile run --profile=json "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/o.npz"
    assert_success
    assert_output --partial '"name": "linear_2, log_softmax", "target": "kernel"'
}

@test "--grads runs the interpreter: --explain is a usage error (exit 2), no crash; --strict is taken" {
    run tcompile run --grads="$TMP/g.npz" --explain "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/o.npz"
    assert_failure 2
    assert_output --partial "--grads runs the interpreter: --explain does not apply"
    run tcompile run --grads="$TMP/g.npz" --strict "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/o.npz"
    assert_success
}
