#!/usr/bin/env bats
# tcompile on the FFTs and complex tensors in graphs: a torch.export graph
# (PyTorch 2.x, tests/fixtures/graph_fft.py) with complex128, complex64 and
# float64 user inputs and complex128/complex64/real outputs through
# torch.fft's functions (ifft, irfft2, rfftn, hfft, ihfft2, fftshift of an
# fft, an fft of complex128 zero-padded to n), which issue 25 found refused
# ("complex128").

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/fft"
}

@test "check: complex128 inputs and outputs and torch.fft's functions are accepted" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok (10 nodes, 3 inputs, 7 outputs)"
}

@test "run: the FFTs' results equal PyTorch 2.x's, interpreted and compiled" {
    outputs_match "$F" 7
    outputs_match "$F" 7 --interpret
}

@test "run: complex inputs and outputs through .npz as through .pt" {
    run tckpt convert "${F}_inputs.pt" "$BATS_TEST_TMPDIR/in.npz"
    assert_success
    run tcompile run --interpret "$F.json" -w "$F.pt" -i "$BATS_TEST_TMPDIR/in.npz" \
        -o "$BATS_TEST_TMPDIR/out.npz"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.npz" "${F}_expected.pt"
    assert_success
    assert_output --regexp "[^0-9]7 tensors match"
}
