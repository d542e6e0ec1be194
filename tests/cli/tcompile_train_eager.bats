#!/usr/bin/env bats
# tcompile train --eager (issue 17's "200 steps of the MLP and the CNN with
# SGD and AdamW match PyTorch's losses step by step, compiled and eager"):
# the same loop as tcompile_train.bats's curves with each step's gradients
# from the eager engine (autograd through the interpreter, derivatives.yaml's
# C helpers) instead of the compiled forward and backward graphs. The CNN
# (batch norm in training mode) against the committed curves and
# state_dicts of train_torch.py --write; the MLP against live PyTorch 2.x.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/train"
    W="$BATS_TEST_TMPDIR"
}

@test "train --eager: 200 SGD steps of the CNN with batch norm: PyTorch's losses and running statistics" {
    cnn_bn_curve cnn_bn_sgd sgd 0.1 --eager
}

@test "train --eager: 200 AdamW steps of the CNN with batch norm: PyTorch's losses and running statistics" {
    cnn_bn_curve cnn_bn_adamw adamw 0.01 --eager
}

@test "train --eager: 200 SGD and AdamW steps of the MLP give PyTorch's losses" {
    require_torch2
    local opt lr
    for opt in sgd:0.1 adamw:0.01; do
        lr=${opt#*:} opt=${opt%:*}
        run tcompile train --eager "$F/mlp_ce.json" -w "$F/mlp_ce.pt" --data "$F/data.npz" \
            --optimizer "$opt" --lr "$lr" --steps 200 --log-loss
        assert_success
        echo "$output" > "$W/ours"
        run "$TORCH2" "$TN_SRCDIR/tests/fixtures/train_torch.py" "$F" "$opt" "$lr" 200
        assert_success
        echo "$output" > "$W/theirs"
        same_losses_as "$W/ours" "$W/theirs" 200
    done
}

@test "train --eager: the eager steps are not the compiled ones (the losses differ in float32's last bits)" {
    run tcompile train --eager "$F/cnn_bn.json" -w "$F/cnn_bn.pt" --data "$F/images.npz" \
        --optimizer sgd --lr 0.1 --steps 20 --log-loss
    assert_success
    echo "$output" > "$W/eager"
    run tcompile train "$F/cnn_bn.json" -w "$F/cnn_bn.pt" --data "$F/images.npz" \
        --optimizer sgd --lr 0.1 --steps 20 --log-loss
    assert_success
    echo "$output" > "$W/compiled"
    run cmp -s "$W/eager" "$W/compiled"
    assert_failure
}

@test "train --eager: applies to train only" {
    run tcompile run --eager "$F/mlp_ce.json" -w "$F/mlp_ce.pt"
    assert_failure 2
    assert_output --partial "--eager does not apply to 'run'"
}
