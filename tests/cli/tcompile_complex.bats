#!/usr/bin/env bats
# complex128 in graphs (issue 23): .to(torch.complex128) converts, as
# PyTorch's, from float64, float32, int64, bool and complex64
# (tests/fixtures/graph_complex128.py); an op computing on complex128 (mul)
# gives PyTorch's values, interpreted and compiled.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

@test "to(complex128): check and run, as PyTorch 2.x" {
    run tcompile check "$D/complex128.json"
    assert_success
    outputs_match "$D/complex128" 5 --interpret
    outputs_match "$D/complex128" 5
}

@test "mul on complex128: computed as PyTorch 2.x" {
    run tcompile check "$D/complex128_mul.json"
    assert_success
    outputs_match "$D/complex128_mul" 1 --interpret
    outputs_match "$D/complex128_mul" 1
}
