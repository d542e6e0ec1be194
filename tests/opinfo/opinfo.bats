#!/usr/bin/env bats
# PyTorch's OpInfo database as the oracle (issue 25): tests/opinfo/sweep.py
# exports every sample of an OpInfo with torch.export, runs it with
# `tcompile run --interpret` (and --grads) and compares as assert_close
# does, against the committed expected-failure list
# (tests/opinfo/expected-failures.txt), which only shrinks. Here the quick
# subset (sweep.py --quick); `make check-opinfo` sweeps all of op_db.
# Skipped without PyTorch 2.x or without its test helpers (expecttest).

load ../cli/helper

setup() {
    require_torch2
    "$TORCH2" -c 'import torch.testing._internal.common_methods_invocations' 2>/dev/null ||
        skip "PyTorch's op_db cannot be imported (pip install expecttest)"
    SWEEP="$TN_SRCDIR/tests/opinfo/sweep.py"
    TC="$TN_BUILDDIR/bin/tcompile/tcompile"
}

@test "the quick subset agrees with the expected-failure list" {
    run "$TORCH2" "$SWEEP" --tcompile "$TC" --quick
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
}

@test "a listed failure that now passes fails the sweep (the list only shrinks)" {
    printf 'abs|float32|fwd|0\twrong\tmade up\n' >"$BATS_TEST_TMPDIR/xf.txt"
    run "$TORCH2" "$SWEEP" --tcompile "$TC" --ops abs --max-samples 2 --xfail "$BATS_TEST_TMPDIR/xf.txt"
    assert_failure 1
    assert_output --partial "NOW PASSES (remove it from xf.txt) abs|float32|fwd|0"
}

@test "a failure the list does not hold fails the sweep" {
    # a tcompile that refuses everything
    printf '#!/bin/sh\necho "tcompile: refused" >&2\nexit 2\n' >"$BATS_TEST_TMPDIR/tc"
    chmod +x "$BATS_TEST_TMPDIR/tc"
    : >"$BATS_TEST_TMPDIR/xf.txt"
    run "$TORCH2" "$SWEEP" --tcompile "$BATS_TEST_TMPDIR/tc" --ops abs --max-samples 1 \
        --xfail "$BATS_TEST_TMPDIR/xf.txt"
    assert_failure 1
    assert_output --partial "NEW FAILURE abs|float32|fwd|0: refused: tcompile: refused"
}
