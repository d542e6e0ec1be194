#!/usr/bin/env bats
# tcompile on graphs as torch.export (PyTorch 2.x) writes them by default:
# the training IR, with in-place ops (relu_, add_, mul_, silu_, fill_,
# zero_, sub_, copy_ with a broadcast), writes through views (slice, select, t, view,
# view_as_real, view_as_complex, real, imag), a buffer
# counter, BatchNorm1d in training mode, a mutated user input and Python's
# h[...] = ... syntax
# (tests/fixtures/graph_inplace.py). check rewrites them to their
# functional form; run returns the user outputs and each mutated input as
# INPUT_mutated, equal to PyTorch's.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

# matches NAME MODE...: `tcompile run MODE` of inplace NAME gives every
# tensor of NAME_expected.pt (user outputs and mutated inputs).
matches() {
    local f=$D/$1
    shift
    run tcompile run "$@" "$f.json" -w "$f.pt" -i "${f}_inputs.pt" -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${f}_expected.pt"
    assert_success
}

@test "check: in-place ops on intermediates and through views are rewritten, and pass" {
    run tcompile check "$D/inplace.json"
    assert_success
    assert_output --regexp "ok \([0-9]+ nodes, 3 inputs, 2 outputs\)"
}

@test "check: the mutations of a buffer, of BatchNorm's running statistics and of a user input become outputs" {
    run tcompile check "$D/inplace_buffer.json"
    assert_success
    assert_output --partial "9 inputs, 5 outputs"
    run tcompile check "$D/inplace_userin.json"
    assert_success
    assert_output --partial "2 inputs, 2 outputs"
}

@test "run --interpret: in-place ops and writes through views as PyTorch computes them" {
    matches inplace --interpret
    assert_output --partial "2 tensors match"
}

@test "run (compiled): the same values" {
    matches inplace
    assert_output --partial "2 tensors match"
}

@test "run: the buffer counter, BatchNorm's running_mean, running_var and num_batches_tracked as PyTorch updates them" {
    matches inplace_buffer --interpret
    assert_output --partial "5 tensors match"
    matches inplace_buffer
    assert_output --partial "5 tensors match"
    run tckpt ls "$BATS_TEST_TMPDIR/out.pt"
    assert_output --partial "b_bn_running_var_mutated"
    assert_output --partial "b_n_mutated"
}

@test "run --grads: the loss is the user outputs' (not the updated running statistics'), gradients equal PyTorch's" {
    local f=$D/inplace_buffer
    for mode in --interpret ""; do
        run tcompile run $mode "$f.json" -w "$f.pt" -i "${f}_inputs.pt" -o "$BATS_TEST_TMPDIR/o.pt" \
            --grads "$BATS_TEST_TMPDIR/g.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/g.pt" "${f}_grads.pt"
        assert_success
        assert_output --partial "4 tensors match"
    done
}

@test "run: a mutated user input comes back as y_mutated" {
    matches inplace_userin --interpret
    assert_output --partial "2 tensors match"
    matches inplace_userin
    assert_output --partial "2 tensors match"
    run tckpt ls "$BATS_TEST_TMPDIR/out.pt"
    assert_output --partial "y_mutated"
}

@test "run: Python's in-place syntax (h[:, 0] = x, h[mask] = 0, h[index] = rows with a lifted constant, +=, *=, clamp_)" {
    run tcompile check "$D/inplace_setitem.json"
    assert_success
    matches inplace_setitem --interpret
    assert_output --partial "1 tensor matches"
    matches inplace_setitem
    assert_output --partial "1 tensor matches"
}

@test "run: writes through views with a symbolic batch, at the traced batch and at another" {
    run tcompile check "$D/inplace_dynamic.json"
    assert_success
    for mode in --interpret ""; do
        matches inplace_dynamic $mode
        assert_output --partial "2 tensors match"
        local f=$D/inplace_dynamic
        run tcompile run $mode "$f.json" -w "$f.pt" -i "${f}_b5_inputs.pt" -o "$BATS_TEST_TMPDIR/o5.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/o5.pt" "${f}_b5_expected.pt"
        assert_success
        assert_output --partial "2 tensors match"
    done
}

