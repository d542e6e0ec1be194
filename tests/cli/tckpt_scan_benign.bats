#!/usr/bin/env bats
# tckpt scan's severities and policies on benign files and their malicious
# twins (tests/fixtures/scan_twins.py), each proven by the loader that
# would read it: --policy pickle (the default) finds nothing in a benign
# file and flags every malicious one; torch2 flags both (weights_only takes
# neither); --fail-on, SARIF levels, files that are no model, and zips
# flagged encrypted.

load helper

setup() {
    SC="$TN_SRCDIR/tests/fixtures/scan"
}

# twins CLASS...: writes the twins of those classes into $D and proves them
twins() {
    D=$BATS_TEST_TMPDIR/twins
    python3 -c 'import numpy' 2>/dev/null || skip "numpy is not installed"
    python3 "$TN_SRCDIR/tests/fixtures/scan_twins.py" "$D" "$@"
}

# verdicts POLICY clean|any [OPTION...]: every malicious file exits 1; with
# "clean", every benign one meant to be clean exits 0
verdicts() {
    run python3 - "$D" "$@" <<'PY'
import json, subprocess, sys
d, policy, benign = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
bad = []
cases = json.load(open(d + "/verdicts.json"))
for c in cases:
    r = subprocess.run(["tckpt", "scan", "--policy", policy] + extra + [d + "/" + c["file"]],
                       capture_output=True, text=True)
    want = 1 if c["verdict"] == "malicious" else {"clean": 0 if c["expect_clean"] else None,
                                                 "any": None}[benign]
    if want is not None and r.returncode != want:
        bad.append((c["file"], want, r.returncode, r.stdout))
assert any(c["verdict"] == "benign" for c in cases) and any(c["verdict"] == "malicious" for c in cases)
assert not bad, bad
PY
    assert_success
}

@test "scan: builtins' values, collections, decimal, stacked pickles, EXT codes: clean under --policy pickle, their twins flagged" {
    twins builtins collections values stacked ext
    verdicts pickle clean
    verdicts pickle clean --fail-on dangerous
    run tckpt scan "$D/b_deque_p2.pkl" "$D/b_bytes_p0.pkl" "$D/b_decimal_p4.pkl"
    assert_success
    # weights_only-exact stays a policy: it refuses deque and Decimal
    verdicts torch2 any
    for f in b_deque_p2 b_decimal_p4 b_stacked b_ext1; do
        run tckpt scan --policy torch2 "$D/$f.pkl"
        [ "$status" -eq 1 ]
    done
}

@test "scan: numpy object arrays of plain values are clean under --policy pickle, with a payload flagged" {
    twins numpy
    verdicts pickle clean
    run tckpt scan --policy torch2 "$D/b_npy_object.npy"
    [ "$status" -eq 1 ]
    assert_output --partial "[npy-object-array]"
}

@test "scan: whole torch.nn and torchvision models and TorchScript data pickles are clean under --policy pickle" {
    python3 -c 'import torch, torchvision' 2>/dev/null || skip "torch and torchvision are not installed"
    twins torch
    verdicts pickle clean
    run tckpt scan --policy torch2 "$D/b_torchvision.pt"
    [ "$status" -eq 1 ]
    assert_output --partial "unknown torchvision.models.resnet.BasicBlock"
}

