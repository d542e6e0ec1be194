#!/usr/bin/env bats
# tcompile run --profile (issue 27): time per node and per op kind, as a
# table on a terminal and JSON otherwise, on stderr; the outputs unchanged.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    TMP=$BATS_TEST_TMPDIR
    # checks a profile (JSON, $1) against the graph ($2): every node once,
    # op kinds counted from the graph's targets, sorted, times summing to
    # no more than the run
    cat >"$TMP/check.py" <<'PY'
import collections, json, sys
p = json.load(open(sys.argv[1]))
g = json.load(open(sys.argv[2]))["graph_module"]["graph"]["nodes"]
def name(n):
    o = n["outputs"][0]
    return n.get("name") or (o["as_tensor"]["name"] if "as_tensor" in o
                             else o["as_tensors"][0]["name"])
assert p["mode"] == "interpreter" and p["runs"] == int(sys.argv[3]), p
assert sorted(x["name"] for x in p["nodes"]) == sorted(name(n) for n in g), p["nodes"]
want = collections.Counter(n["target"] for n in g)
assert {o["target"]: o["count"] for o in p["ops"]} == dict(want), (p["ops"], want)
for o in p["ops"]:
    ms = sum(x["ms"] for x in p["nodes"] if x["target"] == o["target"])
    assert abs(o["total_ms"] - ms) <= 1e-6 + 1e-9 * ms, (o, ms)
    assert abs(o["mean_ms"] * o["count"] - o["total_ms"]) <= 1e-6, o
nodes_ms = sum(x["ms"] for x in p["nodes"])
assert abs(nodes_ms - p["nodes_ms"]) <= 1e-6, (nodes_ms, p["nodes_ms"])
assert 0 < p["nodes_ms"] <= p["wall_ms"], p
for l in (p["ops"], p["nodes"]):
    t = [x.get("total_ms", x.get("ms")) for x in l]
    assert t == sorted(t, reverse=True), t
    assert all(0 <= x["percent"] <= 100 for x in l), l
print("ok", len(p["nodes"]), len(p["ops"]))
PY
}

@test "run --profile off a terminal: one JSON object on stderr, every node, op kinds counted" {
    for m in block mlp attn; do
        tcompile run "$FX/$m.json" -w "$FX/$m.pt" -i "$FX/${m}_inputs.pt" -o "$TMP/$m.npz" \
            --profile 2>"$TMP/$m.prof"
        run python3 "$TMP/check.py" "$TMP/$m.prof" "$FX/$m.json" 1
        assert_success
        assert_output --partial "ok "
        [ -s "$TMP/$m.npz" ]
    done
    # the fastest of --repeat, and =json given explicitly
    tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" -o "$TMP/b.npz" \
        --profile=json --repeat=3 2>"$TMP/b.prof"
    run python3 "$TMP/check.py" "$TMP/b.prof" "$FX/block.json" 3
    assert_success
}

@test "run --profile=table: op kinds with their counts, then every node" {
    run tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" \
        -o "$TMP/b.npz" --profile=table
    assert_success
    assert_line --regexp "^tcompile: profile of .*block.json: 23 nodes took [0-9.]+ ms of the run's [0-9.]+ ms"
    assert_line --regexp "^Op kind +Count +Total ms +% run +Mean ms$"
    assert_line --regexp "^aten\.linear\.default +4 +[0-9.]+ +[0-9.]+% +[0-9.]+$"
    assert_line --regexp "^aten\.transpose\.int +5 "
    assert_line --regexp "^aten\.softmax\.int +1 "
    assert_line --regexp "^Node +Op kind +ms +% run$"
    assert_line --regexp "^linear_3 +aten\.linear\.default +[0-9.]+ +[0-9.]+%$"
    assert_line --regexp "^split +aten\.split\.Tensor "
    # 11 op kinds, 23 nodes: one line each
    [ "$(grep -c '^aten\.[a-z_]*\.[a-zA-Z_]* \+[0-9]\+ ' <<<"$output")" -eq 11 ]
    [ "$(grep -c '^[a-z_0-9]\+ \+aten\.' <<<"$output")" -eq 23 ]
}

@test "run --profile keeps stdout the outputs alone, and the same outputs" {
    tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" >"$TMP/plain.txt"
    tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile >"$TMP/prof.txt" 2>"$TMP/prof.json"
    cmp "$TMP/plain.txt" "$TMP/prof.txt"
    run python3 "$TMP/check.py" "$TMP/prof.json" "$FX/mlp.json" 1
    assert_success
}

@test "run --profile: a bad format and options it excludes are usage errors (exit 2)" {
    run tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile=xml
    assert_failure 2
    assert_output --partial "--profile: 'xml' is not a format (table or json)"
    run tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile --explain
    assert_failure 2
    assert_output --partial "--profile runs the interpreter"
    run tcompile compile "$FX/mlp.pt2" --profile
    assert_failure 2
    assert_output --partial "--profile does not apply to 'compile'"
}
