#!/usr/bin/env bats
# ttest: pytest files run natively, one pytest per file, each pytest case a
# case of ttest's (read back from pytest's JUnit XML), -m passed through.

load ttest-helper

# A Python that has pytest (the python3 on PATH, or Debian's with
# python3-pytest), in $PY; the test is skipped without one.
need_pytest() {
    PY=
    for p in python3 /usr/bin/python3; do
        if "$p" -c 'import pytest' 2>/dev/null; then PY=$p; return; fi
    done
    skip "no python3 that imports pytest (python3 -m pip install pytest, or Debian's python3-pytest)"
}

write_tests() {
    cat >test_mix.py <<'EOF2'
import pytest

def test_pass():
    print("ok 99 - printed, not a TAP point")

def test_fail():
    assert 1 + 1 == 3, "arith # broken"

@pytest.mark.slow
@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x

@pytest.mark.skip(reason="not here")
def test_skip():
    pass

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert 0

class TestKlass:
    def test_method(self):
        pass
EOF2
    printf 'def test_fine():\n    pass\n' >fine_test.py
    printf 'def helper():\n    raise SystemExit(1)\n' >helpers.py
    printf 'import pytest\n' >conftest.py
}

@test "a test_*.py runs under pytest, each case counted and named as pytest names it" {
    need_pytest
    write_tests
    run ttest --python "$PY" --json=o --junit j.xml .
    assert_failure 1
    assert_line "5 passed, 1 failed, 2 skipped"
    assert_line --partial "FAIL test_mix.py: 1 of 7 cases failed"
    run jsummary o
    assert_output "$(printf '%s\n' 'fine_test.py pass 1 1 0 0' 'test_mix.py fail 1 4 1 2')"
    run python3 -c '
import json
for r in sorted((json.loads(l) for l in open("o")), key=lambda r: r["name"]):
    for c in r["cases"]:
        print(r["name"], c["name"], c["result"], c["reason"])'
    assert_output "$(cat <<'EOF2'
fine_test.py test_fine pass None
test_mix.py test_pass pass None
test_mix.py test_fail fail None
test_mix.py test_param[1] pass None
test_mix.py test_param[2] pass None
test_mix.py test_skip skip not here
test_mix.py test_xfail todo known
test_mix.py TestKlass::test_method pass None
EOF2
)"
    xmllint --noout --schema "$TN_SRCDIR/tests/cli/ttest-junit.xsd" j.xml
    run xmllint --xpath 'string(//testcase[@name="test_fail"]/failure/@message)' j.xml
    assert_output --partial "arith # broken"
}

@test "-m MARKEXPR goes to pytest; a file it deselects entirely is skipped" {
    need_pytest
    write_tests
    run ttest --python "$PY" --json=o -m slow .
    assert_success
    assert_line "2 passed, 0 failed, 1 skipped"
    run jsummary o
    assert_output "$(printf '%s\n' 'fine_test.py skip 1 0 0 1' 'test_mix.py pass 1 2 0 0')"
}

@test "-m without a pytest file selected is a usage error, not ignored" {
    echo 'echo 1..1; echo ok 1' | mk prog
    run ttest -m slow prog
    assert_failure 2
    assert_line --index 0 "ttest: -m 'slow': no pytest file is selected (-m selects the cases of pytest files)"
    assert_line --index 1 "Try 'ttest --help' for more information."
}

@test "a Python without pytest is an error before the run (exit 2)" {
    printf 'def test_a():\n    pass\n' >test_a.py
    mkdir bin
    printf '#!/bin/sh\necho "ModuleNotFoundError: pytest" >&2\nexit 1\n' >bin/nopy
    chmod +x bin/nopy
    run ttest --python "$W/bin/nopy" test_a.py
    assert_failure 2
    assert_output "ttest: test_a.py: cannot run pytest files: '$W/bin/nopy' cannot import pytest (install it, or name a Python that has it with --python)"
}
