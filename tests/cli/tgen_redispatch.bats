#!/usr/bin/env bats
# tgen --redispatch: the entries below a key (tn__redispatch_*) only for the
# ops an Autograd kernel or a hand-written kernel calls so.

load helper

gen() {
    tgen --header "$BATS_TEST_TMPDIR/ops.h" --private-header "$BATS_TEST_TMPDIR/ops_gen.h" \
        --source "$BATS_TEST_TMPDIR/ops.c" --derivatives "$TN_SRCDIR/schemas/derivatives.yaml" \
        --autograd "$BATS_TEST_TMPDIR/ad.c" "$@" "$TN_SRCDIR/schemas/native_functions.yaml"
}

@test "tgen --redispatch keeps the Autograd kernels' entries and the named ones, drops the rest" {
    run gen --redispatch cat,sort.values_stable
    assert_success
    cd "$BATS_TEST_TMPDIR"
    # mul has an Autograd kernel, which calls its entry below the key
    grep -q 'tn__redispatch_mul(tn_keyset ks' ops_gen.h || fail "mul's entry is gone"
    grep -q '^struct tn_tensor \* tn__redispatch_mul(tn_keyset ks' ops.c || fail "mul's entry is not defined"
    grep -q 'tn__redispatch_mul(ks' ad.c || fail "the Autograd kernel no longer calls it"
    # named
    grep -q 'tn__redispatch_cat(tn_keyset ks' ops_gen.h || fail "cat's entry is gone"
    grep -q 'tn__redispatch_sort_values_stable_out(tn_keyset ks' ops.c || fail "sort.values_stable's entry is gone"
    # neither: adaptive_avg_pool2d (no Autograd kernel of its own), and the out= ops
    run grep -c 'tn__redispatch_adaptive_avg_pool2d\|tn__redispatch_mul_out' ops_gen.h ops.c
    assert_output "$(printf 'ops_gen.h:0\nops.c:0')"
    # every entry an Autograd kernel calls is declared
    grep -o 'tn__redispatch_[A-Za-z0-9_]*' ad.c | sort -u >called
    grep -o 'tn__redispatch_[A-Za-z0-9_]*(tn_keyset' ops_gen.h | sed 's/(tn_keyset//' | sort -u >declared
    run comm -23 called declared
    assert_output ""
}

@test "without --redispatch every op has its entry below a key" {
    run gen
    assert_success
    cd "$BATS_TEST_TMPDIR"
    grep -q 'tn__redispatch_adaptive_avg_pool2d(tn_keyset ks' ops_gen.h || fail "an entry is missing"
    grep -q 'tn__redispatch_mul_out(tn_keyset ks' ops.c || fail "an entry is missing"
}

@test "tgen --redispatch names the op the schema lacks (exit 2)" {
    run gen --redispatch cat,no_such_op.x
    assert_failure 2
    assert_output --partial "--redispatch: no_such_op.x: no such op"
}
