#!/usr/bin/env bats
# The strongest check of lib/nn, lib/optim and autograd together: the demo's
# MLP trained by share/examples/digits/train (tensorkit) and by
# train_torch.py (PyTorch) from the same seed, hence the same initial
# weights and the same batches, gives the same loss at each of the first 200
# steps (relative difference under 1e-4) for SGD with momentum, Adam and
# AdamW; and the checkpoint train saves opens in torch.load(weights_only=True)
# and gives PyTorch the accuracy train printed.

load helper

TRAIN() { "$TN_BUILDDIR/share/examples/digits/train" "$@"; }
DATA() { echo "$TN_SRCDIR/share/datasets/digits.csv.gz"; }

setup() {
    [ -x "$TN_BUILDDIR/share/examples/digits/train" ] || skip "share/examples/digits/train is not built"
}

# same_losses PYTHON OPTIMIZER [--torch1]
same_losses() {
    local py=$1 opt=$2
    shift 2
    run TRAIN --data "$(DATA)" --optimizer "$opt" --max-steps 200 --log-loss --quiet --output '' "$@"
    assert_success
    echo "$output" > "$BATS_TEST_TMPDIR/ours"
    run "$py" "$TN_SRCDIR/share/examples/digits/train_torch.py" --data "$(DATA)" \
        --optimizer "$opt" --max-steps 200 --log-loss --threads 1
    assert_success
    echo "$output" > "$BATS_TEST_TMPDIR/theirs"
    same_losses_as "$BATS_TEST_TMPDIR/ours" "$BATS_TEST_TMPDIR/theirs" 200
}

@test "SGD with momentum: the first 200 losses equal PyTorch 2.x's" {
    require_torch2
    same_losses "$TORCH2" sgd
}

@test "Adam: the first 200 losses equal PyTorch 2.x's" {
    require_torch2
    same_losses "$TORCH2" adam
}

@test "AdamW: the first 200 losses equal PyTorch 2.x's" {
    require_torch2
    same_losses "$TORCH2" adamw
}

@test "SGD with momentum, Adam and AdamW: the first 200 losses equal PyTorch 1.13's" {
    require_torch1
    for opt in sgd adam adamw; do
        same_losses /usr/bin/python3 "$opt" --torch1
    done
}

@test "the trained checkpoint loads in PyTorch and gives the same test accuracy" {
    cd "$BATS_TEST_TMPDIR"
    run TRAIN --data "$(DATA)" --quiet --output mlp.pt
    assert_success
    acc=$(echo "$output" | awk '/^test accuracy/ { print $3 }')
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'
    for py in /usr/bin/python3 $("$TN_SRCDIR/tests/torch2-python" 2>/dev/null); do
        "$py" -c 'import torch' 2>/dev/null || continue
        run "$py" "$TN_SRCDIR/share/examples/digits/train_torch.py" --data "$(DATA)" --check mlp.pt
        assert_success
        assert_output "test accuracy $acc"
    done
}

@test "train: usage errors exit 2 with a hint" {
    run TRAIN --epochs 0
    assert_failure 2
    assert_output --partial "Try 'train --help'"
    run TRAIN --optimizer rmsprop
    assert_failure 2
    run TRAIN --data /nonexistent/digits.csv.gz
    assert_failure 2
    assert_output --partial "/nonexistent/digits.csv.gz"
}
