#!/bin/sh
# bench/models/zoo.sh (make bench-zoo): issue 23's figures, run from the
# build folder. The models of the zoo test (tests/models/zoo.py: torchvision
# and transformers from small configs, the real all-MiniLM-L6-v2), exported
# as a user would, timed with `tcompile run` (compiled; the compile is done
# by a first run and cached) and `tcompile run --interpret` against PyTorch
# 2.x eager on the same module and inputs (torch.no_grad), at 1 and 2
# threads; the best of TN_BENCH_REPEAT runs (default 10) each. Prints ms
# and the ratios to eager (below 1: ours is faster). Outputs are compared
# with PyTorch's first (a mismatch is reported, not timed). Needs PyTorch
# 2.x with torchvision and transformers (a model whose library is missing is
# left out); the exports (about two minutes) are kept in
# $TMPDIR/tensorkit-bench-zoo. TN_BENCH_MODELS='resnet18 bert' picks models.
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../quick.sh"
quick_tcompile zoo
py=$("$src/tests/torch2-python" 2>/dev/null) || { echo "zoo.sh: needs PyTorch 2.x: skipped"; exit 0; }
tmp=${TMPDIR:-/tmp}/tensorkit-bench-zoo
mkdir -p "$tmp"
export TN_COMPILE_CACHE="$tmp/cache"
rep=${TN_BENCH_REPEAT:-10}
models=${TN_BENCH_MODELS:-$("$py" "$src/tests/models/zoo.py" list | cut -d' ' -f1)}
todo=
for m in $models; do [ -f "$tmp/${m}_expected.pt" ] || todo="$todo $m"; done
[ -z "$todo" ] || "$py" -W ignore "$src/tests/models/zoo.py" "$tmp" $todo >"$tmp/export.log" 2>&1 ||
    { cat "$tmp/export.log"; exit 1; }

# ms of `tcompile run OPTION...` of model $1 (the fastest of $rep runs)
ours() {
    m=$1
    shift
    bin/tcompile/tcompile run "$@" "$tmp/$m.json" -w "$tmp/$m.pt" -i "$tmp/${m}_inputs.pt" \
        -o "$tmp/out.pt" --time --repeat "$rep" 2>&1 | sed -n 's/.*run took \([0-9.]*\) ms.*/\1/p'
}
ratio() { echo "$1 / $2" | bc -l | awk '{printf "%.2f", $1}'; }

printf '%-20s %3s %10s %10s %10s %8s %8s\n' model thr eager_ms ours_ms interp_ms ours/e interp/e
for th in 1 2; do
    # PyTorch eager, every model in one process
    "$py" -W ignore - "$src" "$th" "$rep" $models >"$tmp/eager.txt" 2>"$tmp/eager.log" <<'PY'
import sys, time, torch
sys.path.insert(0, sys.argv[1] + "/tests/models")
import zoo
torch.set_num_threads(int(sys.argv[2]))
for name in sys.argv[4:]:
    try:
        m, inputs = zoo.MODELS[name][0]()
    except ImportError:
        continue
    m.eval()
    best = 1e30
    with torch.no_grad():
        m(*inputs)
        for _ in range(int(sys.argv[3])):
            t0 = time.perf_counter()
            m(*inputs)
            best = min(best, time.perf_counter() - t0)
    print(name, "%.3f" % (best * 1e3))
PY
    for m in $models; do
        [ -f "$tmp/$m.json" ] || continue
        e=$(sed -n "s/^$m //p" "$tmp/eager.txt")
        TN_NUM_THREADS=$th bin/tcompile/tcompile run "$tmp/$m.json" -w "$tmp/$m.pt" \
            -i "$tmp/${m}_inputs.pt" -o "$tmp/out.pt" >/dev/null 2>&1 || true
        if ! bin/tckpt/tckpt diff --atol 1e-4 --rtol 1e-3 "$tmp/out.pt" "$tmp/${m}_expected.pt" \
            >/dev/null 2>&1; then
            echo "$m: tcompile run's outputs differ from PyTorch's (not timed)"
            continue
        fi
        o=$(TN_NUM_THREADS=$th ours "$m")
        i=$(TN_NUM_THREADS=$th ours "$m" --interpret)
        printf '%-20s %3s %10s %10s %10s %8s %8s\n' "$m" "$th" "$e" "$o" "$i" \
            "$(ratio "$o" "$e")" "$(ratio "$i" "$e")"
    done
done
echo "(best of $rep runs each; load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores)"
