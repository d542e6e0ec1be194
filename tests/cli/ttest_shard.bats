#!/usr/bin/env bats
# ttest: the plan: sharding by recorded durations, its stability, the union
# of shards, the durations file, JUnit XML checked against a schema.

load ttest-helper

# Twelve instant tests t01..t12 and a durations file that says t01 takes
# 12 s, t02 11 s, ..., t10 3 s; t11 and t12 have no record.
suite() {
    mkdir -p s
    for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
        printf 'echo 1..1; echo ok 1 - t%s\n' "$i" | mk "s/t$i"
    done
    : >durations
    for i in 01 02 03 04 05 06 07 08 09 10; do
        printf 's/t%s\t3\t%d.000\tpass\n' "$i" $((13 - 10#$i)) >>durations
    done
}

@test "the plan is longest first onto the least loaded shard, unknown tests at the mean" {
    suite
    run ttest --list --shard 1/3 --durations durations s
    assert_success
    # By hand: 12, 11, 10 one each; 9 -> 3 (19); 8 -> 2 (19); t11 at 7.5 (the
    # mean of 3..12) -> 1 (19.5); t12 7.5 -> 2 (tie with 3, lower wins: 26.5);
    # 7 -> 3 (26); 6 -> 1 (25.5); 5 -> 1 (30.5); 4 -> 3 (30); 3 -> 2 (29.5).
    assert_line "# shard 1/3: 4 tests, 30.5 s expected"
    assert_line "# shard 2/3: 4 tests, 29.5 s expected"
    assert_line "# shard 3/3: 4 tests, 30.0 s expected"
    assert_line $'1/3\t12.000\tparallel\ts/t01'
    assert_line $'1/3\t7.500\tparallel\ts/t11'
    assert_line $'2/3\t7.500\tparallel\ts/t12'
    assert_line $'3/3\t4.000\tparallel\ts/t09'
    run ttest --list --json --durations durations s
    assert_success
    assert_line --index 0 '{"name":"s/t01","shard":1,"shards":1,"expected":12.0,"known":true,"serial":false,"run":1,"runs":1}'
}

@test "every shard computes the same plan, whatever the order of paths or -j" {
    suite
    a=$(ttest --list --shard 2/3 --durations durations s/t*)
    b=$(ttest --list --shard 3/3 -j7 --durations durations $(ls -r s/t*))
    c=$(TEST_TOTAL_SHARDS=3 TEST_SHARD_INDEX=0 ttest --list --durations durations s)
    [ -n "$a" ]
    assert_equal "$a" "$b"
    assert_equal "$a" "$c"
}

@test "the shards' union is the whole suite, with no test twice" {
    suite
    # Each shard starts from the same file, as on separate machines (a run
    # updates the file it reads).
    for i in 1 2 3; do
        cp durations d$i
        run ttest --shard $i/3 --durations d$i --json=o$i s
        assert_success
    done
    run ttest --durations durations --json=all s
    assert_success
    assert_equal "$(cat o1 o2 o3 | jsummary /dev/stdin | cut -d' ' -f1)" "$(jsummary all | cut -d' ' -f1)"
    [ "$(jsummary all | wc -l)" -eq 12 ]
    # More shards than tests: the empty shard says so and passes.
    run ttest --shard 13/13 s
    assert_success
    assert_output --partial "no tests selected in this shard"
}

@test "every run updates the durations file; --failed-first starts last time's failures" {
    suite
    echo 'exit 1' | mk s/t12
    run ttest --retries 0 --durations durations s
    assert_failure 1
    run grep -P '^s/t01\t4\t' durations
    assert_success
    run grep -P '^s/t12\t1\t[0-9.]+\tfail$' durations
    assert_success
    run grep -P '^s/t11\t1\t[0-9.]+\tpass$' durations
    assert_success
    run ttest --list --failed-first --durations durations s
    assert_line --index 1 --regexp $'^1/1\t0\\.[0-9]+\tparallel\ts/t12$'
}

@test "JUnit XML validates against the schema, with failures, errors, skips and reruns" {
    mk fails <<'EOF2'
echo 1..3
echo 'ok 1 - fine'
echo 'not ok 2 - <broken> & "quoted"'
echo '# expected 1, got 2'
echo 'ok 3 # SKIP not here'
printf 'control \001\002 characters and ]]> too\n'
exit 1
EOF2
    printf 'sleep 5\n' | mk slow
    printf 'echo 1..1\necho "not ok 1 # TODO later"\n' | mk todo
    printf 'exit 77\n' | mk skipped
    printf 'echo "no TAP"\n' | mk plain
    printf 'kill -SEGV $$\n' | mk crash
    printf '[ "$TTEST_ATTEMPT" -ge 2 ]\n' | mk flaky
    run ttest --retries 1 --timeout 0.5 --grace 0.2 --junit j.xml fails slow todo skipped plain crash flaky
    assert_failure 1
    run xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" j.xml
    assert_success
    run xmllint --xpath 'concat(/testsuites/@tests, " ", /testsuites/@failures, " ", /testsuites/@errors, " ", /testsuites/@skipped)' j.xml
    assert_output "9 1 2 3"
    run xmllint --xpath 'string(//testcase[@classname="slow"]/error/@type)' j.xml
    assert_output "timeout"
    run xmllint --xpath 'string(//testcase[@classname="crash"]/error/@type)' j.xml
    assert_output "SIGSEGV"
    run xmllint --xpath 'count(//testcase[@classname="slow"]/rerunError)' j.xml
    assert_output 1
    run xmllint --xpath 'count(//testcase[@classname="flaky"]/flakyFailure)' j.xml
    assert_output 1
    run xmllint --xpath 'string(//testcase[@classname="fails"]/failure/@message)' j.xml
    assert_output "expected 1, got 2"
}
