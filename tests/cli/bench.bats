#!/usr/bin/env bats
# make bench runs every benchmark to the end (issue 27: bench_graph, run
# with no file, exited 2 and stopped the eleven scripts after it). In the
# quick mode (TN_BENCH_QUICK=1: tiny sizes, one repeat, no PyTorch
# baseline) it takes seconds once the benchmark programs are built.

load helper

setup() {
    # make check's own make must not lend its job server to this one
    unset MAKEFLAGS MFLAGS MAKELEVEL
}

@test "make bench in the quick mode runs every benchmark to the end" {
    cd "$TN_BUILDDIR"
    TN_BENCH_QUICK=1 run make -s bench
    assert_success
    refute_output --partial "bench: failed"
    # driven by graph.sh with a file, never alone
    refute_line "== bench/graph/bench_graph"
    for s in bench/ops/bench_ops bench/graph/graph.sh bench/compile/compile.sh bench/models/zoo.sh; do
        assert_output --partial "== $s"
    done
    assert_line "bench: every benchmark ran"
}

@test "bench/run.sh runs the benchmarks after a failed one and names it" {
    mkdir -p "$BATS_TEST_TMPDIR/bench"
    printf 'exit 3\n' >"$BATS_TEST_TMPDIR/bench/bad.sh"
    printf 'echo second ran\n' >"$BATS_TEST_TMPDIR/bench/good.sh"
    cp "$TN_SRCDIR/bench/run.sh" "$BATS_TEST_TMPDIR/bench/"
    cd "$BATS_TEST_TMPDIR"
    run sh bench/run.sh -- bench/bad.sh bench/good.sh
    assert_failure 1
    assert_line "second ran"
    assert_output --partial "bench: failed: bench/bad.sh"
}
