#!/bin/sh
# tests/fuzz/run.sh [SECONDS [BUILDDIR]]: builds the lib/io fuzz target with
# clang (libFuzzer, ASan, UBSan) from lib/core and lib/io's sources, seeds
# the corpus with the committed checkpoints, and fuzzes for SECONDS
# (default 60).  Exit status: libFuzzer's (non-zero when it found a crash).
# FUZZ_TARGET=dcp fuzzes a distributed checkpoint's .metadata instead
# (tests/fuzz/fuzz_dcp.c), seeded with the DCP fixtures' .metadata files.
set -eu
secs=${1:-60}
target=${FUZZ_TARGET:-ckpt}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-${TMPDIR:-/tmp}/tensorkit-fuzz-$target}
mkdir -p "$out/corpus" "$out/inc/tensor"
printf '#include <tensor/core.h>\n#include <tensor/io.h>\n' >"$out/inc/tensor/tensor.h"
printf '#define TN_PKGLIBDIR "/nonexistent"\n#define PACKAGE_VERSION "fuzz"\n' >"$out/config.h"
if [ "$target" = dcp ]; then
    cp "$src"/tests/fixtures/dcp/one/.metadata "$out/corpus/one.metadata"
    cp "$src"/tests/fixtures/dcp/two/.metadata "$out/corpus/two.metadata"
    cp "$src"/tests/fixtures/dcp/bad/*.metadata "$out/corpus/"
fi
cp "$src"/tests/fixtures/io/*.pt "$src"/tests/fixtures/io/*.npy "$out/corpus/"
# the scanner's adversarial corpus seeds it too
for f in "$src"/tests/fixtures/scan/* "$src"/tests/fixtures/scan_fuzz/*; do
    case $f in *.json) ;; *) cp "$f" "$out/corpus/scan_$(basename "$f")" ;; esac
done
for f in "$src"/tests/fixtures/io/*.pt; do
    unzip -p "$f" '*/data.pkl' >"$out/corpus/$(basename "$f").pkl" 2>/dev/null || true
done
inc="-I$out/inc -I$out -I$src/lib/include -I$src/lib"
# lib/core and lib/io are built with the target, instrumented for the
# fuzzer and the sanitizers: io depends on core alone (DESIGN.md), so the
# two folders link whole.
io_srcs=$(echo "$src"/lib/io/*.c)
clang -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined $inc \
    -DFUZZ_DCP_DIR="\"$src/tests/fixtures/dcp/two\"" \
    "$src"/tests/fuzz/fuzz_$target.c $io_srcs "$src"/lib/core/*.c \
    -ljansson -lopenblas -larchive -lz -lm -lpthread -ldl -o "$out/fuzz_$target"
exec "$out/fuzz_$target" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 \
    -artifact_prefix="$out/" \
    "$out/corpus"
