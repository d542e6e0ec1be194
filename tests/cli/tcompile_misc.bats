#!/usr/bin/env bats
# tcompile on the ops F.interpolate, Conv1d(padding="same"), .to(dtype) and
# torch.fill export to: a torch.export graph (PyTorch 2.x,
# tests/fixtures/graph_misc.py) with conv1d.padding, upsample_nearest2d.vec
# (as_floats scale factors), upsample_bilinear2d.vec, to.dtype and
# to.device (as_device, as_memory_format) with the _assert_tensor_metadata
# nodes 2.x adds after them, and fill.Scalar.

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/graph/torch2/misc"
}

@test "check: conv1d.padding, upsample .vec (float[] scale factors), to.dtype, to.device, fill.Scalar are accepted" {
    run tcompile check "$F.json"
    assert_success
    assert_output --partial "ok (11 nodes, 3 inputs, 4 outputs)"
}

@test "run: outputs and the convolution's gradients equal PyTorch 2.x's" {
    graph_matches "$F" 4 2
}
