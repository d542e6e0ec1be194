#!/usr/bin/env bats
# tcompile on batch norm in training mode (issue 23): a conv, BatchNorm2d
# and relu exported by PyTorch 2.x as exported (batch_norm with
# training=True and num_batches_tracked.add_, functionalised at load) and
# after run_decompositions (_native_batch_norm_legit_functional, the
# updated running statistics as buffer mutations):
# tests/fixtures/graph_bntrain.py. The output, the three updated buffers and
# the four parameters' gradients must be PyTorch's.
# Without running statistics (_native_batch_norm_legit.no_stats): the output
# and the gradients.

load helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

@test "check: both forms" {
    run tcompile check "$D/bntrain.json" "$D/bntrain_core.json"
    assert_success
    assert_line --index 0 --partial "bntrain.json: ok ("
    assert_line --index 1 --partial "bntrain_core.json: ok ("
}

@test "as exported: output, running statistics and gradients, interpreted and compiled" {
    graph_matches "$D/bntrain" 4 4 --interpret
    graph_matches "$D/bntrain" 4 4 --strict
}

@test "_native_batch_norm_legit_functional: the same, interpreted and compiled" {
    graph_matches "$D/bntrain_core" 4 4 --interpret
    graph_matches "$D/bntrain_core" 4 4 --strict
}

@test "eval mode, _native_batch_norm_legit_no_training: gradients, interpreted and compiled" {
    graph_matches "$D/bneval_core" 1 4 --interpret
    graph_matches "$D/bneval_core" 1 4 --strict
}

@test "no running statistics, _native_batch_norm_legit.no_stats: output and gradients, interpreted and compiled" {
    graph_matches "$D/bnnostats_core" 1 4 --interpret
    graph_matches "$D/bnnostats_core" 1 4 --strict
}
