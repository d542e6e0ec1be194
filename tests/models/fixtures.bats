#!/usr/bin/env bats
# What the model zoo (tests/models/zoo.bats, issue 23) found missing, as
# small graphs PyTorch 2.x exported (tests/models/fixtures.py): these run
# without PyTorch, so CI keeps them fixed.

load ../cli/helper

setup() {
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

# fixture NAME NOUT NGRADS: check, then run interpreted and compiled
# (--strict), outputs and parameter gradients against PyTorch's.
fixture() {
    run tcompile check "$D/$1.json"
    assert_success
    assert_output --regexp "ok \([0-9]+ nodes"
    graph_matches "$D/$1" "$2" "$3" --interpret
    graph_matches "$D/$1" "$2" "$3" --strict
}

# fixture_outputs NAME NOUT: fixture without gradients.
fixture_outputs() {
    run tcompile check "$D/$1.json"
    assert_success
    outputs_match "$D/$1" "$2" --interpret
    outputs_match "$D/$1" "$2" --strict
}

@test "swapaxes, swapdims, reshape_as, view_as, expand_as, type_as (LeViT, MaxViT, RoBERTa, Gemma), in place through swapaxes" {
    fixture zoo_views 6 1
}

@test "adaptive_avg_pool1d (Hugging Face Swin), lgamma and its gradient, scatter_reduce and scatter.reduce (issue 25), pow.Scalar, div.Tensor_mode and floor_divide with a number (XCiT, EdgeNeXt, Mixtral)" {
    fixture zoo_ops 19 1
}

@test "a frozen parameter (requires_grad false, Pegasus's positions) gets no gradient" {
    fixture zoo_frozen 1 1
}

@test "backward through a reshape that is a view of an expanded tensor (Falcon's multi-query key and value)" {
    fixture zoo_expand_view 2 1
}

@test "views an extern step returns keep their base's memory (MaxViT, LeViT); an output viewing an input is a copy" {
    fixture_outputs zoo_alias 4
}

@test "batch norm over tokens at batch 1 (XCiT), against a batch-2 run's first sample" {
    fixture_outputs zoo_bn_tokens 1
}
