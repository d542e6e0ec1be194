#!/usr/bin/env bats
# tcompile on graphs that make Python numbers of tensors (issue 23):
# aten.item / _local_scalar_dense giving a SymFloat, SymInt or SymBool by
# the tensor's dtype, and Python's arithmetic on those numbers as torch.export
# writes it (_operator.*, torch.sym_*, math.trunc): tests/fixtures/graph_item.py's
# graphs as PyTorch 2.x exports them. The interpreter runs them, and so does
# the compiler: the numbers, and the ops taking them, are steps of each run.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

@test "check: item, _local_scalar_dense and the sym ops are known" {
    for g in item_float item_int item_dtypes item_core item_grads; do
        run tcompile check --missing "$D/$g.json"
        assert_success
        assert_output "nothing missing (1 graph)"
        run tcompile check "$D/$g.json"
        assert_success
    done
}

@test "run: SymFloat, SymInt and SymBool arithmetic as PyTorch's" {
    outputs_match "$D/item_float" 3 --interpret
    outputs_match "$D/item_int" 3 --interpret
    outputs_match "$D/item_core" 3 --interpret
    # float16, bfloat16, float64, int32, uint8, int8, int16 and bool
    outputs_match "$D/item_dtypes" 8 --interpret
}

@test "run --grads: a parameter's gradient through a SymFloat factor" {
    graph_matches "$D/item_grads" 1 2 --interpret
    graph_matches "$D/item_grads" 1 2
}

@test "run: item() is read from each run's data" {
    P="$D/item_float"
    run tcompile run --interpret "$P.json" -w "$P.pt" -i "${P}_inputs2.pt" \
        -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${P}_expected2.pt"
    assert_success
    assert_output --regexp "[^0-9]3 tensors match"
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${P}_expected.pt"
    assert_failure
}

@test "run --strict: graphs with item() compile, their numbers read at each run" {
    for g in item_float item_int item_dtypes item_core item_roll; do
        P="$D/$g"
        run tcompile run --strict "$P.json" -w "$P.pt" -i "${P}_inputs.pt" \
            -o "$BATS_TEST_TMPDIR/o.pt"
        assert_success
        refute_output --partial "interpreter"
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/o.pt" "${P}_expected.pt"
        assert_success
    done
    # the same library on other data: other numbers (roll's shift, a factor)
    for g in item_float item_roll; do
        P="$D/$g"
        run tcompile run --strict --explain "$P.json" -w "$P.pt" -i "${P}_inputs2.pt" \
            -o "$BATS_TEST_TMPDIR/o.pt"
        assert_success
        assert_output --partial "(from the cache)"
        assert_output --partial "item: reads a tensor's values into a number at run time"
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/o.pt" "${P}_expected2.pt"
        assert_success
    done
    run tcompile run --explain "$D/item_roll.json" -w "$D/item_roll.pt" \
        -i "$D/item_roll_inputs.pt" -o "$BATS_TEST_TMPDIR/o.pt"
    assert_line "  extern aten::roll: roll: takes 'item', a number computed at run time"
    assert_line "  extern aten::add.Scalar: add: takes 'truediv', a number computed at run time"
}

@test "show: the numbers' types; --json keeps SymFloat and SymBool" {
    run tcompile show "$D/item_int.json"
    assert_success
    assert_line "%item: SymInt = aten::item(self=%sum_1)"
    assert_line "%item_1: SymBool = aten::item(self=%any_1)"
    assert_line "%sym_float: SymFloat = torch::sym_float(a=%item)"
    tcompile show --json "$D/item_int.json" >"$BATS_TEST_TMPDIR/g.json"
    # as many as torch.export wrote (7 and 11)
    for arm in as_sym_bool as_sym_float as_sym_int; do
        n=$(grep -o "\"$arm\"" "$D/item_int.json" | wc -l)
        run grep -o "\"$arm\"" "$BATS_TEST_TMPDIR/g.json"
        assert_equal "${#lines[@]}" "$n"
    done
    for f in .pt _inputs.pt _expected.pt; do cp "$D/item_int$f" "$BATS_TEST_TMPDIR/g$f"; done
    outputs_match "$BATS_TEST_TMPDIR/g" 3 --interpret
}

@test "show --json: PyTorch 2.x's deserializer reads it back and runs it as PyTorch" {
    require_torch2
    # the numbers' sym_*_values, symbolic sizes (inplace_dynamic's batch,
    # opinfo_dynamic's sizes read from data) and functionalisation's own
    # sym_size values, as torch.export's serializer writes them
    for g in item_int item_float item_core item_dtypes item_roll inplace_dynamic opinfo_dynamic; do
        P="$D/$g"
        tcompile show --json "$P.json" >"$BATS_TEST_TMPDIR/g.json"
        run "$TORCH2" -W ignore "$TN_SRCDIR/tests/cli/tcompile/torch_load.py" \
            "$BATS_TEST_TMPDIR/g.json" "$P.pt" "${P}_inputs.pt" "$BATS_TEST_TMPDIR/o.pt"
        assert_success
        run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/o.pt" "${P}_expected.pt"
        assert_success
    done
}
