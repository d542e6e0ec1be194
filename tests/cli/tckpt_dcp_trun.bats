#!/usr/bin/env bats
# tn_dcp_save in processes of their own: two ranks under trun
# (tests/cli/tckpt/dcp_worker) save a 64 MiB row-sharded tensor, a
# replicated one and a value, and read it back resharded by columns; then
# rank 1 is SIGKILLed while its shard file is being written: the save fails,
# the previous checkpoint is whole and no temporary is left.  PyTorch 2.x's
# dcp.load reads the folder the two ranks wrote and gets their values.

load helper

setup() {
    W="$TN_BUILDDIR/tests/cli/tckpt/dcp_worker"
    need_built tests/cli/tckpt/dcp_worker
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

@test "PyTorch's dcp.load reads the folder two tn_dcp_save ranks wrote under trun" {
    require_torch2
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$W" save 3 "$T/ck"
    assert_success
    # dcp_worker's values: model.w[i][j] = step * 65536 + (i * 31 + j) % 65521,
    # model.b all step, step the int
    run "$TORCH2" - "$T/ck" 3 <<'PY'
import sys, warnings, torch
import torch.distributed.checkpoint as dcp
warnings.simplefilter("ignore")
step = int(sys.argv[2])
sd = {"model.w": torch.zeros(8192, 2048), "model.b": torch.zeros(4), "step": 0}
dcp.load(sd, checkpoint_id=sys.argv[1])
i = torch.arange(8192).unsqueeze(1)
j = torch.arange(2048).unsqueeze(0)
want = (step * 65536 + (i * 31 + j) % 65521).float()
assert torch.equal(sd["model.w"], want), "model.w differs"
assert torch.equal(sd["model.b"], torch.full((4,), float(step))), sd["model.b"]
assert sd["step"] == step, sd["step"]
print("dcp.load ok")
PY
    assert_success
    assert_output "dcp.load ok"
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
