#!/bin/sh
# bench/run.sh BIN... -- SCRIPT...: what `make bench` runs, from the build
# folder: each benchmark program that runs alone, then each script (from
# the source folder), every one to the end whatever an earlier one did.
# Prints "== NAME" before each and, at the end, the ones that failed; exits
# 1 if any did. TN_BENCH_QUICK=1 runs each with tiny sizes and one repeat
# (tests/cli/bench.bats), to check they run, not to measure.
src=$(cd "$(dirname "$0")/.." && pwd)
failed=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    echo "== $1"
    "./$1" || failed="$failed $1"
    shift
done
[ "$1" = -- ] && shift
for s in "$@"; do
    echo "== $s"
    ${SHELL:-/bin/sh} "$src/$s" || failed="$failed $s"
done
if [ -n "$failed" ]; then
    echo "bench: failed:$failed" >&2
    exit 1
fi
echo "bench: every benchmark ran"
