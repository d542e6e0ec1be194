#!/usr/bin/env bats
# Live oracle: regenerate the dtype fixture with each installed PyTorch and
# run the dtype unit test against what it wrote just now.

load helper

run_dtype_test_with() {
    local py=$1 out=$BATS_TEST_TMPDIR/fx
    need_built tests/unit/test_dtype
    (cd "$TN_SRCDIR/tests/fixtures" && "$py" core_dtype.py "$out") 2>/dev/null
    TN_FIXTURES=$out run "$TN_BUILDDIR/tests/unit/test_dtype"
    assert_success
    refute_output --partial "not ok"
}

@test "dtype conversions and promotion equal Debian's PyTorch 1.13, live" {
    require_torch1
    run_dtype_test_with /usr/bin/python3
}

@test "dtype conversions and promotion equal PyTorch 2.x, live" {
    require_torch2
    run_dtype_test_with "$TORCH2"
}
