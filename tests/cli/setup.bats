#!/usr/bin/env bats
# What a new user does first: install, use what the man pages point to,
# build the README's C example against the installed library, uninstall.
# (CI runs the README's two commands themselves in fresh clones.)

load helper

setup_file() {
    install_to_dest || return 1
    export PKGDATA=$DEST$PREFIX/share/tensorkit
}

@test "make install puts what the man pages point to under pkgdatadir" {
    for f in tools/torch2graph.py schemas/native_functions.yaml schemas/derivatives.yaml \
        schemas/graph.schema.json examples/digits/train.c examples/digits/train_torch.py \
        examples/showcase/showcase.c datasets/digits.csv.gz; do
        [ -f "$PKGDATA/$f" ] || fail "not installed: \$(pkgdatadir)/$f"
    done
    # the installed schema is tgen's example: it reads it
    run tgen --list "$PKGDATA/schemas/native_functions.yaml"
    assert_success
    assert_output --partial "add.Tensor"
}

@test "files tgen generates get the umask's mode, not 0600" {
    local mode
    (
        umask 022
        tgen --header "$BATS_TEST_TMPDIR/ops.h" "$TN_SRCDIR/schemas/native_functions.yaml"
    )
    mode=$(stat -c %a "$BATS_TEST_TMPDIR/ops.h")
    [ "$mode" = 644 ] || fail "tgen --header made mode $mode under umask 022"
}

@test "bash completion is installed for every tool and completes commands and options" {
    local comp=$DEST$PREFIX/share/bash-completion/completions t
    for t in tckpt tcompile tgen trun ttest; do
        [ -e "$comp/$t" ] || fail "no bash completion for $t"
    done
    run bash -c "source '$comp/tckpt'; COMP_WORDS=(tckpt co); COMP_CWORD=1; _tensorkit
                 echo \"\${COMPREPLY[*]}\"
                 COMP_WORDS=(tcompile run --gr); COMP_CWORD=2; _tensorkit
                 echo \"\${COMPREPLY[*]}\""
    assert_success
    assert_line --index 0 "convert"
    assert_line --index 1 "--grads="
}

@test "the README's C example builds and runs against the installed library" {
    command -v pkg-config >/dev/null || skip "no pkg-config"
    # the program and the command line, as README.md has them
    awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' "$TN_SRCDIR/README.md" >"$BATS_TEST_TMPDIR/demo.c"
    grep -q 'tn_randn' "$BATS_TEST_TMPDIR/demo.c" || fail "README.md has no C example"
    cmd=$(grep -m1 '^    cc demo.c ' "$TN_SRCDIR/README.md" | sed 's/^    //')
    [ -n "$cmd" ] || fail "README.md has no cc command for the example"
    cd "$BATS_TEST_TMPDIR"
    export PKG_CONFIG_PATH=$DEST$PREFIX/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST
    run bash -c "$cmd -o demo"
    assert_success
    # run with no help from the environment: the rpath finds the library
    run env -u LD_LIBRARY_PATH ./demo
    assert_success
    assert_output --partial "tensor("
    run env -u LD_LIBRARY_PATH ldd ./demo
    assert_output --partial "$DEST$PREFIX/lib/libtensor.so"
}

@test "make uninstall leaves no file and none of the package's folders" {
    local d=$BATS_TEST_TMPDIR/dest2
    make -s -C "$TN_BUILDDIR" install DESTDIR="$d" >/dev/null 2>&1
    run make -s -C "$TN_BUILDDIR" uninstall DESTDIR="$d"
    assert_success
    run find "$d" -not -type d
    assert_output ""
    run find "$d" -type d \( -name tensor -o -name tensorkit \)
    assert_output ""
}
