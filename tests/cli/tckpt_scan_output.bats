#!/usr/bin/env bats
# tckpt scan's outputs: SARIF 2.1.0 valid against OASIS's schema
# (tests/fixtures/sarif-schema-2.1.0.json, see its .txt), with
# percent-encoded URIs, file:// URIs for absolute paths, archive members as
# nested artifacts whose offsets count in the member, rules and
# invocations; --sarif - and FILE through links and devices; standard
# input; a failed write to stdout; folders; options that conflict.

load helper

setup() {
    SC="$TN_SRCDIR/tests/fixtures/scan"
    FX="$TN_SRCDIR/tests/fixtures/io"
    SCHEMA="$TN_SRCDIR/tests/fixtures/sarif-schema-2.1.0.json"
}

# Sets PYJS to a Python with jsonschema (Debian's python3-jsonschema, or
# the python3 on PATH), or skips the test.
require_jsonschema() {
    for PYJS in /usr/bin/python3 "$(command -v python3)"; do
        "$PYJS" -c 'import jsonschema' 2>/dev/null && return 0
    done
    skip "no python3 with jsonschema (apt-get install python3-jsonschema)"
}

@test "scan --sarif: valid SARIF 2.1.0, with rules, invocations and encoded URIs" {
    require_jsonschema
    mkdir -p "$BATS_TEST_TMPDIR/odd dir"
    cp "$SC/deny_os_system.pkl" "$BATS_TEST_TMPDIR/odd dir/ä #1.pkl"
    cd "$BATS_TEST_TMPDIR"
    run tckpt scan --sarif s.sarif -r "$SC" "odd dir" "$FX/module_1.pt"
    [ "$status" -eq 1 ]
    run "$PYJS" - s.sarif "$SCHEMA" "$BATS_TEST_TMPDIR" "$SC" <<'PY'
import json, sys, urllib.parse
import jsonschema
s, schema = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(s)
run = s["runs"][0]
rules = run["tool"]["driver"]["rules"]
ids = [r["id"] for r in rules]
assert all(r["shortDescription"]["text"] for r in rules)
for res in run["results"]:
    assert ids[res["ruleIndex"]] == res["ruleId"], res
assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}], run["invocations"]
uris = [a["location"]["uri"] for a in run["artifacts"]]
assert "odd%20dir/%C3%A4%20%231.pkl" in uris, uris
assert run["originalUriBaseIds"]["CWD"]["uri"] == "file://" + urllib.parse.quote(sys.argv[3]) + "/"
assert "file://" + urllib.parse.quote(sys.argv[4]) + "/deny_os_system.pkl" in uris, uris
PY
    assert_success
}

@test "scan --sarif: a finding in an archive member counts its offset in the member" {
    require_jsonschema
    # cov_nested_zip.zip holds inner.pt, whose archive/data.pkl calls posix.system
    run tckpt scan --sarif "$BATS_TEST_TMPDIR/n.sarif" "$SC/cov_nested_zip.zip"
    [ "$status" -eq 1 ]
    run "$PYJS" - "$BATS_TEST_TMPDIR/n.sarif" "$SC/cov_nested_zip.zip" <<'PY'
import io, json, sys, zipfile
s = json.load(open(sys.argv[1]))
run = s["runs"][0]
arts = run["artifacts"]
res = [r for r in run["results"] if r["ruleId"] == "dangerous-global"]
assert res, run["results"]
loc = res[0]["locations"][0]["physicalLocation"]
# walk the nesting: every level is an artifact whose parentIndex names the one holding it
chain, i = [], loc["artifactLocation"]["index"]
assert arts[i]["location"]["uri"] == loc["artifactLocation"]["uri"]
while "parentIndex" in arts[i]:
    chain.append(arts[i]["location"]["uri"])
    i = arts[i]["parentIndex"]
chain.reverse()
assert all(c.startswith("/") for c in chain), chain
data = open(sys.argv[2], "rb").read()
for c in chain:
    data = zipfile.ZipFile(io.BytesIO(data)).read(c[1:])
off = loc["region"]["byteOffset"]
# the offset points into the member's own bytes, at the opcode that names os
assert b"os" in data[off:off + 16] or b"posix" in data[off:off + 16], (chain, off, data[off:off + 16])
PY
    assert_success
}

