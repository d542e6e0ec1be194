#!/usr/bin/env bats
# tckpt: ls, show, get, verify, convert and diff over checkpoints that real
# PyTorch wrote (tests/fixtures/io), and the one-line errors for bad input.

load helper
load tckpt-helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/io"
}

@test "ls lists every tensor with storage and offset, and totals" {
    run tckpt ls "$FX/views_2.pt"
    assert_success
    assert_line --regexp '^t +float32 +\[4, 3\] +48 +0 +0$'
    assert_line --regexp '^flat +float32 +\[7\] +28 +0 +5$'
    assert_line "6 tensors, 212 bytes; 1 storage, 48 bytes stored"
}

@test "ls --json is one object with PyTorch's shapes and strides" {
    run tckpt ls --json "$FX/module_1.pt"
    assert_success
    # The fixture JSON (written by PyTorch) and ours agree on every tensor.
    run python3 -c '
import json, sys
ours = json.loads(sys.argv[1])
fx = json.load(open(sys.argv[2]))["value"]["odict"]
want = [(k["str"], v["tensor"]["shape"], v["tensor"]["stride"]) for k, v in fx]
got = [(t["name"], t["shape"], t["stride"]) for t in ours["tensors"]]
assert got == want, (got, want)
assert ours["total_tensors"] == len(want)
print("same")' "$output" "$FX/module_1.json"
    assert_success
    assert_output "same"
}

@test "ls detects formats from content, not names" {
    cp "$FX/tensors.safetensors" "$BATS_TEST_TMPDIR/weights.pt"
    run tckpt ls --json "$BATS_TEST_TMPDIR/weights.pt"
    assert_success
    assert_output --partial '"format":"safetensors"'
    run tckpt ls "$FX/tensors.npz"
    assert_success
    assert_output --partial "fortran"
}

@test "show prints the tree and one tensor as PyTorch prints it" {
    run tckpt show "$FX/optim_2.pt"
    assert_success
    assert_line --partial "'exp_avg_sq': Tensor float32 [2, 2]"
    assert_line --partial "'eps': 1e-08"
    require_torch2
    run tckpt show "$FX/module_2.pt" 0.weight
    assert_success
    want=$("$TORCH2" -c 'import torch, sys; print(torch.load(sys.argv[1])["0.weight"])' "$FX/module_2.pt")
    assert_output --partial "$want"
    assert_line --regexp '^numel=6 min=.* nan=0 inf=0$'
}

@test "get writes a .npy that numpy reads with PyTorch's values" {
    require_torch2
    run tckpt get "$FX/dtypes_2.pt" float64 -o "$BATS_TEST_TMPDIR/f.npy"
    assert_success
    run "$TORCH2" -c '
import sys, numpy as np, torch
a = np.load(sys.argv[1]); t = torch.load(sys.argv[2])["float64"]
print(np.array_equal(a, t.numpy(), equal_nan=True))' "$BATS_TEST_TMPDIR/f.npy" "$FX/dtypes_2.pt"
    assert_output "True"
}

@test "convert to the 1.13 layout reproduces PyTorch 1.13's file byte for byte" {
    tckpt convert --layout torch1 "$FX/optim_1.pt" "$BATS_TEST_TMPDIR/optim_1.pt"
    cmp "$FX/optim_1.pt" "$BATS_TEST_TMPDIR/optim_1.pt"
}

@test "convert to safetensors and back keeps every value; diff agrees" {
    run tckpt convert "$FX/views_2.pt" "$BATS_TEST_TMPDIR/v.safetensors"
    assert_success
    assert_output --partial "written as copies"
    run tckpt convert "$BATS_TEST_TMPDIR/v.safetensors" "$BATS_TEST_TMPDIR/v.pt"
    assert_success
    run tckpt diff "$FX/views_2.pt" "$BATS_TEST_TMPDIR/v.pt"
    assert_success
    assert_output --partial "6 tensors match"
    run tckpt convert --to npz "$FX/module_2.pt" "$BATS_TEST_TMPDIR/m.out"
    assert_success
    run tckpt diff "$FX/module_2.pt" "$BATS_TEST_TMPDIR/m.out"
    assert_success
}

