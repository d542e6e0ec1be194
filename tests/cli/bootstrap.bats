#!/usr/bin/env bats
# bootstrap.sh: what it says when it cannot install, and that it is quick
# and installs nothing when nothing is missing.

load helper

@test "bootstrap.sh lists one package list and refuses politely without root" {
    # A fake dpkg-query that reports every package missing, run as non-root.
    fake=$BATS_TEST_TMPDIR/bin
    mkdir -p "$fake"
    printf '#!/bin/sh\nexit 1\n' >"$fake/dpkg-query"
    printf '#!/bin/sh\necho 1000\n' >"$fake/id"
    chmod +x "$fake/dpkg-query" "$fake/id"
    run env PATH="$fake:$PATH" sh "$TN_SRCDIR/bootstrap.sh"
    assert_failure 1
    assert_output --partial "missing Debian packages:"
    assert_output --partial "libopenblas-dev"
    assert_output --partial "run this script as root"
}

@test "torch2-python finds PyTorch 2.x or says there is none" {
    run "$TN_SRCDIR/tests/torch2-python"
    if [ "$status" -eq 0 ]; then
        run "$output" -c 'import torch; print(torch.__version__)'
        assert_success
        assert_output --regexp '^[2-9]\.'
    else
        assert_output ""
    fi
}
