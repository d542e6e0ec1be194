#!/usr/bin/env bats
# tcompile on advanced indexing: a torch.export graph (PyTorch 2.x,
# tests/fixtures/graph_index.py) with x[idx], x[:, idx] (as_optional_tensors
# holding None), x[rows, cols] and index_put(accumulate=True), whose indices
# go to the ops' Tensor?[] argument.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/index"
    TMP=$BATS_TEST_TMPDIR
}

@test "check: Tensor?[] arguments (as_tensors, as_optional_tensors with None) are accepted" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok (6 nodes, 4 inputs, 4 outputs)"
}

@test "run: indexing outputs and the weight's gradient equal PyTorch 2.x's" {
    run tcompile run "$F.json" -w "$F.pt" -i "${F}_inputs.pt" -o "$TMP/out.pt" --grads "$TMP/g.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/out.pt" "${F}_expected.pt"
    assert_success
    assert_output --partial "4 tensors match"
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/g.pt" "${F}_grads.pt"
    assert_success
    assert_output --partial "1 tensors match"
}
