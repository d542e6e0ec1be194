#!/usr/bin/env bats
# ttest: its command line, counts, outputs and exit statuses.

load ttest-helper

@test "--help and --version print to stdout and exit 0" {
    run ttest --help
    assert_success
    assert_line --index 0 "Usage: ttest [OPTION]... PATH..."
    run ttest --version
    assert_success
    assert_output --regexp '^ttest \(tensorkit\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "every option in --help is in the man page" {
    man=$TN_SRCDIR/man/man1/ttest.1
    opts=$(ttest --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    [ -n "$opts" ]
    for o in $opts; do
        grep -q -- "$(printf '%s' "$o" | sed 's/-/\\\\-/g')" "$man" || fail "$o is not in ttest.1"
    done
    for s in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
        grep -q "^\.SH $s" "$man" || fail "ttest.1 has no $s section"
    done
}

@test "usage errors exit 2 with a hint" {
    echo 'echo ok' | mk t
    for args in "--bogus t" "-j 0 t" "--jobs x t" "--shard 0/2 t" "--shard 3/2 t" "--shard 1 t" \
        "--timeout -1 t" "--retries many t" "--repeat 0 t" "" "-v -q t" "--tap --json t" \
        "--list --junit j.xml t" "--list --tap t"; do
        run ttest $args
        [ "$status" -eq 2 ] || fail "ttest $args exited $status"
        assert_output --partial "Try 'ttest --help'"
    done
    run ttest "$W/missing"
    assert_failure 2
    assert_output --partial "missing: No such file or directory"
    TEST_TOTAL_SHARDS=2 TEST_SHARD_INDEX=2 run ttest t
    assert_failure 2
}

@test "bad manifests and durations files are errors (exit 2)" {
    echo '{"tests": [{"name": "a", "command": "true", "serail": true}]}' >m.json
    run ttest m.json
    assert_failure 2
    assert_output --partial 'unknown field "serail"'
    echo '[{"name": "a"}]' >m.json
    run ttest m.json
    assert_failure 2
    echo '[1,' >m.json
    run ttest m.json
    assert_failure 2
    echo '[{"name": "a", "command": "true"}, {"name": "a", "command": "true"}]' >m.json
    run ttest m.json
    assert_failure 2
    assert_output --partial "two tests are named 'a'"
    echo '[{"name": "a", "command": "true"}]' >m.json
    printf 'a\tlots\t1.0\tpass\n' >d
    run ttest --durations d m.json
    assert_failure 2
}

@test "a test that cannot be started makes the exit status 2" {
    echo '[{"name": "gone", "command": ["/nonexistent/program"]}, {"name": "fine", "command": "true"}]' >m.json
    run ttest m.json
    assert_failure 2
    assert_output --partial "gone: cannot run /nonexistent/program: No such file or directory"
    assert_line "1 passed, 1 failed"
}

@test "cases are counted per case; the closing line is exact; exit 1 on failure" {
    mk good <<'EOF2'
echo 1..3
echo 'ok 1 - a'
echo 'ok 2 - b # SKIP not here'
echo 'not ok 3 - c # TODO later'
echo 'passing output'
EOF2
    mk bad <<'EOF2'
echo 1..2
echo 'ok 1 - x'
echo 'not ok 2 - y'
echo 'said on stderr' >&2
exit 1
EOF2
    mk plain <<'EOF2'
echo 'no TAP at all'
EOF2
    run ttest --retries 0 good bad plain
    assert_failure 1
    assert_line "3 passed, 1 failed, 2 skipped"
    assert_line --partial "FAIL bad: 1 of 2 cases failed"
    assert_line "said on stderr"
    refute_line "passing output"
    run ttest --retries 0 good plain
    assert_success
    assert_line "2 passed, 0 failed, 2 skipped"
    run ttest -v good
    assert_success
    assert_line "passing output"
}

@test "-q prints failures and the closing line only; no progress line off a terminal" {
    echo 'echo 1..1; echo ok 1' | mk a
    echo 'echo 1..1; echo not ok 1; exit 1' | mk b
    run ttest -q --retries 0 a b
    assert_failure 1
    assert_line "1 passed, 1 failed"
    refute_output --partial "Ran "
    refute_output --partial $'\r'
    run ttest --progress a
    assert_output --partial $'\r'
}

@test "--json writes one object per test; --tap writes TAP 14 that ttest reads back" {
    echo 'echo 1..2; echo ok 1 - one; echo "ok 2 - two # skip why"' | mk a
    echo 'echo 1..1; echo not ok 1 - broken; exit 1' | mk b
    run ttest --retries 0 --json=out.json a b
    assert_failure 1
    run jsummary out.json
    assert_output "a pass 1 1 0 1
b fail 1 0 1 0"
    ttest --retries 0 --tap a b >out.tap 2>/dev/null || true
    run head -2 out.tap
    assert_output $'TAP version 14\n1..2'
    printf '#!/bin/sh\ncat %s/out.tap\n' "$W" >replay
    chmod +x replay
    run ttest --retries 0 replay
    assert_failure 1
    assert_line "1 passed, 1 failed"
}

@test "--filter, --exclude, --label and --repeat select and multiply tests" {
    mkdir d
    for n in alpha beta gamma; do echo 'echo 1..1; echo ok 1' | mk "d/$n"; done
    run ttest --json=o d --filter '*a' --exclude '*gamma'
    assert_success
    run jsummary o
    assert_output "d/alpha pass 1 1 0 0
d/beta pass 1 1 0 0"
    cat >m.json <<'EOF2'
[{"name": "fast", "command": "echo ok 1; echo 1..1", "labels": ["quick"]},
 {"name": "slow", "command": ["sh", "-c", "echo ok 1; echo 1..1"], "labels": ["slow"]}]
EOF2
    run ttest --json=o --label quick m.json
    assert_success
    run jsummary o
    assert_output "fast pass 1 1 0 0"
    run ttest --repeat 3 -f fast m.json
    assert_success
    assert_line "3 passed, 0 failed"
}

@test "a manifest sets the working folder and environment of its tests" {
    mkdir sub
    cat >m.json <<'EOF2'
[{"name": "where", "command": "test \"$(pwd)\" = \"$EXPECT\" && test \"$GREETING\" = hi", "cwd": "sub",
  "env": {"GREETING": "hi", "EXPECT": "PLACEHOLDER"}}]
EOF2
    sed -i "s|PLACEHOLDER|$W/sub|" m.json
    run ttest m.json
    assert_success
}

@test "-x stops at the first failure and reports the rest as not run" {
    echo 'sleep 0.3; exit 1' | mk a
    for n in b c d; do echo 'sleep 0.5' | mk $n; done
    run ttest -x -j1 --retries 0 --json=o a b c d
    assert_failure 1
    run grep -c '"result":"notrun"' o
    assert_output 3
}