@test "scan --sarif: a member's header finding is located in the archive that holds it" {
    # and a zip after other bytes counts from the file's start
    python3 -c 'import sys; open(sys.argv[2], "wb").write(b"\xff" * 16 + open(sys.argv[1], "rb").read())' \
        "$SC/zip_crc.pt" "$BATS_TEST_TMPDIR/prefixed.pt"
    for f in "$SC/zip_crc.pt" "$BATS_TEST_TMPDIR/prefixed.pt"; do
        run tckpt scan --sarif "$BATS_TEST_TMPDIR/c.sarif" "$f"
        [ "$status" -eq 1 ]
        run python3 - "$BATS_TEST_TMPDIR/c.sarif" "$f" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
r = [r for r in run["results"] if r["ruleId"] == "zip-crc-mismatch"][0]
loc = r["locations"][0]["physicalLocation"]
art = run["artifacts"][loc["artifactLocation"]["index"]]
assert "parentIndex" not in art, art   # the file itself
off = loc["region"]["byteOffset"]
assert open(sys.argv[2], "rb").read()[off:off + 4] == b"PK\x03\x04", off
PY
        assert_success
    done
}

@test "scan --sarif -: SARIF on standard output instead of the report" {
    run tckpt scan --sarif - "$SC/deny_os_system.pkl"
    [ "$status" -eq 1 ]
    printf '%s' "$output" | python3 -c 'import json, sys; assert json.load(sys.stdin)["version"] == "2.1.0"'
    run tckpt scan --json --sarif - "$SC/deny_os_system.pkl"
    [ "$status" -eq 2 ]
    assert_output --partial "--json and --sarif - both write to standard output"
}

@test "scan --sarif FILE: through a symlink its target is replaced; /dev/stdout is written" {
    echo old >"$BATS_TEST_TMPDIR/target.sarif"
    ln -s target.sarif "$BATS_TEST_TMPDIR/link.sarif"
    run tckpt scan --sarif "$BATS_TEST_TMPDIR/link.sarif" "$FX/module_1.pt"
    assert_success
    [ -L "$BATS_TEST_TMPDIR/link.sarif" ]
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$BATS_TEST_TMPDIR/target.sarif"
    run bash -c "tckpt scan --json --sarif /dev/stdout '$FX/module_1.pt' | grep -c '\"version\":\"2.1.0\"'"
    assert_output 1
    run tckpt scan --sarif /nonexistent/dir/s.sarif "$FX/module_1.pt"
    [ "$status" -eq 2 ]
    assert_output --partial "/nonexistent/dir/s.sarif"
    refute_output --partial scanned
}

@test "scan: a failed write to standard output exits 2 with a message" {
    for opt in "" --json "--sarif -"; do
        run bash -c "tckpt scan $opt '$FX/module_1.pt' >/dev/full"
        [ "$status" -eq 2 ]
        assert_output --partial "<stdout>"
    done
    # the SARIF written beside says so
    run bash -c "tckpt scan --sarif '$BATS_TEST_TMPDIR/f.sarif' '$FX/module_1.pt' >/dev/full"
    [ "$status" -eq 2 ]
    run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["runs"][0]["invocations"])' \
        "$BATS_TEST_TMPDIR/f.sarif"
    assert_output "[{'executionSuccessful': False, 'exitCode': 2}]"
}

@test "scan: a folder without -r is 'Is a directory'; -r scans what is under it" {
    run tckpt scan "$SC"
    [ "$status" -eq 2 ]
    assert_output --partial "$SC: Is a directory (use -r"
    mkdir "$BATS_TEST_TMPDIR/empty"
    run tckpt scan -r "$BATS_TEST_TMPDIR/empty"
    [ "$status" -eq 2 ]
    assert_output --partial "no file found"
}

@test "scan: standard input once; options given twice that would clash are refused" {
    run bash -c "tckpt scan - <'$SC/deny_os_system.pkl'"
    [ "$status" -eq 1 ]
    run bash -c "tckpt scan - - <'$SC/deny_os_system.pkl'"
    [ "$status" -eq 2 ]
    assert_output --partial "standard input (-) given twice"
    run bash -c "echo mylib.models.Net | tckpt scan --allowlist - '$SC/deny_mylib_models_Net.pkl'"
    assert_success
    run bash -c "echo x.y | tckpt scan --allowlist - - <'$SC/deny_os_system.pkl'"
    [ "$status" -eq 2 ]
    run tckpt scan --sarif a.sarif --sarif b.sarif "$FX/module_1.pt"
    [ "$status" -eq 2 ]
    run tckpt scan --policy torch2 --policy torch1.13 "$FX/module_1.pt"
    [ "$status" -eq 2 ]
}
