#!/usr/bin/env bats
# libtensor's sources that build complex numbers compile with clang as well
# as gcc, without a warning (issue 25): glibc's complex.h gives CMPLX and
# CMPLXF to gcc only, so under clang they were implicit functions and the
# tools failed to link. Each file is checked with clang -fsyntax-only and
# the build's own warning flags, as errors. Skipped without clang.

load helper

@test "the complex kernels, core's complex helpers and tgen compile with clang, warning-free" {
    command -v clang >/dev/null || skip "clang is not installed"
    local warn
    warn=$(sed -n 's/^TN_WARN_CFLAGS = //p' "$TN_BUILDDIR/Makefile")
    [ -n "$warn" ]
    for f in lib/ops/cpu/binary.c lib/ops/cpu/unary.c lib/ops/cpu/linalg.c lib/core/factory.c \
             lib/core/dtype.c lib/autograd/formulas.c lib/graph/functionalize.c bin/tgen/gen.c; do
        run clang -std=c11 -fsyntax-only -Werror $warn -DHAVE_CONFIG_H -D_GNU_SOURCE \
            -I"$TN_SRCDIR/lib/include" -I"$TN_BUILDDIR/lib/include" -I"$TN_SRCDIR/lib" \
            -I"$TN_BUILDDIR/lib" -I"$TN_BUILDDIR" -I"$TN_SRCDIR/bin/tgen" -DTN_PKGLIBDIR='"/"' \
            "$TN_SRCDIR/$f"
        [ "$status" -eq 0 ] || { echo "$f: $output"; false; }
    done
}
