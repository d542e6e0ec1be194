#!/bin/sh
# bench/compile/train.sh: issue 17's figures (bench/compile/train.py), run
# from the build folder: a training step of an MLP, a CNN (batch norm in
# training mode) and a transformer block, each with its loss, through
# tcompile train against PyTorch 2.x eager and torch.compile, 1 and 2
# threads, steps per second and peak RSS. Arguments go to train.py
# (--epochs, --threads, --models mlp,cnn,block, --baseline OTHER/tcompile:
# another build run beside ours, on the same graphs; --cpu: steps per CPU
# second, for a loaded machine, with --threads 1). Needs PyTorch 2.x
# (`python3` or tests/torch2-python).
set -e
. "$(dirname "$0")/../quick.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
[ -x bin/tcompile/tcompile ] || { echo "train.sh: run it from the build folder (make bench-train)" >&2; exit 1; }
# The quick mode checks the script finds its tools; train.py's baselines
# (torch.compile) take half a minute even for one epoch.
quick_done train
py=$("$src/tests/torch2-python" 2>/dev/null) || {
    echo "train.sh: needs PyTorch 2.x (python3 or tests/torch2-python --install): skipped"
    exit 0
}
exec "$py" -W ignore "$src/bench/compile/train.py" --tcompile bin/tcompile/tcompile "$@"
