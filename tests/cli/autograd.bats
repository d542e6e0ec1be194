#!/usr/bin/env bats
# Autograd: the op gradients again under PyTorch 2.x (the committed fixture
# is 1.13's), and tgen's errors for derivatives.yaml.

load helper

@test "op gradients agree with PyTorch 2.x" {
    require_torch2
    need_built tests/unit/test_autograd
    mkdir -p "$BATS_TEST_TMPDIR/autograd" "$BATS_TEST_TMPDIR/x"
    run "$TORCH2" -W ignore "$TN_SRCDIR/tests/fixtures/autograd_ops.py" "$BATS_TEST_TMPDIR/autograd"
    assert_success
    run "$TORCH2" -W ignore "$TN_SRCDIR/tests/fixtures/autograd_ops.py" --names "$BATS_TEST_TMPDIR/autograd"
    assert_success
    TN_FIXTURES=$BATS_TEST_TMPDIR/x run "$TN_BUILDDIR/tests/unit/test_autograd"
    assert_success
    assert_output --partial "from PyTorch 2."
    refute_output --partial "not ok"
}

@test "tgen --derivatives compiles the formulas into Autograd kernels" {
    run tgen --header "$BATS_TEST_TMPDIR/ops.h" --source "$BATS_TEST_TMPDIR/ops.c" \
        --derivatives "$TN_SRCDIR/schemas/derivatives.yaml" --autograd "$BATS_TEST_TMPDIR/ad.c" \
        "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_success
    run grep -c "MulBackward0" "$BATS_TEST_TMPDIR/ad.c"
    assert_output 1
    run grep -q "TN_KEY_AUTOGRAD\] = GEN_FN(tn__autograd_mul_Tensor)" "$BATS_TEST_TMPDIR/ops.c"
    assert_success
}

@test "tgen reads a number's exponent with its sign (1e-12 is one number, not 1e minus 12)" {
    printf -- '- name: mul.Tensor\n  self: grad * (other + 1e-12)\n  other: grad * 2.5E+3 - 4e2\n' \
        > "$BATS_TEST_TMPDIR/n.yaml"
    run tgen --header "$BATS_TEST_TMPDIR/ops.h" --private-header "$BATS_TEST_TMPDIR/ops_gen.h" \
        --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/n.yaml" \
        --autograd "$BATS_TEST_TMPDIR/ad.c" "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_success
    run grep -cF '{TN__DX_NUM, 0, '"'"' '"'"', "1e-12"}' "$BATS_TEST_TMPDIR/ad.c"
    assert_output 1
    run grep -cF '{TN__DX_NUM, 0, '"'"' '"'"', "2.5E+3"}' "$BATS_TEST_TMPDIR/ad.c"
    assert_output 1
    run grep -cF '{TN__DX_NUM, 0, '"'"' '"'"', "4e2"}' "$BATS_TEST_TMPDIR/ad.c"
    assert_output 1
    run grep -cF '"1e"' "$BATS_TEST_TMPDIR/ad.c"
    assert_output 0
}

@test "tgen names the place of a bad formula" {
    printf -- '- name: mul.Tensor\n  self: grad * (other\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/bad.yaml" \
        --autograd "$BATS_TEST_TMPDIR/ad.c" "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "bad.yaml:2:"
    assert_output --partial "expected ')'"
    printf -- '- name: mul.Tensor\n  self: grad * nothing\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/bad.yaml" \
        --autograd "$BATS_TEST_TMPDIR/ad.c" "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "'nothing' is not grad, result or an argument of mul"
    printf -- '- name: no_such_op\n  self: grad\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/bad.yaml" \
        "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "bad.yaml:1:3: name: 'no_such_op' is not a functional op"
}

@test "tgen writes the formulas and define: entries as a table; a bad define is named" {
    run tgen --header "$BATS_TEST_TMPDIR/ops.h" --private-header "$BATS_TEST_TMPDIR/ops_gen.h" \
        --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$TN_SRCDIR/schemas/derivatives.yaml" \
        --autograd "$BATS_TEST_TMPDIR/ad.c" "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_success
    # mul's formula for self (grad * other), its call of an op resolved
    run grep -F '{TN__DX_BIN, 2, '"'"'*'"'"', ""}, {TN__DX_ID, 0, '"'"' '"'"', "grad"}, {TN__DX_ID, 0, '"'"' '"'"', "other"},' "$BATS_TEST_TMPDIR/ad.c"
    assert_success
    run grep -c '"aten::_softmax_backward_data"' "$BATS_TEST_TMPDIR/ad.c"
    assert_output 3 # _softmax's formula, _softmax_backward_data's own and its entry
    run grep -F '{"_gelu_bw", "grad, self, approximate='"'"'tanh'"'"'", ' "$BATS_TEST_TMPDIR/ad.c"
    assert_success
    printf -- '- define: _x\n  result: grad\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/bad.yaml" \
        "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "bad.yaml:1:11: define: expected name(parameters)"
    printf -- '- define: _x(grad)\n  reslt: grad\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$BATS_TEST_TMPDIR/bad.yaml" \
        "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "bad.yaml:2:3: define: 'reslt' is not result or result<k>"
    printf -- '- define: _x(grad)\n  result: grad * (grad\n' > "$BATS_TEST_TMPDIR/bad.yaml"
    run tgen --private-header "$BATS_TEST_TMPDIR/ops_gen.h" --source "$BATS_TEST_TMPDIR/ops.c" \
        --derivatives "$BATS_TEST_TMPDIR/bad.yaml" --autograd "$BATS_TEST_TMPDIR/ad.c" \
        "$TN_SRCDIR/schemas/native_functions.yaml"
    assert_failure 2
    assert_output --partial "bad.yaml:2:"
    assert_output --partial "expected ')'"
}
