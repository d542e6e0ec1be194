#!/usr/bin/env bats
# tcompile's squeeze-excite block, efficientnet_b0's MBConv in small
# (tests/fixtures/graph_se.py, PyTorch 2.x): conv, batch norm and SiLU, and
# the feature map times its per-channel gate, sigmoid(conv(silu(conv(
# adaptive_avg_pool2d)))). What a kernel computes of values the same along
# its inner loop (the gate's sigmoid, the batch norm's 1 / sqrt(var + eps))
# comes before that loop: left inside, the gate's sigmoid kept the loop
# from vectorizing, and efficientnet_b0's gate products at 224 x 224 took
# three times the interpreter's mul.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/se"
    export TN_COMPILE_CACHE="$BATS_TEST_TMPDIR/cache"
}

# The inner loops (for r) of kernel.c's kernel whose comment starts with $1.
inner_loops() {
    awk -v k="/* $1:" 'index($0, k) == 1 { on = 1; next }
        on && /^}/ { on = 0 }
        on && /for \(int64_t r = / { loop = 1 }
        on && loop { print }
        loop && /^        }$/ { loop = 0 }' "$BATS_TEST_TMPDIR/out/kernel.c"
}

@test "run: the squeeze-excite block equals PyTorch 2.x's, compiled and interpreted" {
    outputs_match "$F" 1
    outputs_match "$F" 1 --interpret
}

@test "compile: the gate's sigmoid and the batch norm's 1/sqrt(var + eps) come before the inner loop" {
    run tcompile compile "$F.json" -w "$F.pt" -i "${F}_inputs.pt" -o "$BATS_TEST_TMPDIR/out"
    assert_success
    run inner_loops "mul"
    assert_success
    assert_output --partial "[ob + r] = "
    refute_output --partial "tn_sigmoidf"
    run inner_loops "batch_norm, silu"
    assert_success
    assert_output --partial "tn_expf"
    refute_output --partial "sqrtf"
}
