#!/usr/bin/env bats
# bench/compile/compile.py, issue 16's figures, in its quick form (no
# torch.compile, one thread, short repeats): its models export and pass
# `tcompile check`, tcompile's outputs are compared with PyTorch's, a
# mismatch fails the bench, and the rows follow what tcompile offers
# (--interpret, "compile took X ms"). No timing is asserted.

load helper

# bench [ARG]...: the bench on the MLP and the CNN at one thread, quickly
bench() {
    run "$TORCH2" -W ignore "$TN_SRCDIR/bench/compile/compile.py" --models mlp,cnn \
        --no-inductor --threads 1 --budget 0.01 --work "$BATS_TEST_TMPDIR/work" "$@"
}

# fake_tcompile [--interpret] [--wrong]: writes $BATS_TEST_TMPDIR/tcompile,
# a stand-in that checks every graph, and runs one by copying PyTorch's own
# outputs (with --wrong, writing them doubled) and printing a compile and a
# run time; its --help lists --interpret when asked. Only --wrong imports
# torch (seconds a call).
fake_tcompile() {
    local help="--time" wrong=False
    for a; do
        case $a in
        --interpret) help="--interpret --time" ;;
        --wrong) wrong=True ;;
        esac
    done
    cat > "$BATS_TEST_TMPDIR/tcompile" <<PY
#!$TORCH2
import shutil, sys
a = sys.argv[1:]
if a[0] == "--help":
    print("Usage: tcompile COMMAND\n  $help")
elif a[0] == "check":
    print(a[1] + ": ok")
else:
    graph, out = a[1], a[a.index("-o") + 1]
    expected = graph[:-len(".json")] + "_expected.pt"
    if $wrong:
        import torch
        torch.save({k: v * 2 for k, v in torch.load(expected).items()}, out)
    else:
        shutil.copy(expected, out)
    print("tcompile: %s: compile took 12.5 ms" % graph, file=sys.stderr)
    print("tcompile: %s: run took 0.5 ms (the fastest of --repeat)" % graph, file=sys.stderr)
PY
    chmod +x "$BATS_TEST_TMPDIR/tcompile"
}

@test "bench/compile: tcompile run of the MLP and the CNN gives PyTorch's outputs, and the work folder goes" {
    require_torch2
    bench --tcompile "$TN_BUILDDIR/bin/tcompile/tcompile"
    assert_success
    assert_line --regexp '^tcompile check: .*/mlp.json: ok '
    assert_line --regexp '^tcompile check: .*/cnn.json: ok '
    assert_line --regexp '^PyTorch eager +[0-9.]+ +- +1\.000$'
    assert_line --regexp '^tcompile run +[0-9.]+ +- +[0-9.]+$'
    assert_line --regexp '^tcompile --interpret +[0-9.]+ +- +[0-9.]+$'
    assert_line --regexp '^max abs diff against PyTorch eager \(atol 1e-05, rtol 0.0001\): tcompile run 1 thread [0-9.e-]+, tcompile --interpret 1 thread [0-9.e-]+$'
    assert_line --regexp '^cold compile \(1 thread\): torch.compile -, tcompile [0-9.]+ ms$'
    assert [ ! -e "$BATS_TEST_TMPDIR/work" ]
}

@test "bench/compile: outputs that differ from PyTorch's fail the bench, naming the model and the output" {
    require_torch2
    fake_tcompile --wrong
    bench --tcompile "$BATS_TEST_TMPDIR/tcompile" --models cnn
    assert_failure 1
    assert_line --regexp "^  cnn: tcompile run: output 'linear' differs from PyTorch's: max abs diff [0-9.e-]+ \\(atol 1e-05, rtol 0.0001\\)$"
}

@test "bench/compile: with --interpret in tcompile --help, the interpreter has its row; the cold compile is parsed" {
    require_torch2
    fake_tcompile --interpret
    bench --tcompile "$BATS_TEST_TMPDIR/tcompile"
    assert_success
    assert_line --regexp '^tcompile run +0\.500 +- +[0-9.]+$'
    assert_line --regexp '^tcompile --interpret +0\.500 +- +[0-9.]+$'
    assert_line "cold compile (1 thread): torch.compile -, tcompile 12.5 ms"
    refute_output --partial "lists no --interpret"
    fake_tcompile
    bench --tcompile "$BATS_TEST_TMPDIR/tcompile"
    assert_success
    refute_output --partial "tcompile --interpret"
    assert_output --partial "lists no --interpret"
}

@test "bench/compile: without PyTorch 2.x it says so and skips" {
    require_torch1
    run /usr/bin/python3 "$TN_SRCDIR/bench/compile/compile.py"
    assert_success
    assert_output "compile.py: needs PyTorch 2.x in /usr/bin/python3: skipped"
}
