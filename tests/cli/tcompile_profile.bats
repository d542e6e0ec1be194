#!/usr/bin/env bats
# tcompile run --profile (issue 27): time per step (a node in the
# interpreter; a fused kernel, a matmul or a node left to libtensor when
# compiled) and per op kind, as a table on a terminal and JSON otherwise,
# on stderr; the outputs unchanged.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    TMP=$BATS_TEST_TMPDIR
    # checks a profile (JSON, $1) against the graph ($2) and --repeat ($3):
    # in the interpreter every node once and op kinds counted from the
    # graph's targets; compiled ($4), steps naming the graph's nodes (a
    # linear may be a matmul step and a kernel), every node in some; both sorted, times summing to no more than
    # the run
    cat >"$TMP/check.py" <<'PY'
import collections, json, sys
p = json.load(open(sys.argv[1]))
g = json.load(open(sys.argv[2]))["graph_module"]["graph"]["nodes"]
def name(n):
    o = n["outputs"][0]
    return n.get("name") or (o["as_tensor"]["name"] if "as_tensor" in o
                             else o["as_tensors"][0]["name"])
mode = sys.argv[4] if len(sys.argv) > 4 else "interpreter"
assert p["mode"] == mode and p["runs"] == int(sys.argv[3]), p
if mode == "interpreter":
    assert sorted(x["name"] for x in p["nodes"]) == sorted(name(n) for n in g), p["nodes"]
    want = collections.Counter(n["target"] for n in g)
    assert {o["target"]: o["count"] for o in p["ops"]} == dict(want), (p["ops"], want)
else:
    # a step names the nodes it computes: graph nodes only ("output" is
    # none), each once; a view an extern step reads is in no step
    for x in p["nodes"]:
        names = x["name"].split(", ")
        assert set(names) <= {name(n) for n in g} and len(set(names)) == len(names), x
    kinds = {o["target"] for o in p["ops"]}
    assert "kernel" in kinds and kinds <= {n["target"] for n in g} | {"kernel", "matmul"}, kinds
    want = collections.Counter(x["target"] for x in p["nodes"])
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

@test "run --profile --interpret off a terminal: one JSON object on stderr, every node, op kinds counted" {
    for m in block mlp attn; do
        tcompile run "$FX/$m.json" -w "$FX/$m.pt" -i "$FX/${m}_inputs.pt" -o "$TMP/$m.npz" \
            --profile --interpret 2>"$TMP/$m.prof"
        run python3 "$TMP/check.py" "$TMP/$m.prof" "$FX/$m.json" 1
        assert_success
        assert_output --partial "ok "
        [ -s "$TMP/$m.npz" ]
    done
    # the fastest of --repeat, and =json given explicitly
    tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" -o "$TMP/b.npz" \
        --profile=json --repeat=3 --interpret 2>"$TMP/b.prof"
    run python3 "$TMP/check.py" "$TMP/b.prof" "$FX/block.json" 3
    assert_success
}

@test "run --profile compiled: fused kernels and matmuls as steps, the nodes they stand for" {
    for m in block mlp; do
        tcompile run "$FX/$m.json" -w "$FX/$m.pt" -i "$FX/${m}_inputs.pt" -o "$TMP/$m.npz" \
            --profile --repeat=3 --strict 2>"$TMP/$m.prof"
        run python3 "$TMP/check.py" "$TMP/$m.prof" "$FX/$m.json" 3 compiled
        assert_success
        assert_output --partial "ok "
    done
    run tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" \
        -o "$TMP/b.npz" --profile=table
    assert_success
    assert_line --regexp "^tcompile: profile of .*block.json \(23 nodes\): [0-9]+ steps .*; compiled: "
    assert_line --regexp "^kernel +[0-9]+ +[0-9.]+ +[0-9.]+% +[0-9.]+$"
    assert_line --regexp "^kernel +[0-9.]+ +[0-9.]+%  .*softmax"
}

@test "run --profile=table: op kinds with their counts, then every node" {
    run tcompile run "$FX/block.json" -w "$FX/block.pt" -i "$FX/block_inputs.pt" \
        -o "$TMP/b.npz" --profile=table --interpret
    assert_success
    assert_line --regexp "^tcompile: profile of .*block.json \(23 nodes\): 23 steps took [0-9.]+ ms of the run's [0-9.]+ ms .*interpreter: each node a step"
    assert_line --regexp "^Op kind +Count +Total ms +% run +Mean ms$"
    assert_line --regexp "^aten\.linear\.default +4 +[0-9.]+ +[0-9.]+% +[0-9.]+$"
    assert_line --regexp "^aten\.transpose\.int +5 "
    assert_line --regexp "^aten\.softmax\.int +1 "
    assert_line --regexp "^Op kind +ms +% run  Node$"
    assert_line --regexp "^aten\.linear\.default +[0-9.]+ +[0-9.]+%  linear_3$"
    assert_line --regexp "^aten\.split\.Tensor +[0-9.]+ +[0-9.]+%  split$"
    # 11 op kinds, 23 nodes: one line each
    [ "$(grep -c '^aten\.[a-z_]*\.[a-zA-Z_]* \+[0-9]\+ ' <<<"$output")" -eq 11 ]
    [ "$(grep -c '^aten\.[a-z_]*\.[a-zA-Z_]* \+[0-9.]\+ \+[0-9.]\+%  ' <<<"$output")" -eq 23 ]
}

@test "run --profile keeps stdout the outputs alone, and the same outputs" {
    tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" >"$TMP/plain.txt"
    tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile --interpret >"$TMP/prof.txt" \
        2>"$TMP/prof.json"
    cmp "$TMP/plain.txt" "$TMP/prof.txt"
    run python3 "$TMP/check.py" "$TMP/prof.json" "$FX/mlp.json" 1
    assert_success
}

@test "run --profile: a bad format and options it excludes are usage errors (exit 2)" {
    run tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile=xml
    assert_failure 2
    assert_output --partial "--profile: 'xml' is not a format (table or json)"
    run tcompile run "$FX/mlp.pt2" -i "$FX/mlp_inputs.pt" --profile --grads="$TMP/g.npz"
    assert_failure 2
    assert_output --partial "--profile times a forward run: --grads does not apply"
    run tcompile compile "$FX/mlp.pt2" --profile
    assert_failure 2
    assert_output --partial "--profile does not apply to 'compile'"
}
