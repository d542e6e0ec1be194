#!/usr/bin/env bats
# The conv net of bench/nn/convnet.sh (two conv2d + ReLU + max_pool2d, then
# linear; batch 32 of 28x28) trained by SGD with momentum through lib/nn
# (tests/cli/nn/convnet_losses) and by PyTorch from the same seed, hence the
# same initial weights and batch: the same loss at each of the first 10
# steps (relative difference under 1e-4).  A layer that trains wrongly, or
# not at all (a conv weight without a gradient), differs from step 2 on.

load helper

setup() {
    need_built tests/cli/nn/convnet_losses
}

# same_losses PYTHON
same_losses() {
    run "$TN_BUILDDIR/tests/cli/nn/convnet_losses" 10
    assert_success
    echo "$output" > "$BATS_TEST_TMPDIR/ours"
    run "$1" - <<'PY'
import torch
nn = torch.nn
torch.set_num_threads(1)
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                  nn.Linear(32 * 7 * 7, 10))
x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
for _ in range(10):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    print(f"{loss.item():.9g}")
PY
    assert_success
    echo "$output" > "$BATS_TEST_TMPDIR/theirs"
    same_losses_as "$BATS_TEST_TMPDIR/ours" "$BATS_TEST_TMPDIR/theirs" 10
}

@test "conv net, SGD with momentum: the first 10 losses equal PyTorch 2.x's" {
    require_torch2
    same_losses "$TORCH2"
}

@test "conv net, SGD with momentum: the first 10 losses equal PyTorch 1.13's" {
    require_torch1
    same_losses /usr/bin/python3
}
