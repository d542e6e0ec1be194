#!/usr/bin/env bats
# Live oracle: regenerate the random-number fixture with each installed
# PyTorch and run the random unit test against what it wrote just now (the
# other version's fixture is the committed copy).

load helper

# $1: the Python to run; $2: the fixture it writes; $3: the other one,
# copied from the committed fixtures.
run_random_test_with() {
    local py=$1 out=$BATS_TEST_TMPDIR/fx
    # helper.bash pins PyTorch to its AVX2 kernels, whose float32 randn
    # tensorkit follows; without AVX2 PyTorch cannot run them.
    grep -qw avx2 /proc/cpuinfo || skip "this CPU has no AVX2, whose randn kernel tensorkit follows"
    mkdir -p "$out"
    cp "$TN_SRCDIR/tests/fixtures/core/$3.json" "$out/"
    cd "$TN_SRCDIR/tests/fixtures"
    run "$py" -W ignore core_random.py "$out"
    assert_success
    [ -s "$out/$2.json" ]
    need_built tests/unit/test_random
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
