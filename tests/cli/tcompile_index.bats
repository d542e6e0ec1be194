#!/usr/bin/env bats
# tcompile on advanced indexing: a torch.export graph (PyTorch 2.x,
# tests/fixtures/graph_index.py) with x[idx], x[:, idx] (as_optional_tensors
# holding None), x[rows, cols] and index_put(accumulate=True), whose indices
# go to the ops' Tensor?[] argument.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/index"
}

@test "check: Tensor?[] arguments (as_tensors, as_optional_tensors with None) are accepted" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok (6 nodes, 4 inputs, 4 outputs)"
}

@test "run: indexing outputs and the weight's gradient equal PyTorch 2.x's" {
    graph_matches "$F" 4 1
}
