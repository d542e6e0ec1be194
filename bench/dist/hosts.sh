#!/bin/sh
# trun against torchrun across two hosts: network-namespace hosts nsa
# (10.77.0.1, the endpoint) and nsb (10.77.0.2), made by
# tests/cli/netns.bash, c10d rendezvous, both launchers started alike.
#  - launch: 2 hosts x 2 workers (`--no-python true`) from the start of both
#    launchers until both exit (the rendezvous formed the world of 4 and the
#    workers ran); median of 3 runs each, alternating;
#  - dead host: with PyTorch gloo workers allreducing every 50 ms
#    (hosts_worker.py), SIGKILL of nsb's launcher (then of every process of
#    nsb: the whole host), and the times until nsa's workers are gone and
#    until nsa's launcher exits (cap 30 s each).
# Prints both sides and the ratios. Needs root (ip netns) and PyTorch 2.x;
# skips with the reason otherwise. Run from the build folder.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/../quick.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
trun=$PWD/bin/trun/trun
[ -x "$trun" ] || { echo "hosts: build bin/trun/trun first" >&2; exit 1; }
skip() {
    echo "hosts: skipped: $*"
    exit 0
}
TMP=$(mktemp -d)
. "$src/tests/cli/netns.bash"
trap netns_teardown EXIT
BATS_TEST_NUMBER=bench
netns_setup

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# launcher NAME PORT ARGS...: the command line of trun or torchrun
launcher() {
    local name=$1 port=$2
    shift 2
    local common=(--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d
        --rdzv-endpoint "10.77.0.1:$port" --rdzv-id bench --no-python)
    if [ "$name" = trun ]; then
        echo "$trun" "${common[@]}" --rdzv-conf join_timeout=120
    else
        echo "$py" -m torch.distributed.run "${common[@]}" --rdzv-conf join_timeout=120
    fi
}

# launch NAME PORT: ms for both hosts' launchers of `true` to exit (0 each)
launch() {
    local cmd t0 rc=0
    read -ra cmd <<<"$(launcher "$1" "$2")"
    t0=$(now_ms)
    on_host "$NS_B" nsb timeout 120 "${cmd[@]}" true >"$TMP/b.out" 2>&1 &
    on_host "$NS_A" nsa timeout 120 "${cmd[@]}" true >"$TMP/a.out" 2>&1 || rc=1
    wait $! || rc=1
    [ $rc = 0 ] || { echo "hosts: $1 failed:" >&2; cat "$TMP/a.out" "$TMP/b.out" >&2; exit 1; }
    echo $(($(now_ms) - t0))
}

# nsa's workers still running: their first argument is hosts_worker.py
# (the launchers and `timeout` name it later in theirs)
nsa_workers() {
    local p
    for p in $(ip netns pids "$NS_A"); do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n 2p | grep -q 'hosts_worker\.py$' && echo "$p"
    done
}

# killed NAME PORT WHAT: after the SIGKILL of nsb's launcher (WHAT=launcher)
# or of all of nsb's processes (WHAT=host), "W L": ms until nsa's workers
# are gone (W) and until nsa's launcher exits (L), each "over 30000" past
# 30 s (then the leftovers are killed)
killed() {
    local cmd t0 n h ns name f
    read -ra cmd <<<"$(launcher "$1" "$2")"
    for h in "$NS_A:nsa:a" "$NS_B:nsb:b"; do
        IFS=: read -r ns name f <<<"$h"
        on_host "$ns" "$name" timeout 300 sh -c 'echo $$ >"$0"; exec "$@"' "$TMP/$f.pid" \
            "${cmd[@]}" "$py" "$src/bench/dist/hosts_worker.py" loop >"$TMP/$f.out" 2>&1 &
    done
    for ((n = 0; n < 1200; n++)); do # the world formed: every worker said so
        [ "$(cat "$TMP/a.out" "$TMP/b.out" 2>/dev/null | grep -c 'formed$')" = 4 ] && break
        sleep 0.1
    done
    [ "$n" -lt 1200 ] || { echo "hosts: $1's world did not form:" >&2; cat "$TMP/a.out" "$TMP/b.out" >&2; exit 1; }
    local a b tw="over 30000" tl="over 30000" dt
    a=$(cat "$TMP/a.pid")
    b=$(cat "$TMP/b.pid")
    t0=$(now_ms)
    if [ "$3" = launcher ]; then
        kill -9 "$b"
    else
        kill -9 $(ip netns pids "$NS_B")
    fi
    while dt=$(($(now_ms) - t0)) && [ "$dt" -lt 30000 ]; do
        [ "$tw" != "over 30000" ] || [ -n "$(nsa_workers)" ] || tw=$dt
        kill -0 "$a" 2>/dev/null || { tl=$dt; break; }
        sleep 0.02
    done
    [ "$tw" != "over 30000" ] || [ "$tl" = "over 30000" ] || tw=$tl
    echo "$tw:$tl"
    local p
    for ns in "$NS_A" "$NS_B"; do
        for p in $(ip netns pids "$ns"); do kill -9 "$p" 2>/dev/null; done
    done
    wait
}

if [ -n "$quick" ]; then
    launch trun 29401 >/dev/null
    quick_done "2 hosts x 2 workers, c10d: trun"
fi
py=$("$src/tests/torch2-python") || skip "PyTorch 2.x is not installed"
v=$("$py" -c 'import torch; print(torch.__version__)')
median() { sort -n | sed -n 2p; }
t=() o=()
for i in 1 2 3; do
    x=$(launch trun $((29410 + i))) || exit 1
    y=$(launch torchrun $((29420 + i))) || exit 1
    t+=("$x") o+=("$y")
done
lt=$(printf '%s\n' "${t[@]}" | median)
lo=$(printf '%s\n' "${o[@]}" | median)
echo "launch 2 hosts x 2 workers to a formed world (c10d, median of 3): trun $lt ms (${t[*]}), torchrun $lo ms (${o[*]}), PyTorch $v: $(awk -v a="$lt" -v b="$lo" 'BEGIN { printf "%.1f", b / a }')x faster"
ratio() { case "$1 $2" in *over*) echo "n/a" ;; *) awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", b / a }' ;; esac; }
for what in launcher host; do
    x=$(killed trun 29431 "$what") || exit 1
    y=$(killed torchrun 29432 "$what") || exit 1
    IFS=: read -r wt lt <<<"$x"
    IFS=: read -r wo lo <<<"$y"
    echo "dead host (SIGKILL of nsb's $what, gloo workers allreducing): nsa's workers gone after trun $wt ms, torchrun $wo ms ($(ratio "$wt" "$wo")); nsa's launcher exits after trun $lt ms, torchrun $lo ms ($(ratio "$lt" "$lo"))"
done
echo "(two network-namespace hosts on this machine, taken under load: $(cut -d' ' -f1-3 /proc/loadavg))"
