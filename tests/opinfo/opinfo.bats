#!/usr/bin/env bats
# PyTorch's OpInfo database as the oracle (issue 25): tests/opinfo/sweep.py
# exports every sample of an OpInfo with torch.export, runs it with
# `tcompile run --interpret` (and --grads) and compares as assert_close
# does, against the committed expected-failure list
# (tests/opinfo/expected-failures.txt), which only shrinks. Here the quick
# subset (sweep.py --quick); `make check-opinfo` sweeps all of op_db.
# Skipped without PyTorch 2.x or without its test helpers (expecttest).

load ../cli/helper

# sweep.py runs in the file's fork server, which imports torch and op_db
# (seconds each) once; the short sweeps run with --jobs 1, as each worker
# process (spawned) would import them again (the composites' keeps the
# workers: --jobs as many as the CPUs)
setup_file() {
    torch2_serve torch.testing._internal.common_methods_invocations
}

teardown_file() {
    torch2_stop
}

setup() {
    SWEEP="$TN_SRCDIR/tests/opinfo/sweep.py"
    TC="$TN_BUILDDIR/bin/tcompile/tcompile"
    D="$TN_SRCDIR/tests/fixtures/graph/torch2"
}

require_op_db() {
    require_torch2
    once op_db torch2 -c 'import torch.testing._internal.common_methods_invocations' ||
        skip "PyTorch's op_db cannot be imported (pip install expecttest)"
}

# The fixtures of tests/opinfo/fixtures.py (PyTorch 2.x), without PyTorch.
@test "fixed defects: inf and NaN constants, bfloat16 addcmul, div trunc and logit, mT, masked_fill broadcasting, gather with an empty uint8 index" {
    run tcompile check "$D/opinfo_values.json"
    assert_success
    outputs_match "$D/opinfo_values" 8 --interpret
    outputs_match "$D/opinfo_values" 8 --strict
}

@test "fixed defects: the gradient of logit(x, eps) is 0 outside [eps, 1-eps]" {
    graph_matches "$D/opinfo_logit" 1 1 --interpret
    graph_matches "$D/opinfo_logit" 1 1 --strict
}

@test "fixed defects: dropout in training draws PyTorch's masks after tcompile run --seed (torch.manual_seed)" {
    outputs_match "$D/opinfo_dropout" 3 --interpret --seed 42
    # the shapes Meta works out before the run draw nothing: another seed
    # gives other masks, the same seed the same ones again
    run tcompile run --interpret --seed 41 "$D/opinfo_dropout.json" -w "$D/opinfo_dropout.pt" \
        -i "$D/opinfo_dropout_inputs.pt" -o "$BATS_TEST_TMPDIR/o41.pt"
    assert_success
    run tckpt diff "$BATS_TEST_TMPDIR/o41.pt" "$D/opinfo_dropout_expected.pt"
    assert_failure 1
    run tcompile run --interpret --seed 42 --repeat 2 "$D/opinfo_dropout.json" -w "$D/opinfo_dropout.pt" \
        -i "$D/opinfo_dropout_inputs.pt" -o "$BATS_TEST_TMPDIR/o42.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/o42.pt" "$D/opinfo_dropout_expected.pt"
    assert_success
}

@test "fixed defects: bfloat16 nll_loss (cascade sum), linear of a vector (one rounding), batch_norm training (rounded statistics)" {
    outputs_match "$D/opinfo_bf16" 5 --interpret
}

@test "fixed defects: float64 gradients of norm(p=3) to every digit, linalg.vector_norm(ord=0)'s is zero, ord inf's with NaNs is PyTorch's" {
    graph_matches "$D/opinfo_norm" 6 1 --interpret
    # pow(x, 1/3)'s gradient lost digits (x^(1/3 - 1) with the exponent at float32)
    run tckpt diff --atol 0 --rtol 1e-12 "$BATS_TEST_TMPDIR/g.pt" "$D/opinfo_norm_grads.pt"
    assert_success
}

