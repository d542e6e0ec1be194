#!/usr/bin/env bats
# Optimizer and model state_dicts written by tensorkit open in PyTorch:
# test_nn loads each state_dict file PyTorch saved (tests/fixtures/nn),
# re-saves it with tn_save into $TN_NN_OUT, and here each installed PyTorch
# opens our file with torch.load(weights_only=True) (1.13: optimizer files
# without weights_only, which cannot read floats there), finds the same keys
# and values as in its own file, and its load_state_dict takes it (then one
# optimizer step runs).

load helper

check_with() {
    local py=$1 tag=$2 out=$BATS_TEST_TMPDIR/out
    need_built tests/unit/test_nn
    mkdir -p "$out"
    TN_NN_OUT=$out run "$TN_BUILDDIR/tests/unit/test_nn"
    assert_success
    run "$py" - "$TN_SRCDIR/tests/fixtures/nn" "$out" "$tag" <<'PY'
import sys, torch
fx, out, tag = sys.argv[1:]
nn = torch.nn
def same(a, b, where):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape \
            and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()) or set(a.keys()) <= set(b.keys()), \
            f"{where}: keys {list(a.keys())} against {list(b.keys())}"
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
cls = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
for kind in ("adam", "sgd", "adamw"):
    # 1.13's weights_only unpickler has no BINFLOAT: it cannot read an
    # optimizer's state_dict (lr is a float), its own included
    wo = tag != "torch1"
    theirs = torch.load(f"{fx}/{kind}_state_{tag}.pt", weights_only=wo)
    ours = torch.load(f"{out}/{kind}_state_{tag}.pt", weights_only=wo)
    same(theirs["state"], ours["state"], f"{kind} state")
    for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "momentum",
              "dampening", "nesterov", "params"):
        if k in theirs["param_groups"][0]:
            same(theirs["param_groups"][0][k], ours["param_groups"][0][k],
                 f"{kind} param_groups.{k}")
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    sd = torch.load(f"{out}/model_{kind}_{tag}.pt", weights_only=True)
    same(torch.load(f"{fx}/model_{kind}_{tag}.pt", weights_only=True), sd, f"{kind} model")
    m.load_state_dict(sd)
    opt = cls[kind](m.parameters(), lr=0.5)
    opt.load_state_dict(ours)
    for p in m.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    print(kind, "ok, lr", opt.param_groups[0]["lr"])
PY
    echo "$output"
    assert_success
}

@test "state_dicts saved by tensorkit load in Debian's PyTorch 1.13" {
    require_torch1
    check_with /usr/bin/python3 torch1
}

@test "state_dicts saved by tensorkit load in PyTorch 2.x" {
    require_torch2
    check_with "$TORCH2" torch2
}
