#!/usr/bin/env bats
# What the package holds: every test file in the tree runs in the suite, and
# every file git tracks is in the distribution (so `make distcheck` need not
# run the whole suite again to find one missing from EXTRA_DIST).

load helper

@test "every Bats file and unit test in the tree is in the suite's plan" {
    local plan=$BATS_TEST_TMPDIR/plan files=$BATS_TEST_TMPDIR/files
    (cd "$TN_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s check-plan) |
        grep -v '^#' | cut -f4 | sort >"$plan"
    [ -s "$plan" ]
    (cd "$TN_SRCDIR" && {
        find tests -name '*.bats'
        # the unit tests are in the plan only where cmocka configured them
        if grep -q '^tests/unit/' "$plan"; then
            find tests/unit -name 'test_*.c' | sed 's/\.c$//'
        fi
    }) | sort >"$files"
    run comm -23 "$files" "$plan"
    assert_output ""
}

@test "every file git tracks is in the distribution" {
    [ -d "$TN_SRCDIR/.git" ] && command -v git >/dev/null ||
        skip "the sources are not a git checkout (a tarball's tree)"
    local d=$BATS_TEST_TMPDIR/dist
    (cd "$TN_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s distdir distdir="$d") >/dev/null
    (cd "$d" && find . -type f | sed 's|^\./||' | sort) >"$BATS_TEST_TMPDIR/dist.list"
    # .gitignore is the one file a tarball has no use for
    git -C "$TN_SRCDIR" ls-files | grep -vx '.gitignore' | sort >"$BATS_TEST_TMPDIR/git.list"
    run comm -23 "$BATS_TEST_TMPDIR/git.list" "$BATS_TEST_TMPDIR/dist.list"
    assert_output ""
}
