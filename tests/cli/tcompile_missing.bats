#!/usr/bin/env bats
# tcompile check --missing GRAPH...: the targets a set of graphs needs that
# tensorkit lacks, with how many graphs need each and how many nodes use
# it, most needed first; --json; exit 1 when something is missing. The
# graphs are the committed torch.export fixtures with targets renamed to
# ones no registry has.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
    T=$BATS_TEST_TMPDIR
    # mlp: linear x3, relu, tanh, log_softmax
    sed -e 's/aten\.relu\.default/aten.frobnicate.default/' \
        -e 's/aten\.tanh\.default/aten.zork.default/' \
        -e 's/aten\.linear\.default/aten.blorp.default/' "$D/mlp.json" >"$T/a.json"
    sed -e 's/aten\.relu\.default/aten.frobnicate.default/' "$D/mlp.json" >"$T/b.json"
    # an in-place op with no functional form; inplace.json's others have one
    sed -e 's/aten\.relu_\.default/aten.frobnicate_.default/' "$D/inplace.json" >"$T/c.json"
}

@test "check --missing: one line per missing target, most needed first, exit 1" {
    run tcompile check --missing "$T/a.json" "$T/b.json" "$T/c.json" "$D/inplace.json"
    assert_failure 1
    assert_line --index 0 "torch.ops.aten.frobnicate.default: 2 graphs, 2 uses"
    assert_line --index 1 "torch.ops.aten.blorp.default: 1 graph, 3 uses"
    assert_line --index 2 "torch.ops.aten.frobnicate_.default: 1 graph, 1 use"
    assert_line --index 3 "torch.ops.aten.zork.default: 1 graph, 1 use"
    assert_equal "${#lines[@]}" 4
}

@test "check --missing: in-place ops with a functional form are not missing; nothing missing is exit 0" {
    run tcompile check --missing "$D/inplace.json" "$D/mlp.json" "$D/inplace_buffer.json"
    assert_success
    assert_output "nothing missing (3 graphs)"
}

@test "check --missing --json: targets, counts and the graphs that need each" {
    run tcompile check --missing --json "$T/a.json" "$T/b.json"
    assert_failure 1
    run python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["graphs"] == 2, d
m = {e["target"]: e for e in d["missing"]}
f = m["torch.ops.aten.frobnicate.default"]
assert (f["graphs"], f["uses"]) == (2, 2), f
assert [p.rsplit("/", 1)[-1] for p in f["in"]] == ["a.json", "b.json"], f
assert m["torch.ops.aten.blorp.default"]["uses"] == 3
assert d["missing"][0]["target"] == "torch.ops.aten.frobnicate.default"
print("ok")' <<<"$output"
    assert_success
    assert_output "ok"
}

@test "check --missing: an unreadable graph is exit 2, naming it" {
    echo '{"graph_module": 3}' >"$T/bad.json"
    run tcompile check --missing "$T/a.json" "$T/bad.json"
    assert_failure 2
    assert_output --partial "bad.json"
}

@test "check: several graphs, one report each; exit 1 when one has problems" {
    run tcompile check "$D/mlp.json" "$T/b.json"
    assert_failure 1
    assert_line --index 0 --partial "mlp.json: ok"
    assert_output --partial "b.json: node 'relu': unknown target 'torch.ops.aten.frobnicate.default'"
    run tcompile check "$D/mlp.json" "$D/inplace.json"
    assert_success
}

@test "usage: --missing applies to check alone; check needs a GRAPH" {
    run tcompile run --missing "$D/mlp.json"
    assert_failure 2
    assert_output --partial "--missing does not apply to 'run'"
    run tcompile check --missing
    assert_failure 2
    assert_output --partial "check: needs a GRAPH"
}
