#!/bin/sh
# bench/compile/compile.sh: issue 16's figures (bench/compile/compile.py),
# run from the build folder: tcompile run (and --interpret once it exists)
# against PyTorch 2.x eager and torch.compile at 1 and 2 threads, cold
# compile and warm start, on a transformer block, an MLP, a small CNN and a
# memory-bound chain. About two minutes, most of it torch.compile's cold
# compiles. Arguments go to compile.py (--models, --threads, --no-inductor,
# --keep; --help). Needs PyTorch 2.x (`python3` or tests/torch2-python).
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../quick.sh"
quick_tcompile compile
py=$("$src/tests/torch2-python" 2>/dev/null) || {
    echo "compile.sh: needs PyTorch 2.x (python3 or tests/torch2-python --install): skipped"
    exit 0
}
exec "$py" -W ignore "$src/bench/compile/compile.py" --tcompile bin/tcompile/tcompile "$@"
