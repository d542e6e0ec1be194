#!/bin/sh
# tests/fuzz/graph.sh [SECONDS [OUTDIR [BUILDDIR]]]: builds the lib/graph
# fuzz target with clang (libFuzzer, ASan, UBSan): lib/graph's sources
# instrumented, the rest of libtensor from BUILDDIR's static library
# (default: the source tree, as CI builds it); seeds the corpus with the
# committed graphs and fuzzes for SECONDS (default 60). The target also
# aborts unless lib/graph/json.c and jansson's json_loadb read each input
# alike (both refuse it, or both read equal trees).
# Exit status: libFuzzer's (non-zero when it found a crash).
set -eu
secs=${1:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-${TMPDIR:-/tmp}/tensorkit-fuzz-graph}
build=${3:-$src}
lib=$build/.libs/libtensor.a
[ -f "$lib" ] || { echo "graph.sh: no $lib (build libtensor first)"; exit 2; }
mkdir -p "$out/corpus"
cp "$src"/tests/fixtures/graph/torch1/*.json "$out/corpus/"
for f in "$src"/tests/fixtures/graph/torch2/*.json; do cp "$f" "$out/corpus/t2_$(basename "$f")"; done
printf '#define TN_PKGLIBDIR "/nonexistent"\n#define PACKAGE_VERSION "fuzz"\n' >"$out/config.h"
inc="-I$out -I$build -I$build/lib/include -I$src/lib/include -I$src/lib"
clang -std=c11 -g -O1 -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
    -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined $inc \
    "$src"/tests/fuzz/fuzz_graph.c "$src"/lib/graph/*.c "$lib" \
    -ljansson -lopenblas -lyaml -larchive -lz -lm -lpthread -ldl -o "$out/fuzz_graph"
exec "$out/fuzz_graph" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 \
    -dict="$src/tests/fuzz/json.dict" -artifact_prefix="$out/" "$out/corpus"
