#!/bin/sh
# bench/graph/overhead.sh (make bench-overhead): issue 27's whole-process
# figure, run from the build folder. `tcompile run` of a one-line graph
# (bench/graph/overhead.py: relu(x * 2 + 1)) on a 32 MiB .npy input,
# writing a 32 MiB .npy output, compiled (cached by a first run) and in the
# interpreter: the process's wall time against the compute that `--time`
# reports, the fastest of TN_BENCH_REPEAT processes (default 10) each, and
# their difference, the overhead (start-up, reading the graph, the weights
# and the input, writing the output; the aim is under 50 ms). The same
# work in one python3 process (numpy load, torch, numpy save, interpreter
# start-up included) is the baseline. 1 thread. Needs PyTorch 2.x for the
# export (kept in $TMPDIR/tensorkit-bench-overhead).
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../quick.sh"
quick_tcompile overhead
py=$("$src/tests/torch2-python" 2>/dev/null) || { echo "overhead.sh: needs PyTorch 2.x: skipped"; exit 0; }
cores=$(nproc)
export TN_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=${TMPDIR:-/tmp}/tensorkit-bench-overhead
mkdir -p "$tmp"
export TN_COMPILE_CACHE="$tmp/cache"
rep=${TN_BENCH_REPEAT:-10}
if [ ! -f "$tmp/x.npy" ]; then
    "$py" -W ignore "$src/share/tools/torch2graph.py" "$src/bench/graph/overhead.py:affine" \
        -o "$tmp/m" >/dev/null
    "$py" -c 'import sys, numpy, torch
numpy.save(sys.argv[2], torch.load(sys.argv[1])["x"].numpy())' "$tmp/m_inputs.pt" "$tmp/x.npy"
fi
# The built program itself, not libtool's wrapper script (whose shell start-up
# added 12 ms to every run): the overhead of tcompile as installed.
tc=bin/tcompile/tcompile
if [ -x bin/tcompile/.libs/tcompile ]; then
    tc=bin/tcompile/.libs/tcompile
    export LD_LIBRARY_PATH="$PWD/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
now() { date +%s%N; }
# prints "WALL_MS COMPUTE_MS" of the fastest of $rep processes of tcompile run OPTION...
best() {
    "$tc" run "$tmp/m.json" -w "$tmp/m.pt" -i "x=$tmp/x.npy" -o "$tmp/out.npy" \
        "$@" >/dev/null 2>&1
    i=0 bw= bc=
    while [ $i -lt "$rep" ]; do
        t0=$(now)
        c=$("$tc" run "$tmp/m.json" -w "$tmp/m.pt" -i "x=$tmp/x.npy" \
            -o "$tmp/out.npy" --time "$@" 2>&1 | sed -n 's/.*run took \([0-9.]*\) ms.*/\1/p')
        w=$(( ($(now) - t0) / 1000 ))
        if [ -z "$bw" ] || [ "$w" -lt "$bw" ]; then bw=$w bc=$c; fi
        i=$((i + 1))
    done
    awk -v w="$bw" -v c="$bc" 'BEGIN { printf "%.1f %.1f", w / 1e3, c }'
}
theirs=$("$py" - "$tmp/x.npy" "$tmp/out_py.npy" "$rep" <<'PY'
import subprocess, sys, time
code = ("import sys, numpy, torch\n"
        "torch.set_num_threads(1)\n"
        "x = torch.from_numpy(numpy.load(sys.argv[1]))\n"
        "numpy.save(sys.argv[2], torch.relu(x * 2.0 + 1.0).numpy())\n")
best = 1e30
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, sys.argv[1], sys.argv[2]], check=True)
    best = min(best, time.perf_counter() - t0)
print("%.1f" % (best * 1e3))
PY
)
echo "whole process, 32 MiB .npy in and out, 1 thread, best of $rep"
printf '%-22s %10s %10s %12s\n' mode wall_ms compute_ms overhead_ms
for mode in compiled interpreter; do
    set --
    [ $mode = compiled ] || set -- --interpret
    r=$(best "$@")
    echo "$r" | awk -v m="$mode" '{ printf "%-22s %10.1f %10.1f %12.1f\n", m, $1, $2, $1 - $2 }'
done
printf '%-22s %10s\n' "python3+torch eager" "$theirs"
echo "(aim: overhead under 50 ms; load $(cut -d' ' -f1 /proc/loadavg) on $cores cores)"
