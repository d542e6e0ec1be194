# Shared set-up for the Bats tests: the built tools first on PATH, the
# source tree in TN_SRCDIR, bats-support and bats-assert loaded.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

: "${TN_SRCDIR:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
: "${TN_BUILDDIR:=$TN_SRCDIR}"
for d in "$TN_BUILDDIR"/bin/*/; do
    PATH="$d:$PATH"
done
export PATH TN_SRCDIR TN_BUILDDIR

# tcompile's cache: one per test file, never the user's own
: "${TN_COMPILE_CACHE:=${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}}/tn-compile-cache}"
export TN_COMPILE_CACHE

# PyTorch picks kernels by the CPU (AVX-512, AVX2 or plain), and some of
# their roundings (float32 randn, arange) differ between them; tensorkit
# follows the AVX2 ones, so every live oracle is pinned to those.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    export ATEN_CPU_CAPABILITY=avx2
fi

# need_built PROGRAM...: makes the check programs (paths in the build
# folder) a test runs: a plain `make` builds none of them, `make check` does
# (and then this is one make that finds them up to date). Skips the test
# where the build has no rule for one (configured without cmocka).
need_built() {
    local out
    out=$(cd "$TN_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "$@" 2>&1) && return 0
    case $out in
    *"No rule to make target"*) skip "$* cannot be built here (no cmocka: the unit tests are not configured)" ;;
    esac
    echo "$out"
    echo "make $* failed in $TN_BUILDDIR"
    return 1
}

# once KEY COMMAND...: COMMAND's output and exit status, COMMAND run only
# by the first test of the file that asks (kept under $BATS_FILE_TMPDIR as
# KEY): for the checks that import PyTorch, seconds each, which most tests
# of a file repeat in their setup.
once() {
    local f=${BATS_FILE_TMPDIR:?}/once-$1
    shift
    if [ ! -f "$f.rc" ]; then
        "$@" >"$f.out" 2>/dev/null
        echo $? >"$f.rc.tmp" && mv "$f.rc.tmp" "$f.rc"
    fi
    cat "$f.out"
    return "$(cat "$f.rc")"
}

# Skips the test unless Debian's PyTorch 1.13 is importable.
require_torch1() {
    once torch1 /usr/bin/python3 -c 'import torch' || skip "Debian's python3-torch is not installed"
}

# Sets TORCH2 to a Python with PyTorch 2.x, or skips the test.
require_torch2() {
    TORCH2=$(once torch2 "$TN_SRCDIR/tests/torch2-python") ||
        skip "PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)"
}

# torch2_serve [MODULE...]: in setup_file, starts the file's fork server
# (tests/pyfork.py), a PyTorch 2.x Python that has imported torch and the
# MODULEs once, and that torch2 below runs each test's scripts in. Nothing
# where there is no PyTorch 2.x (the tests skip), or where it fails (torch2
# then runs "$TORCH2"). torch2_stop ends it (else it ends with the file:
# it watches its parent).
torch2_serve() {
    local py sock=$BATS_FILE_TMPDIR/torch2.sock i
    py=$(once torch2 "$TN_SRCDIR/tests/torch2-python") || return 0
    "$py" "$TN_SRCDIR/tests/pyfork.py" serve "$sock" torch "$@" \
        </dev/null >"$BATS_FILE_TMPDIR/torch2-serve.log" 2>&1 3>&- &
    echo $! >"$BATS_FILE_TMPDIR/torch2.pid"
    for ((i = 0; i < 1200; i++)); do
        [ -f "$sock.python" ] && return 0
        kill -0 $! 2>/dev/null || break
        sleep 0.1
    done
    echo "# torch2_serve: no fork server, each run imports PyTorch:" >&3
    sed 's/^/# /' "$BATS_FILE_TMPDIR/torch2-serve.log" >&3
}

# torch2_stop: in teardown_file, ends the fork server torch2_serve started
torch2_stop() {
    local pid
    pid=$(cat "$BATS_FILE_TMPDIR/torch2.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

# torch2 ARG...: "$TORCH2" ARG... (ARG: [-u] [-W OPTION]... SCRIPT|-c CODE|-,
# then its arguments), in a child of the file's fork server where
# torch2_serve started one: the same output, exit status and environment.
torch2() {
    local sock=$BATS_FILE_TMPDIR/torch2.sock
    if [ -S "$sock" ] && [ -f "$sock.python" ]; then
        "$(cat "$sock.python")" -I -S "$TN_SRCDIR/tests/pyfork.py" run "$sock" "$@"
    else
        "$TORCH2" "$@"
    fi
}

# same_losses_as OURS THEIRS N: the files OURS and THEIRS (one loss a line,
# tensorkit's and PyTorch's) both hold N losses, each pair within a
# relative difference of 1e-4; prints the worst difference, and the steps
# that differ.
same_losses_as() {
    run awk -v want="$3" 'NR == FNR { a[FNR] = $1; n = FNR; next }
             { m = FNR; d = a[FNR] - $1; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1)
               if (r > worst) worst = r
               if (r >= 1e-4) { print "step " FNR ": ours " a[FNR] ", PyTorch " $1; bad++ } }
             END { printf "%d and %d steps, worst relative difference %.3g\n", n, m, worst
                   exit (bad || n != want || m != want) }' "$1" "$2"
    echo "$output"
    assert_success
}

# cnn_bn_curve NAME OPTIMIZER LR [OPTION...]: 200 steps of `tcompile train
# OPTION...` of tests/fixtures/train/cnn_bn (batch norm in training mode)
# against that folder's NAME.txt losses and NAME_state.pt model (the running
# statistics among it), written by train_torch.py --write; the
# checkpoint left in $W/ck.pt, our losses in $W/ours.
cnn_bn_curve() {
    local f="$TN_SRCDIR/tests/fixtures/train" name=$1 opt=$2 lr=$3
    shift 3
    run tcompile train "$f/cnn_bn.json" -w "$f/cnn_bn.pt" --data "$f/images.npz" \
        --optimizer "$opt" --lr "$lr" --steps 200 --log-loss --save "$W/ck.pt" "$@"
    assert_success
    echo "$output" > "$W/ours"
    same_losses_as "$W/ours" "$f/$name.txt" 200
    run tckpt diff --prefix model. --atol 1e-5 --rtol 1e-4 "$W/ck.pt" "$f/${name}_state.pt"
    assert_success
    assert_output --partial "8 tensors match"
    run tckpt show "$W/ck.pt" model.bn.num_batches_tracked
    assert_line --index 0 "tensor(200)"
}

# graph_matches PREFIX NOUT NGRADS [OPTION...]: `tcompile run OPTION...` of
# the fixture graph PREFIX.json (weights PREFIX.pt, inputs PREFIX_inputs.pt)
# gives the NOUT outputs of PREFIX_expected.pt and the NGRADS (a number or a
# regular expression) parameter gradients of PREFIX_grads.pt
# (torch2graph.py's files, from PyTorch).
graph_matches() {
    local p=$1 nout=$2 ngrads=$3
    shift 3
    run tcompile run "$@" "$p.json" -w "$p.pt" -i "${p}_inputs.pt" -o "$BATS_TEST_TMPDIR/out.pt" \
        --grads "$BATS_TEST_TMPDIR/g.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${p}_expected.pt"
    assert_success
    assert_output --regexp "[^0-9]$nout tensors? match"
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/g.pt" "${p}_grads.pt"
    assert_success
    assert_output --regexp "[^0-9]$ngrads tensors? match"
}

# outputs_match PREFIX NOUT [OPTION...]: graph_matches without gradients.
outputs_match() {
    local p=$1 nout=$2
    shift 2
    run tcompile run "$@" "$p.json" -w "$p.pt" -i "${p}_inputs.pt" -o "$BATS_TEST_TMPDIR/out.pt"
    assert_success
    run tckpt diff --atol 1e-5 --rtol 1e-4 "$BATS_TEST_TMPDIR/out.pt" "${p}_expected.pt"
    assert_success
    assert_output --regexp "[^0-9]$nout tensors? match"
}

# Installs the build into $BATS_FILE_TMPDIR/dest (for setup_file): sets DEST,
# and PREFIX to the configured prefix, as the installed pkg-config file says.
install_to_dest() {
    export DEST=$BATS_FILE_TMPDIR/dest
    make -s -C "$TN_BUILDDIR" install DESTDIR="$DEST" >"$BATS_FILE_TMPDIR/install.log" 2>&1 ||
        { cat "$BATS_FILE_TMPDIR/install.log" >&2; return 1; }
    PREFIX=$(sed -n 's/^prefix=//p' "$TN_BUILDDIR/tensor.pc")
    export PREFIX
}