@test "convert --dtype casts floating tensors only; torch.load reads the result" {
    tckpt convert --dtype bf16 "$FX/dtypes_2.pt" "$BATS_TEST_TMPDIR/b.pt"
    run tckpt ls "$BATS_TEST_TMPDIR/b.pt"
    assert_line --regexp '^float64 +bfloat16 '
    assert_line --regexp '^int64 +int64 '
    require_torch2
    run "$TORCH2" -c 'import torch, sys; d = torch.load(sys.argv[1], weights_only=True); print(d["float32"].dtype, d["int8"].dtype)' "$BATS_TEST_TMPDIR/b.pt"
    assert_output "torch.bfloat16 torch.int8"
}

@test "convert draws no progress bar when stderr is not a terminal" {
    # TCKPT_PROGRESS_MIN=1 makes any file large enough for a bar: only the
    # terminal test can keep it away.
    TCKPT_PROGRESS_MIN=1 tckpt convert "$FX/module_2.pt" "$BATS_TEST_TMPDIR/m.safetensors" \
        2>"$BATS_TEST_TMPDIR/err"
    [ ! -s "$BATS_TEST_TMPDIR/err" ]
    TCKPT_PROGRESS_MIN=1 tckpt convert "$FX/module_2.pt" "$BATS_TEST_TMPDIR/m.pt" \
        2>"$BATS_TEST_TMPDIR/err"
    [ ! -s "$BATS_TEST_TMPDIR/err" ]
}

@test "convert --dtype and verify draw converting and reading bars on a terminal" {
    command -v script >/dev/null || skip "script(1) from util-linux is not installed"
    run script -qec "TCKPT_PROGRESS_MIN=1 tckpt convert --dtype f16 '$FX/module_2.pt' '$BATS_TEST_TMPDIR/h.pt'" /dev/null
    assert_success
    assert_output --partial "tckpt: converting ["
    assert_output --partial "tckpt: writing ["
    run script -qec "TCKPT_PROGRESS_MIN=1 tckpt verify '$FX/module_2.pt'" /dev/null
    assert_success
    assert_output --partial "tckpt: reading ["
    assert_output --partial "100%"
    # not on a pipe
    TCKPT_PROGRESS_MIN=1 tckpt verify "$FX/module_2.pt" 2>"$BATS_TEST_TMPDIR/err" >/dev/null
    [ ! -s "$BATS_TEST_TMPDIR/err" ]
}

@test "convert draws a progress bar on a terminal for large files only, NO_COLOR or not" {
    command -v script >/dev/null || skip "script(1) from util-linux is not installed"
    # script(1) gives the command a terminal; its output is what was drawn.
    mkdir "$BATS_TEST_TMPDIR/bar" "$BATS_TEST_TMPDIR/quiet"
    run script -qec "TCKPT_PROGRESS_MIN=1 tckpt convert '$FX/module_2.pt' '$BATS_TEST_TMPDIR/bar/m.pt'" /dev/null
    assert_success
    assert_output --partial "tckpt: writing ["
    assert_output --partial "100%"
    run script -qec "NO_COLOR=1 TCKPT_PROGRESS_MIN=1 tckpt convert '$FX/module_2.pt' '$BATS_TEST_TMPDIR/b.npz'" /dev/null
    assert_success
    assert_output --partial "100%"
    # The default threshold (64 MiB) keeps small files quiet.
    run script -qec "tckpt convert '$FX/module_2.pt' '$BATS_TEST_TMPDIR/quiet/m.pt'" /dev/null
    assert_success
    assert_output ""
    cmp "$BATS_TEST_TMPDIR/bar/m.pt" "$BATS_TEST_TMPDIR/quiet/m.pt"
}

@test "diff reports changed values and exits 1; tolerances apply" {
    run tckpt diff "$FX/module_1.pt" "$FX/module_2.pt"
    assert_success
    run tckpt diff "$FX/dtypes_1.pt" "$FX/views_1.pt"
    assert_failure 1
    assert_output --partial "only in"
    tckpt convert --dtype f16 "$FX/module_2.pt" "$BATS_TEST_TMPDIR/h.pt"
    run tckpt diff "$FX/module_2.pt" "$BATS_TEST_TMPDIR/h.pt"
    assert_failure 1
    assert_output --partial "dtype float32 -> float16"
    run tckpt diff --json "$FX/module_2.pt" "$BATS_TEST_TMPDIR/h.pt"
    assert_failure 1
    run python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["differ"], sorted({x["kind"] for x in d["differences"]}))' "$output"
    assert_output "True ['dtype', 'values']"
}

