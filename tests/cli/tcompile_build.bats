#!/usr/bin/env bats
# tcompile build (issue 18): a graph, its kernels and weights as one shared
# library with a C API; a C program dlopens or links it and gets the
# interpreter's outputs with no graph file and no C compiler; a symbolic
# batch runs at another size; bad inputs are error codes with a message;
# nothing is left behind.

load helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/graph/torch2"
    TMP=$BATS_TEST_TMPDIR
    MAIN="$TN_BUILDDIR/tests/cli/tcompile/model_main"
    need_built tests/cli/tcompile/model_main
}

# build NAME [OPTIONS]: $TMP/NAME.so from fixture NAME
build() {
    local m=$1
    shift
    run tcompile build "$FX/$m.json" -w "$FX/$m.pt" -i "$FX/${m}_inputs.pt" -o "$TMP/$m.so" "$@"
    assert_success
}

@test "packages of the MLP, CNN, block, text, cat, index and misc graphs give the interpreter's outputs through the C API, with no compiler" {
    for m in mlp cnn block text cat index misc; do
        build "$m"
        run tcompile run --interpret "$FX/$m.json" -w "$FX/$m.pt" -i "$FX/${m}_inputs.pt" -o "$TMP/i.npz"
        assert_success
        # no cache, no compiler: the package's own kernels
        CC=/bin/false TN_COMPILE_CACHE=$TMP/none run "$MAIN" "$TMP/$m.so" model "$FX/${m}_inputs.pt" "$TMP/c.npz"
        assert_success
        refute_output --partial warning
        [ ! -e "$TMP/none" ]
        run tckpt diff --atol=1e-6 --rtol=1e-5 "$TMP/c.npz" "$TMP/i.npz"
        assert_success
    done
}

@test "tcompile run LIB.so runs a package like its graph; the symbolic batch runs at another size" {
    build block --name block
    CC=/bin/false TN_COMPILE_CACHE=$TMP/none run tcompile run "$TMP/block.so" -i "$FX/block_b3_inputs.pt" -o "$TMP/o.pt"
    assert_success
    refute_output --partial warning
    run tckpt diff --atol=1e-5 --rtol=1e-4 "$TMP/o.pt" "$FX/block_b3_expected.pt"
    assert_success
    run "$MAIN" "$TMP/block.so" block "$FX/block_b3_inputs.pt" "$TMP/c.npz"
    assert_success
    assert_line "input 0: x float32 [-1, 5, 32]"
    assert_line "output 0: add_1 float32 [-1, 5, 32]"
}

@test "--header declares the API; a program linked to the library runs it" {
    build mlp --name mlp --header "$TMP/mlp.h"
    grep -q 'int mlp_run(void \*model, struct tn_tensor \*const \*inputs, struct tn_tensor \*\*outputs);' "$TMP/mlp.h"
    grep -q 'input 0: x float32 \[3, 6\]' "$TMP/mlp.h"
    cat >"$TMP/prog.c" <<'C'
#include <stdio.h>
#include <tensor/core.h>
#include "mlp.h"
int main(void)
{
    void *m = mlp_create(NULL);
    if (!m)
        return fprintf(stderr, "%s\n", mlp_error()), 2;
    struct tn_tensor *x = tn_ones(TN_SHAPE(3, 6), TN_FLOAT32), *y = NULL;
    if (mlp_run(m, &x, &y) != 0)
        return fprintf(stderr, "%s\n", mlp_error()), 2;
    printf("%s %lld %lld\n", mlp_output_name(m, 0), (long long)y->sizes[0], (long long)y->sizes[1]);
    /* a wrong shape: an error code and a message */
    struct tn_tensor *bad = tn_ones(TN_SHAPE(3, 7), TN_FLOAT32);
    int rc = mlp_run(m, &bad, &y);
    printf("%d %s\n", rc != 0, mlp_error());
    mlp_destroy(m);
    return 0;
}
C
    lib=$(dirname "$(readlink -f "$TN_BUILDDIR/.libs/libtensor.so")")
    run ${CC:-cc} -o "$TMP/prog" -I"$TMP" -I"$TN_SRCDIR/lib/include" -I"$TN_BUILDDIR/lib/include" \
        "$TMP/prog.c" "$TMP/mlp.so" -L"$lib" -ltensor -Wl,-rpath,"$TMP" -Wl,-rpath,"$lib"
    assert_success
    run "$TMP/prog"
    assert_success
    assert_line "log_softmax 3 4"
    assert_line --regexp "^1 .*input 'x' is float32\[3, 7\], but the graph declares size 6 for dimension 1"
}

