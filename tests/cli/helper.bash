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

# PyTorch picks kernels by the CPU (AVX-512, AVX2 or plain), and some of
# their roundings (float32 randn, arange) differ between them; tensorkit
# follows the AVX2 ones, so every live oracle is pinned to those.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    export ATEN_CPU_CAPABILITY=avx2
fi

# Skips the test unless Debian's PyTorch 1.13 is importable.
require_torch1() {
    /usr/bin/python3 -c 'import torch' 2>/dev/null || skip "Debian's python3-torch is not installed"
}

# Sets TORCH2 to a Python with PyTorch 2.x, or skips the test.
require_torch2() {
    TORCH2=$("$TN_SRCDIR/tests/torch2-python") || skip "PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)"
}
