#!/usr/bin/env bats
# ttest: process control: timeouts that kill whole process groups, retries
# and flaky tests, serial tests, temporary folders.

load ttest-helper

# Whether process $1 is gone (a zombie is gone: it no longer runs).
gone() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
    case $st in Z*) return 0 ;; esac
    return 1
}

@test "a hanging test that forks children is killed with its whole group" {
    mk hang <<EOF2
sleep 300 &
echo \$! >"$W/pids"
sh -c 'sleep 300 & echo \$! >>"$W/pids"; wait' &
echo \$! >>"$W/pids"
echo 'ok 1 - started'
sleep 300
EOF2
    start=$(date +%s)
    run ttest --timeout 1 --grace 1 --retries 0 hang
    assert_failure 1
    assert_line --partial "FAIL hang: timed out after 1.0 s"
    assert_line "1 passed, 1 failed"
    [ $(($(date +%s) - start)) -lt 10 ]
    [ "$(wc -l <pids)" -eq 3 ]
    for p in $(cat pids); do
        gone "$p" || fail "process $p was left behind"
    done
}

@test "a test that ignores SIGTERM is killed after the grace period" {
    mk stubborn <<EOF2
trap '' TERM
sleep 300 &
echo \$! >"$W/pids"
while :; do sleep 1; done
EOF2
    run ttest --json=o --timeout 0.5 --grace 0.5 --retries 0 stubborn
    assert_failure 1
    run jfield o 0 result
    assert_output timeout
    for p in $(cat pids); do gone "$p" || fail "process $p was left behind"; done
}

@test "what a passing test leaves running in its group is killed" {
    mk leaver <<EOF2
sleep 300 >/dev/null 2>&1 &
echo \$! >"$W/pids"
echo 1..1; echo ok 1
EOF2
    run ttest leaver
    assert_success
    for p in $(cat pids); do gone "$p" || fail "process $p was left behind"; done
}

@test "a test that fails and then passes is flaky, in every output" {
    mk flaky <<'EOF2'
echo 1..1
if [ "$TTEST_ATTEMPT" -ge 2 ]; then echo 'ok 1 - works'; else echo 'not ok 1 - works'; exit 1; fi
EOF2
    run ttest --retries 1 --json=o --junit=j.xml flaky
    assert_success
    assert_line --partial "FLAKY flaky: 1 of 1 case failed, then passed on attempt 2"
    assert_line "1 passed, 0 failed, 1 flaky"
    run jsummary o
    assert_output "flaky flaky 2 1 0 0"
    grep -q '<flakyFailure message="1 of 1 case failed" type="failure">' j.xml
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" j.xml
    run ttest --retries 1 --tap=o.tap flaky
    grep -q '^  result: flaky$' o.tap
    run ttest --retries 0 flaky
    assert_failure 1
    assert_line "0 passed, 1 failed"
}

@test "no retries by default: a failing test runs once, a hung test costs one timeout" {
    mk flaky <<'EOF2'
echo 1..1
if [ "$TTEST_ATTEMPT" -ge 2 ]; then echo 'ok 1 - works'; else echo 'not ok 1 - works'; exit 1; fi
EOF2
    printf 'echo started >>"$1"
sleep 30
' | mk hang
    run ttest --json=o flaky
    assert_failure 1
    assert_line "0 passed, 1 failed"
    run jsummary o
    assert_output "flaky fail 1 0 1 0"
    echo '[{"name": "hang", "command": ["./hang", "'"$W"'/starts"]}]' >m.json
    run ttest --timeout 0.5 --grace 0.2 --json=o m.json
    assert_failure 1
    assert_line --partial "FAIL hang: timed out after 0.5 s (0."
    run jsummary o
    assert_output "hang timeout 1 0 1 0"
    run wc -l <starts
    assert_output 1
}

@test "--retries N runs a failing test N+1 times, each in a fresh process and folder" {
    mk always <<EOF2
echo "\$\$ \$TMPDIR" >>"$W/runs"
exit 3
EOF2
    run ttest --retries 2 always
    assert_failure 1
    assert_line --partial "FAIL always: exited with status 3"
    [ "$(wc -l <runs)" -eq 3 ]
    [ "$(cut -d' ' -f1 runs | sort -u | wc -l)" -eq 3 ]
    [ "$(cut -d' ' -f2 runs | sort -u | wc -l)" -eq 3 ]
}

@test "each test gets stdin from /dev/null and its own temporary folder, removed afterwards" {
    mk probe <<EOF2
test -d "\$TMPDIR" && test "\$TMPDIR" = "\$TEST_TMPDIR" || exit 1
echo "\$TMPDIR" >"$W/tmp"
touch "\$TMPDIR/x"; mkdir "\$TMPDIR/ro"; touch "\$TMPDIR/ro/y"; chmod 500 "\$TMPDIR/ro"
read line && exit 2
exit 0
EOF2
    run ttest probe </dev/zero
    assert_success
    [ ! -e "$(cat tmp)" ]
}

@test "serial tests run alone, after the pool or before it" {
    for n in p1 p2 p3; do
        mk $n <<EOF2
touch "$W/running.$n"; echo "$n" >>"$W/order"; sleep 0.3; rm "$W/running.$n"
EOF2
    done
    mk s1 <<EOF2
echo s1 >>"$W/order"; ls "$W"/running.* 2>/dev/null && exit 1; exit 0
EOF2
    run ttest -j3 --serial s1 p1 p2 p3 s1
    assert_success
    assert_equal "$(tail -1 order)" s1
    rm order
    run ttest -j3 --serial s1 --serial-first p1 p2 p3 s1
    assert_success
    assert_equal "$(head -1 order)" s1
}

@test "nothing of ttest's shard reaches the tests" {
    mk env <<'EOF2'
test -z "$TEST_TOTAL_SHARDS$TEST_SHARD_INDEX" && test "$TTEST_SHARD" = 1/2 && test "$TTEST_WORKER" = 1
EOF2
    TEST_TOTAL_SHARDS=2 TEST_SHARD_INDEX=0 run ttest --json=o env
    assert_success
    run jsummary o
    assert_output "env pass 1 1 0 0"
}
