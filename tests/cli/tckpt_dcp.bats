#!/usr/bin/env bats
# tckpt over distributed checkpoint (DCP) folders: those PyTorch 2.x wrote
# (tests/fixtures/io_dcp.py, one process and 2 gloo ranks) listed, shown,
# diffed, verified, scanned and converted as dcp_to_torch_save converts
# them; a .metadata that would run a command under PyTorch refused and
# reported; broken folders refused naming the key.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/dcp"
    T="$BATS_TEST_TMPDIR"
}

# bad_folder CASE: $T/CASE, two/'s shards with bad/CASE.metadata.
bad_folder() {
    mkdir -p "$T/$1"
    cp "$FX"/two/*.distcp "$T/$1/"
    cp "$FX/bad/$1.metadata" "$T/$1/.metadata"
}

@test "ls, show and get read a folder saved by 2 ranks as its whole tensors" {
    run tckpt ls "$FX/two"
    assert_success
    assert_line --regexp '^model\.w +float32 +\[5, 3\] +60 '
    assert_line --regexp '^model\.c +float32 +\[4, 6\] +96 '
    assert_line --regexp '^optim\.state\.model\.w\.exp_avg +float32 +\[5, 3\]'
    assert_line --partial '5 tensors, 232 bytes'
    run tckpt ls --json "$FX/two"
    assert_output --partial '"format":"dcp"'
    run tckpt get "$FX/two" tag
    assert_output "run-a"
    run tckpt get "$FX/two" optim.param_groups.0.lr
    assert_output "0.1"
    # the column-sharded tensor, glued from both ranks' chunks
    run tckpt show "$FX/two" model.c
    assert_success
    assert_line --index 0 'tensor([[ 0.,  1.,  2.,  3.,  4.,  5.],'
    assert_line --partial 'numel=24 min=0 max=23'
}

@test "ls lists a folder from its .metadata: no tensor's bytes are read" {
    # rank 0's shard file holds only tensor chunks (model.w, model.c and
    # exp_avg at offsets 0, 1577 and 3154): zeroed, their bytes are no
    # zips any more, but their sizes and dtypes stand in .metadata
    cp -r "$FX/two" "$T/zeroed"
    head -c "$(wc -c <"$FX/two/__0_0.distcp")" /dev/zero >"$T/zeroed/__0_0.distcp"
    run tckpt ls "$T/zeroed"
    assert_success
    assert_output "$(tckpt ls "$FX/two")"
    run tckpt ls --json "$T/zeroed"
    assert_success
    assert_output "$(tckpt ls --json "$FX/two" | sed "s|$FX/two|$T/zeroed|")"
    # what does read them still finds the damage
    run tckpt show "$T/zeroed" model.w
    assert_failure 2
}

@test "a folder equals what dcp_to_torch_save wrote of it; convert to .pt matches it" {
    for d in one two; do
        run tckpt diff "$FX/$d" "$FX/$d.pt"
        assert_success
        tckpt convert "$FX/$d" "$T/$d.pt"
        run tckpt diff "$T/$d.pt" "$FX/$d.pt"
        assert_success
    done
    run tckpt verify "$FX/two"
    assert_success
    assert_output "$FX/two: ok (dcp, 5 tensors)"
}

@test "convert DIR model.pt: PyTorch loads what dcp_to_torch_save gives" {
    require_torch2
    tckpt convert "$FX/two" "$T/ours.pt"
    "$TORCH2" - "$FX/two" "$T/ours.pt" "$T/theirs.pt" <<'PY'
import sys, torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save(sys.argv[1], sys.argv[3])
a, b = torch.load(sys.argv[2]), torch.load(sys.argv[3])
def eq(x, y):
    if isinstance(x, torch.Tensor):
        return isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y)
    if isinstance(x, dict):
        return list(x) == list(y) and all(eq(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return type(x) == type(y) and len(x) == len(y) and all(map(eq, x, y))
    return x == y
sys.exit(0 if eq(a, b) else 1)
PY
}

@test "a .metadata that runs a command under PyTorch: refused naming the global, reported by scan" {
    bad_folder global
    rm -f /tmp/tensorkit-dcp-pwned
    run tckpt ls "$T/global"
    assert_failure 2
    assert_output --partial "GLOBAL posix.system is not a class a DCP .metadata holds"
    [ "${#lines[@]}" -eq 1 ]
    run tckpt scan "$T/global"
    assert_failure 1
    assert_line "$T/global: .metadata@2548: dangerous posix.system (called) [dangerous-global]"
    [ ! -e /tmp/tensorkit-dcp-pwned ]
    # a sound folder is clean, its items scanned too; -r takes it whole
    run tckpt scan "$FX/two"
    assert_success
    run tckpt scan -r "$FX"
    assert_failure 1
    refute_output --partial "two/.metadata"
}

@test "overlapping or missing chunks, lengths past the end, paths outside, truncated shards: exit 2 naming the key" {
    for c in overlap:'model.w: chunks 0 and 1 overlap' \
             missing:'model.w: the chunks cover 9 of the tensor'"'"'s 15 elements (missing chunks)' \
             past_end:'model.c: bytes 7882..1056458 lie past the end of __1_0.distcp (14190 bytes)' \
             path:'tag: the storage'"'"'s relative_path must name a file of the folder'; do
        bad_folder "${c%%:*}"
        run tckpt ls "$T/${c%%:*}"
        assert_failure 2
        assert_output "tckpt: $T/${c%%:*}: ${c#*:}"
    done
    mkdir "$T/cut"
    cp "$FX"/two/.metadata "$FX"/two/*.distcp "$T/cut/"
    truncate -s 8000 "$T/cut/__1_0.distcp"
    run tckpt ls "$T/cut"
    assert_failure 2
    assert_output --partial "model.c: bytes 7882..9459 lie past the end of __1_0.distcp (8000 bytes)"
    run tckpt verify "$T/cut"
    assert_failure 1
    assert_output --partial "model.c: bytes 7882..9459 lie past the end of __1_0.distcp (8000 bytes)"
    run tckpt scan "$T/cut"
    assert_failure 2
    # a folder without .metadata is still "Is a directory"
    run tckpt ls "$T"
    assert_failure 2
    assert_output --partial "Is a directory"
}

@test "convert model.pt DIR --shards N: PyTorch's dcp.load reads our folder and gets our values" {
    require_torch2
    for n in 1 2 3; do
        rm -rf "$T/out$n"
        run tckpt convert "$FX/two.pt" "$T/out$n" --shards $n
        assert_success
        [ -f "$T/out$n/.metadata" ] && [ -f "$T/out$n/__$((n - 1))_0.distcp" ]
        run tckpt diff "$T/out$n" "$FX/two.pt"
        assert_success
    done
    # the 3-shard folder into tensors shaped as dcp.load fills them
    "$TORCH2" - "$T/out3" "$FX/two.pt" <<'PY'
import sys, warnings, torch
import torch.distributed.checkpoint as dcp
warnings.simplefilter("ignore")
ref = torch.load(sys.argv[2])
sd = {"model": {k: torch.zeros_like(v) for k, v in ref["model"].items()},
      "optim": {"state": {"model.w": {"exp_avg": torch.zeros(5, 3), "step": torch.tensor(0.0)}},
                "param_groups": [{"lr": 0.0, "betas": (0.0, 0.0), "params": []}]},
      "epoch": 0, "tag": ""}
dcp.load(sd, checkpoint_id=sys.argv[1])
ok = all(torch.equal(sd["model"][k], ref["model"][k]) for k in ref["model"])
ok &= torch.equal(sd["optim"]["state"]["model.w"]["exp_avg"], ref["optim"]["state"]["model.w"]["exp_avg"])
ok &= sd["epoch"] == 7 and sd["tag"] == "run-a" and sd["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
sys.exit(0 if ok else 1)
PY
    # safetensors in and out
    tckpt convert "$FX/two" "$T/two.safetensors"
    tckpt convert "$T/two.safetensors" "$T/st/"
    run tckpt diff "$T/st" "$T/two.safetensors"
    assert_success
}

@test "convert to a DCP folder: replaces only a DCP folder, leaves no temporary, refuses --shards for files" {
    mkdir "$T/plain"
    run tckpt convert "$FX/two.pt" "$T/plain/"
    assert_failure 2
    assert_output "tckpt: $T/plain/: exists and is not a distributed checkpoint; not replaced"
    run tckpt convert "$FX/two.pt" "$T/plain"
    assert_failure 2
    assert_line --index 0 --partial "cannot tell the format"
    tckpt convert "$FX/one.pt" "$T/d/" --shards 2
    tckpt convert "$FX/two.pt" "$T/d"
    run tckpt diff "$T/d" "$FX/two.pt"
    assert_success
    run ls -A "$T"
    refute_output --partial "dcp-tmp"
    run tckpt convert "$FX/two.pt" "$T/x.pt" --shards 2
    assert_failure 2
    assert_line --index 0 --partial "--shards"
    run tckpt convert "$FX/two.pt" "$T/y" --shards 0
    assert_failure 2
}
