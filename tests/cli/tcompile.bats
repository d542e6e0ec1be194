#!/usr/bin/env bats
# tcompile: check, show and run on graphs that real PyTorch exported
# (tests/fixtures/graph: torch.export on 2.x, torch.fx on 1.13, .pt2
# archives), exit statuses, pipes, and live exports where PyTorch is here.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph"
    TMP=$BATS_TEST_TMPDIR
}

@test "check: an exported graph is ok (exit 0)" {
    run tcompile check "$FX/torch2/mlp.json"
    assert_success
    assert_output --partial "ok (6 nodes, 7 inputs, 1 output)"
    run tcompile check "$FX/torch2/mlp.pt2"
    assert_success
}

@test "check: each problem names the node, exit 1; --json says the same" {
    sed 's/torch.ops.aten.relu.default/torch.ops.aten.frobnicate.default/' \
        "$FX/torch2/mlp.json" >"$TMP/bad.json"
    run tcompile check "$TMP/bad.json"
    assert_failure 1
    assert_output --partial "node 'relu': unknown target 'torch.ops.aten.frobnicate.default'"
    run tcompile check --json "$TMP/bad.json"
    assert_failure 1
    run python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert not d["ok"]; assert d["problems"][0]["node"] == "relu", d' "$output"
    assert_success
}

@test "check: malformed JSON and unsupported arms are errors (exit 2)" {
    printf '{"graph_module": [' >"$TMP/cut.json"
    run tcompile check "$TMP/cut.json"
    assert_failure 2
    assert_output --partial "cut.json:1:"
    sed 's/"as_int": -1/"as_graph": {}/' "$FX/torch2/mlp.json" >"$TMP/hop.json"
    run tcompile check "$TMP/hop.json"
    assert_failure 2
    assert_output --partial "node 'log_softmax': the argument kind 'as_graph' is not supported"
    run tcompile check "$TMP/missing.json"
    assert_failure 2
}

@test "show: one line per node with shapes; --dot is a digraph; --json reads back" {
    run tcompile show "$FX/torch2/block.json"
    assert_success
    assert_line --partial "%x: float32[s77, 5, 32] = input"
    assert_line --partial "%p_qkv_weight: float32[96, 32] = parameter qkv.weight"
    assert_line --regexp '^%getitem: float32\[s77, 5, 32\], %getitem_1: .* = aten::split.Tensor\('
    assert_line "return (%add_1)"
    run tcompile show --dot "$FX/torch1/mlp.json"
    assert_success
    assert_line --index 0 "digraph graph_module {"
    assert_output --partial '"fc1" -> "relu" [label="float32[3, 16]"];'
    tcompile show --json "$FX/torch2/block.json" >"$TMP/again.json"
    # written and read back, it checks as the original does (which needs
    # the block's ops)
    status0=0
    tcompile check "$FX/torch2/block.json" >/dev/null || status0=$?
    run tcompile check "$TMP/again.json"
    assert_equal "$status" "$status0"
}

@test "run: outputs equal PyTorch's (torch.export, torch.fx and .pt2)" {
    for t in torch1 torch2; do
        for m in mlp block text cnn; do
            tcompile check "$FX/$t/$m.json" >/dev/null 2>&1 || continue # an op not there yet
            run tcompile run "$FX/$t/$m.json" -w "$FX/$t/$m.pt" -i "$FX/$t/${m}_inputs.pt" \
                -o "$TMP/$m.pt"
            assert_success
            run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/$m.pt" "$FX/$t/${m}_expected.pt"
            assert_success
        done
    done
    run tcompile run "$FX/torch2/mlp.pt2" -i "$FX/torch2/mlp_inputs.pt" -o "$TMP/p.npz" --time
    assert_success
    assert_output --regexp 'run took [0-9.]+ ms'
}