@test "scan: the code-execution gadgets of the advisories are dangerous" {
    local g m n
    for g in torch.utils.bottleneck.__main__:run_cprofile torch.utils.bottleneck.__main__:run_autograd_prof \
        doctest:debug_script test.support.script_helper:assert_python_ok \
        torch.utils.data.datapipes.utils.decoder:basichandlers \
        torch.utils._config_module:ConfigModule.load_config torch.storage:_load_from_bytes \
        torch:compile mailcap:findmatch fickling.hook:remove_hook; do
        m=${g%%:*} n=${g#*:}
        python3 -c 'import sys; m, n = sys.argv[1:3]
sys.stdout.buffer.write(b"\x80\x04\x8c" + bytes([len(m)]) + m.encode() + b"\x8c" + bytes([len(n)])
                        + n.encode() + b"\x93)R.")' "$m" "$n" >"$BATS_TEST_TMPDIR/g.pkl"
        run tckpt scan --fail-on dangerous "$BATS_TEST_TMPDIR/g.pkl"
        [ "$status" -eq 1 ]
        assert_output --partial "dangerous $m.$n (called) [dangerous-global]"
    done
}

@test "scan: --fail-on sets the least severity that fails" {
    run tckpt scan --policy torch2 "$SC/op_ext1.pkl"
    [ "$status" -eq 1 ]
    run tckpt scan --policy torch2 --fail-on dangerous "$SC/op_ext1.pkl"
    assert_success
    assert_output --partial "unknown copyreg.extension 1"
    run tckpt scan --fail-on unknown "$SC/op_build_on_global.pkl"
    assert_success
    assert_output --partial "suspicious [build-on-global]"
    run tckpt scan --fail-on dangerous "$SC/deny_os_system.pkl"
    [ "$status" -eq 1 ]
    run tckpt scan --fail-on bad "$SC/deny_os_system.pkl"
    [ "$status" -eq 2 ]
    assert_output --partial "--fail-on: 'bad' is not"
}

@test "scan: SARIF levels follow the severity: dangerous error, suspicious warning, unknown note" {
    run tckpt scan --policy torch2 --sarif "$BATS_TEST_TMPDIR/s.sarif" "$SC/deny_os_system.pkl" \
        "$SC/op_ext1.pkl" "$SC/diff_frame_short.pkl"
    [ "$status" -eq 1 ]
    run python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]["results"]
lv = {(x["properties"]["severity"], x["level"]) for x in r}
assert lv == {("dangerous", "error"), ("unknown", "note"), ("suspicious", "warning")}, lv' \
        "$BATS_TEST_TMPDIR/s.sarif"
    assert_success
}

@test "scan: a file that is no model says what it is: exit 2, or 0 with --not-a-model=ok, never a finding" {
    T=$BATS_TEST_TMPDIR
    printf '\211PNG\r\n\032\nxxxx' >"$T/image.pt"
    printf 'hello\n' >"$T/notes.pt"
    : >"$T/empty.pt"
    run tckpt scan "$T/image.pt" "$T/notes.pt" "$T/empty.pt"
    [ "$status" -eq 2 ]
    assert_line "$T/image.pt: not a model: a PNG image"
    assert_line "$T/notes.pt: not a model: text"
    assert_line "$T/empty.pt: not a model: an empty file"
    assert_output --partial "0 with findings"
    run tckpt scan --not-a-model=ok "$T/image.pt" "$T/notes.pt" "$T/empty.pt"
    assert_success
    assert_output --partial ", 3 not a model"
    run tckpt scan --json "$T/image.pt"
    assert_output --partial '"status":"not-a-model","incomplete":true,"not_model":true'
    # a model among them still fails
    run tckpt scan --not-a-model=ok "$T/image.pt" "$SC/deny_os_system.pkl"
    [ "$status" -eq 1 ]
    run tckpt scan --not-a-model=maybe "$T/image.pt"
    [ "$status" -eq 2 ]
}

