#!/usr/bin/env bats
# tckpt scan: the adversarial corpus (tests/fixtures/scan, made by
# scan_corpus.py) through the command line, the exit statuses, --json,
# --sarif, -r, -j, standard input, --allow, and real PyTorch checkpoints
# that must come out clean.

load helper

setup() {
    SC="$TN_SRCDIR/tests/fixtures/scan"
    FX="$TN_SRCDIR/tests/fixtures/io"
}

@test "scan: every corpus case reports its severity, global and anomaly" {
    local files=()
    for f in "$SC"/*; do
        [ "${f##*/}" = manifest.json ] || files+=("$f")
    done
    # the manifest grades under weights_only's list
    run tckpt scan --policy torch2 --json -j 2 "${files[@]}"
    [ "$status" -eq 1 ]
    printf '%s' "$output" >"$BATS_TEST_TMPDIR/out.json"
    run python3 - "$BATS_TEST_TMPDIR/out.json" "$SC/manifest.json" <<'PY'
import json, os, sys
rank = {"clean": 0, "suspicious": 1, "unknown": 2, "dangerous": 3}
got = {os.path.basename(f["path"]): f for f in json.load(open(sys.argv[1]))["files"]}
bad = []
for c in json.load(open(sys.argv[2])):
    f = got[c["file"]]
    fs = f["findings"]
    sev = c["severity"]
    if sev == "incomplete":
        ok = not fs and f["status"] in ("incomplete", "not-a-model") and f["incomplete"]
    elif sev == "clean":
        ok = not fs and f["status"] == "clean"
    else:
        ok = max([rank[x["severity"]] for x in fs], default=0) == rank[sev]
        if c["global"]:
            ok = ok and any(x["global"] == c["global"] and x["severity"] == sev for x in fs)
        if c["reason"]:
            ok = ok and any(x["reason"] == c["reason"] for x in fs)
    if not ok:
        bad.append((c, fs))
assert len(got) >= 60
assert not bad, bad
PY
    assert_success
}

@test "scan: real PyTorch checkpoints, safetensors and npz are clean" {
    run tckpt scan "$FX"/*_1.pt "$FX"/*_2.pt "$FX"/deflated.pt "$FX"/tensors.npz \
        "$FX"/tensors_deflated.npz "$FX"/tensors.safetensors "$FX"/tensors_fortran.npy
    assert_success
    assert_line --regexp '^scanned [0-9]+ files: [0-9]+ clean, 0 with findings .*, 0 incomplete$'
}

@test "scan: a 20,000-tensor state_dict saved by PyTorch 1.13 is clean" {
    require_torch1
    /usr/bin/python3 -c '
import sys, torch
torch.save({"w%d" % i: torch.zeros(2) for i in range(20000)}, sys.argv[1])' \
        "$BATS_TEST_TMPDIR/many.pt"
    run tckpt scan "$BATS_TEST_TMPDIR/many.pt"
    assert_success
    assert_output --partial "1 clean, 0 with findings"
}

@test "scan: exit 1 on a finding, with the global, its use and the offset" {
    run tckpt scan "$SC/deny_os_system.pkl"
    [ "$status" -eq 1 ]
    assert_line --regexp 'deny_os_system\.pkl@2: dangerous os\.system \(called\) \[dangerous-global\]$'
}

@test "scan: exit 2 for unreadable or unrecognised input, never clean" {
    run tckpt scan "$SC/fail_empty.pkl"
    [ "$status" -eq 2 ]
    assert_output --partial "incomplete"
    run tckpt scan /nonexistent/x.pt
    [ "$status" -eq 2 ]
    run tckpt scan "$SC"
    [ "$status" -eq 2 ]
    # a finding wins over an unreadable file
    run tckpt scan /nonexistent/x.pt "$SC/deny_os_system.pkl"
    [ "$status" -eq 1 ]
}

@test "scan: standard input, -r and -j give the same findings" {
    run bash -c "tckpt scan - <'$SC/op_obj_pop.pkl'"
    [ "$status" -eq 1 ]
    assert_line --regexp '^-@[0-9]+: dangerous os\.system \(called\)'
    run tckpt scan -r "$SC"
    [ "$status" -eq 1 ]
    one=$output
    run tckpt scan -r -j 4 "$SC"
    [ "$output" = "$one" ]
}

@test "scan: --allow extends the allowlist but never for os, sys, subprocess or eval" {
    run tckpt scan --allow mylib.models.Net "$SC/deny_mylib_models_Net.pkl"
    assert_success
    printf 'mylib.models.Net  # ours\n' >"$BATS_TEST_TMPDIR/allow.txt"
    run tckpt scan --allowlist "$BATS_TEST_TMPDIR/allow.txt" "$SC/deny_mylib_models_Net.pkl"
    assert_success
    for g in os.system posix.system nt.system sys.exit subprocess.Popen builtins.eval builtins.exec; do
        run tckpt scan --allow "$g" "$SC/deny_os_system.pkl"
        [ "$status" -eq 2 ]
        assert_output --partial "can never be allowed"
    done
}

@test "scan: --policy torch1.13 refuses what only PyTorch 2 allows" {
    run tckpt scan --policy torch1.13 "$FX/optim_2.pt"
    [ "$status" -eq 1 ]
    run tckpt scan --policy torch2 "$FX/module_1.pt"
    assert_success
    run tckpt scan --policy torch3 "$FX/module_1.pt"
    [ "$status" -eq 2 ]
}

@test "scan: --sarif writes SARIF 2.1.0 with one result per finding" {
    run tckpt scan --sarif "$BATS_TEST_TMPDIR/s.sarif" "$SC/deny_os_system.pkl" "$FX/module_1.pt"
    [ "$status" -eq 1 ]
    run python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["version"] == "2.1.0"
r = s["runs"][0]["results"]
assert len(r) == 1 and r[0]["ruleId"] == "dangerous-global" and r[0]["level"] == "error", r
assert r[0]["locations"][0]["physicalLocation"]["region"]["byteOffset"] == 2' "$BATS_TEST_TMPDIR/s.sarif"
    assert_success
}