@test "fixed refusals: broadcast_to, einsum 'iji->j' and 'ii', take, kl_div, batch_norm of an empty input, int64 convolution" {
    outputs_match "$D/opinfo_refused" 9 --interpret
    outputs_match "$D/opinfo_refused" 9 --strict
}

@test "fixed refusals: data-dependent sizes (nonzero_numpy too), and the SymBool checks export writes for them (_operator.ge/le, _assert_scalar)" {
    outputs_match "$D/opinfo_dynamic" 5 --interpret
    # a check that fails at run time gives its message (u0 <= 12 made u0 <= 1)
    sed '/"_operator.le"/,/"as_int": 12/s/"as_int": 12/"as_int": 1/' "$D/opinfo_dynamic.json" \
        >"$BATS_TEST_TMPDIR/g.json"
    run tcompile run --interpret "$BATS_TEST_TMPDIR/g.json" -w "$D/opinfo_dynamic.pt" \
        -i "$D/opinfo_dynamic_inputs.pt" -o "$BATS_TEST_TMPDIR/o.pt"
    assert_failure
    assert_output --partial "Runtime assertion failed for expression u0 <= 12 on node 'le'"
}

@test "tcompile run --seed is refused by the commands that draw nothing" {
    run tcompile show --seed 1 "$D/opinfo_dropout.json"
    assert_failure 2
    assert_output --partial "--seed"
}

@test "tcompile show --json writes inf and NaN constants as torch.export does" {
    run tcompile show --json "$D/opinfo_values.json"
    assert_success
    assert_output --partial '"as_float": "-Infinity"'
    assert_output --partial '"as_float": "NaN"'
    assert_output --partial '"as_float": "Infinity"'
}

@test "the quick subset agrees with the expected-failure list" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --quick
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
}

@test "fixed defects: every sample of as_strided (overlapping views' gradients summed where they repeat an element), avg_pool1d, topk (ties in any order), resize_ and resize_as_" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --jobs 1 --ops as_strided,nn.functional.avg_pool1d,topk,resize_,resize_as_
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --regexp "core OpInfos .*: 5 swept, 5 pass every sample"
}

@test "fixed defects: every sample of var_mean, std_mean and round with decimals (added ops)" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --jobs 1 \
        --ops var_mean,std_mean,var_mean.unbiased,std_mean.unbiased,round.decimals_0,round.decimals_3,round.decimals_neg_3
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --partial "7 OpInfos swept, 7 with samples that export, 7 pass every sample"
}

@test "added composites: subtract (masked.var/std), glu, prelu, margin_ranking_loss, rot90, diag, diag_embed, diagonal_copy, nanmean, count_nonzero, sum_to_size, poisson_nll_loss, bilinear, nonzero_static, linalg_diagonal (a sample a dtype)" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --max-samples 1 \
        --ops masked.var,masked.std,nn.functional.glu,nn.functional.prelu,nn.functional.margin_ranking_loss,rot90,diag,diag_embed,diagonal_copy,nanmean,count_nonzero,sum_to_size,nn.functional.poisson_nll_loss,nn.functional.bilinear,nonzero_static,linalg.diagonal
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --partial "16 OpInfos swept, 16 with samples that export, 16 pass every sample"
}

@test "fixed refusals: the random ops (rand_like, randn_like, randint_like, bernoulli, normal, uniform) after --seed, as torch.manual_seed draws them" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --jobs 1 \
        --ops rand_like,randn_like,randint_like,randn,randint,bernoulli,normal,normal.number_mean,normal.in_place,uniform
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --partial "forward: 157 samples: 142 pass"
}

@test "fixed refusals: every sample of unfold (a view) and index_reduce's four reductions (added ops)" {
    require_op_db
    run torch2 "$SWEEP" --tcompile "$TC" --jobs 1 \
        --ops unfold,index_reduce.prod,index_reduce.mean,index_reduce.amax,index_reduce.amin
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --partial "5 OpInfos swept, 5 with samples that export, 5 pass every sample"
}

