# bench/quick.sh: sourced by the bench scripts. In the quick mode
# (TN_BENCH_QUICK set and not 0: tests/cli/bench.bats runs `make bench` so)
# quick=1: a script runs its own side with tiny sizes and one repeat, then
# stops before its PyTorch baseline (quick_done says so); the figures mean
# nothing, the run checks that every benchmark works.
quick=
case ${TN_BENCH_QUICK:-0} in 0 | '') ;; *) quick=1 ;; esac
# quick_done WHAT: in the quick mode, say that WHAT ran and exit 0
quick_done() {
    [ -z "$quick" ] && return 0
    echo "$1: ran (quick mode: PyTorch baseline not run)"
    exit 0
}
# quick_tcompile WHAT: in the quick mode, for the scripts whose models come
# from PyTorch exports (a minute or more): time `tcompile run` of the
# committed block graph once instead, then quick_done WHAT
quick_tcompile() {
    [ -z "$quick" ] && return 0
    fx=$(cd "$(dirname "$0")/../.." && pwd)/tests/fixtures/graph/torch2
    out=$(mktemp --suffix=.pt "${TMPDIR:-/tmp}/tn-bench-quick.XXXXXX")
    bin/tcompile/tcompile run "$fx/block.json" -w "$fx/block.pt" -i "$fx/block_inputs.pt" \
        -o "$out" --interpret --time --repeat 1 || { rm -f "$out"; exit 1; }
    rm -f "$out"
    quick_done "$1"
}
