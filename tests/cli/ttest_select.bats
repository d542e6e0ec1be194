#!/usr/bin/env bats
# ttest: choosing what runs, as pytest's users expect: -k expressions,
# --maxfail, --last-failed, --shuffle, folders without and with -r, and what
# an empty selection means.

load ttest-helper

# tests N...: makes passing test programs named N in $W.
tests() {
    for t in "$@"; do
        mkdir -p "$(dirname "$W/$t")"
        { echo '#!/bin/sh'; echo 'echo 1..1; echo ok 1'; } >"$W/$t"
        chmod +x "$W/$t"
    done
}

# names: the test names of `ttest --list` with the given arguments.
names() {
    ttest --list "$@" | grep -v '^#' | cut -f4 | tr '\n' ' '
}

@test "-k selects by pytest's expressions over the names, case ignored" {
    tests test_add test_sub test_mul Test_Div
    run names -k add .
    assert_output "test_add "
    run names -k 'add or SUB' .
    assert_output "test_add test_sub "
    run names -k 'not (add or sub) and test_' .
    assert_output "Test_Div test_mul "
    run names -k 'test and not div' .
    assert_output "test_add test_mul test_sub "
    run names -k '' .
    assert_output "Test_Div test_add test_mul test_sub "
    for bad in 'add sub' '(add' 'add)' 'and' 'not' 'add or'; do
        run ttest -k "$bad" .
        assert_failure 2
        assert_line --index 0 --partial "ttest: -k: '$bad': "
        assert_line --index 1 "Try 'ttest --help' for more information."
    done
}

@test "no tests selected exits 5 (pytest's status) unless --allow-no-tests" {
    tests a b
    mkdir empty
    run ttest empty
    assert_failure 5
    assert_output "ttest: no tests selected (of 0 found); --allow-no-tests makes that a success"
    run ttest -k nothing .
    assert_failure 5
    run ttest --filter 'z*' --list .
    assert_failure 5
    run ttest --allow-no-tests -k nothing .
    assert_success
    assert_line "0 passed, 0 failed"
    # A shard that gets none of a non-empty selection is fine.
    run ttest --shard 3/3 a b
    assert_success
}

@test "folders are searched one level deep; -r searches their subfolders" {
    tests top deeper/inner deeper/still/more
    run names .
    assert_output "top "
    run names -r .
    assert_output "deeper/inner deeper/still/more top "
    run names deeper
    assert_output "deeper/inner "
}

@test "--maxfail N starts no test after N failed tests" {
    for t in a b c d e; do printf 'echo 1..1; echo not ok 1\n' | mk $t; done
    run ttest -j1 --maxfail 2 --json=o a b c d e
    assert_failure 1
    run jsummary o
    assert_output "$(printf '%s\n' 'a fail 1 0 1 0' 'b fail 1 0 1 0' 'c notrun 0 0 0 1' 'd notrun 0 0 0 1' 'e notrun 0 0 0 1')"
    run ttest -j1 --maxfail 2 --tap=o.tap a b c
    grep -q 'not run: the run stopped after 2 failed tests (--maxfail)' o.tap
    run ttest --maxfail 0 a
    assert_failure 2
}

@test "--last-failed runs only what failed last time, all when nothing did" {
    tests good1 good2
    printf 'exit 1\n' | mk bad
    run ttest --durations d .
    assert_failure 1
    run ttest --last-failed --durations d --json=o .
    assert_failure 1
    run jsummary o
    assert_output "bad fail 1 0 1 0"
    printf 'exit 0\n' | mk bad
    run ttest --lf --durations d .
    assert_success
    assert_line "1 passed, 0 failed"
    # Now nothing failed: all of them, and a word about it.
    run ttest --lf --durations d .
    assert_success
    assert_line "ttest: --last-failed: no test failed last time (d); running all 3 selected"
    assert_line "3 passed, 0 failed"
    run ttest --last-failed .
    assert_failure 2
    assert_output --partial "--last-failed needs --durations"
}

@test "--shuffle prints its seed; the same seed gives the same order, shards unchanged" {
    tests t01 t02 t03 t04 t05 t06 t07 t08 t09 t10 t11 t12
    run names .
    plain=$output
    run names --shuffle=42 .
    a=$output
    run names --shuffle=42 .
    assert_output "$a"
    run names --shuffle=43 .
    [ "$output" != "$a" ]
    [ "$a" != "$plain" ]
    [ "$(echo $a | tr ' ' '\n' | sort)" = "$(echo $plain | tr ' ' '\n' | sort)" ]
    run ttest -j1 --shuffle .
    assert_success
    assert_line --index 0 --regexp '^Random order: --shuffle=[0-9]+$'
    seed=${lines[0]#Random order: --shuffle=}
    run names --shuffle="$seed" .
    shuffled=$output
    run ttest -j1 -v --shuffle="$seed" .
    [ "$(printf '%s\n' "${lines[@]}" | sed -n 's/^PASS \([^ ]*\) .*/\1/p' | tr '\n' ' ')" = "$shuffled" ]
    # Shuffling reorders within a shard; it moves no test to another.
    for s in 1/3 2/3 3/3; do
        [ "$(names --shard $s . | tr ' ' '\n' | sort)" = "$(names --shard $s --shuffle=7 . | tr ' ' '\n' | sort)" ]
    done
    run ttest --shuffle=x .
    assert_failure 2
}
