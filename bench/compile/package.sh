#!/bin/sh
# bench/compile/package.sh: issue 18's figures for tcompile build, run from
# the build folder: the cold start of a C program that loads a built
# library and runs one batch (tests/cli/tcompile/model_main, whole process,
# the fastest of 20) against `python3 -c 'import torch'` alone (the fastest
# of 5), and what a deployment needs on disk: the library, libtensor and
# OpenBLAS against libtorch's libraries.
set -e
. "$(dirname "$0")/../quick.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
fx=$src/tests/fixtures/graph/torch2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s tests/cli/tcompile/model_main >/dev/null
main=tests/cli/tcompile/model_main
# the real binary, not libtool's wrapper script
[ -x tests/cli/tcompile/.libs/model_main ] && main=tests/cli/tcompile/.libs/model_main
lib=$(dirname "$(readlink -f .libs/libtensor.so)")
export LD_LIBRARY_PATH=$lib
ms() { echo $(( ($(date +%s%N) - $1) / 1000 )); }
best() { # N CMD...: the fastest of N runs, microseconds
    n=$1; shift; b=
    for _ in $(seq "$n"); do
        t=$(date +%s%N); "$@" >/dev/null 2>&1; d=$(ms "$t")
        [ -z "$b" ] || [ "$d" -lt "$b" ] && b=$d
    done
    echo "$b"
}
py=$("$src/tests/torch2-python" 2>/dev/null) || py=/usr/bin/python3
[ -n "$quick" ] && tv= || tv=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) || tv=
models="mlp cnn block" runs=20
if [ -n "$quick" ]; then models=mlp runs=1; fi
if [ -n "$tv" ]; then
    imp=$(best 5 "$py" -c 'import torch')
    echo "python3 -c 'import torch' (PyTorch $tv): $(echo "$imp" | awk '{printf "%.1f", $1/1000}') ms"
fi
for m in $models; do
    bin/tcompile/tcompile build "$fx/$m.json" -w "$fx/$m.pt" -i "$fx/${m}_inputs.pt" -o "$tmp/$m.so"
    t=$(best "$runs" env CC=/bin/false TN_COMPILE_CACHE="$tmp/none" "$main" "$tmp/$m.so" model "$fx/${m}_inputs.pt" "$tmp/o.npz")
    line="$m: load the library and run one batch, whole process: $(echo "$t" | awk '{printf "%.2f", $1/1000}') ms"
    [ -n "$tv" ] && line="$line; import torch / this: $(echo "$imp $t" | awk '{printf "%.0f", $1/$2}')x"
    echo "$line"
done
[ -z "$quick" ] || quick_done "package, mlp"
blas=$(ldd .libs/libtensor.so | awk '/blas/ {print $3}' | head -1)
ours=$(du -bL "$tmp/block.so" .libs/libtensor.so ${blas:+"$blas"} | awk '{s+=$1} END {printf "%.1f", s/1048576}')
echo "on disk, the block's library + libtensor + OpenBLAS: $ours MiB"
if [ -n "$tv" ]; then
    tl=$("$py" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
    theirs=$(du -sbL "$tl" | awk '{printf "%.1f", $1/1048576}')
    echo "on disk, libtorch's libraries ($tl): $theirs MiB; ratio $(echo "$theirs $ours" | awk '{printf "%.0f", $1/$2}')x"
fi
