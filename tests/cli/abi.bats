#!/usr/bin/env bats
# The installed headers declare exactly what the installed library exports:
# a program that refers to every function they declare links against the
# installed libtensor.so (the export rule -export-symbols-regex '^tn_[a-z0-9]'
# hides tn__ names, so a declared tn__ function, or a plumbing entry the
# headers should not show, fails here).

load helper

setup_file() {
    install_to_dest || return 1
    export INC=$DEST$PREFIX/include LIB=$DEST$PREFIX/lib
}

# declared FILE.c: the functions (not static inline ones) that the
# installed headers declare, one a line, from GCC's -aux-info listing of
# every prototype FILE.c sees, kept to those whose declaration is in $INC.
declared() {
    gcc -std=c11 -I"$INC" -aux-info "$1.aux" -fsyntax-only "$1.c" || return 1
    grep -F "/* $INC/" "$1.aux" | grep -v '\*/ static ' |
        sed -n 's/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\) *(.*/\1/p' | sort -u
}

# links FILE.c, which refers to every function in FILE.list, against the
# installed library.
refer_to_all() {
    {
        cat "$1.c"
        echo 'int main(void) {'
        echo '    static void (*const f[])(void) = {'
        sed 's/.*/        (void (*)(void))\&&,/' "$1.list"
        echo '    };'
        echo '    volatile size_t i = sizeof f / sizeof *f - 1;'
        echo '    return f[i] ? 0 : 1;'
        echo '}'
    } >"$1.main.c"
    gcc -std=c11 -I"$INC" "$1.main.c" -o "$1" -L"$LIB" -Wl,-rpath,"$LIB" -ltensor
}

@test "every function the installed headers declare links against the installed library" {
    command -v gcc >/dev/null || skip "no gcc (for -aux-info)"
    cd "$BATS_TEST_TMPDIR"
    local h n
    for h in "$INC"/tensor/*.h; do
        echo "#include <tensor/$(basename "$h")>"
    done >all.c
    [ "$(wc -l <all.c)" -ge 10 ] || fail "only $(wc -l <all.c) installed headers"
    declared all >all.list || fail "the installed headers do not compile"
    n=$(wc -l <all.list)
    # the typed entry points of tensor/ops.h alone are several hundred
    [ "$n" -gt 700 ] || fail "only $n declared functions found"
    grep -qx tn_add all.list || fail "tn_add is not in the list"
    grep -qx tn_dispatch_keyset all.list || fail "tn_dispatch_keyset is not in the list"
    # no plumbing: what is below the public API is in no installed header
    run grep -E '^tn__|^tn_redispatch_' all.list
    assert_output ""
    run refer_to_all all
    assert_success
    run env -u LD_LIBRARY_PATH ./all
    assert_success
}

@test "a declared function the library hides fails that link" {
    command -v gcc >/dev/null || skip "no gcc (for -aux-info)"
    cd "$BATS_TEST_TMPDIR"
    # tn__tensor_new is the library's own (core/internal.h): a header that
    # declared it would promise what libtensor.so does not export
    printf '#include <tensor/core.h>\nint tn__tensor_new(void);\n' >hidden.c
    echo tn__tensor_new >hidden.list
    run refer_to_all hidden
    assert_failure
    assert_output --partial "tn__tensor_new"
}

@test "ATen's underscore ops are exported under the tn_underscore_ spelling" {
    command -v gcc >/dev/null || skip "no gcc (for -aux-info)"
    cd "$BATS_TEST_TMPDIR"
    local yaml=$TN_SRCDIR/schemas/native_functions.yaml n
    echo '#include <tensor/ops.h>' >ops.c
    declared ops >ops.list
    # the schema's underscore ops (aten::_softmax, ...) and the C names tgen
    # gives them, one per overload: every one a tn_underscore_ name, and
    # those names exactly the installed header's tn_underscore_ functions
    tgen --list "$yaml" | awk -F'\t' '$1 ~ /^aten::_/ { print $2 }' | sort >want.list
    n=$(grep -c '^- func: _' "$yaml")
    [ "$(wc -l <want.list)" -eq "$n" ] ||
        fail "tgen --list gives $(wc -l <want.list) underscore ops, the schema $n"
    [ "$n" -ge 2 ] || fail "only $n underscore ops in the schema: the pattern is wrong"
    run grep -v '^tn_underscore_' want.list
    assert_output ""
    grep '^tn_underscore_' ops.list | sort >got.list
    run diff want.list got.list
    assert_success
    run grep -x -e tn_underscore_softmax -e tn_underscore_to_copy ops.list
    assert_success
}

@test "the soname and the dtype enum's values are the ABI this version promises" {
    command -v readelf >/dev/null || skip "no readelf"
    cd "$BATS_TEST_TMPDIR"
    # configure.ac's TN_LT_VERSION 2:0:0 (current - age = 2): 1 when
    # complex128 joined the computing dtypes and renumbered the storage-only
    # ones, 2 when _tn_attention's exported signatures lost dropout_p and
    # seed; a change to these values, or to an exported signature, needs a
    # new current with age 0
    run readelf -d "$LIB/libtensor.so"
    assert_success
    assert_output --partial "Library soname: [libtensor.so.2]"
    cat >enum.c <<'C'
#include <stdio.h>
#include <tensor/core.h>
int main(void)
{
    printf("%d %d %d %d %d %d %d\n", TN_COMPLEX64, TN_COMPLEX128, TN_NUM_DTYPES,
           TN_FLOAT8_E5M2, TN_UINT16, TN_UINT64, TN_NUM_ALL_DTYPES);
    return 0;
}
C
    gcc -std=c11 -I"$INC" enum.c -o enum || fail "enum.c does not build"
    run ./enum
    assert_output "10 11 12 12 16 18 19"
}