@test "verify passes PyTorch's files and lists a CRC problem" {
    run tckpt verify "$FX/module_2.pt"
    assert_success
    assert_output --partial "ok (torch, 9 tensors)"
    crc_broken "$FX/module_2.pt" "$BATS_TEST_TMPDIR/crc.pt"
    run tckpt verify "$BATS_TEST_TMPDIR/crc.pt"
    assert_failure 1
    assert_output --partial "module_2/data/0: CRC-32 is"
}

@test "bad input: one line naming the file and reason, exit 2" {
    run tckpt ls "$TN_SRCDIR/README.md"
    assert_failure 2
    assert_output "tckpt: $TN_SRCDIR/README.md: not a checkpoint, safetensors, .npy or .npz file"
    run tckpt ls "$FX/bad_global_os.pt"
    assert_failure 2
    assert_output --partial "bad_global_os/data.pkl: GLOBAL at byte 2: Trying to load unsupported GLOBAL posix.system"
    run tckpt show "$FX/bad_too_big_storage.pt"
    assert_failure 2
    assert_output --partial "data/0 holds 16 bytes but the storage needs 400"
    head -c 300 "$FX/module_2.pt" >"$BATS_TEST_TMPDIR/cut.pt"
    run tckpt ls "$BATS_TEST_TMPDIR/cut.pt"
    assert_failure 2
    assert_output --regexp "^tckpt: .*cut.pt: "
    [ "${#lines[@]}" -eq 1 ]
    run tckpt ls /nonexistent.pt
    assert_failure 2
    assert_output "tckpt: /nonexistent.pt: No such file or directory"
}

@test "usage errors exit 2 with a hint; --help and --version exit 0" {
    run tckpt
    assert_failure 2
    assert_line --index 0 "tckpt: missing command (ls, show, get, verify, convert, diff or scan)"
    assert_output --partial "Try 'tckpt --help'"
    run tckpt frobnicate x
    assert_failure 2
    run tckpt convert --dtype int8 a.pt b.pt
    assert_failure 2
    assert_output --partial "--dtype: 'int8' is not bf16, f16, f32 or f64"
    run tckpt --help
    assert_success
    assert_output --partial "Usage: tckpt COMMAND"
    run tckpt --version
    assert_success
}

@test "every option in --help is in the man page" {
    for o in $(tckpt --help | grep -o -- '--[a-z0-9-]*' | sort -u); do
        grep -q -- "$(echo "$o" | sed 's/-/\\\\-/g')" "$TN_SRCDIR/man/man1/tckpt.1" || {
            echo "missing from tckpt.1: $o"; return 1; }
    done
}

@test "tckpt(1) renders the --json keys of ls, show and diff with their quotes" {
    command -v groff >/dev/null || skip "groff is not installed"
    run sh -c "groff -man -Tutf8 -rLL=200n '$TN_SRCDIR/man/man1/tckpt.1' 2>/dev/null | col -b"
    assert_success
    for k in '"format"' '"total_tensors"' '"storage_bytes"' '"metadata"' '"value"' '"tensors_b"' \
             '"values_b"' '"differ"'; do
        assert_output --partial "$k"
    done
}

@test "diff: an infinity equals only itself, whatever the tolerances (torch.allclose)" {
    require_torch1
    /usr/bin/python3 -c '
import sys, torch
inf = float("inf")
torch.save({"a": torch.tensor([-inf, 1.0, inf]), "lr": inf}, sys.argv[1] + "/i.pt")
torch.save({"a": torch.tensor([0.0, 1.0, inf]), "lr": 1e30}, sys.argv[1] + "/z.pt")
torch.save({"a": torch.tensor([-inf, 1.0, -inf]), "lr": inf}, sys.argv[1] + "/n.pt")' "$BATS_TEST_TMPDIR"
    run tckpt diff --atol 1 --rtol 1 "$BATS_TEST_TMPDIR/i.pt" "$BATS_TEST_TMPDIR/i.pt"
    assert_success
    run tckpt diff --atol 1 --rtol 1 "$BATS_TEST_TMPDIR/z.pt" "$BATS_TEST_TMPDIR/i.pt"
    assert_failure 1
    assert_output --partial "a: 1 of 3 elements differ"
    assert_output --partial "lr:"
    run tckpt diff --atol 1 --rtol 1 "$BATS_TEST_TMPDIR/n.pt" "$BATS_TEST_TMPDIR/i.pt"
    assert_failure 1
    assert_output --partial "a: 1 of 3 elements differ"
}
