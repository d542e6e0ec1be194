#!/bin/sh
# tests/fuzz/compile.sh [SECONDS [OUTDIR [BUILDDIR]]]: builds the lib/compile
# fuzz target with clang (libFuzzer, ASan, UBSan): lib/compile's sources and
# the random graph generator (tests/unit/randgraph.c) instrumented, the rest
# of libtensor from BUILDDIR's static library (default: the source tree, as
# CI builds it); fuzzes for SECONDS (default 60), the cache in OUTDIR/cache.
# Each input is a graph compiled by the C compiler ($CC, else cc): a few
# inputs a second, not thousands.
# Exit status: libFuzzer's (non-zero when compiled and interpreted differ,
# or on a crash).
set -eu
secs=${1:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-${TMPDIR:-/tmp}/tensorkit-fuzz-compile}
build=${3:-$src}
lib=$build/.libs/libtensor.a
[ -f "$lib" ] || { echo "compile.sh: no $lib (build libtensor first)"; exit 2; }
mkdir -p "$out/corpus" "$out/cache"
chmod 700 "$out/cache"
# a few seeds: an empty graph, and choices that open every op once
printf '' >"$out/corpus/empty"
i=0
while [ $i -lt 27 ]; do
    printf "\\000\\001\\000\\002\\000\\005\\002\\000\\$(printf %o $i)\\001\\003\\002\\001" >"$out/corpus/op$i"
    i=$((i + 1))
done
printf '#define TN_PKGLIBDIR "/nonexistent"\n#define PACKAGE_VERSION "fuzz"\n' >"$out/config.h"
inc="-I$out -I$build -I$build/lib/include -I$src/lib/include -I$src/lib -I$src/tests/unit"
clang -std=c11 -g -O1 -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
    -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined $inc \
    "$src"/tests/fuzz/fuzz_compile.c "$src"/tests/unit/randgraph.c "$src"/lib/compile/*.c "$lib" \
    -ljansson -lopenblas -lyaml -larchive -lz -lm -lpthread -ldl -o "$out/fuzz_compile"
TN_COMPILE_CACHE=$out/cache exec "$out/fuzz_compile" -max_total_time="$secs" -max_len=256 \
    -len_control=0 -rss_limit_mb=2048 -timeout=120 -artifact_prefix="$out/" "$out/corpus"
