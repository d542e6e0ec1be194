#!/usr/bin/env bats
# DESIGN.md's layers ("libtensor modules, bottom up"): a module uses only
# the modules above it in the list, never one below.  Every .c/.h (and .cu,
# .inc) under lib/MODULE/ and every public header lib/include/tensor/Y.h is
# read for its #include lines: each `#include "X/..."` names module X, each
# `#include <tensor/Y.h>` the module the table below gives Y.h; a file
# including a module below its own, a header the table lacks, or a folder
# under lib/ that is no module fails, and so does io using any module but
# core (DESIGN.md: io "depends only on core").  Generated sources (ops_gen.c,
# autograd_gen.c, tensor/ops.h) are read from the build folder too.

load helper

# module -> its place in DESIGN.md's list (nn and optim share 5 and use
# neither the other).  aoti is libtensor-aoti, a library over libtensor and
# not one of its modules: placed after all of them, and held to what the
# tools are held to (libtensor's public headers alone; see the last test).
LEVELS='core 1
dispatch 2
ops 3
autograd 4
nn 5
optim 5
io 6
graph 7
compile 8
dist 9
aoti 10'

# The one file kept below its place, known and named (the link check's
# KNOWN below lists the same uses): ops/linear_cross_entropy.c, the chunked
# custom ops of F.linear_cross_entropy, which return their own gradients
# from the forward (PyTorch precomputes them there).  It runs the autograd
# engine over cross_entropy(linear(...)) rather than a second, hand-written
# copy of cross_entropy's derivative (weights, ignore_index, label
# smoothing, probability targets) that could drift from the one autograd
# uses; it goes when that derivative exists as ops.
KNOWN_INCLUDES='lib/ops/linear_cross_entropy.c tensor/autograd.h'

# module -> the only modules it may use, where DESIGN.md says more than
# the order does ("io ... Depends only on core")
ONLY='io core'

# installed header -> the module that defines it; tensor.h is everything,
# so it counts as the last module's
HEADERS='core.h core
value.h core
dispatch.h dispatch
ops.h ops
autograd.h autograd
nn.h nn
optim.h optim
io.h io
dcp.h io
graph.h graph
compile.h compile
dist.h dist
tensor.h dist'

# awk: level[module] from levels, and allowed[module] (" core ", spaced for
# index()) and may[module] ("core") from only, both passed with -v
TABLES='
    function tables(    n, i, l, w, m) {
        n = split(levels, l, "\n")
        for (i = 1; i <= n; i++) { split(l[i], w, " "); level[w[1]] = w[2] }
        n = split(only, l, "\n")
        for (i = 1; i <= n; i++) {
            m = l[i]; sub(/ .*/, "", m)
            allowed[m] = " " l[i] " "; may[m] = substr(l[i], length(m) + 2)
        }
    }'

# sources ROOT...: "relpath" of every source file under ROOT/lib, each once
sources() {
    local root
    for root in "$@"; do
        [ -d "$root/lib" ] || continue
        (cd "$root" && find lib -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
            -o -name '*.inc' \) -print)
    done | sort -u
}