@test "run --grads: gradients of the outputs' sum equal PyTorch's" {
    # every parameter of the MLP, the CNN, the transformer block and the
    # text classifier
    for t in torch1 torch2; do
        for m in mlp:6 cnn:10 block:12 text:5; do
            run tcompile run "$FX/$t/${m%:*}.json" -w "$FX/$t/${m%:*}.pt" \
                -i "$FX/$t/${m%:*}_inputs.pt" --grads "$TMP/g.pt"
            assert_success
            run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/g.pt" "$FX/$t/${m%:*}_grads.pt"
            assert_success
            assert_output --partial "${m#*:} tensors match"
        done
    done
}

@test "run: lists of tensors (torch.cat, torch.stack): outputs and gradients equal PyTorch's" {
    for t in torch2 torch1; do
        local f="$FX/$t/cat"
        run tcompile run "$f.json" -w "$f.pt" -i "${f}_inputs.pt" -o "$TMP/cat.pt" \
            --grads "$TMP/g.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/cat.pt" "${f}_expected.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/g.pt" "${f}_grads.pt"
        assert_success
        assert_output --partial "6 tensors match"
    done
}

@test "run: pipes: a .npy input from stdin, .npz outputs to stdout" {
    tckpt get "$FX/torch2/mlp_inputs.pt" x -o "$TMP/x.npy"
    tcompile run "$FX/torch2/mlp.json" -w "$FX/torch2/mlp.pt" -i x=- -o - \
        <"$TMP/x.npy" >"$TMP/y.npz"
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/y.npz" "$FX/torch2/mlp_expected.pt"
    assert_success
    # the graph itself from stdin
    run tcompile check - <"$FX/torch2/mlp.json"
    assert_success
}

@test "run: a symbolic batch runs at another size; wrong inputs are named" {
    tcompile check "$FX/torch2/block.json" >/dev/null 2>&1 || skip "the block's ops are not all there yet"
    run tcompile run "$FX/torch2/block.json" -w "$FX/torch2/block.pt" \
        -i "$FX/torch2/block_b3_inputs.pt" -o "$TMP/b3.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/b3.pt" "$FX/torch2/block_b3_expected.pt"
    assert_success
    run tcompile run "$FX/torch2/mlp.json" -w "$FX/torch2/mlp.pt" -i "x=$FX/torch2/block_b3_inputs.pt"
    assert_failure 2
    assert_output --partial "input 'x' is float32[3, 5, 32], but the graph declares float32 with 2 dimensions"
    run tcompile run "$FX/torch2/mlp.json" -i "$FX/torch2/mlp_inputs.pt"
    assert_failure 2
    assert_output --partial "no value for the parameter 'fc1.weight'"
}

@test "usage errors exit 2" {
    run tcompile
    assert_failure 2
    run tcompile frob x.json
    assert_failure 2
    assert_output --partial "unknown command 'frob'"
    run tcompile run
    assert_failure 2
    run tcompile --help
    assert_success
    assert_output --partial "Usage: tcompile COMMAND"
}

@test "live: torch2graph.py with PyTorch 2.x exports what tcompile runs" {
    require_torch2
    "$TORCH2" -W ignore "$TN_SRCDIR/share/tools/torch2graph.py" \
        "$TN_SRCDIR/tests/fixtures/graph_models.py:mlp" -o "$TMP/m" --pt2
    run tcompile run "$TMP/m.pt2" -i "$TMP/m_inputs.pt" -o "$TMP/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/out.pt" "$TMP/m_expected.pt"
    assert_success
}

@test "live: torch2graph.py with PyTorch 1.13 (torch.fx) exports what tcompile runs" {
    require_torch1
    /usr/bin/python3 -W ignore "$TN_SRCDIR/share/tools/torch2graph.py" \
        "$TN_SRCDIR/tests/fixtures/graph_models.py:mlp" -o "$TMP/m" --dynamic-batch
    run tcompile run "$TMP/m.json" -w "$TMP/m.pt" -i "$TMP/m_inputs.pt" -o "$TMP/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$TMP/out.pt" "$TMP/m_expected.pt"
    assert_success
}
