#!/usr/bin/env bats
# tgen's outputs as a user meets them (issue 22): through symlinks, to
# /dev/stdout, with the umask's mode, never half-written; folders and
# write failures are errors.

load helper

setup() {
    TMP=$BATS_TEST_TMPDIR
    YAML=$TN_SRCDIR/schemas/native_functions.yaml
}

@test "--header through a symlink replaces the target and keeps the link" {
    echo old >"$TMP/real.h"
    ln -s real.h "$TMP/ops.h"
    run tgen --header "$TMP/ops.h" "$YAML"
    assert_success
    [ -L "$TMP/ops.h" ] || fail "tgen replaced the symlink with a file"
    grep -q 'tn_add' "$TMP/real.h" || fail "the link's target was not written"
}

@test "--header /dev/stdout writes to the pipe; a new file gets the umask's mode" {
    run bash -c "tgen --header /dev/stdout '$YAML' | grep -c 'tn_add('"
    assert_success
    (umask 027 && tgen --source "$TMP/ops.c" "$YAML")
    [ "$(stat -c %a "$TMP/ops.c")" = 640 ] || fail "mode $(stat -c %a "$TMP/ops.c") under umask 027"
}

@test "a schema that fails leaves the old output whole and no temporary" {
    echo 'kept' >"$TMP/ops.h"
    printf -- '- func: broken(\n' >"$TMP/bad.yaml"
    run tgen --header "$TMP/ops.h" "$TMP/bad.yaml"
    assert_failure 2
    [ "$(cat "$TMP/ops.h")" = kept ] || fail "the old header was touched"
    run ls -A "$TMP"
    assert_output "$(printf 'bad.yaml\nops.h')"
}

@test "a folder as the schema or the output says 'Is a directory' (exit 2)" {
    run tgen --list "$TMP"
    assert_failure 2
    assert_output "tgen: $TMP: Is a directory"
    run tgen --header "$TMP" "$YAML"
    assert_failure 2
    assert_output --partial "Is a directory"
}

@test "a failed write to stdout is an error (exit 2)" {
    [ -w /dev/full ] || skip "no /dev/full"
    run bash -c "tgen --list '$YAML' >/dev/full"
    assert_failure 2
    assert_output --partial "<stdout>: cannot write"
    run bash -c "tgen --header - '$YAML' >/dev/full"
    assert_failure 2
}