@test "fixed refusals: max_unpool1d/2d/3d (and their grad variants) and max_pool1d (added ops; the first 3 samples of each dtype)" {
    require_op_db
    # whole, these give about 2,900 and 2,200 samples (10 minutes each at
    # load 9): make check-opinfo OPINFO_FLAGS='--ops ... --jobs 1' sweeps them all
    run torch2 "$SWEEP" --tcompile "$TC" --max-samples 3 --jobs 1 \
        --ops nn.functional.max_unpool1d,nn.functional.max_unpool2d,nn.functional.max_unpool3d,nn.functional.max_unpool1d.grad,nn.functional.max_unpool2d.grad,nn.functional.max_unpool3d.grad,nn.functional.max_pool1d
    echo "$output" | grep -v Warning
    assert_success
    assert_output --partial " 0 disagree"
    assert_output --partial "7 OpInfos swept, 7 with samples that export, 7 pass every sample"
}

@test "a listed failure that now passes fails the sweep (the list only shrinks)" {
    require_op_db
    printf 'abs|float32|fwd|0\twrong\tmade up\n' >"$BATS_TEST_TMPDIR/xf.txt"
    run torch2 "$SWEEP" --tcompile "$TC" --ops abs --max-samples 2 --xfail "$BATS_TEST_TMPDIR/xf.txt"
    assert_failure 1
    assert_output --partial "NOW PASSES (remove it from xf.txt) abs|float32|fwd|0"
}

@test "a failure the list does not hold fails the sweep" {
    require_op_db
    # a tcompile that refuses everything
    printf '#!/bin/sh\necho "tcompile: refused" >&2\nexit 2\n' >"$BATS_TEST_TMPDIR/tc"
    chmod +x "$BATS_TEST_TMPDIR/tc"
    : >"$BATS_TEST_TMPDIR/xf.txt"
    run torch2 "$SWEEP" --tcompile "$BATS_TEST_TMPDIR/tc" --ops abs --max-samples 1 \
        --xfail "$BATS_TEST_TMPDIR/xf.txt"
    assert_failure 1
    assert_output --partial "NEW FAILURE abs|float32|fwd|0: refused: tcompile: refused"
}

@test "the summary and --json class each OpInfo by its graph's targets (core ATen or other); --results reads the older results-only JSON" {
    require_op_db
    printf 'abs|float64|%s|0\trefused\tlisted\n' fwd grad >"$BATS_TEST_TMPDIR/xf.txt"
    # a tcompile that refuses everything: abs (core) fails as listed, nn.functional.linear (aten.linear, not core) not
    printf '#!/bin/sh\necho "tcompile: refused" >&2\nexit 2\n' >"$BATS_TEST_TMPDIR/tc"
    chmod +x "$BATS_TEST_TMPDIR/tc"
    run torch2 "$SWEEP" --tcompile "$BATS_TEST_TMPDIR/tc" --ops abs,nn.functional.linear --max-samples 1 --jobs 1 \
        --dtypes float64 --xfail "$BATS_TEST_TMPDIR/xf.txt" --json "$BATS_TEST_TMPDIR/r.json"
    assert_failure 1
    assert_output --partial "core OpInfos (every target a core ATen overload): 1 swept, 0 pass every sample, 1 with listed failures only, 0 with unlisted failures"
    assert_output --partial "other OpInfos (a target outside core ATen): 1 swept, 0 pass every sample, 0 with listed failures only, 1 with unlisted failures"
    run torch2 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["classes"], d["targets"]["abs"]); json.dump(d["results"], open(sys.argv[2], "w"))' \
        "$BATS_TEST_TMPDIR/r.json" "$BATS_TEST_TMPDIR/old.json"
    assert_output --partial "{'abs': 'core', 'nn.functional.linear': 'other'} ['torch.ops.aten.abs.default']"
    run torch2 "$SWEEP" --tcompile "$TC" --results "$BATS_TEST_TMPDIR/old.json" --xfail "$BATS_TEST_TMPDIR/xf.txt"
    assert_output --partial "unclassified OpInfos (no targets recorded): 2 swept"
}

