#!/bin/sh
# bench/graph/graph.sh: issue 10's figures, run from the build folder.
#  1. start-up: reading and checking a 5,001-node graph that torch.export
#     wrote (bench/graph/models.py:chain), ours (tn_graph_parse +
#     tn_graph_check) against PyTorch 2.x's own deserializer
#     (torch._export.serde.serialize.deserialize) on the same JSON;
#  2. tcompile run of the transformer block (batch 8, sequence 128, width
#     256) against PyTorch 2.x eager on the same module, same threads (1,
#     then all cores), in turns, the best of TN_BENCH_ROUNDS rounds each.
# Prints milliseconds and ratios (below 1: ours is faster). Needs PyTorch
# 2.x (`python3` or tests/torch2-python); the exports take about a minute.
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../quick.sh"
[ -z "$quick" ] || bench/graph/bench_graph "$src/tests/fixtures/graph/torch2/block.json" 1
quick_tcompile graph
py=$("$src/tests/torch2-python" 2>/dev/null) || py=python3
"$py" -c 'import torch.export' 2>/dev/null || { echo "graph.sh: needs PyTorch 2.x: skipped"; exit 0; }
n=$(nproc)
export TN_NUM_THREADS=$n
tmp=${TMPDIR:-/tmp}/tensorkit-bench-graph
mkdir -p "$tmp"
[ -f "$tmp/chain.json" ] || "$py" -W ignore "$src/share/tools/torch2graph.py" \
    "$src/bench/graph/models.py:chain" -o "$tmp/chain"
[ -f "$tmp/block.json" ] || "$py" -W ignore "$src/share/tools/torch2graph.py" \
    "$src/bench/graph/models.py:block" -o "$tmp/block"

bench/graph/bench_graph "$tmp/chain.json" 10
ours=$(bench/graph/bench_graph --ms "$tmp/chain.json" 10)
theirs=$("$py" -W ignore - "$tmp/chain.json" <<'PY'
import sys, time
from torch._export.serde.serialize import deserialize, SerializedArtifact
text = open(sys.argv[1], "rb").read()
best = 1e30
for _ in range(3):
    t0 = time.perf_counter()
    # the graph alone: no weights, constants or example inputs to unpickle
    deserialize(SerializedArtifact(text, b"", b"", b""))
    best = min(best, time.perf_counter() - t0)
print("%.3f" % (best * 1e3))
PY
) || theirs=
if [ -n "$theirs" ]; then
    echo "start-up, 5,001 nodes: ours $ours ms, torch.export deserialize $theirs ms, ratio $(echo "$ours / $theirs" | bc -l | cut -c1-5)"
else
    echo "start-up, 5,001 nodes: ours $ours ms (PyTorch's deserializer did not run)"
fi

# the block at 1 thread and at all of them, ours and PyTorch's in turns
# (TN_BENCH_ROUNDS, default 3): the best of each counts, the machine being
# shared
rounds=${TN_BENCH_ROUNDS:-3}
for th in $(echo 1 "$n" | tr ' ' '\n' | sort -nu); do
    ours= theirs=
    for r in $(seq "$rounds"); do
        out=$(TN_NUM_THREADS=$th bin/tcompile/tcompile run "$tmp/block.json" -w "$tmp/block.pt" \
            -i "$tmp/block_inputs.pt" -o "$tmp/block_out.pt" --time --repeat 20 2>&1)
        o=$(echo "$out" | sed -n 's/.*run took \([0-9.]*\) ms.*/\1/p')
        bin/tckpt/tckpt diff --atol 1e-4 --rtol 1e-3 "$tmp/block_out.pt" "$tmp/block_expected.pt" \
            >/dev/null || echo "graph.sh: the block's outputs differ from PyTorch's"
        t=$("$py" -W ignore - "$src" "$th" <<'PY'
import sys, time, torch
sys.path.insert(0, sys.argv[1] + "/bench/graph")
import models
torch.set_num_threads(int(sys.argv[2]))
m, (x,) = models.block()
best = 1e30
with torch.no_grad():
    for _ in range(20):
        t0 = time.perf_counter()
        m(x)
        best = min(best, time.perf_counter() - t0)
print("%.3f" % (best * 1e3))
PY
)
        ours=$(echo "$o $ours" | tr ' ' '\n' | grep . | sort -n | head -1)
        theirs=$(echo "$t $theirs" | tr ' ' '\n' | grep . | sort -n | head -1)
    done
    echo "transformer block 8x128x256, $th thread(s): tcompile run $ours ms, PyTorch eager $theirs ms, ratio $(echo "$ours / $theirs" | bc -l | cut -c1-5) (best of $rounds rounds, load $(cut -d' ' -f1 /proc/loadavg))"
done
