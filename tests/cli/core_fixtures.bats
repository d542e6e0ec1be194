#!/usr/bin/env bats
# Live oracle for views, constructors and copies: regenerate views.json and
# factory.json (1.13) or views_torch2.json and factory_torch2.json (2.x)
# with each installed PyTorch and run test_views, test_factory
# and test_copy against what it wrote just now.  Where 1.13 and 2.x differ
# the generators mark the case "follow": "2.x", and the C tests hold a 1.x
# fixture to that case only loosely (both fail, or both succeed).

load helper

run_core_tests_with() {
    local py=$1 out=$BATS_TEST_TMPDIR/fx t
    need_built tests/unit/test_views tests/unit/test_factory tests/unit/test_copy
    # the tests read both versions' files: the one not regenerated is the
    # committed copy
    mkdir -p "$out"
    cp "$TN_SRCDIR"/tests/fixtures/core/views*.json "$TN_SRCDIR"/tests/fixtures/core/factory*.json "$out"/
    chmod u+w "$out"/*.json
    run "$py" "$TN_SRCDIR/tests/fixtures/core_views.py" "$out"
    assert_success
    run "$py" "$TN_SRCDIR/tests/fixtures/core_factory.py" "$out"
    assert_success
    for t in test_views test_factory test_copy; do
        TN_FIXTURES=$out run "$TN_BUILDDIR/tests/unit/$t"
        assert_success
        refute_output --partial "not ok"
    done
}

@test "views, constructors and copies match Debian's PyTorch 1.13, live" {
    require_torch1
    run_core_tests_with /usr/bin/python3
}

@test "views, constructors and copies match PyTorch 2.x, live" {
    require_torch2
    run_core_tests_with "$TORCH2"
}
