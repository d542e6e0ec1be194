#!/usr/bin/env bats
# The op fixtures are committed from PyTorch 1.13; here each generator runs
# again under PyTorch 2.x (where installed; in the file's fork server, which
# imports torch once) and the unit tests check the operators against those
# results, strictly (2.x's values and words).

load helper

setup_file() {
    torch2_serve
}

teardown_file() {
    torch2_stop
}

setup() {
    require_torch2
    mkdir -p "$BATS_TEST_TMPDIR/ops" "$BATS_TEST_TMPDIR/x"
}

# the family's script under 2.x; its test also reads the family's committed
# FAMILY_v2.json where it has one (ops_FAMILY_v2.py's cases, whose reference
# is 2.x alone already), copied beside the fresh file
check_family() {
    need_built "tests/unit/test_ops_$1"
    run torch2 "$TN_SRCDIR/tests/fixtures/ops_$1.py" "$BATS_TEST_TMPDIR/ops"
    assert_success
    if [ -f "$TN_SRCDIR/tests/fixtures/ops/$1_v2.json" ]; then
        cp "$TN_SRCDIR/tests/fixtures/ops/$1_v2.json" "$BATS_TEST_TMPDIR/ops/"
    fi
    TN_FIXTURES=$BATS_TEST_TMPDIR/x run "$TN_BUILDDIR/tests/unit/test_ops_$1"
    assert_success
    refute_output --partial "not ok"
}

@test "binary ops agree with PyTorch 2.x" { check_family binary; }
@test "unary ops and activations agree with PyTorch 2.x" { check_family unary; }
@test "matrix products agree with PyTorch 2.x" { check_family linalg; }
@test "reductions (sum, mean, amax, amin, prod, any, all, argmax, argmin, cumsum, cumprod, logsumexp, var, std) agree with PyTorch 2.x" { check_family reduce; }
@test "softmax agrees with PyTorch 2.x" { check_family softmax; }
@test "where, addcmul, addcdiv and lerp agree with PyTorch 2.x" { check_family ternary; }
@test "max.dim, min.dim, sort and topk agree with PyTorch 2.x" { check_family sort; }
@test "losses (nll, cross entropy, mse, l1, smooth l1, binary cross entropy, with logits) agree with PyTorch 2.x" { check_family loss; }
@test "index_select, embedding and embedding_dense_backward agree with PyTorch 2.x" { check_family embedding; }
@test "layer, batch and group norm and their backward ops agree with PyTorch 2.x" { check_family norm; }
@test "dropout agrees with PyTorch 2.x" { check_family dropout; }
@test "max, avg, adaptive avg and adaptive max pooling and their backward ops agree with PyTorch 2.x" { check_family pool; }
@test "gather, scatter, masked_fill, dot, mv, outer, baddbmm and norms agree with PyTorch 2.x" { check_family shape; }
@test "split, chunk, unbind and tensor_split agree with PyTorch 2.x" { check_family split; }
@test "pad's modes (constant, reflect, replicate, circular) agree with PyTorch 2.x" { check_family pad; }
@test "index and index_put (advanced indexing) agree with PyTorch 2.x" { check_family index; }
@test "tril, triu, flip, roll, repeat, tile, argsort, nonzero, masked_select and one_hot agree with PyTorch 2.x" { check_family movement; }
@test "upsample_nearest2d, upsample_bilinear2d and their backward ops agree with PyTorch 2.x" { check_family upsample; }
@test "convolution (transposed too) and its backward agree with PyTorch 2.x" { check_family conv; }
@test "conv1d, the padding=same/valid convolutions, upsample .vec, fill, zero, _to_copy and to.dtype agree with PyTorch 2.x" { check_family misc; }
@test "scaled_dot_product_attention (masks, causal, GQA, the CPU flash pair, gradients) agrees with PyTorch 2.x" { check_family sdpa; }
@test "the FFTs (_fft_r2c, _fft_c2r, _fft_c2c, torch.fft's functions) agree with PyTorch 2.x, strides included" { check_family fft; }
