#!/usr/bin/env bats
# The contiguous float32 loops of the elementwise kernels compile to packed
# vector code (issue 27: add1_f32 was one scalar addss an element): an AVX2
# clone with ymm adds and mults, chosen at load time, beside the plain
# x86-64 one, which uses packed SSE (lib/ops/cpu/kernel.h).

load helper

setup() {
    lib=$TN_BUILDDIR/.libs/libtensor.so
    [ -f "$lib" ] || skip "no $lib (a static build)"
    command -v objdump >/dev/null || skip "objdump is not installed"
    [ "$(uname -m)" = x86_64 ] || skip "x86-64 only"
}

# the instructions of the function named $1 in libtensor
body() {
    objdump -d --no-show-raw-insn "$lib" |
        awk -v f="<$1>:" '$2 == f { on = 1; next } /^[0-9a-f]+ </ { on = 0 } on'
}

@test "float32 add and mul have an AVX2 (x86-64-v3) clone with packed ymm arithmetic" {
    run body add1_f32.arch_x86_64_v3
    assert_output --regexp 'vaddps.*%ymm'
    run body mul_f32.arch_x86_64_v3
    assert_output --regexp 'vmulps.*%ymm'
    run body add_f32.arch_x86_64_v3
    assert_output --regexp 'vfmadd[0-9]+ps.*%ymm'
}

@test "the plain x86-64 float32 add is packed SSE, and unary loops are vectorised" {
    run body add1_f32.default
    assert_output --regexp 'addps'
    run body neg_f32.arch_x86_64_v3
    assert_output --regexp '%ymm'
    run body abs_f32.arch_x86_64_v3
    assert_output --regexp 'vandps.*%ymm'
    run body exp_f32_run
    assert_output --regexp 'vfmadd[0-9]+ps'
}

@test "float32 exp has a sixteen-lane AVX-512 loop scaling by vscalefps" {
    run body exp_f32_run16
    assert_output --regexp 'vfmadd[0-9]+ps.*%zmm'
    assert_output --regexp 'vscalefps.*%zmm'
}

@test "float32 softmax rows have a sixteen-lane AVX-512 loop (the same bits: test_ops_softmax)" {
    run body rows_f32_avx512
    assert_output --regexp 'vscalefps.*%zmm'
    assert_output --regexp 'vaddps.*%ymm'
}
