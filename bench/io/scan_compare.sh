#!/bin/sh
# bench/io/scan_compare.sh [TCKPT [CORPUS]]: scans the adversarial corpus
# (tests/fixtures/scan, see scan_corpus.py, under --policy torch2), the
# proven twins of tests/fixtures/scan_twins.py, and the benign checkpoints of
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
# the tools run in the temporary folder (fickling writes a report where it runs)
case $tckpt in */*) tckpt=$(cd "$(dirname "$tckpt")" && pwd)/$(basename "$tckpt") ;; esac
case $corpus in /*) ;; *) corpus=$(pwd)/$corpus ;; esac
cd "$tmp"

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

# The benign files and malicious twins of tests/fixtures/scan_twins.py (each
# proven by the loader that would read it): per class and in all, malicious
# files reported (exit 1), passed as clean (exit 0) and failed with another
# exit, and benign files flagged (any exit but 0; * marks a class whose
# benign files are non-canonical on purpose, which tckpt reports), for tckpt
# under its default policy (pickle) and under torch2, and each peer.
if python3 -c 'import numpy' 2>/dev/null &&
    python3 "$src/tests/fixtures/scan_twins.py" "$tmp/twins" >/dev/null 2>&1; then
    python3 - "$tmp/twins" "$tckpt" $tools <<'PY'
import collections, concurrent.futures, json, subprocess, sys
d, tckpt, peers = sys.argv[1], sys.argv[2], sys.argv[4:]
cmds = {"tckpt": [tckpt, "scan"], "tckpt torch2": [tckpt, "scan", "--policy", "torch2"],
        "picklescan": ["picklescan", "-p"], "modelscan": ["modelscan", "-p"],
        "fickling": ["fickling", "--check-safety"]}
tools = ["tckpt", "tckpt torch2"] + peers
cases = json.load(open(d + "/verdicts.json"))
def rc(tool, c):
    try:
        return subprocess.run(cmds[tool] + [d + "/" + c["file"]], capture_output=True,
                              timeout=120).returncode
    except subprocess.TimeoutExpired:
        return -1
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    got = {(t, c["file"]): ex.submit(rc, t, c) for t in tools for c in cases}
got = {k: v.result() for k, v in got.items()}
classes = sorted({c["class"] for c in cases})
def counts(t, sel):
    n = collections.Counter()
    for c in sel:
        r = got[(t, c["file"])]
        if c["verdict"] == "malicious":
            n["mal"] += 1
            n["rep" if r == 1 else "clean" if r == 0 else "err"] += 1
        else:
            n["ben"] += 1
            n["fp"] += r != 0
    return n
print("\n| class: malicious reported, benign flagged |" + "".join(" %s |" % t for t in tools))
print("|---|" + "---|" * len(tools))
for k in classes:
    sel = [c for c in cases if c["class"] == k]
    star = "*" if any(c["verdict"] == "benign" and not c["expect_clean"] for c in sel) else ""
    row = ""
    for t in tools:
        n = counts(t, sel)
        row += " %d/%d, %d/%d |" % (n["rep"], n["mal"], n["fp"], n["ben"])
    print("| %s%s |%s" % (k, star, row))
tot = {t: counts(t, cases) for t in tools}
first = tot["tckpt"]
print("\n| all: %d malicious, %d benign |" % (first["mal"], first["ben"])
      + "".join(" %s |" % t for t in tools))
print("|---|" + "---|" * len(tools))
for key, label in (("rep", "malicious reported (exit 1)"),
                   ("clean", "malicious passed as clean (exit 0)"),
                   ("err", "malicious: another exit"), ("fp", "benign flagged")):
    print("| %s |" % label + "".join(" %d |" % tot[t][key] for t in tools))
PY
fi

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
