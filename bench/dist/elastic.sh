#!/bin/bash
# Detection of a dead host (issue 24): three hosts made of network
# namespaces on a bridge (10.79.0.1-3, each launcher in its own UTS
# namespace), one launcher per host with `--nnodes 3 --rdzv-backend c10d`
# and one worker each; once every worker runs, every process of host 3 is
# SIGKILLed at once (its launcher, its workers), and the time until both
# other launchers have exited (fewer than 3 nodes are left) is measured, for
# trun and torchrun (python3's PyTorch 2.x) in the same run:
#   idle:  the workers sleep (a worker between steps, or one that waits on
#          something else than its peers): only the launchers can notice;
#   gloo:  the workers run gloo all_reduce in a loop, so a dead peer makes
#          them fail, and the launchers learn it from their workers.
# A launcher that has not acted within the cap (60 s; 20 s with
# TN_BENCH_QUICK) is reported as such. Needs root and `ip netns`; says why
# and exits 0 elsewhere. Run from the build folder; the machine is shared,
# so figures are taken under load.
set -e
. "$(dirname "$0")/../quick.sh"
cap=60
[ -n "${quick:-}" ] && cap=20
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    echo "dead host detection: skipped (needs root, ip and unshare for network namespaces)"
    exit 0
fi
python3 -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2"))' 2>/dev/null || {
    echo "dead host detection: skipped (python3 has no PyTorch 2.x for torchrun)"
    exit 0
}
T=$(mktemp -d)
pre="tnD$$"
cleanup() {
    local n p
    for n in br a b c; do
        for p in $(ip netns pids "${pre}$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "${pre}$n" 2>/dev/null || true
        rm -rf "/etc/netns/${pre}$n"
    done
    rm -rf "$T"
}
trap cleanup EXIT
ip netns add "${pre}br" || { echo "dead host detection: skipped (ip netns add is not permitted)"; exit 0; }
ip -n "${pre}br" link add br0 type bridge
ip -n "${pre}br" link set br0 up
i=1
for h in a b c; do
    ip netns add "$pre$h"
    ip link add "x$$$h" type veth peer name "y$$$h"
    ip link set "x$$$h" netns "$pre$h"
    ip link set "y$$$h" netns "${pre}br"
    ip -n "${pre}br" link set "y$$$h" master br0 up
    ip -n "$pre$h" addr add "10.79.0.$i/24" dev "x$$$h"
    ip -n "$pre$h" link set lo up
    ip -n "$pre$h" link set "x$$$h" up
    # the hosts' names for torchrun, which resolves its own (ip netns exec
    # mounts /etc/netns/NS/hosts on /etc/hosts)
    mkdir -p "/etc/netns/$pre$h"
    printf '127.0.0.1 localhost\n10.79.0.1 nsa\n10.79.0.2 nsb\n10.79.0.3 nsc\n' >"/etc/netns/$pre$h/hosts"
    i=$((i + 1))
done
cat >"$T/gloo.py" <<'PY'
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
x = torch.ones(4)
print("ready", flush=True)
end = time.time() + 300
while time.time() < end:
    dist.all_reduce(x)
    time.sleep(0.05)
PY
idle='echo ready; exec sleep 300'

# one LAUNCHER KIND ID PORT: the three hosts' launchers, the endpoint at
# PORT (each run its own: a store of the last run may still hold its port);
# prints the seconds from
# the SIGKILL of host c until both others exited, or "none" past the cap.
one() {
    local launcher=$1 kind=$2 id=$3 port=$4 h
    local -a cmd
    if [ "$launcher" = trun ]; then
        cmd=(bin/trun/trun)
    else
        cmd=(python3 -m torch.distributed.run)
    fi
    cmd+=(--nnodes 3 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "10.79.0.1:$port"
        --rdzv-id "$id" --max-restarts 0)
    if [ "$kind" = idle ]; then
        cmd+=(--no-python sh -c "$idle")
    else
        cmd+=("$T/gloo.py")
    fi
    rm -f "$T"/out_* "$T"/end_*
    for h in a b c; do
        (ip netns exec "$pre$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "ns$h" \
            timeout $((cap + 240)) "${cmd[@]}" >"$T/out_$h" 2>&1 || true
            date +%s.%N >"$T/end_$h") 2>/dev/null &
    done
    for ((i = 0; i < 1800; i++)); do # torchrun may take a minute under load
        [ "$(cat "$T"/out_* 2>/dev/null | grep -c ready)" = 3 ] && break
        sleep 0.1
    done
    if [ "$(cat "$T"/out_* 2>/dev/null | grep -c ready)" != 3 ]; then
        echo "$launcher: the workers did not all start:" >&2
        tail -n 5 "$T"/out_* >&2
        echo failed
        return
    fi
    sleep 0.5
    local t0
    t0=$(date +%s.%N)
    for p in $(ip netns pids "${pre}c"); do kill -9 "$p" 2>/dev/null || true; done
    for ((i = 0; i < cap * 10; i++)); do
        [ -e "$T/end_a" ] && [ -e "$T/end_b" ] && break
        sleep 0.1
    done
    if [ -e "$T/end_a" ] && [ -e "$T/end_b" ]; then
        awk -v t0="$t0" -v a="$(cat "$T/end_a")" -v b="$(cat "$T/end_b")" \
            'BEGIN { printf "%.2f\n", (a > b ? a : b) - t0 }'
    else
        echo none
    fi
    for h in a b c; do
        for p in $(ip netns pids "$pre$h"); do kill -9 "$p" 2>/dev/null || true; done
    done
    wait
}

[ -n "$quick" ] && quick_done "dead host, idle workers: survivors out after trun $(one trun idle tquick 29400) s"
port=29400
for kind in idle gloo; do
    ours=$(one trun "$kind" "t$kind" $((port += 1)))
    theirs=$(one torchrun "$kind" "p$kind" $((port += 1)))
    awk -v k="$kind" -v o="$ours" -v t="$theirs" -v cap="$cap" 'BEGIN {
        printf "dead host, %s workers: survivors out after trun %s s, torchrun %s", k, o,
            t == "none" ? "(not within " cap " s)" : t " s"
        if (o + 0 > 0 && t + 0 >= o + 0) printf ": %.1fx faster", t / o
        else if (o + 0 > 0 && t + 0 > 0) printf ": %.1fx slower", o / t
        else if (o + 0 > 0 && t == "none") printf ": more than %.0fx faster", cap / o
        printf "\n" }'
done
