#!/usr/bin/env bats
# trun across hosts: two hosts made of a network namespace each (10.77.0.1
# and 10.77.0.2, joined by a veth pair) with their own host names (a UTS
# namespace per trun), running torchrun's c10d command line with no
# --node-rank (forming, failing, restarting) and an elastic --nnodes 1:2 job.
# Needs root and `ip netns`; skipped with the reason elsewhere.

load helper
load netns

setup() {
    netns_setup
}

teardown() {
    netns_teardown
}

@test "c10d across two hosts, no --node-rank: one world of 2 nodes x 2 workers whose collectives complete" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
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