@test "scan: a password-protected zip is incomplete (exit 2), a zip only flagged encrypted is read" {
    command -v zip >/dev/null || skip "zip is not installed"
    T=$BATS_TEST_TMPDIR
    printf 'secret notes\n' >"$T/notes.txt"
    (cd "$T" && zip -q -P pw locked.zip notes.txt)
    run tckpt scan "$T/locked.zip"
    [ "$status" -eq 2 ]
    assert_line "$T/locked.zip: not a model: encrypted zip"
    assert_output --partial "0 with findings"
    run tckpt scan --not-a-model=ok "$T/locked.zip"
    assert_success
    # a torch zip whose data.pkl is flagged encrypted (both headers) but plain
    python3 - "$T/flagged.pt" <<'PY'
import io, sys, zipfile
evil = b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R."
b = io.BytesIO()
with zipfile.ZipFile(b, "w") as z:
    z.writestr("archive/data.pkl", evil)
    z.writestr("archive/version", b"3\n")
d = bytearray(b.getvalue())
for sig, flag in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
    i = d.index(sig)  # data.pkl comes first
    d[i + flag] |= 1
open(sys.argv[1], "wb").write(d)
PY
    run tckpt scan "$T/flagged.pt"
    [ "$status" -eq 1 ]
    assert_output --partial "dangerous posix.system (called)"
    assert_output --partial "[zip-encrypted-flag]"
}

@test "scan: expansion bombs (nested memo GETs, nested DUPs) and containers holding themselves are [expansion], shared references within bounds are not" {
    twins expansion
    verdicts pickle clean
    verdicts torch2 any
    run tckpt scan "$D/m_memo_bomb.pkl"
    assert_output --partial "suspicious [expansion]: a walk of the value meets 31111111111 values"
    run tckpt scan "$D/m_dup_bomb.pkl"
    assert_output --partial "suspicious [expansion]: a walk of the value meets 2147483647 values"
    run tckpt scan "$D/m_cycle_dict.pkl"
    assert_output --partial "[expansion]: a container that holds itself"
}

@test "scan: .npy headers are read as numpy reads them (escapes, concatenation, duplicate keys, object names, object fields), and a header that is not numpy's own literal is reported" {
    twins npyheader
    verdicts pickle clean
    verdicts torch2 any
    local f
    for f in "$D"/m_npy_*.npy; do
        run tckpt scan "$f"
        [ "$status" -eq 1 ]
        assert_output --partial "dangerous posix.system (called)"
    done
    run tckpt scan "$D/m_npy_dup_key.npy"
    assert_output --partial "suspicious [npy-header-noncanonical]"
    for f in "$D"/b_npy_dquote.npy "$D"/b_npy_octal.npy "$D"/b_npy_concat.npy; do
        run tckpt scan "$f"
        [ "$status" -eq 1 ]
        assert_output --partial "[npy-header-noncanonical]"
    done
    run tckpt scan "$D/b_npy_canonical.npy"
    assert_success
}

@test "scan: text memo keys are read with CPython's int() rules, so the global a STACK_GLOBAL takes from them is named" {
    twins anomaly
    verdicts pickle clean
    local f
    for f in "$D"/m_memo_key_*.pkl; do
        run tckpt scan "$f"
        [ "$status" -eq 1 ]
        assert_output --partial "dangerous os.system (called) [dangerous-global]"
        assert_output --partial "suspicious [memo-key-noncanonical]"
    done
    run tckpt scan "$D/b_memo_key_cr.pkl"
    [ "$status" -eq 1 ]
    assert_output --partial "[memo-key-noncanonical]"
    run tckpt scan "$D/b_memo_key_plain.pkl"
    assert_success
    run tckpt scan --fail-on dangerous "$D/m_frame_short.pkl"
    [ "$status" -eq 1 ]
}

@test "scan: compressed pickles and joblib files (zlib, gzip, bz2, lzma, xz) and 7z archives are decompressed and scanned" {
    twins compressed
    verdicts pickle clean
    verdicts torch2 any
    local f
    for f in "$D"/m_*; do
        run tckpt scan "$f"
        [ "$status" -eq 1 ]
        assert_output --partial "dangerous posix.system (called)"
    done
    run tckpt scan "$D/m_pickle.xz"
    assert_line --partial "m_pickle.xz: (xz)@2: dangerous posix.system (called)"
    run tckpt scan --json "$D/b_pickle.bz2"
    assert_success
    assert_output --partial '"format":"bzip2","status":"clean"'
}
