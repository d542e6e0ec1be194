#!/usr/bin/env bats
# ttest: reading TAP 12, 13 and 14 as test programs really print it.

load ttest-helper

# run_one NAME: runs $W/NAME alone, without retries, JSON to $W/o.
run_one() {
    run ttest --retries 0 --json=o "$1"
}

@test "odd output: noise, bare points, escapes, YAML, subtests, CRLF, no final newline" {
    mk odd <<'EOF2'
echo 'TAP version 14'
echo 'hello from the program'
echo 'okay this is not a test point'
echo '1..6'
echo 'ok'
echo 'not ok 2 # TODO not yet'
echo 'ok 3 - a \# hash and a \\ backslash'
echo 'ok 4 # skipped: nothing to do'
echo '    # Subtest: inner'
echo '    not ok 1 - an inner failure the parent forgives'
echo '    1..1'
echo 'ok 5 - inner'
echo '  ---'
echo '  note: |'
echo '    not ok 99 - inside YAML'
echo '  ...'
printf 'ok 6 - crlf\r\n'
printf 'trailing text without a newline'
EOF2
    run_one odd
    assert_success
    assert_line "4 passed, 0 failed, 2 skipped"
    run python3 -c 'import json; c = json.load(open("o"))["cases"]; print([(k["id"], k["name"], k["result"], k["reason"]) for k in c])'
    assert_output "[(1, 'test 1', 'pass', None), (2, 'test 2', 'todo', 'not yet'), (3, 'a # hash and a \\\\ backslash', 'pass', None), (4, 'test 4', 'skip', ': nothing to do'), (5, 'inner', 'pass', None), (6, 'crlf', 'pass', None)]"
}

@test "a plan at the end and TAP 12 without a version line are fine" {
    printf 'echo ok 1 - a\necho ok 2 - b\necho 1..2\n' | mk late
    run_one late
    assert_success
    assert_line "2 passed, 0 failed"
}

@test "a count that differs from the plan fails the test" {
    printf 'echo 1..3\necho ok 1\necho ok 2\n' | mk short
    run_one short
    assert_failure 1
    assert_line --partial "FAIL short: bad TAP: planned 3 tests but ran 2"
    assert_line "2 passed, 1 failed"
}

@test "points out of sequence, outside the plan, after a trailing plan, or with no plan fail" {
    printf 'echo 1..2\necho ok 1\necho ok 3\n' | mk seq
    run_one seq
    assert_failure 1
    assert_output --partial "test 3 out of sequence (expected 2)"
    printf 'echo 1..1\necho ok 1\necho ok 2\n' | mk outside
    run_one outside
    assert_failure 1
    assert_output --partial "test 2 is outside the plan 1..1"
    printf 'echo ok 1\necho 1..1\necho ok 2\n' | mk after
    run_one after
    assert_failure 1
    assert_output --partial "test point after the plan at the end"
    printf 'echo ok 1\necho ok 2\n' | mk noplan
    run_one noplan
    assert_failure 1
    assert_output --partial "bad TAP: no plan"
    printf 'echo 1..1\necho 1..1\necho ok 1\n' | mk twoplans
    run_one twoplans
    assert_failure 1
    assert_output --partial "more than one plan"
}

@test "Bail out! fails the test and ignores what follows" {
    printf 'echo 1..3\necho ok 1\necho "Bail out! no database"\necho ok 2\n' | mk bail
    run_one bail
    assert_failure 1
    assert_line --partial "FAIL bail: bailed out: no database"
    assert_line "1 passed, 1 failed"
}

@test "1..0 and exit 77 skip the whole test; exit 99 and signals fail it" {
    printf 'echo "1..0 # no GPU here"\n' | mk none
    run_one none
    assert_success
    assert_line "0 passed, 0 failed, 1 skipped"
    run jfield o 0 message
    assert_output "skipped: no GPU here"
    printf 'exit 77\n' | mk skip77
    run_one skip77
    assert_success
    assert_line "0 passed, 0 failed, 1 skipped"
    printf 'echo 1..1\necho ok 1\nexit 99\n' | mk hard
    run_one hard
    assert_failure 1
    assert_line --partial "exited with status 99 (hard error)"
    printf 'echo 1..1\necho ok 1\nkill -SEGV $$\n' | mk crash
    run_one crash
    assert_failure 1
    assert_line --partial "FAIL crash: killed by SIGSEGV"
    run jfield o 0 signal
    assert_output SEGV
}

@test "a failing TODO is not a failure; a failing case with exit 0 is" {
    printf 'echo 1..2\necho "not ok 1 # todo later"\necho "ok 2 # TODO done early"\n' | mk todo
    run_one todo
    assert_success
    assert_line "1 passed, 0 failed, 1 skipped"
    printf 'echo 1..1\necho "not ok 1 - wrong"\n' | mk liar
    run_one liar
    assert_failure 1
}

@test "Bats files are run with bats --tap and counted per case" {
    # Written with printf: Bats would take @test lines in a heredoc for its own.
    t=@test
    printf '%s "passes" { true; }\n%s "skips" { skip "not today"; }\n%s "fails" { false; }\n' "$t" "$t" "$t" >b.bats
    # The outer Bats's variables would confuse the inner one.
    run env $(env | sed -n 's/^\(BATS_[A-Za-z0-9_]*\)=.*/-u \1/p') ttest --retries 0 --json=o b.bats
    assert_failure 1
    assert_line "1 passed, 1 failed, 1 skipped"
    run python3 -c 'import json; print([k["result"] for k in json.load(open("o"))["cases"]])'
    assert_output "['pass', 'skip', 'fail']"
}

@test "a point without a description is 'test N' in JUnit, its retries matched to it" {
    mk bare <<'EOF2'
echo 1..3
echo ok
echo 'not ok'
echo 'ok 3'
EOF2
    run ttest --retries 1 --junit j.xml bare
    assert_failure 1
    for k in 1 2 3; do
        run xmllint --xpath "count(//testcase[@name='test $k'])" j.xml
        assert_output 1
    done
    run xmllint --xpath 'count(//testcase[@name="test 2"]/rerunFailure)' j.xml
    assert_output 1
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" j.xml
}

@test "a missing bats is an error before the run (exit 2), not a failed test" {
    t=@test
    printf '%s "passes" { true; }\n' "$t" >b.bats
    echo 'echo ok 1; echo 1..1' | mk prog
    run ttest --bats "$W/no/bats" prog b.bats
    assert_failure 2
    assert_output "ttest: b.bats: cannot run Bats files: '$W/no/bats' is not found (install bats, or name it with --bats or \$BATS)"
    mkdir empty
    run env -u BATS PATH="$W/empty" "$(command -v ttest)" b.bats
    assert_failure 2
    assert_output --partial "cannot run Bats files: 'bats' is not found"
    # Without a Bats file, no Bats is needed.
    run ttest --bats "$W/no/bats" prog
    assert_success
}
