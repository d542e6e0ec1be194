#!/usr/bin/env bats
# tn_dcp_save in processes of their own: two ranks under trun
# (tests/cli/tckpt/dcp_worker) save a 64 MiB row-sharded tensor, a
# replicated one and a value, and read it back resharded by columns; then
# rank 1 is SIGKILLed while its shard file is being written: the save fails,
# the previous checkpoint is whole and no temporary is left.

load helper

setup() {
    W="$TN_BUILDDIR/tests/cli/tckpt/dcp_worker"
    [ -x "$W" ] || skip "dcp_worker is not built (make check builds it)"
    T="$BATS_TEST_TMPDIR"
}

@test "two ranks under trun save a DCP folder, read it back resharded, and tckpt reads it" {
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$W" save 1 "$T/ck"
    assert_success
    assert_line "[0]:rank 0 of 2 saved step 1 ok"
    assert_line "[1]:rank 1 of 2 saved step 1 ok"
    run "$W" check 1 "$T/ck"
    assert_success
    run tckpt verify "$T/ck"
    assert_success
    run tckpt ls "$T/ck"
    assert_success
    assert_line --regexp '^model\.w +float32 +\[8192, 2048\] '
    # a second save replaces the first
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$W" save 2 "$T/ck"
    assert_success
    run "$W" check 2 "$T/ck"
    assert_success
    run ls -A "$T"
    assert_output "ck"
}

@test "a rank SIGKILLed mid-save under trun: the save fails, the last checkpoint is whole, no temporary is left" {
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$W" save 1 "$T/ck"
    assert_success
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$W" kill 2 "$T/ck"
    assert_failure
    refute_output --partial "saved step 2"
    refute_output --partial "ended before it could be killed"
    run "$W" check 1 "$T/ck"
    assert_success
    assert_output "$T/ck holds step 1"
    run ls -A "$T"
    assert_output "ck"
    run ls -A "$T/ck"
    assert_output $'.metadata\n__0_0.distcp\n__1_0.distcp'
    run tckpt verify "$T/ck"
    assert_success
}