@test "wrong inputs are an error code and a message, never a crash" {
    build mlp
    run "$MAIN" "$TMP/mlp.so" model "$FX/cnn_inputs.pt" "$TMP/c.npz"
    assert_failure 2
    assert_output --partial "input 'x' is float32[2, 3, 8, 8], but the graph declares float32 with 2 dimensions"
    # no tensor for x: a NULL input
    run "$MAIN" "$TMP/mlp.so" model "$FX/mlp.pt" "$TMP/c.npz"
    assert_failure 2
    assert_output --partial "input 0 (x) is NULL"
    run tcompile run "$TMP/mlp.so" -i x="$FX/cnn_inputs.pt"
    assert_failure 2
    assert_output --partial "but the graph declares"
}

@test "--weights-file: the weights come from the file given to create; without one, a clear error" {
    build mlp --weights-file
    run "$MAIN" "$TMP/mlp.so" model "$FX/mlp_inputs.pt" "$TMP/c.npz"
    assert_failure 2
    assert_output --partial "built with its weights in a file: give the file"
    run "$MAIN" "$TMP/mlp.so" model "$FX/mlp_inputs.pt" "$TMP/c.npz" "$FX/mlp.pt"
    assert_success
    run tcompile run "$TMP/mlp.so" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/r.npz"
    assert_success
    run tckpt diff "$TMP/c.npz" "$TMP/r.npz"
    assert_success
    # embedded weights are smaller than the library that carries them
    build mlp -o "$TMP/embedded.so"
    [ "$(stat -c %s "$TMP/embedded.so")" -gt "$(stat -c %s "$TMP/mlp.so")" ]
}

@test "the build folder keeps nothing but the library: on success and on failure" {
    mkdir "$TMP/out"
    run tcompile build "$FX/mlp.json" -w "$FX/mlp.pt" -i "$FX/mlp_inputs.pt" -o "$TMP/out/m.so"
    assert_success
    [ "$(ls -A "$TMP/out")" = m.so ]
    CC=/bin/false run tcompile build "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/out/c.so" --cache-dir "$TMP/c2"
    assert_failure 2
    [ "$(ls -A "$TMP/out")" = m.so ]
    # an old library is replaced whole, or kept when the build fails
    cp "$TMP/out/m.so" "$TMP/before.so"
    CC=/bin/false run tcompile build "$FX/cnn.json" -w "$FX/cnn.pt" -i "$FX/cnn_inputs.pt" -o "$TMP/out/m.so" --cache-dir "$TMP/c3"
    assert_failure 2
    cmp "$TMP/out/m.so" "$TMP/before.so"
}

@test "build's usage: -o is needed, --name must be a C identifier, a missing weight is named" {
    run tcompile build "$FX/mlp.json" -w "$FX/mlp.pt"
    assert_failure 2
    assert_output --partial "build: needs -o LIB.so"
    run tcompile build "$FX/mlp.json" -w "$FX/mlp.pt" -o "$TMP/m.so" --name 9lives
    assert_failure 2
    assert_output --partial "--name 9lives: not a C identifier"
    run tcompile build "$FX/mlp.json" -o "$TMP/m.so"
    assert_failure 2
    assert_output --regexp "no weight '[^']+' to embed \(give --weights, or build with --weights-file\)"
    [ ! -e "$TMP/m.so" ]
    run tcompile run --header x.h "$FX/mlp.json"
    assert_failure 2
    assert_output --partial "--header does not apply to 'run'"
}
