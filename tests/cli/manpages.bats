#!/usr/bin/env bats
# Every tool's man page documents every long option its --help prints, and
# has the sections DESIGN.md asks for.

load helper

tools() {
    local d
    for d in "$TN_BUILDDIR"/bin/*/; do
        local t
        t=$(basename "$d")
        [ -x "$d/$t" ] && echo "$t"
    done
}

@test "every tool has a man page with the required sections" {
    local t n=0
    for t in $(tools); do
        n=$((n + 1))
        page=$TN_SRCDIR/man/man1/$t.1
        [ -f "$page" ] || fail "$t has no man page man/man1/$t.1"
        for s in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
            grep -q "^\.SH \"\?$s\"\?" "$page" || fail "man/man1/$t.1 lacks the section $s"
        done
    done
    [ "$n" -gt 0 ] || skip "no tool is built yet"
}

@test "every option in a tool's --help is in its man page" {
    local t opt n=0
    for t in $(tools); do
        n=$((n + 1))
        run "$t" --help
        assert_success
        page=$TN_SRCDIR/man/man1/$t.1
        for opt in $(printf '%s\n' "$output" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
            # man pages escape dashes (\-\-name); accept plain ones too
            grep -q -F -e "$(printf '%s' "$opt" | sed 's/-/\\-/g')" -e "$opt" "$page" ||
                fail "$t --help shows $opt but man/man1/$t.1 does not"
        done
    done
    [ "$n" -gt 0 ] || skip "no tool is built yet"
}

@test "every man page's footer carries the package's version" {
    local version page
    version=$(tckpt --version | awk '{ print $NF }')
    [ -n "$version" ] || fail "tckpt --version printed no version"
    for page in "$TN_SRCDIR"/man/man*/*.[135]; do
        grep -q "^\.TH .*\"tensorkit $version\"" "$page" ||
            fail "$(basename "$page"): .TH does not name tensorkit $version"
    done
}

@test "quotes inside macro arguments are escaped, so JSON keys render with them" {
    # groff takes a bare " inside .B/.I arguments as an argument delimiter:
    # {"a", "b"} renders as {a, b}. They must be written \(dq.
    run grep -nE '^\.(B|I|BR|IR|RB|RI|BI|IB) .*(\{"|\["|[a-z]", ")' "$TN_SRCDIR"/man/man*/*.[135]
    assert_output ""
}
