#!/usr/bin/env bats
# DESIGN.md's Threads rule: thread-local state is limited to grad mode, the
# key sets and the last error.  lib/core/internal.h lists every thread-local
# of the library with its reason under one of three kinds (state, call,
# cache) whose rules it states; a new _Thread_local must join that list, and
# state (what a caller sees carried between calls) holds DESIGN's names and
# the progress callback alone.

load helper

# "file name" for each _Thread_local variable defined under lib/ (extern
# declarations skipped), file relative to lib/
defined() {
    (cd "$TN_SRCDIR/lib" && grep -rn --include='*.c' --include='*.h' '_Thread_local' . |
        grep -v ':[0-9]*:[[:space:]]*\(/\*\|\*\|//\)' | grep -v '\bextern\b' |
        sed -E 's/TN_TLS_IE//; s/\[[^]]*\]//g; s/[=;].*//; s|^\./([^:]*):[0-9]+:.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*$|\1 \2|')
}

# the block of lib/core/internal.h that lists them
listing() {
    sed -n '/thread-local state (DESIGN.md, Threads)/,/tests\/cli\/threads.bats/p' \
        "$TN_SRCDIR/lib/core/internal.h"
}

@test "every thread-local under lib/ is listed, with its file, in core/internal.h" {
    local file name n=0
    run defined
    assert_success
    while read -r file name; do
        n=$((n + 1))
        [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || fail "cannot read a name from: $file $name"
        listing | grep -q "${file%.[ch]}" ||
            fail "lib/$file is not in lib/core/internal.h's thread-local list"
        listing | grep -qw "$name" ||
            fail "lib/$file's thread-local $name is not in lib/core/internal.h's list"
    done <<<"$output"
    [ "$n" -ge 3 ] || fail "found only $n thread-locals: the pattern is wrong"
}

@test "every thread-local the list names exists" {
    local name
    # the names of a "file names  reason" line and of its continuation lines
    for name in $(listing | sed -nE 's/^ \*   [a-z_]+\/[a-z_]+\.c (.*)/\1/p; s/^ \*     ([a-z_].*)/\1/p' |
        sed -E 's/  .*//; s/,/ /g'); do
        grep -rqw --include='*.c' "_Thread_local.*\b$name\b" "$TN_SRCDIR/lib" ||
            fail "lib/core/internal.h lists $name, which no _Thread_local defines"
    done
}

# "kind name" for each name the list gives, kind the heading ("state:",
# "call:", "cache:") it stands under, "none" before the first
kinds() {
    listing | awk '
        /^ \* [a-z]+:$/ { kind = substr($2, 1, length($2) - 1); next }
        /^ \*   [a-z_]+\/[a-z_]+\.c / || /^ \*     [a-z_]/ {
            line = $0
            sub(/^ \*   [a-z_]+\/[a-z_]+\.c /, "", line)
            sub(/^ \*     /, "", line)
            sub(/  .*/, "", line)
            gsub(/,/, " ", line)
            n = split(line, names, " ")
            for (i = 1; i <= n; i++) print (kind == "" ? "none" : kind), names[i]
        }'
}

@test "every thread-local is listed under one of the three kinds, and state holds DESIGN's alone" {
    local kind name file n=0
    run kinds
    assert_success
    local listed=$output
    while read -r kind name; do
        n=$((n + 1))
        case $kind in
        state)
            # DESIGN's three (key sets, with grad mode, and the last error) and
            # tn_io_set_progress's per-thread callback, which its contract asks for
            case $name in
            tls_included | tls_excluded | tn_error_buf | tn_error_status | progress_fn | progress_ctx) ;;
            *) fail "$name is listed as state, which DESIGN.md's Threads rule does not allow" ;;
            esac
            ;;
        call | cache) ;;
        *) fail "$name is listed under '$kind', not one of state, call, cache" ;;
        esac
    done <<<"$listed"
    [ "$n" -ge 3 ] || fail "found only $n listed names: the pattern is wrong"
    run defined
    assert_success
    while read -r file name; do
        grep -qE "^(state|call|cache) $name\$" <<<"$listed" ||
            fail "lib/$file's thread-local $name is listed under no kind"
    done <<<"$output"
}
