#!/usr/bin/env bats
# Live oracle: regenerate the print fixture with each installed PyTorch and
# run the printing unit test against what it wrote just now.  test_print
# reads both print.json (2.x) and print_torch1.json (1.13); the one not
# regenerated is the committed copy.

load helper

run_print_test_with() {
    local py=$1 out=$BATS_TEST_TMPDIR/fx
    need_built tests/unit/test_print
    "$py" -c 'import numpy' 2>/dev/null || skip "$py has no numpy"
    mkdir -p "$out"
    cp "$TN_SRCDIR"/tests/fixtures/core/print.json "$TN_SRCDIR"/tests/fixtures/core/print_torch1.json "$out"/
    chmod u+w "$out"/*.json
    run "$py" "$TN_SRCDIR/tests/fixtures/core_print.py" "$out"
    assert_success
    TN_FIXTURES=$out run "$TN_BUILDDIR/tests/unit/test_print"
    assert_success
    refute_output --partial "not ok"
}

@test "tensors print as Debian's PyTorch 1.13 prints them (where 2.x agrees), live" {
    require_torch1
    run_print_test_with /usr/bin/python3
}

@test "tensors print as PyTorch 2.x prints them, live" {
    require_torch2
    run_print_test_with "$TORCH2"
}
