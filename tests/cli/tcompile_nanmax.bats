#!/usr/bin/env bats
# tcompile's row max and min with NaN: amax, amin and softmax over rows of
# which two hold a NaN (tests/fixtures/graph_nanmax.py, PyTorch 2.x). The
# generated kernel takes the max as a vector reduction and keeps apart
# whether a NaN was seen: those rows must still come out NaN.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/nanmax"
}

@test "run: amax, amin and softmax of rows with a NaN equal PyTorch 2.x's" {
    outputs_match "$F" 3
}
