#!/bin/sh
# bench/io/scan_compare.sh [TCKPT [CORPUS]]: scans the adversarial corpus
# (tests/fixtures/scan, see scan_corpus.py) and the benign checkpoints of
# tests/fixtures/io with tckpt scan and with picklescan, modelscan and
# fickling when they are on PATH (pip install picklescan modelscan
# fickling; absent ones are skipped), and prints a Markdown table of which
# files each tool catches, then the time each takes on a 20,000-tensor
# checkpoint and on a 1 GiB one written by PyTorch (python3 with torch;
# skipped without), with each time as a ratio to tckpt's.
#
# Marks: "yes" reported (non-zero exit for a finding), "err" the tool
# failed on the file (an error exit), "-" reported nothing (exit 0).  For
# benign files "-" is the right answer.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
tckpt=${1:-tckpt}
corpus=${2:-$src/tests/fixtures/scan}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tools="tckpt"
for t in picklescan modelscan fickling; do
    command -v "$t" >/dev/null 2>&1 && tools="$tools $t"
done

# run TOOL FILE: prints yes, err or -
run() {
    case $1 in
    tckpt) "$tckpt" scan --policy torch2 "$2" >/dev/null 2>&1; rc=$? ;;
    picklescan) picklescan -p "$2" >/dev/null 2>&1; rc=$? ;;
    modelscan) modelscan -p "$2" >/dev/null 2>&1; rc=$? ;;
    fickling) fickling --check-safety "$2" >/dev/null 2>&1; rc=$? ;;
    esac
    case $1:$rc in
    *:0) echo "-" ;;
    tckpt:1 | picklescan:1 | modelscan:1 | fickling:1) echo yes ;;
    *) echo err ;;
    esac
}

printf '| file | class | expected |'
for t in $tools; do printf ' %s |' "$t"; done
printf '\n|---|---|---|'
for t in $tools; do printf -- '---|'; done
printf '\n'
python3 -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    print(c["file"], c["class"], c["severity"])' "$corpus/manifest.json" >"$tmp/cases"
for f in "$src"/tests/fixtures/io/*_1.pt "$src"/tests/fixtures/io/*_2.pt \
    "$src"/tests/fixtures/io/tensors.npz "$src"/tests/fixtures/io/tensors.safetensors; do
    echo "$f benign clean"
done >>"$tmp/cases"
for t in $tools; do echo 0 >"$tmp/caught_$t"; echo 0 >"$tmp/fp_$t"; echo 0 >"$tmp/err_$t"; done
total=0
benign=0
while read -r file class sev; do
    case $file in /*) path=$file; file=$(basename "$file") ;; *) path=$corpus/$file ;; esac
    printf '| %s | %s | %s |' "$file" "$class" "$sev"
    [ "$sev" = clean ] && benign=$((benign + 1)) || total=$((total + 1))
    for t in $tools; do
        m=$(run "$t" "$path")
        printf ' %s |' "$m"
        if [ "$sev" = clean ]; then
            [ "$m" = "-" ] || echo $(($(cat "$tmp/fp_$t") + 1)) >"$tmp/fp_$t"
        else
            [ "$m" != yes ] || echo $(($(cat "$tmp/caught_$t") + 1)) >"$tmp/caught_$t"
            [ "$m" != err ] || echo $(($(cat "$tmp/err_$t") + 1)) >"$tmp/err_$t"
        fi
    done
    printf '\n'
done <"$tmp/cases"
printf '| **caught (of %d adversarial)** | | |' "$total"
for t in $tools; do printf ' %s |' "$(cat "$tmp/caught_$t")"; done
printf '\n| **failed with an error (adversarial)** | | |'
for t in $tools; do printf ' %s |' "$(cat "$tmp/err_$t")"; done
printf '\n| **false alarms or errors (of %d benign)** | | |' "$benign"
for t in $tools; do printf ' %s |' "$(cat "$tmp/fp_$t")"; done
printf '\n'

# Timing on a 20,000-tensor checkpoint and on a 1 GiB one (256 float32
# tensors of 4 MiB): seconds, and each tool's time as a multiple of tckpt's
# on the same file in the same run (tckpt's should not grow with the bytes).
timing() {
    printf '\n| tool | seconds on %s | time / tckpt'"'"'s | exit |\n|---|---|---|---|\n' "$2"
    base=
    for t in $tools; do
        start=$(date +%s.%N)
        m=$(run "$t" "$1")
        end=$(date +%s.%N)
        s=$(echo "$end - $start" | bc)
        [ -n "$base" ] || base=$s
        printf '| %s | %.3f | %.1f | %s |\n' "$t" "$s" "$(echo "$s / $base" | bc -l)" "$m"
    done
}
tp=
for p in ${TORCH_PYTHON:-} python3 /usr/bin/python3; do
    "$p" -c 'import torch' 2>/dev/null && { tp=$p; break; }
done
if [ -n "$tp" ]; then
    "$tp" -c '
import sys, torch
torch.save({"layer%d.weight" % i: torch.zeros(4) for i in range(20000)}, sys.argv[1])
torch.save({"layer%d.weight" % i: torch.ones(1 << 20) for i in range(256)}, sys.argv[2])' \
        "$tmp/many.pt" "$tmp/big.pt"
    timing "$tmp/many.pt" "a 20,000-tensor checkpoint"
    timing "$tmp/big.pt" "a 1 GiB checkpoint"
fi
