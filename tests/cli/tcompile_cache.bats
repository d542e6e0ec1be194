#!/usr/bin/env bats
# tcompile cache ls|stats|clear: the compile cache on disk (entries made
# by tests/cli/tcompile/cache_fill, which compiles small sources through
# lib/compile's tn__cc_load), where it is, and the folders it refuses.

load helper

setup() {
    C=$BATS_TEST_TMPDIR/cache
    FILL=$TN_BUILDDIR/tests/cli/tcompile/cache_fill
    need_built tests/cli/tcompile/cache_fill
    command -v cc >/dev/null || skip "no C compiler (cc) on PATH"
}

# fill N: N entries in $C; their libraries' paths in $SO (an array)
fill() {
    run "$FILL" "$C" "$1"
    assert_success
    mapfile -t SO <<<"$output"
}

@test "ls and stats of a cache that does not exist yet: nothing, and nothing created" {
    run tcompile cache ls --cache-dir="$C"
    assert_success
    assert_output ""
    run tcompile cache stats --cache-dir="$C"
    assert_success
    assert_line "folder: $C"
    assert_line "entries: 0 (0 valid, 0 invalid)"
    assert_line "bytes: 0"
    [ ! -e "$C" ]
}

@test "ls: one line per entry in key order, valid, or invalid and why" {
    fill 3
    [ "$(stat -c %a "$C")" = 700 ]
    run tcompile cache ls --cache-dir="$C"
    assert_success
    assert_equal "${#lines[@]}" 3
    for so in "${SO[@]}"; do
        key=$(basename "$so" .so)
        assert_line --regexp "^$key +[0-9]+  [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}  valid$"
    done
    [ "$(printf '%s\n' "${lines[@]}" | cut -c1-64 | sort)" = "$(printf '%s\n' "${lines[@]}" | cut -c1-64)" ]
    truncate -s 100 "${SO[1]}"
    chmod g+w "${SO[2]}"
    run tcompile cache ls --cache-dir="$C"
    assert_success
    assert_line --regexp "^$(basename "${SO[0]}" .so) .*  valid$"
    assert_line --regexp "^$(basename "${SO[1]}" .so) .*  invalid: library's size differs from the manifest's$"
    assert_line --regexp "^$(basename "${SO[2]}" .so) .*  invalid: library writable by others$"
}

@test "stats: the folder, the entries and their bytes; --json says the same" {
    fill 2
    rm "${SO[0]%.so}.json"
    bytes=$(find "$C" -type f -path "$C/[0-9a-f][0-9a-f]/*" -printf '%s\n' | awk '{ s += $1 } END { print s }')
    run tcompile cache stats --cache-dir="$C"
    assert_success
    assert_output "folder: $C
entries: 2 (1 valid, 1 invalid)
bytes: $bytes"
    run tcompile cache stats --json --cache-dir="$C"
    assert_success
    assert_equal "$(jq -c . <<<"$output")" "{\"folder\":\"$C\",\"entries\":2,\"valid\":1,\"invalid\":1,\"bytes\":$bytes}"
    run tcompile cache ls --json --cache-dir="$C"
    assert_success
    assert_equal "$(jq -r '.entries | map(.valid) | sort | join(" ")' <<<"$output")" "false true"
    assert_equal "$(jq -r '.entries[] | select(.valid | not) | .why' <<<"$output")" "no manifest"
    assert_equal "$(jq '[.entries[].bytes] | add' <<<"$output")" "$bytes"
}

@test "clear: removes the entries and temporaries, prints the count, leaves other files" {
    fill 3
    sub=$(dirname "${SO[0]}")
    touch "$sub/.$(basename "${SO[0]}").tmp-ABCDEF" "$C/README"
    run tcompile cache clear --cache-dir="$C"
    assert_success
    assert_output "removed 3 entries from $C"
    assert_equal "$(find "$C" -mindepth 1)" "$C/README"
    run tcompile cache ls --cache-dir="$C"
    assert_output ""
    run tcompile cache clear --cache-dir="$C"
    assert_output "removed 0 entries from $C"
}

@test "a compiler's --version is remembered in the cache: a warm start runs no process; a new compiler is asked" {
    log=$BATS_TEST_TMPDIR/calls
    printf '#!/bin/sh\necho "$1" >>"%s"\nexec cc "$@"\n' "$log" >"$BATS_TEST_TMPDIR/countcc"
    chmod +x "$BATS_TEST_TMPDIR/countcc"
    export CC=$BATS_TEST_TMPDIR/countcc
    fill 1
    assert_equal "$(grep -c -- --version "$log")" 1
    assert_equal "$(wc -l <"$log")" 2
    fill 1 # another process, the same entry: nothing runs
    assert_equal "$(wc -l <"$log")" 2
    memo=$(ls "$C"/compilers/*.txt)
    assert_equal "$(head -1 "$memo")" "$(cc --version | head -1)"
    chmod g+w "$memo" # not trusted: asked again
    fill 1
    assert_equal "$(grep -c -- --version "$log")" 2
    touch -d '2001-01-01' "$CC" # another compiler file: asked again, a new memo
    fill 1
    assert_equal "$(grep -c -- --version "$log")" 3
    assert_equal "$(ls "$C"/compilers | wc -l)" 2
    run tcompile cache clear --cache-dir="$C"
    assert_output "removed 1 entry from $C"
    [ ! -e "$C/compilers" ]
}

@test "the folder: --cache-dir, else TN_COMPILE_CACHE, else XDG_CACHE_HOME/tensorkit, else ~/.cache/tensorkit" {
    run env -u TN_COMPILE_CACHE -u XDG_CACHE_HOME HOME=/h tcompile cache stats
    assert_line "folder: /h/.cache/tensorkit"
    run env -u TN_COMPILE_CACHE XDG_CACHE_HOME=/x HOME=/h tcompile cache stats
    assert_line "folder: /x/tensorkit"
    run env TN_COMPILE_CACHE="$C" XDG_CACHE_HOME=/x tcompile cache stats
    assert_line "folder: $C"
    run env TN_COMPILE_CACHE=/elsewhere tcompile cache stats --cache-dir="$C"
    assert_line "folder: $C"
    fill 1
    run env TN_COMPILE_CACHE="$C" tcompile cache ls
    assert_line --partial "$(basename "${SO[0]}" .so)"
}

@test "a cache folder others can write, or someone else's, is refused: one line, exit 2" {
    fill 1
    chmod 0777 "$C"
    for action in ls stats clear; do
        run tcompile cache "$action" --cache-dir="$C"
        assert_failure 2
        assert_output "tcompile: $C: cache folder refused: writable by others (mode 0777)"
    done
    [ -e "${SO[0]}" ]
    chmod 0700 "$C"
    if [ "$(id -u)" = 0 ]; then
        chown 65534 "$C"
        run tcompile cache ls --cache-dir="$C"
        assert_failure 2
        assert_output "tcompile: $C: cache folder refused: owned by uid 65534, not by us (uid 0)"
    fi
}

@test "usage: an action is needed; --cache-dir is for cache; --json not for clear" {
    run tcompile cache
    assert_failure 2
    assert_line --index 0 "tcompile: cache: needs one of ls, stats or clear"
    run tcompile cache prune
    assert_failure 2
    assert_line --index 0 "tcompile: cache: unknown action 'prune' (ls, stats or clear)"
    run tcompile check --cache-dir="$C" x.json
    assert_failure 2
    assert_line --index 0 "tcompile: --cache-dir does not apply to 'check'"
    run tcompile cache clear --json
    assert_failure 2
    assert_line --index 0 "tcompile: --json does not apply to 'cache clear'"
}
