#!/usr/bin/env bats
# Live oracle: regenerate the random-number fixture with each installed
# PyTorch and run the random unit test against what it wrote just now (the
# other version's fixture is the committed copy).

load helper

# $1: the Python to run; $2: the fixture it writes; $3: the other one,
# copied from the committed fixtures.
run_random_test_with() {
    local py=$1 out=$BATS_TEST_TMPDIR/fx
    # PyTorch picks its float32 randn kernel by the CPU (AVX-512, AVX2 or
    # plain); the test follows the AVX2 one, so pin PyTorch to it.
    grep -qw avx2 /proc/cpuinfo || skip "this CPU has no AVX2, whose randn kernel tensorkit follows"
    mkdir -p "$out"
    cp "$TN_SRCDIR/tests/fixtures/core/$3.json" "$out/"
    cd "$TN_SRCDIR/tests/fixtures"
    ATEN_CPU_CAPABILITY=avx2 run "$py" -W ignore core_random.py "$out"
    assert_success
    [ -s "$out/$2.json" ]
    TN_FIXTURES=$out run "$TN_BUILDDIR/tests/unit/test_random"
    assert_success
    refute_output --partial "not ok"
}

@test "random numbers equal Debian's PyTorch 1.13, live" {
    require_torch1
    run_random_test_with /usr/bin/python3 random random_torch2
}

@test "random numbers equal PyTorch 2.x, live" {
    require_torch2
    run_random_test_with "$TORCH2" random_torch2 random
}
