#!/usr/bin/env bats
# tckpt over whole training checkpoints (tests/fixtures/io/tckpt, written by
# PyTorch 2.x: io_tckpt.py): diff of every value, show and get of values
# other than tensors, convert --dtype and --keys, and Hugging Face sharded
# checkpoints read as one.

load helper

# PyTorch's side of the checks runs in the file's fork server (torch imported once)
setup_file() {
    torch2_serve
}

teardown_file() {
    torch2_stop
}

setup() {
    FX="$TN_SRCDIR/tests/fixtures/io/tckpt"
    T="$BATS_TEST_TMPDIR"
}

@test "diff compares every value: epoch, lr and an extra key differ, exit 1" {
    run tckpt diff "$FX/train_a.pt" "$FX/train_b.pt"
    assert_failure 1
    assert_line "only in $FX/train_b.pt: best"
    assert_line "epoch: 3 -> 4"
    assert_line "lr: 0.01 -> 0.005"
    [ "${#lines[@]}" -eq 3 ]
    run tckpt diff --json "$FX/train_a.pt" "$FX/train_b.pt"
    assert_failure 1
    run python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(d["differ"], [(x["kind"], x["name"], x.get("a"), x.get("b")) for x in d["differences"]])' "$output"
    assert_output "True [('only_in_b', 'best', None, None), ('value', 'epoch', 3, 4), ('value', 'lr', 0.01, 0.005)]"
    # the same file: every value equal
    run tckpt diff "$FX/train_a.pt" "$FX/train_a.pt"
    assert_success
    assert_output --regexp "27 tensors match; [0-9]+ other values equal$"
}

@test "diff --only-tensors compares the tensors alone; --atol applies to floats" {
    run tckpt diff --only-tensors "$FX/train_a.pt" "$FX/train_b.pt"
    assert_success
    assert_output "$FX/train_a.pt and $FX/train_b.pt: 27 tensors match"
    python3 -c '
import sys, torch
d = torch.load(sys.argv[1], weights_only=True); d["lr"] += 1e-9
torch.save(d, sys.argv[2])' "$FX/train_a.pt" "$T/near.pt"
    run tckpt diff "$FX/train_a.pt" "$T/near.pt"
    assert_failure 1
    assert_output --partial "lr: 0.01 -> 0.010000001"
    run tckpt diff --atol 1e-6 "$FX/train_a.pt" "$T/near.pt"
    assert_success
}

@test "diff --prefix compares a subtree with a bare state dict" {
    run tckpt diff "$FX/train_a.pt" "$FX/model.pt"
    assert_failure 1
    run tckpt diff --prefix model. "$FX/train_a.pt" "$FX/model.pt"
    assert_success
    assert_output "$FX/train_a.pt and $FX/model.pt: 9 tensors match"
    run tckpt diff --prefix model. "$FX/model.pt" "$FX/train_b.pt"
    assert_success
    python3 -c '
import sys, torch
d = torch.load(sys.argv[1], weights_only=True); d["0.bias"][1] += 1
torch.save(d, sys.argv[2])' "$FX/model.pt" "$T/m.pt"
    run tckpt diff --prefix model. "$FX/train_a.pt" "$T/m.pt"
    assert_failure 1
    assert_output --partial "0.bias: 1 of 4 elements differ"
}

