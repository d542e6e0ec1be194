#!/usr/bin/env bats
# configure's optional CUDA detection: the backend needs nvcc and libcudart
# alone; cuBLAS, which nothing calls yet, is reported but not required.
# Each test runs the source tree's configure from a shadow of it (symlinks,
# so an in-tree build's config.status does not stop a second build folder)
# against a fake toolkit.

load helper

setup() {
    src=$BATS_TEST_TMPDIR/src
    mkdir -p "$src"
    for f in "$TN_SRCDIR"/* "$TN_SRCDIR"/.[!.]*; do
        [ -e "$f" ] || continue
        case ${f##*/} in
        config.status | config.h | config.log | Makefile | libtool | stamp-h1 | .git) ;;
        *) ln -s "$f" "$src/${f##*/}" ;;
        esac
    done
    cuda=$BATS_TEST_TMPDIR/cuda
    mkdir -p "$cuda/bin" "$cuda/lib64" "$cuda/include"
    printf '#!/bin/sh\nexit 0\n' >"$cuda/bin/nvcc"
    chmod +x "$cuda/bin/nvcc"
    mkdir -p "$BATS_TEST_TMPDIR/build"
    cd "$BATS_TEST_TMPDIR/build"
}

@test "configure: the CUDA backend without cuBLAS (it was refused)" {
    : >"$cuda/lib64/libcudart.so"
    run "$src/configure" --with-cuda="$cuda"
    assert_success
    assert_output --regexp 'CUDA backend: +yes'
    assert_output --regexp 'cuBLAS: +no'
    run grep '^CUDA_LIBS = ' Makefile
    refute_output --partial cublas
}

@test "configure: cuBLAS found is reported, and still not linked" {
    : >"$cuda/lib64/libcudart.so"
    : >"$cuda/lib64/libcublas.so"
    : >"$cuda/include/cublas_v2.h"
    run "$src/configure" --with-cuda="$cuda"
    assert_success
    assert_output --regexp 'cuBLAS: +yes'
    run grep '^CUDA_LIBS = ' Makefile
    refute_output --partial cublas
}

@test "configure: --with-cuda without libcudart is one line naming the folder" {
    run "$src/configure" --with-cuda="$cuda"
    assert_failure
    assert_output --partial "configure: error: --with-cuda: no nvcc and libcudart under $cuda"
}
