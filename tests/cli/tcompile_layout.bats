#!/usr/bin/env bats
# tcompile on memory formats in graphs: a torch.export graph (PyTorch 2.x,
# tests/fixtures/graph_layout.py) with clone(memory_format=channels_last) and
# _to_copy to channels_last / channels_last_3d, and to.dtype_layout (device
# "cpu", no dtype) to channels_last, clone() and empty_like() of a
# channels_last value (preserve_format), zeros_like/ones_like/full_like with
# a memory_format, each followed by a permute
# to channels-innermost order and a view that is legal only where the copy
# has PyTorch's channels_last strides.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/layout"
}

@test "check: clone and _to_copy with channels_last(_3d), then permute and view, are accepted" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok ("
}

@test "run: the views of the channels_last copies equal PyTorch 2.x's" {
    outputs_match "$F" 9
}