@test "show prints every value as Python does, dtypes by name; KEY may name any value" {
    require_torch2
    run tckpt show "$FX/train_a.pt"
    assert_success
    # PyTorch's own repr of each top-level value that is no container
    want=$(torch2 -c '
import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
for k in ("epoch", "lr", "dtype", "name"): print("  %r: %r" % (k, d[k]))' "$FX/train_a.pt")
    while IFS= read -r l; do assert_line "$l"; done <<<"$want"
    refute_output --partial "<global>"
    run tckpt show "$FX/train_a.pt" dtype
    assert_output "torch.float16"
    run tckpt show "$FX/train_a.pt" optimizer.param_groups.0.betas
    assert_line --index 0 "tuple (2 items)"
    run tckpt show "$FX/train_a.pt" optimizer.state.0.step
    assert_success
    assert_line --regexp '^numel=1 '
    run tckpt show "$FX/train_a.pt" nothing.here
    assert_failure 2
    assert_output "tckpt: $FX/train_a.pt: no key 'nothing.here'"
    run tckpt show --json "$FX/train_a.pt"
    assert_success
    run python3 -c 'import json, sys; v = json.loads(sys.argv[1])["value"]; print(v["epoch"], v["dtype"], v["optimizer"]["param_groups"][0]["betas"])' "$output"
    assert_output "3 torch.float16 [0.9, 0.999]"
}

@test "show and ls --json give safetensors' __metadata__" {
    run tckpt show "$FX/model.safetensors"
    assert_success
    assert_line "__metadata__: dict (1 item)"
    assert_line "  'format': 'pt'"
    run tckpt ls --json "$FX/model.safetensors"
    run python3 -c 'import json, sys; print(json.loads(sys.argv[1])["metadata"])' "$output"
    assert_output "{'format': 'pt'}"
    run tckpt ls --json "$TN_SRCDIR/tests/fixtures/io/module_2.pt"
    refute_output --partial '"metadata"'
}

@test "get writes a value other than a tensor as text, and refuses a dict" {
    run tckpt get "$FX/train_a.pt" epoch
    assert_output "3"
    run tckpt get "$FX/train_a.pt" name
    assert_output "run1"
    tckpt get "$FX/train_a.pt" lr -o "$T/lr"
    [ "$(cat "$T/lr")" = 0.01 ]
    run tckpt get "$FX/train_a.pt" model
    assert_failure 2
    assert_output "tckpt: $FX/train_a.pt: 'model' is a OrderedDict: name a tensor or a value inside it (tckpt show lists them)"
}

@test "convert --dtype casts the model's floating tensors, not optimizer state" {
    require_torch2
    tckpt convert --dtype bf16 "$FX/train_a.pt" "$T/b.pt"
    run torch2 -c '
import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
print(sorted({str(v.dtype) for v in d["model"].values()}))
print(sorted({str(v.dtype) for s in d["optimizer"]["state"].values() for v in s.values()}))
print(d["epoch"], d["dtype"])' "$T/b.pt"
    assert_line --index 0 "['torch.bfloat16', 'torch.int64']"
    assert_line --index 1 "['torch.float32']"
    assert_line --index 2 "3 torch.float16"
}

@test "convert --keys writes only the keys that match the glob" {
    require_torch2
    tckpt convert --keys 'model.*' "$FX/train_a.pt" "$T/m.pt"
    run torch2 -c '
import sys, torch
a = torch.load(sys.argv[1], weights_only=True); b = torch.load(sys.argv[2], weights_only=True)
print(list(b), list(b["model"]) == list(a["model"]["model"] if False else a["model"]))' "$FX/train_a.pt" "$T/m.pt"
    assert_output "['model'] True"
    tckpt convert --keys '*.weight' "$FX/model.pt" "$T/w.safetensors"
    run tckpt ls "$T/w.safetensors"
    assert_line --regexp '^0.weight '
    refute_line --regexp '^0.bias '
    run tckpt convert --keys 'nope*' "$FX/model.pt" "$T/x.pt"
    assert_failure 2
    assert_output "tckpt: $FX/model.pt: no key matches --keys 'nope*'"
    [ ! -e "$T/x.pt" ]
}

@test "a sharded Hugging Face checkpoint reads as one in every subcommand" {
    I="$FX/sharded/model.safetensors.index.json"
    run tckpt ls "$I"
    assert_success
    assert_line "9 tensors, 176 bytes; 9 storages, 176 bytes stored"
    run tckpt diff "$I" "$FX/model.pt"
    assert_success
    run tckpt verify "$I"
    assert_output "$I: ok (sharded, 9 tensors)"
    run tckpt show "$I" 2.weight
    assert_success
    assert_line --regexp '^numel=8 '
    run tckpt ls --json "$I"
    run python3 -c 'import json, sys; print(json.loads(sys.argv[1])["metadata"])' "$output"
    assert_output "{'total_size': 176}"
    tckpt get "$I" 0.weight -o "$T/w.npy"
    cmp "$T/w.npy" <(tckpt get "$FX/model.pt" 0.weight)
    tckpt convert "$I" "$T/one.safetensors"
    run tckpt diff "$T/one.safetensors" "$FX/model.safetensors"
    assert_success
    # a shard that lacks what the index puts in it; a shard outside the folder
    mkdir "$T/s"
    cp "$FX"/sharded/* "$T/s"
    cp "$FX/sharded/model-00001-of-00003.safetensors" "$T/s/model-00002-of-00003.safetensors"
    run tckpt ls "$T/s/model.safetensors.index.json"
    assert_failure 2
    assert_output --partial "weight_map puts 1.bias in $T/s/model-00002-of-00003.safetensors, which does not hold it"
    printf '{"weight_map": {"a": "../x.safetensors"}}' >"$T/s/evil.index.json"
    run tckpt ls "$T/s/evil.index.json"
    assert_failure 2
    assert_output --partial "the shard must be a file name beside the index"
}

@test "values weights_only allows but tensorkit cannot rebuild are shown, not refused" {
    require_torch2
    O="$FX/opaque.pt"
    run tckpt ls "$O"
    assert_success
    assert_line --regexp '^w +float32 +\[4\] '
    assert_line "2 tensors, 32 bytes; 2 storages, 32 bytes stored"
    run tckpt show "$O"
    assert_success
    # as PyTorch 2.x's own repr of what torch.load gives
    want=$(torch2 -c '
import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
for k in ("device", "cuda", "set", "bytes", "bytearray", "complex"): print("  %r: %r" % (k, d[k]))' "$O")
    while IFS= read -r l; do assert_line "$l"; done <<<"$want"
    assert_line --regexp "^  'sparse': torch._utils._rebuild_sparse_tensor\(.*\(3, 3\)"
    want=$(torch2 -c '
import sys, torch
q = torch.load(sys.argv[1], weights_only=True)["q"]
print("  %r: tensor(%s %s, quantizer=(%s, %r, %d))" % ("q", str(q.dtype)[6:], list(q.shape), q.qscheme(), q.q_scale(), q.q_zero_point()))' "$O")
    assert_line "$want"
    run tckpt get "$O" device
    assert_output "device(type='cpu')"
    run tckpt diff "$O" "$O"
    assert_success
    run tckpt convert "$O" "$T/o.safetensors"
    assert_success
    assert_output --partial "8 other values dropped"
    run tckpt convert "$O" "$T/o.pt"
    assert_failure 2
    assert_output "tckpt: $T/o.pt: cannot write device(type='cpu'): tensorkit loaded it without rebuilding it"
    [ ! -e "$T/o.pt" ]
}

@test "legacy (pre-1.6) files of 1.13 and 2.x: ls, show, get and convert read them" {
    require_torch2
    for v in 1 2; do
        L="$FX/legacy_$v.pt"
        run tckpt ls --json "$L"
        assert_success
        # names, shapes, strides, offsets and shared storages as torch.load sees them
        run torch2 -c '
import json, sys, torch
ours = json.loads(sys.argv[1]); d = torch.load(sys.argv[2], weights_only=True)
flat = {}
def walk(p, v):
    if isinstance(v, dict):
        for k, x in v.items(): walk(p + [str(k)], x)
    elif isinstance(v, torch.Tensor): flat[".".join(p)] = v
walk([], d)
got = [(t["name"], t["shape"], t["stride"], t["offset"], t["parameter"]) for t in ours["tensors"]]
want = [(k, list(t.shape), list(t.stride()), t.storage_offset(), isinstance(t, torch.nn.Parameter)) for k, t in flat.items()]
assert got == want, (got, want)
assert ours["format"] == "legacy" and ours["storages"] == len({t.untyped_storage().data_ptr() for t in flat.values()})
print("same")' "$output" "$L"
        assert_output "same"
        run tckpt show "$L" epoch
        assert_output "7"
        tckpt get "$L" col -o "$T/col.npy"
        tckpt convert "$L" "$T/z.pt"
        run torch2 -c '
import sys, numpy as np, torch
a = torch.load(sys.argv[1], weights_only=True); b = torch.load(sys.argv[2], weights_only=True)
same = all(torch.equal(a[k], b[k]) for k in ("base", "col", "p", "ints"))
same &= all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
print(same, b["epoch"], b["col"].untyped_storage().data_ptr() == b["base"].untyped_storage().data_ptr(),
      np.array_equal(np.load(sys.argv[3]), a["col"].numpy()))' "$L" "$T/z.pt" "$T/col.npy"
        assert_output "True 7 True True"
    done
    run tckpt diff "$FX/legacy_1.pt" "$FX/legacy_2.pt"
    assert_success
    run tckpt verify "$FX/legacy_2.pt"
    assert_output "$FX/legacy_2.pt: ok (legacy, 11 tensors)"
    head -c 700 "$FX/legacy_2.pt" >"$T/cut.pt"
    run tckpt ls "$T/cut.pt"
    assert_failure 2
    assert_output --regexp "^tckpt: $T/cut.pt: "
    [ "${#lines[@]}" -eq 1 ]
}
