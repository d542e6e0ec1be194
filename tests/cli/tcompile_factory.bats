#!/usr/bin/env bats
# tcompile on the factories and aliases real models' torch.export graphs
# name (arange, zeros, ones, full, scalar_tensor, the _like and new_ forms,
# __and__.Tensor, expand_as) and the core ATen ops added with them
# (hardswish_, hardsigmoid, pow.Tensor_Scalar, min.other, clamp_min,
# where.ScalarOther, slice_scatter, fmod.Scalar, special_erfinv, and the view
# as_strided): tests/fixtures/graph_factory.py's graph as PyTorch 2.x
# exports it (issue 23); empty, empty_strided and diagonal: graph_empty.py's;
# rand, randn and randperm with run --seed: graph_random.py's.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/factory"
}

@test "check: every target known, the factories' shapes and dtypes from the Meta pass" {
    run tcompile check "$F.json"
    assert_success
    assert_output --regexp "ok \(61 nodes, 5 inputs, 1 output\)"
    run tcompile check --missing "$F.json"
    assert_success
    assert_output "nothing missing (1 graph)"
}

@test "run --interpret: the output and the parameters' gradients equal PyTorch 2.x's" {
    graph_matches "$F" 1 2 --interpret
}

@test "run (compiled, --strict): the same output and gradients" {
    graph_matches "$F" 1 2 --strict
}

@test "run --explain: the constant factories are lowered into the kernels, none through libtensor" {
    run tcompile run --explain --strict "$F.json" -w "$F.pt" -i "${F}_inputs.pt" -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    assert_output --regexp "61 nodes: [0-9]+ fused"
    refute_output --regexp "extern aten::(zeros|ones|full|new_zeros|new_ones|new_full|zeros_like|ones_like|full_like)[.: ]"
    # the sums of the factories reach the last kernel's label
    assert_output --regexp "kernel tn_k[0-9]+: pointwise over \[2, 4, 6\] float32: .*add_8"
}

# tests/fixtures/graph_empty.py: empty.memory_format (channels_last, then
# permute and view), empty_strided with padded strides, and diagonal
@test "empty, empty_strided, diagonal: check (Meta strides) and run, as PyTorch 2.x" {
    E="$TN_SRCDIR/tests/fixtures/graph/torch2/empty"
    run tcompile check "$E.json"
    assert_success
    assert_output --regexp "ok \(27 nodes, 3 inputs, 1 output\)"
    run tcompile check --missing "$E.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    graph_matches "$E" 1 2 --interpret
    graph_matches "$E" 1 2 --strict
}

# tests/fixtures/graph_space.py: linspace and logspace in their four
# overloads each (a 0-dim tensor start or end a graph input), dtypes, a base
@test "linspace, logspace (default, Tensor_Tensor, Tensor_Scalar, Scalar_Tensor): as PyTorch 2.x" {
    P="$TN_SRCDIR/tests/fixtures/graph/torch2/space"
    run tcompile check "$P.json"
    assert_success
    assert_output --regexp "ok \(18 nodes, 3 inputs, 1 output\)"
    run tcompile check --missing "$P.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    graph_matches "$P" 1 1 --interpret
    graph_matches "$P" 1 1 --strict
}

# tests/fixtures/graph_triangle.py: tril_indices and triu_indices (session 45;
# the OpInfo sweep skips their samples, which hold no tensor), indexing a
# parameter so that its gradient goes through them
@test "tril_indices, triu_indices: check and run, as PyTorch 2.x" {
    P="$TN_SRCDIR/tests/fixtures/graph/torch2/triangle"
    run tcompile check "$P.json"
    assert_success
    assert_output --regexp "ok \(21 nodes, 2 inputs, 6 outputs\)"
    run tcompile check --missing "$P.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    graph_matches "$P" 6 1 --interpret
    graph_matches "$P" 6 1 --strict
}

# tests/fixtures/graph_symint.py: sym_numel.default of a dynamic batch
@test "sym_numel: check and run, as PyTorch 2.x" {
    S="$TN_SRCDIR/tests/fixtures/graph/torch2/symint"
    run tcompile check --missing "$S.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    graph_matches "$S" 1 2 --interpret
    graph_matches "$S" 1 2 --strict
}

# tests/fixtures/graph_random.py: rand (float32, float64), randn and randperm
# (int64 and int32) in a forward, drawn as PyTorch's CPU generator draws
# them after torch.manual_seed(2024): tcompile run --seed=2024
@test "rand, randn, randperm: run --seed gives torch.manual_seed's numbers" {
    R="$TN_SRCDIR/tests/fixtures/graph/torch2/random"
    run tcompile check --missing "$R.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    outputs_match "$R" 2 --interpret --seed=2024
    outputs_match "$R" 2 --strict --seed=2024
    # another seed, other numbers
    run tcompile run --interpret --seed=7 "$R.json" -w "$R.pt" -i "${R}_inputs.pt" \
        -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${R}_expected.pt"
    assert_failure
    run tcompile check --seed=1 "$R.json"
    assert_failure 2
    assert_output --partial "--seed"
}

# tests/fixtures/graph_random_ops.py: every random op torch.export writes
# (rand twice, randn, randint and .low, randperm, the _like forms, bernoulli
# and .p, normal's four overloads; float32, float64, bfloat16, int64),
# after torch.manual_seed(42): tcompile run --seed=42, bit for bit, the
# interpreter and the compiled graph alike (which runs them as steps of
# their own, each once per run, in graph order)
@test "random ops: run --seed gives torch.manual_seed's numbers bit for bit; two calls, two draws" {
    R="$TN_SRCDIR/tests/fixtures/graph/torch2/random_ops"
    run tcompile check --missing "$R.json"
    assert_success
    assert_output "nothing missing (1 graph)"
    for mode in --interpret --strict; do
        run tcompile run $mode --seed=42 "$R.json" -i "${R}_inputs.pt" -o "$BATS_TEST_TMPDIR/o.pt"
        assert_success
        run tckpt diff --atol 0 --rtol 0 "$BATS_TEST_TMPDIR/o.pt" "${R}_expected.pt"
        assert_success
        assert_output --partial "23 tensors match"
    done
    # the compiler keeps each random node a step of its own, never merged
    run tcompile run --strict --explain --seed=42 "$R.json" -i "${R}_inputs.pt" \
        -o "$BATS_TEST_TMPDIR/o.pt"
    assert_success
    assert_output --partial "extern aten::rand: rand: it draws random numbers"
    assert_output --partial "extern aten::rand: rand_1: it draws random numbers"
    # the two rand calls of one graph drew two different tensors
    tckpt get "$BATS_TEST_TMPDIR/o.pt" rand -o "$BATS_TEST_TMPDIR/a.npy"
    tckpt get "$BATS_TEST_TMPDIR/o.pt" rand_1 -o "$BATS_TEST_TMPDIR/b.npy"
    run cmp -s "$BATS_TEST_TMPDIR/a.npy" "$BATS_TEST_TMPDIR/b.npy"
    assert_failure
}
