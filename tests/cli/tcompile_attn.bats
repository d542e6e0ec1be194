#!/usr/bin/env bats
# tcompile on F.scaled_dot_product_attention: a torch.export graph (PyTorch
# 2.x, tests/fixtures/graph_attn.py) with three
# aten.scaled_dot_product_attention.default nodes and their keyword
# arguments (is_causal; a float mask buffer with scale=; enable_gqa with a
# bool mask buffer and 2 key/value heads for 4 query heads).

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/attn"
}

@test "check: scaled_dot_product_attention's shapes come from its Meta kernel" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok (14 nodes, 7 inputs, 2 outputs)"
}

@test "run --interpret: outputs and the projections' gradients equal PyTorch 2.x's" {
    run tcompile run --interpret "$F.json" -w "$F.pt" -i "${F}_inputs.pt" \
        -o "$BATS_TEST_TMPDIR/out.pt" --grads "$BATS_TEST_TMPDIR/g.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${F}_expected.pt"
    assert_success
    assert_output --regexp "[^0-9]2 tensors match"
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/g.pt" "${F}_grads.pt"
    assert_success
    assert_output --regexp "[^0-9]4 tensors match"
}

@test "run (compiled, the op through libtensor): the same outputs" {
    graph_matches "$F" 2 4
}
