#!/usr/bin/env bats
# ttest: the files it writes (--junit, --durations) go through tn_out: a
# symlink is written through, descriptors and devices directly, "-" is
# stdout, a new file gets the umask's mode; an unwritable path is refused
# before anything runs, and a failed write to stdout is exit 2.

load ttest-helper

# A passing test that leaves a mark in $W/ran when it runs.
mkpass() {
    printf 'echo run >>"%s/ran"\necho 1..1\necho ok 1 - fine\n' "$W" | mk pass
}

@test "--junit and --durations write through a symlink and keep it" {
    mkpass
    mkdir real
    ln -s real/j.xml j.xml
    ln -s real/d d
    run ttest --junit j.xml --durations d pass
    assert_success
    [ -L j.xml ] || fail "j.xml is no longer a link"
    [ -L d ] || fail "d is no longer a link"
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" real/j.xml
    grep -q '^pass	1	' real/d
    run ttest --junit j.xml --durations d pass
    assert_success
    [ -L j.xml ] && [ -L d ]
    grep -q '^pass	2	' real/d
    [ -z "$(ls -A . | grep tmp)" ] && [ -z "$(ls -A real | grep tmp)" ]
}

@test "--junit to a descriptor, /dev/stdout and - writes it directly" {
    mkpass
    run ttest --junit /dev/fd/5 pass 5>fd.xml
    assert_success
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" fd.xml
    # The human report steps aside to stderr, as for "-".
    ttest --junit /dev/stdout pass >out 2>err
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" out
    grep -q '^1 passed, 0 failed$' err
    [ -c /dev/stdout ] || [ -L /dev/stdout ]
    ttest --junit - pass >dash.xml 2>err
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" dash.xml
    grep -q '^1 passed, 0 failed$' err
    ttest --junit >(cat >pipe.xml) pass >/dev/null
    sleep 0.2
    grep -q '</testsuites>' pipe.xml
}

@test "a new --junit or --durations file gets the umask's mode; a replaced one keeps its own" {
    mkpass
    (umask 027 && ttest --junit j.xml --durations d pass >/dev/null)
    [ "$(stat -c %a j.xml)" = 640 ] || fail "j.xml is $(stat -c %a j.xml)"
    [ "$(stat -c %a d)" = 640 ] || fail "d is $(stat -c %a d)"
    chmod 604 j.xml d
    ttest --junit j.xml --durations d pass >/dev/null
    [ "$(stat -c %a j.xml)" = 604 ] && [ "$(stat -c %a d)" = 604 ]
}

@test "an unwritable --junit or --durations is refused before any test runs" {
    mkpass
    run ttest --junit "$W/no/such/j.xml" pass
    assert_failure 2
    assert_output --partial "ttest: --junit: $W/no/such/j.xml: "
    [ ! -e ran ] || fail "a test ran"
    mkdir folder
    run ttest --durations folder pass
    assert_failure 2
    assert_output --partial "ttest: --durations: folder"
    assert_output --partial "Is a directory"
    [ ! -e ran ] || fail "a test ran"
    run ttest --junit folder pass
    assert_failure 2
    [ ! -e ran ]
    run ttest --tap="$W/no/such/t.tap" pass
    assert_failure 2
    assert_output "ttest: --tap: $W/no/such/t.tap: No such file or directory"
    [ ! -e ran ]
}

@test "a failed write to stdout is exit 2 with a message" {
    mkpass
    run sh -c 'ttest --list pass >/dev/full'
    assert_failure 2
    assert_output --partial "ttest: <stdout>: cannot write"
    run sh -c 'ttest pass >/dev/full'
    assert_failure 2
    assert_output --partial "ttest: <stdout>: cannot write: No space left on device"
    run sh -c 'ttest --junit - pass >/dev/full 2>/dev/null'
    assert_failure 2
    run sh -c 'ttest --list --json pass >/dev/full'
    assert_failure 2
}