@test "tcompile run --batch: one run per line, each result on its own line, a failure ends only its run" {
    B="$BATS_TEST_TMPDIR/runs.txt"
    T="$BATS_TEST_TMPDIR"
    {
        printf '%s\t-w\t%s\t-i\t%s\t-o\t%s\t--seed\t42\n' "$D/opinfo_dropout.json" \
            "$D/opinfo_dropout.pt" "$D/opinfo_dropout_inputs.pt" "$T/a.pt"
        printf '%s\t-w\t%s\t-o\t%s\n' "$D/opinfo_logit.json" "$D/opinfo_logit.pt" "$T/b.pt"
        printf '\n%s\t-o\t%s\n' "$T/absent.json" "$T/c.pt"
        printf '%s\t--bogus\n' "$D/opinfo_values.json"
        printf '%s\t-w\t%s\t-i\t%s\t-o\t%s\t--seed\t41\n' "$D/opinfo_dropout.json" \
            "$D/opinfo_dropout.pt" "$D/opinfo_dropout_inputs.pt" "$T/e.pt"
    } >"$B"
    run tcompile run --interpret --batch "$B"
    assert_success
    assert_line --index 0 "$(printf '1\texit 0\t')"
    assert_line --index 1 --partial "$(printf '2\texit 2\ttcompile: %s: no value for the user input' "$D/opinfo_logit.json")"
    assert_line --index 2 --partial "$(printf '4\texit 2\ttcompile: %s: ' "$T/absent.json")"
    assert_line --index 3 --partial "$(printf '5\texit 2\t')"
    assert_line --index 4 "$(printf '6\texit 0\t')"
    # each line's own --seed: the first gives PyTorch's masks, the last others
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$T/a.pt" "$D/opinfo_dropout_expected.pt"
    assert_success
    run tckpt diff "$T/e.pt" "$D/opinfo_dropout_expected.pt"
    assert_failure 1
    run tcompile run --batch "$T/none.txt"
    assert_failure 2
    assert_output --partial "--batch: $T/none.txt: "
    run tcompile run --batch "$B" "$D/opinfo_logit.json"
    assert_failure 2
    assert_output --partial "give no GRAPH"
    run tcompile show --batch "$B" "$D/opinfo_logit.json"
    assert_failure 2
    assert_output --partial "--batch does not apply to 'show'"
}

@test "a batch that dies: its samples without a result run again one per process" {
    require_op_db
    # a tcompile whose --batch gives the first line's result and then dies
    cat >"$BATS_TEST_TMPDIR/tc" <<EOS
#!/bin/sh
case " \$* " in
*" --batch "*) printf '1\texit 2\ttcompile: refused in the batch\n'; kill -SEGV \$\$ ;;
esac
exec "$TC" "\$@"
EOS
    chmod +x "$BATS_TEST_TMPDIR/tc"
    : >"$BATS_TEST_TMPDIR/xf.txt"
    run torch2 "$SWEEP" --tcompile "$BATS_TEST_TMPDIR/tc" --ops addcmul --max-samples 3 \
        --xfail "$BATS_TEST_TMPDIR/xf.txt" -v
    assert_failure 1
    assert_output --partial "addcmul|float32|fwd|0 refused tcompile: refused in the batch"
    assert_output --partial "addcmul|float32|fwd|1 pass"
    assert_output --partial "addcmul|float32|fwd|2 pass"
    refute_output --partial "addcmul|float32|fwd|1 crash"
    run torch2 "$SWEEP" --tcompile "$TC" --ops addcmul --max-samples 3 --xfail "$BATS_TEST_TMPDIR/xf.txt" --batch 1
    assert_success
    assert_output --partial " tcompile processes (0 samples run again alone)"
}
