#!/bin/sh
# bench/compile/train.sh: issue 17's figures (bench/compile/train.py), run
# from the build folder: a training step of an MLP with its loss through
# tcompile train against PyTorch 2.x eager and torch.compile, 1 and 2
# threads, steps per second and peak RSS. Arguments go to train.py
# (--epochs, --threads). Needs PyTorch 2.x (`python3` or tests/torch2-python).
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$src/tests/torch2-python" 2>/dev/null) || {
    echo "train.sh: needs PyTorch 2.x (python3 or tests/torch2-python --install): skipped"
    exit 0
}
exec "$py" -W ignore "$src/bench/compile/train.py" --tcompile bin/tcompile/tcompile "$@"