@test "run: float32 h.add_(float64 y) keeps h's dtype, as PyTorch's in-place op does" {
    run tcompile check "$D/inplace_mixed.json"
    assert_success
    matches inplace_mixed --interpret
    assert_output --partial "1 tensor matches"
    matches inplace_mixed
    assert_output --partial "1 tensor matches"
}

@test "run: out= overloads into a user input (add.out, mul.out) come back as o_mutated" {
    run tcompile check "$D/inplace_outvar.json"
    assert_success
    matches inplace_outvar --interpret
    assert_output --partial "2 tensors match"
    matches inplace_outvar
    assert_output --partial "2 tensors match"
    run tckpt ls "$BATS_TEST_TMPDIR/out.pt"
    assert_output --partial "o_mutated"
}

@test "run: writes through view_as_real, real, imag and view_as_complex are written back (issue 25)" {
    run tcompile check "$D/inplace_complex.json"
    assert_success
    assert_output --partial "2 inputs, 4 outputs"
    matches inplace_complex --interpret
    assert_output --partial "4 tensors match"
    # compiled: its outputs share one storage, complex64 and float32 alike;
    # the .pt gives each dtype its own, as torch.save does distinct tensors
    matches inplace_complex
    assert_output --partial "4 tensors match"
    run tckpt ls "$BATS_TEST_TMPDIR/out.pt"
    assert_output --partial "x_mutated"
    assert_output --partial "z_mutated"
}

@test "run: compiled outputs of two dtypes in one storage load in PyTorch 2.x" {
    require_torch2
    local f=$D/inplace_complex
    run tcompile run "$f.json" -w "$f.pt" -i "${f}_inputs.pt" -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run "$TORCH2" -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for k in b:
    assert a[k].dtype == b[k].dtype, k
    torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4)
print(len(b), "tensors as PyTorch", sorted({str(t.dtype) for t in a.values()}))' \
        "$BATS_TEST_TMPDIR/out.pt" "${f}_expected.pt"
    assert_success
    assert_output --partial "4 tensors as PyTorch"
    assert_output --partial "torch.complex64"
    assert_output --partial "torch.float32"
}

@test "check: an in-place op without a functional form is named" {
    sed 's/aten\.relu_\.default/aten.frobnicate_.default/' "$D/inplace.json" >"$BATS_TEST_TMPDIR/g.json"
    run tcompile check "$BATS_TEST_TMPDIR/g.json"
    assert_failure 1
    assert_output --partial "node 'relu_': unknown target 'torch.ops.aten.frobnicate_.default' (an in-place op, and tensorkit has no functional torch.ops.aten.frobnicate.default)"
}

@test "fixtures: the graphs are the training IR (in-place ops as written, no mutation outputs)" {
    run grep -c '"torch.ops.aten.relu_.default"' "$D/inplace.json"
    assert_output 1
    run grep -c 'buffer_mutation' "$D/inplace_buffer.json"
    assert_output 0
}

# resize_ as torch.export writes it (2.x, exported here): of a tensor no view
# shares, it runs as PyTorch's; where a view was taken first, what the view
# sees would change, and check names the node
@test "run: resize_ of a fresh tensor equals PyTorch 2.x's; check refuses resize_ of a tensor with a view" {
    require_torch2
    run "$TORCH2" -W ignore -c 'import sys, torch
class Fresh(torch.nn.Module):
    def forward(self, x):
        return (x * 2).resize_(3, 4) + 1
class Viewed(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        v = y[0]
        y.resize_(3, 4)
        return v + 1
x = torch.randn(2, 6)
d = sys.argv[1]
for name, m in (("fresh", Fresh()), ("viewed", Viewed())):
    torch.export.save(torch.export.export(m, (x,)), d + "/" + name + ".pt2")
torch.save({"x": x}, d + "/in.pt")
torch.save({"add": Fresh()(x)}, d + "/want.pt")' "$BATS_TEST_TMPDIR"
    assert_success
    run tcompile run "$BATS_TEST_TMPDIR/fresh.pt2" -i "$BATS_TEST_TMPDIR/in.pt" -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run tckpt diff "$BATS_TEST_TMPDIR/out.pt" "$BATS_TEST_TMPDIR/want.pt"
    assert_success
    run tcompile check "$BATS_TEST_TMPDIR/viewed.pt2"
    assert_failure 1
    assert_output --partial "resize_ of a view, or of a tensor a view was taken of"
}