# check ROOT...: one line for each include that breaks the layers (the
# file, the line and why); prints nothing when all hold.  A file found
# under more than one ROOT is read from the first.
check() {
    local f root
    sources "$@" | while read -r f; do
        for root in "$@"; do
            if [ -f "$root/$f" ]; then
                grep -nH -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$root/$f" |
                    sed "s|^$root/||"
                break
            fi
        done
    done | awk -v levels="$LEVELS" -v headers="$HEADERS" -v only="$ONLY" \
        -v knowninc="$KNOWN_INCLUDES" "$TABLES"'
        BEGIN {
            tables()
            n = split(headers, h, "\n")
            for (i = 1; i <= n; i++) { split(h[i], w, " "); owner[w[1]] = w[2] }
            n = split(knowninc, h, "\n")
            for (i = 1; i <= n; i++) known[h[i]] = 1
        }
        {
            # FILE:LINE:#include ...
            file = $0; sub(/:.*/, "", file)
            rest = substr($0, length(file) + 2)
            line = rest; sub(/:.*/, "", line)
            inc = substr(rest, length(line) + 2)
            sub(/^[[:space:]]*#[[:space:]]*include[[:space:]]*/, "", inc)
            quoted = substr(inc, 1, 1) == "\""
            name = substr(inc, 2); sub(/[">].*/, "", name)
            # the including file`s module
            split(file, p, "/")
            if (p[2] == "include") {
                if (p[3] != "tensor" || !(p[4] in owner)) {
                    print file ":" line ": an installed header no module owns (add it to the table)"
                    next
                }
                me = owner[p[4]]
            } else if (p[2] in level) {
                me = p[2]
            } else {
                print file ":" line ": lib/" p[2] " is not a module of DESIGN.md`s list"
                next
            }
            # the included header`s module
            if (!quoted && name !~ /^tensor\//)
                next # a system header
            if (quoted && name == "config.h")
                next # configure`s
            if (name ~ /^tensor\//) {
                base = substr(name, 8)
                if (!(base in owner)) {
                    print file ":" line ": includes " name ", a header the table does not know"
                    next
                }
                them = owner[base]
            } else {
                split(name, q, "/")
                if (!(q[1] in level) || index(name, "/") == 0) {
                    print file ":" line ": includes \"" name "\", not a module`s header"
                    next
                }
                them = q[1]
            }
            if (them == me || (file " " name) in known)
                next
            if (level[them] >= level[me])
                print file ":" line ": " me " (" level[me] ") includes " name " of " them \
                      " (" level[them] "), not above it in DESIGN.md`s list"
            else if ((me in allowed) && !index(allowed[me], " " them " "))
                print file ":" line ": " me " includes " name " of " them ", but DESIGN.md lets " \
                      me " use only " may[me]
        }' | tr '`' "'"
}

roots() {
    if [ "$TN_BUILDDIR" != "$TN_SRCDIR" ]; then
        echo "$TN_SRCDIR $TN_BUILDDIR"
    else
        echo "$TN_SRCDIR"
    fi
}

@test "every module includes only the modules above it in DESIGN.md's list" {
    run sources $(roots)
    assert_success
    [ "$(wc -l <<<"$output")" -ge 100 ] || fail "found only $(wc -l <<<"$output") files under lib/"
    grep -q '^lib/ops/ops_gen.c$' <<<"$output" || fail "no lib/ops/ops_gen.c: build first"
    run check $(roots)
    assert_success
    [ -z "$output" ] || fail "$output"
}

@test "the table knows every installed header" {
    local h
    for h in "$TN_SRCDIR"/lib/include/tensor/*.h; do
        grep -q "^$(basename "$h") " <<<"$HEADERS" ||
            fail "lib/include/tensor/$(basename "$h") is not in the test's table"
    done
}

@test "the tools and aoti include only libtensor's public headers (DESIGN.md)" {
    run grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([.][.]/)*(lib/)?[a-z_]+/' \
        --include='*.c' --include='*.h' "$TN_SRCDIR/bin" "$TN_SRCDIR/lib/aoti"
    refute_output --regexp '"([.][.]/)*(lib/)?(core|dispatch|ops|autograd|nn|optim|io|graph|compile|dist)/'
    # the check sees such an include
    printf '#include "../../lib/io/internal.h"\n' >"$BATS_TEST_TMPDIR/x.c"
    run grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([.][.]/)*(lib/)?[a-z_]+/' "$BATS_TEST_TMPDIR/x.c"
    assert_output --regexp '"([.][.]/)*(lib/)?(core|dispatch|ops|autograd|nn|optim|io|graph|compile|dist)/'
}

@test "the check fails on a module that includes one below it, and on unknown headers" {
    local t=$BATS_TEST_TMPDIR/tree
    mkdir -p "$t/lib/nn" "$t/lib/core" "$t/lib/include/tensor" "$t/lib/extra"
    printf '#include "core/internal.h"\n#include <tensor/nn.h>\n#include <stdio.h>\n' >"$t/lib/nn/ok.c"
    printf '#include "io/internal.h"\n' >"$t/lib/nn/down.c"
    printf '#include <tensor/optim.h>\n' >"$t/lib/nn/side.c"
    printf '  #  include <tensor/io.h>\n' >"$t/lib/core/down.h"
    printf '#include <tensor/other.h>\n#include "local.h"\n#include "misc/x.h"\n' >"$t/lib/core/odd.c"
    printf '#include <tensor/core.h>\n' >"$t/lib/extra/x.c"
    printf '#include <tensor/graph.h>\n' >"$t/lib/include/tensor/io.h"
    mkdir -p "$t/lib/io"
    printf '#include "core/internal.h"\n#include "ops/internal.h"\n' >"$t/lib/io/x.c"
    run check "$t"
    assert_success
    assert_line 'lib/nn/down.c:1: nn (5) includes io/internal.h of io (6), not above it in DESIGN.md'"'"'s list'
    assert_line --partial 'lib/nn/side.c:1: nn (5) includes tensor/optim.h of optim (5)'
    assert_line --partial 'lib/core/down.h:1: core (1) includes tensor/io.h of io (6)'
    assert_line 'lib/core/odd.c:1: includes tensor/other.h, a header the table does not know'
    assert_line 'lib/core/odd.c:2: includes "local.h", not a module'"'"'s header'
    assert_line 'lib/core/odd.c:3: includes "misc/x.h", not a module'"'"'s header'
    assert_line --partial 'lib/extra/x.c:1: lib/extra is not a module'
    assert_line --partial 'lib/include/tensor/io.h:1: io (6) includes tensor/graph.h of graph (7)'
    assert_line 'lib/io/x.c:2: io includes ops/internal.h of ops, but DESIGN.md lets io use only core'
    refute_output --partial 'ok.c'
    refute_output --partial 'lib/io/x.c:1'
    [ "${#lines[@]}" -eq 9 ] || fail "expected 9 findings: $output"
}

# The same order at link level: for each object libtensor is built of
# (lib/M/.../.libs/libtensor_la-F.o in the build folder, or beside .libs),
# every symbol it uses that another module's object defines.  One use below
# is known and kept, a table the dispatcher is handed rather than a call:
# the generated registration table (lib/ops/ops_gen.c, tgen's) holds each
# op's Autograd kernel, tn__autograd_*, beside its CPU and Meta ones, as
# issue 20 prescribes ("the registration table is compiled with the ops").
# Autograd filling its own key would need a second generated table keyed by
# op name and a dispatch call to patch registered ops' kernels after the
# fact (and an order between the two hand-overs), for no gain: the table
# only stores addresses, ops never calls them.  The table itself now goes
# the other way: ops hands it to dispatch (tn__op_register_builtins, from a
# constructor in ops_gen.c), and dispatch no longer names tn__builtin_ops.
# And the file KNOWN_INCLUDES names, for the same reason (the fourth field
# limits a use to objects whose path matches it).
KNOWN='ops autograd ^tn__autograd_
ops autograd ^tn_(grad|requires_grad_|set_grad_enabled)$ linear_cross_entropy[.]o$'

# objects: "module object" of each built libtensor object, from the sources
objects() {
    local f o
    sources "$TN_SRCDIR" "$TN_BUILDDIR" | grep '\.c$' | grep -v '^lib/aoti/\|^lib/include/' |
        while read -r f; do
            o=$TN_BUILDDIR/$(dirname "$f")/.libs/libtensor_la-$(basename "${f%.c}").o
            [ -f "$o" ] || o=${o/\/.libs\//\/} # libtool's objects without PIC copies
            [ -f "$o" ] && echo "$(cut -d/ -f2 <<<"$f") $o"
        done
}

# symbol_uses: "object: module (level) uses SYMBOL of module (level)" for
# each use below the user's place and not in KNOWN
symbol_uses() {
    local m o
    objects | while read -r m o; do
        nm --defined-only -g "$o" | awk -v m="$m" -v o="$o" 'NF == 3 { print "D", $3, m, o }'
        nm -u "$o" | awk -v m="$m" -v o="$o" '{ print "U", $NF, m, o }'
    done | awk -v levels="$LEVELS" -v known="$KNOWN" -v b="$TN_BUILDDIR/" -v only="$ONLY" "$TABLES"'
        BEGIN {
            tables()
            nk = split(known, k, "\n")
        }
        $1 == "D" { def[$2] = $3; next }
        { use[++nu] = $2 " " $3 " " $4 }
        END {
            for (i = 1; i <= nu; i++) {
                split(use[i], u, " ")
                if (!(u[1] in def) || def[u[1]] == u[2]) continue
                them = def[u[1]]
                o = index(u[3], b) == 1 ? substr(u[3], length(b) + 1) : u[3]
                if ((u[2] in allowed) && !index(allowed[u[2]], " " them " ")) {
                    print o ": " u[2] " uses " u[1] " of " them ", but DESIGN.md lets " u[2] \
                          " use only " may[u[2]]
                    continue
                }
                if (level[them] < level[u[2]]) continue
                ok = 0
                for (j = 1; j <= nk; j++) {
                    split(k[j], w, " ")
                    if (w[1] == u[2] && w[2] == them && u[1] ~ w[3] && (w[4] == "" || o ~ w[4]))
                        ok = 1
                }
                if (!ok)
                    print o ": " u[2] " (" level[u[2]] ") uses " u[1] " of " them " (" level[them] ")"
            }
        }' | sort -u
}

@test "at link level too, no libtensor object uses a symbol of a module below its own" {
    run objects
    assert_success
    [ "$(wc -l <<<"$output")" -ge 100 ] || fail "found only $(wc -l <<<"$output") built objects: build first"
    grep -q 'ops_gen.o$' <<<"$output" || fail "no ops_gen.o: build first"
    run symbol_uses
    assert_success
    [ -z "$output" ] || fail "$output"
}
