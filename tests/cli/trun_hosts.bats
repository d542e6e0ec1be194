#!/usr/bin/env bats
# trun across hosts: two hosts made of a network namespace each (10.77.0.1
# and 10.77.0.2, joined by a veth pair) with their own host names (a UTS
# namespace per trun), running torchrun's c10d command line with no
# --node-rank (forming, failing, restarting) and an elastic --nnodes 1:2 job.
# Needs root and `ip netns`; skipped with the reason elsewhere.

load helper

setup() {
    TMP=$(mktemp -d)
    command -v ip >/dev/null || skip "ip (iproute2) is not installed"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    [ "$(id -u)" = 0 ] || skip "network namespaces need root"
    NS_A="tnA$$_$BATS_TEST_NUMBER"
    NS_B="tnB$$_$BATS_TEST_NUMBER"
    ip netns add "$NS_A" 2>"$TMP/err" || skip "ip netns add is not permitted: $(cat "$TMP/err")"
    ip netns add "$NS_B" || skip "ip netns add is not permitted"
    ip netns exec "$NS_A" unshare --uts true 2>"$TMP/err" ||
        skip "ip netns exec with unshare --uts is not permitted: $(cat "$TMP/err")"
    local va="va$$" vb="vb$$"
    ip link add "$va" type veth peer name "$vb" 2>"$TMP/err" ||
        skip "veth pairs are not permitted: $(cat "$TMP/err")"
    ip link set "$va" netns "$NS_A"
    ip link set "$vb" netns "$NS_B"
    ip -n "$NS_A" addr add 10.77.0.1/24 dev "$va"
    ip -n "$NS_B" addr add 10.77.0.2/24 dev "$vb"
    local ns
    for ns in "$NS_A" "$NS_B"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$NS_A" link set "$va" up
    ip -n "$NS_B" link set "$vb" up
}

teardown() {
    local ns p
    for ns in "${NS_A:-}" "${NS_B:-}"; do
        [ -n "$ns" ] || continue
        # whatever a failed test left running on the host (ours only: the
        # namespace is this test's)
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$TMP"
}

# on_host NS NAME COMMAND...: runs COMMAND on host NS, whose name is NAME.
on_host() {
    local ns=$1 name=$2
    shift 2
    ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

# The job's trun on host NS (NAME); its output and "exit STATUS" go to $TMP/NAME.
node() {
    local ns=$1 name=$2
    shift 2
    local rc=0
    on_host "$ns" "$name" timeout 60 trun --no-python "$@" >"$TMP/$name" 2>&1 || rc=$?
    echo "exit $rc" >>"$TMP/$name"
}

# The job's trun on both hosts, nsb's first (it waits for the endpoint's
# owner to host the store); prints both outputs.
host_pair() {
    node "$NS_B" nsb "$@" &
    node "$NS_A" nsa "$@"
    wait
    cat "$TMP/nsa" "$TMP/nsb"
}

@test "c10d across two hosts, no --node-rank: one world of 2 nodes x 2 workers whose collectives complete" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    [ -x "$w" ] || skip "pg_worker is not built (make check builds it)"
    # no port: torchrun's c10d default, 29400
    local args=(--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 10.77.0.1
        --rdzv-id hosts --rdzv-conf join_timeout=30
        sh -c 'echo "rank $RANK of $WORLD_SIZE node $GROUP_RANK on $(hostname)"; exec "$0"' "$w")
    run host_pair "${args[@]}"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    local r
    for r in 0 1 2 3; do assert_line "[$r]:rank $r of 4 ok"; done
    # each host's two workers share a node rank, the two hosts differ
    local a b
    a=$(sed -n 's/^\[[0-3]\]:rank [0-3] of 4 node \([01]\) on nsa$/\1/p' "$TMP/nsa" | sort -u)
    b=$(sed -n 's/^\[[0-3]\]:rank [0-3] of 4 node \([01]\) on nsb$/\1/p' "$TMP/nsb" | sort -u)
    [ "$(wc -l <<<"$a")" = 1 ] && [ "$(wc -l <<<"$b")" = 1 ]
    [ "$(printf '%s\n%s\n' "$a" "$b" | sort | tr -d '\n')" = 01 ]
}

@test "c10d across hosts: the endpoint's host alone fails at the join timeout, naming itself and the node that never came" {
    node "$NS_A" nsa --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.77.0.1:29400 --rdzv-id alone \
        --rdzv-conf join_timeout=1 true
    run cat "$TMP/nsa"
    assert_line "exit 1"
    assert_output --partial "; 1 of 2 nodes joined (nsa), 1 never came"
}

@test "c10d across hosts: an endpoint that never answers fails at the join timeout, not the kernel's 2 minutes" {
    # 10.77.0.3 is nobody: its frames go out on the link to a MAC no host
    # has, so no SYN gets an answer (no reset, no unreachable)
    ip -n "$NS_B" neigh add 10.77.0.3 lladdr 02:00:00:00:77:03 dev "vb$$" nud permanent
    node "$NS_B" nsb --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.77.0.3:29400 --rdzv-id far \
        --rdzv-conf join_timeout=1 true
    run cat "$TMP/nsb"
    assert_line "exit 2"
    assert_output --partial "trun: cannot reach the rendezvous store: TCPStore client: cannot connect to 10.77.0.3:29400 within 1000 ms"
}

@test "c10d across hosts: a worker that fails on one host restarts the group on both, in a new round" {
    # round 0: nsb's workers fail, nsa's would sleep on; round 1 ends well
    local w='[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && { [ "$(hostname)" = nsb ] && exit 3; exec sleep 30; }
        echo "round $TORCHELASTIC_RESTART_COUNT rank $RANK of $WORLD_SIZE"'
    local args=(--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 10.77.0.1:29400
        --rdzv-id again --rdzv-conf join_timeout=30 --max-restarts 1 --grace 1 sh -c "$w")
    run host_pair "${args[@]}"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    local r
    for r in 0 1 2 3; do assert_line "[$r]:round 1 rank $r of 4"; done
    run cat "$TMP/nsa"
    assert_line "trun: a worker on another node failed; restarting the group (1 of 1)"
}

@test "--nnodes 1:2 across hosts with the endpoint given as an IP: the endpoint's host hosts, both form one world" {
    local args=(--nnodes 1:2 --rdzv-endpoint 10.77.0.1:29400 --rdzv-id elastic
        --rdzv-conf join_timeout=30,last_call_timeout=5 sh -c 'echo "rank $RANK of $WORLD_SIZE on $(hostname)"')
    run host_pair "${args[@]}"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    assert_line --regexp '^\[[01]\]:rank [01] of 2 on nsa$'
    assert_line --regexp '^\[[01]\]:rank [01] of 2 on nsb$'
    [ "$(sed -n 's/^\[\([01]\)\]:rank \1 of 2 on ns[ab]$/\1/p' <<<"$output" | sort | tr -d '\n')" = 01 ]
}
