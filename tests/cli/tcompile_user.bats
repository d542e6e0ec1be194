#!/usr/bin/env bats
# tcompile as a user meets it (issue 22): outputs through links, devices
# and '-', write failures, inputs bound by name or alone, options that do
# not apply, dot labels.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    TMP=$BATS_TEST_TMPDIR
    # the MLP's input as a lone .npy (its name is not in the file)
    tckpt get "$FX/mlp_inputs.pt" x -o "$TMP/x.npy"
}

@test "run -i FILE binds a one-tensor file to the graph's only input" {
    run tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "$TMP/x.npy" -o "$TMP/a.npz"
    assert_success
    run tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "x=$TMP/x.npy" -o "$TMP/b.npz"
    assert_success
    cmp "$TMP/a.npz" "$TMP/b.npz"
}

@test "run -i NAME=FILE for an input the graph lacks says so, exit 2" {
    run tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "y=$TMP/x.npy"
    assert_failure 2
    assert_output --partial "has no input 'y' (its inputs: x)"
}

@test "run -o through a symlink replaces the link's target and keeps the link" {
    echo old >"$TMP/target.npz"
    ln -s target.npz "$TMP/link.npz"
    run tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "$TMP/x.npy" -o "$TMP/link.npz"
    assert_success
    [ -L "$TMP/link.npz" ] || fail "the symlink was replaced by a file"
    run python3 -c 'import numpy, sys; print(list(numpy.load(sys.argv[1]).keys()))' "$TMP/target.npz"
    assert_output "['log_softmax']"
}

@test "run -o /dev/stdout and -o - write to the pipe, not over /dev/stdout" {
    tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "$TMP/x.npy" -o /dev/stdout | cat >"$TMP/a.npz"
    tcompile run "$FX/mlp.json" -w "$FX/mlp.pt" -i "$TMP/x.npy" -o - | cat >"$TMP/b.npz"
    [ -c /dev/stdout ] || [ -L /dev/stdout ] || fail "/dev/stdout is no longer a device or link"
    cmp "$TMP/a.npz" "$TMP/b.npz"
    run python3 -c 'import numpy, sys; print(list(numpy.load(sys.argv[1]).keys()))' "$TMP/a.npz"
    assert_output "['log_softmax']"
}

@test "a failed write to stdout is an error (exit 2) in check, show and run" {
    [ -w /dev/full ] || skip "no /dev/full"
    run bash -c "tcompile check '$FX/mlp.json' >/dev/full"
    assert_failure 2
    assert_output --partial "<stdout>"
    run bash -c "tcompile show --dot '$FX/mlp.json' >/dev/full"
    assert_failure 2
    run bash -c "tcompile show --json '$FX/mlp.json' >/dev/full"
    assert_failure 2
    run bash -c "tcompile run '$FX/mlp.json' -w '$FX/mlp.pt' -i '$TMP/x.npy' >/dev/full"
    assert_failure 2
    run bash -c "tcompile run '$FX/mlp.json' -w '$FX/mlp.pt' -i '$TMP/x.npy' -o - >/dev/full"
    assert_failure 2
}

@test "options that do not apply to the command are usage errors" {
    run tcompile check --dot "$FX/mlp.json"
    assert_failure 2
    assert_output --partial "--dot does not apply to 'check'"
    run tcompile show -w "$FX/mlp.pt" "$FX/mlp.json"
    assert_failure 2
    run tcompile check -o "$TMP/o.npz" "$FX/mlp.json"
    assert_failure 2
    run tcompile show --json --dot "$FX/mlp.json"
    assert_failure 2
    run tcompile run --json "$FX/mlp.json"
    assert_failure 2
}

@test "show --dot keeps the line break of a node's label" {
    run tcompile show --dot "$FX/mlp.json"
    assert_success
    assert_output --partial '"relu" [shape=box, label="relu\naten::relu"];'
    if command -v dot >/dev/null; then
        tcompile show --dot "$FX/mlp.json" | dot -Tplain | grep -q 'relu' || fail "dot did not read it"
    fi
}

@test "a graph read from a pipe, and a folder as the graph" {
    run tcompile check <(cat "$FX/mlp.pt2")
    assert_success
    run tcompile check <(cat "$FX/mlp.json")
    assert_success
    run tcompile check "$TMP"
    assert_failure 2
    assert_output --partial "Is a directory"
}

@test "weights and inputs from pipes, /dev/stdin and '-'; a folder is refused" {
    run tcompile run "$FX/mlp.json" -w <(cat "$FX/mlp.pt") -i "x=$TMP/x.npy" -o "$TMP/a.npz"
    assert_success
    run bash -c "tcompile run '$FX/mlp.json' -w '$FX/mlp.pt' -i x=<(cat '$TMP/x.npy') -o '$TMP/b.npz'"
    assert_success
    run bash -c "cat '$TMP/x.npy' | tcompile run '$FX/mlp.json' -w '$FX/mlp.pt' -i x=/dev/stdin -o '$TMP/c.npz'"
    assert_success
    run bash -c "cat '$TMP/x.npy' | tcompile run '$FX/mlp.json' -w '$FX/mlp.pt' -i x=- -o '$TMP/d.npz'"
    assert_success
    cmp "$TMP/a.npz" "$TMP/b.npz"
    cmp "$TMP/a.npz" "$TMP/c.npz"
    cmp "$TMP/a.npz" "$TMP/d.npz"
    run tcompile run "$FX/mlp.json" -w "$TMP" -i "x=$TMP/x.npy"
    assert_failure 2
    assert_output "tcompile: $TMP: Is a directory"
}
