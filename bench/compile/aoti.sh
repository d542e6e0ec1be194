#!/bin/sh
# bench/compile/aoti.sh: PyTorch's AOTInductor packages (Linear+ReLU, MLP,
# CNN, transformer block) under `tcompile run` (libtensor-aoti, no libtorch)
# against the same packages under PyTorch's aoti_load_package (Python) and
# AOTIModelPackageLoader (C++, bench/compile/aoti_loader.cpp, where the wheel
# ships its headers): run time at 1 and 2 threads and cold start, ratios in
# one run (bench/compile/aoti.py). Run from the build folder; arguments go
# to aoti.py (--models, --threads, --repeat, --starts, --no-cpp; --help).
# Needs PyTorch 2.x and a C++ compiler (the packages are made first when
# tests/fixtures/aoti_packages.py's cache lacks them: minutes each).
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../quick.sh"
quick_tcompile aoti
py=$("$src/tests/torch2-python" 2>/dev/null) || {
    echo "aoti.sh: needs PyTorch 2.x (python3 or tests/torch2-python --install): skipped"
    exit 0
}
TN_AOTI_LIBDIR=${TN_AOTI_LIBDIR:-$PWD/lib/aoti/.libs}
export TN_AOTI_LIBDIR
exec "$py" -W ignore "$src/bench/compile/aoti.py" --tcompile bin/tcompile/tcompile "$@"
