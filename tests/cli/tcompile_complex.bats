#!/usr/bin/env bats
# complex128 in graphs (issue 23): .to(torch.complex128) converts, as
# PyTorch's, from float64, float32, int64, bool and complex64
# (tests/fixtures/graph_complex128.py); an op computing on complex128 is
# refused with its name, as complex128 is a storage dtype outside the FFTs.

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

@test "mul on complex128: refused with the node's name" {
    P="$D/complex128_mul"
    run tcompile run --interpret "$P.json" -w "$P.pt" -i "${P}_inputs.pt" -o "$BATS_TEST_TMPDIR/o.pt"
    assert_failure 2
    assert_output --partial "node 'mul'"
    assert_output --partial "\"mul\" not implemented for 'ComplexDouble'"
}
