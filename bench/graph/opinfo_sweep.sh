#!/bin/sh
# The OpInfo sweep (tests/opinfo/sweep.py, issue 25) with a tcompile process
# per sample (--batch 1, the baseline) against `tcompile run --batch` (up to
# 64 samples a process), on the same OpInfos in the same run: the sweep's
# wall time and the part of it spent running tcompile, and their ratios.
# OPINFO_OPS (default nn.functional.multi_head_attention_forward) and
# OPINFO_MAX (the first N samples of each dtype; default all) choose the set.
# Needs PyTorch 2.x with op_db; skipped (exit 0) without it.
# Run from the build folder; TCOMPILE names the tcompile to time.
set -eu
. "$(dirname "$0")/../quick.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
TCOMPILE=${TCOMPILE:-$PWD/bin/tcompile/tcompile}
case $TCOMPILE in /*) ;; *) TCOMPILE=$PWD/$TCOMPILE ;; esac
py=$("$src/tests/torch2-python") || { echo "opinfo_sweep: skipped: PyTorch 2.x is not installed"; exit 0; }
ops=${OPINFO_OPS:-nn.functional.multi_head_attention_forward}
max=${OPINFO_MAX:-}
[ -z "$quick" ] || { ops=abs; max=1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/opinfo_sweep.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
sweep() { # BATCH: the summary's timing line
    "$py" "$src/tests/opinfo/sweep.py" --tcompile "$TCOMPILE" --ops "$ops" \
        ${max:+--max-samples "$max"} --batch "$1" --json "$W/r$1.json" 2>/dev/null |
        grep 'tcompile processes'
}
echo "opinfo sweep of $ops${max:+ (first $max samples per dtype)}"
one=$(sweep 1)
echo "  a process per sample: $one"
bat=$(sweep 64)
echo "  --batch 64:           $bat"
# the same results either way
cmp -s "$W/r1.json" "$W/r64.json" || { echo "opinfo_sweep: the two sweeps' results differ" >&2; exit 1; }
quick_done opinfo_sweep
echo "$one $bat" | awk '{ for (i = 1; i <= NF; i++) if ($i == "all,") { n++; w[n] = $(i - 3) }
                          else if ($i == "running") r[n] = $(i - 2) }
    END { printf "  speed-up: whole sweep %.2fx (%s s -> %s s), tcompile part %.2fx (%s s -> %s s)\n",
                 w[1] / w[2], w[1], w[2], r[1] / r[2], r[1], r[2] }'
