#!/usr/bin/env bats
# tcompile's batched matrix products (issues 17, 23; lib/compile/bmm.c):
# attention's q @ k^T and att @ v on [B, H, S, D] permuted views and a
# product whose batch broadcasts, as torch.export gives them (aten.matmul)
# and in the core ATen form (expand, clone, view to [B*H, S, D], bmm),
# tests/fixtures/graph_bmm.py (PyTorch 2.x). Compiled values and
# gradients (eager autograd, and the joint graph's forward and backward
# compiled) equal PyTorch's.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
    O="$BATS_TEST_TMPDIR/j"
}

# joint_matches PREFIX [OPTION...]: tcompile grad, then its forward and its
# backward (given the options: the input when it reads it) compiled
# (--strict); the 5 gradients equal PyTorch's.
joint_matches() {
    local p=$1
    shift
    run tcompile grad "$p.json" -o "$O"
    assert_success
    run tcompile run --strict "$O/forward.json" -w "$p.pt" -i "${p}_inputs.pt" -o "$O/fw.npz"
    assert_success
    run tcompile run --strict "$O/backward.json" -w "$p.pt" "$@" -i "$O/fw.npz" \
        -o "$O/grads.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$O/grads.pt" "${p}_grads.pt"
    assert_success
    assert_output --regexp "[^0-9]5 tensors match"
}

@test "matmul of [B, H, S, D] views: batched products, no copy of the heads, PyTorch's values" {
    graph_matches "$D/bmm" 2 5 --strict
    run tcompile compile --explain "$D/bmm.json" -w "$D/bmm.pt" -i "$D/bmm_inputs.pt" -o "$O/c"
    assert_success
    refute_output --partial "extern aten::matmul"
    assert_output --partial "extern bmm [2, 3, 7, 4] x [2, 3, 4, 7]: matmul "
    assert_output --partial "extern bmm [2, 3, 7, 7] x [2, 3, 7, 4]: matmul_1 "
    # the broadcast operand [2, 1, 7, 12] by [3, 12, 5]: read with batch stride 0
    assert_output --partial "extern bmm [2, 3, 7, 12] x [2, 3, 12, 5]: matmul_2 "
    # q, k and v are read where the qkv projection wrote them: one kernel
    # (its bias) before the first product, none for the permutes
    refute_output --regexp "kernel tn_k[0-9]+: pointwise over \[2, 3, 7, 4\]"
    refute_output --regexp "kernel tn_k[0-9]+: pointwise over \[2, 3, 4, 7\]"
}

@test "bmm of expand, clone and view chains (core ATen form): read through the views" {
    graph_matches "$D/bmm_core" 2 5 --strict
    run tcompile compile --explain "$D/bmm_core.json" -w "$D/bmm_core.pt" \
        -i "$D/bmm_core_inputs.pt" -o "$O/c"
    assert_success
    refute_output --partial "extern aten::bmm"
    assert_output --partial "extern bmm [2, 3, 7, 4] x [2, 3, 4, 7]: bmm "
    refute_output --regexp "kernel tn_k[0-9]+: pointwise over \[2, 3, 7, 4\]"
    refute_output --regexp "kernel tn_k[0-9]+: pointwise over \[2, 3, 4, 7\]"
}

@test "grad: the joint graphs' batched products, compiled, give PyTorch's gradients" {
    # matmul's gradient of the broadcast [3, 12, 5] operand is summed over
    # the batch; addmm's bias gradient over the rows
    joint_matches "$D/bmm" -i "$D/bmm_inputs.pt"
    run tcompile compile --explain "$O/backward.json" -w "$D/bmm.pt" -i "$D/bmm_inputs.pt" \
        -i "$O/fw.npz" -o "$O/c"
    assert_success
    refute_output --partial "extern aten::matmul"
    joint_matches "$D/bmm_core"
}
