#!/usr/bin/env bats
# trun: torchrun's environment, rank-prefixed output, failure handling,
# restarts, signals, no worker left behind, and real PyTorch (2.x and 1.13)
# running init_process_group("gloo") and an allreduce under it.

load helper

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    # anything a failed test left: kill it by the pids it recorded
    if [ -f "$TMP/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$TMP/pids"
    fi
    rm -rf "$TMP"
}

# Whether pid is a live (not zombie) process.
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    case "$st" in Z*) return 1 ;; esac
    return 0
}

@test "trun --help and --version" {
    run trun --help
    assert_success
    assert_output --partial "--nproc-per-node"
    run trun --version
    assert_success
    assert_output --partial "trun (tensorkit)"
    run trun --nproc-per-node x true
    assert_failure 2
    run trun
    assert_failure 2
}

@test "workers get torchrun's environment and rank-prefixed output" {
    run trun --no-python --nproc-per-node 2 --master-port 0 --rdzv-id job7 --role trainer sh -c \
        'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $ROLE_RANK $ROLE_NAME $TORCHELASTIC_RUN_ID $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_USE_AGENT_STORE $MASTER_ADDR"; [ "$MASTER_PORT" -gt 0 ]'
    assert_success
    assert_line "[0]:0 0 2 2 0 0 trainer job7 0 True 127.0.0.1"
    assert_line "[1]:1 1 2 2 0 1 trainer job7 0 True 127.0.0.1"
}

@test "PET_ variables give defaults; --local-ranks-filter hides ranks" {
    PET_NPROC_PER_NODE=3 run trun --no-python --master-port 0 --local-ranks-filter 0,2 sh -c 'echo r$RANK'
    assert_success
    assert_line "[0]:r0"
    assert_line "[2]:r2"
    refute_line "[1]:r1"
}

@test "--log-dir keeps per-rank logs; --redirects keeps them off the console" {
    run trun --no-python --nproc-per-node 2 --master-port 0 --rdzv-id j --log-dir "$TMP/logs" -r 1 \
        sh -c 'echo out$RANK; echo err$RANK >&2'
    assert_success
    refute_line "[0]:out0"
    assert_line "[0]:err0"
    [ "$(cat "$TMP"/logs/j_*/attempt_0/1/stdout.log)" = out1 ]
    [ "$(cat "$TMP"/logs/j_*/attempt_0/1/stderr.log)" = err1 ]
}

@test "a worker that exits 3: the others are stopped, trun exits 3 naming it" {
    SECONDS=0
    run trun --no-python --nproc-per-node 3 --master-port 0 sh -c \
        'if [ "$RANK" = 1 ]; then echo "about to fail"; exit 3; fi; sleep 60'
    assert_failure 3
    [ "$SECONDS" -lt 30 ]
    assert_output --partial "rank      : 1 (local_rank: 1)"
    assert_output --partial "exitcode  : 3"
    assert_output --partial "about to fail"
}

@test "a worker killed by a signal: 128+N and the signal's name" {
    run trun --no-python --nproc-per-node 2 --master-port 0 sh -c \
        'if [ "$RANK" = 0 ]; then kill -9 $$; fi; sleep 60'
    assert_failure 137
    assert_output --partial "SIGKILL"
    run trun --no-python --nproc-per-node 1 --master-port 0 sh -c 'kill -SEGV $$'
    assert_failure 139
    assert_output --partial "SIGSEGV"
}

@test "restarts that eventually succeed" {
    run trun --no-python --nproc-per-node 2 --master-port 0 --max-restarts 3 sh -c \
        'if [ "$TORCHELASTIC_RESTART_COUNT" -lt 2 ]; then exit 1; fi; echo "done $TORCHELASTIC_RESTART_COUNT"'
    assert_success
    assert_line "[0]:done 2"
    assert_line "[1]:done 2"
    assert_output --partial "restarting the group (2 of 3)"
    # and restarts that run out, each attempt with a new store on the same port
    run trun --no-python --nproc-per-node 1 --max-restarts 10 sh -c 'exit 5'
    assert_failure 5
    assert_output --partial "attempt 11 of 11"
    refute_output --partial "cannot host the store"
}

@test "SIGTERM to trun reaches the workers" {
    trun --no-python --nproc-per-node 2 --master-port 0 sh -c \
        'trap "echo got-term; exit 0" TERM; echo ready; while :; do sleep 0.1; done' \
        >"$TMP/out" 2>&1 &
    local t=$!
    echo "$t" >>"$TMP/pids"
    for _ in $(seq 100); do [ "$(grep -c ready "$TMP/out")" -ge 2 ] && break; sleep 0.1; done
    kill -TERM "$t"
    local rc=0
    wait "$t" || rc=$?
    [ "$rc" -eq 143 ]
    [ "$(grep -c got-term "$TMP/out")" -eq 2 ]
}

@test "trun killed with SIGKILL leaves no process after a second" {
    trun --no-python --nproc-per-node 2 --master-port 0 sh -c \
        "sleep 300 & echo \$! >>'$TMP/pids'; echo \$\$ >>'$TMP/pids'; wait" \
        >/dev/null 2>&1 &
    local t=$!
    for _ in $(seq 100); do [ "$(wc -l <"$TMP/pids" 2>/dev/null || echo 0)" -ge 4 ] && break; sleep 0.1; done
    [ "$(wc -l <"$TMP/pids")" -ge 4 ]
    kill -9 "$t"
    sleep 1
    local p
    while read -r p; do
        if alive "$p"; then fail "process $p outlived trun"; fi
    done <"$TMP/pids"
}

@test "TN_STORE_TOKEN with Python workers: trun says PyTorch clients cannot send it" {
    TN_STORE_TOKEN=secret PYTHON_EXEC=true run trun --nproc-per-node 1 --master-port 0 job.py
    assert_success
    assert_output --partial "trun: TN_STORE_TOKEN is set, but PyTorch's TCPStore clients cannot send a token"
    TN_STORE_TOKEN=secret run trun --no-python --nproc-per-node 1 --master-port 0 true
    assert_success
    refute_output --partial "TN_STORE_TOKEN"
}

@test "a failed worker's whole group is killed before the restart" {
    run trun --no-python --nproc-per-node 1 --master-port 0 --max-restarts 1 sh -c '
        if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
            sleep 300 >/dev/null 2>&1 &
            echo $! >"$0/child"; echo $! >>"$0/pids"; kill -9 $$
        fi
        st=$(ps -o stat= -p "$(cat "$0/child")")
        case "$st" in "" | Z*) echo "child gone" ;; *) echo "child alive" ;; esac' "$TMP"
    assert_success
    assert_line "[0]:child gone"
}

@test "the guardian forgets a reaped group: a process that reuses its id outlives trun's SIGKILL" {
    unshare -Urpf --mount-proc true 2>/dev/null ||
        skip "a user and PID namespace (unshare -Urpf) is not permitted here"
    cat >"$TMP/ns.sh" <<'EOF'
T=$1
wait_for() { # up to 30 s for the condition "$@"
    local i=0
    until "$@"; do [ $i -lt 300 ] || return 1; sleep 0.1; i=$((i + 1)); done
}
trun --no-python --nproc-per-node 2 --master-port 0 sh -c \
    'if [ "$RANK" = 1 ]; then echo $$ >"$0/p1"; exit 0; fi; exec sleep 300' "$T" >"$T/out" 2>&1 &
t=$!
wait_for test -s "$T/p1" || { echo "rank 1 never ran"; exit 3; }
p=$(cat "$T/p1")
wait_for test ! -e "/proc/$p" || { echo "rank 1 never reaped"; exit 3; }
echo $((p - 1)) >/proc/sys/kernel/ns_last_pid
setsid sleep 300 &
s=$!
[ "$s" = "$p" ] || { echo "pid $p not reused (got $s)"; exit 4; }
kill -9 "$t"
guardian_gone() { ! ps -eo stat=,comm= | awk '$2 == "trun" && $1 !~ /^Z/ { f = 1 } END { exit !f }'; }
wait_for guardian_gone || { echo "the guardian never ended"; exit 3; }
st=$(ps -o stat= -p "$s")
case "$st" in "" | Z*) echo "unrelated group $s killed" ;; *) echo "unrelated group $s alive" ;; esac
kill -9 "$s"
EOF
    run timeout 120 unshare -Urpf --mount-proc bash "$TMP/ns.sh" "$TMP"
    [ "$status" -ne 4 ] || skip "the namespace did not hand out the reused pid: $output"
    assert_success
    assert_output --regexp "unrelated group [0-9]+ alive"
}

@test "PyTorch 2.x under trun: init_process_group(gloo) and an allreduce" {
    require_torch2
    run timeout 300 trun --no-python --nproc-per-node 2 --master-port 0 "$TORCH2" \
        "$TN_SRCDIR/tests/cli/trun/allreduce.py"
    assert_success
    assert_line "[0]:allreduce 3 torch 2"
    assert_line "[1]:allreduce 3 torch 2"
}

@test "PyTorch 1.13 under trun: init_process_group(gloo) and an allreduce" {
    require_torch1
    run timeout 300 trun --no-python --nproc-per-node 2 --master-port 0 /usr/bin/python3 \
        "$TN_SRCDIR/tests/cli/trun/allreduce.py"
    assert_success
    assert_line "[0]:allreduce 3 torch 1"
    assert_line "[1]:allreduce 3 torch 1"
}

@test "under Slurm, the node's rank, the node count and the master come from its variables" {
    SLURM_NODEID=1 SLURM_NNODES=2 SLURM_STEP_NODELIST='node[07-08],x' \
        run trun --no-python --nproc-per-node 2 --master-port 5 sh -c 'echo "$RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR"'
    assert_success
    assert_line "[2]:2 4 1 node07"
    assert_line "[3]:3 4 1 node07"
    # options still win
    OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3 \
        run trun --no-python --nproc-per-node 1 --nnodes 1 --master-port 0 sh -c 'echo "$RANK $WORLD_SIZE"'
    assert_success
    assert_line "[0]:0 1"
}

@test "tensorkit workers under trun: tn_dist_init(env://) and allreduce of every dtype, 2 and 4 ranks" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 "$w"
    assert_success
    assert_line "[0]:rank 0 of 2 ok"
    assert_line "[1]:rank 1 of 2 ok"
    run timeout 120 trun --no-python --nproc-per-node 4 --master-port 0 --max-restarts 1 "$w"
    assert_success
    assert_line "[3]:rank 3 of 4 ok"
}

# every_rank_prints WORKER NPROC LINE: runs the built worker under trun with
# NPROC ranks; each rank R must print LINE with R for "%R".
every_rank_prints() {
    local w="$TN_BUILDDIR/tests/cli/trun/$1"
    need_built "tests/cli/trun/$1"
    run timeout 120 trun --no-python --nproc-per-node "$2" --master-port 0 "$w"
    assert_success
    local r
    for r in $(seq 0 $(($2 - 1))); do
        assert_line "[$r]:${3//%R/$r}"
    done
}

@test "DDP through autograd under trun: the gradients of 2 and 3 ranks equal one process's on the whole batch" {
    every_rank_prints ddp_worker 2 "rank %R ddp ok"
    every_rank_prints ddp_worker 3 "rank %R ddp ok"
}

@test "the summary shows the error file PyTorch's @record wrote" {
    require_torch2
    run timeout 120 trun --no-python --nproc-per-node 2 --master-port 0 --rdzv-id rec --log-dir "$TMP/logs" \
        "$TORCH2" "$TN_SRCDIR/tests/cli/trun/record_fail.py"
    assert_failure 1
    assert_output --partial "rank      : 1 (local_rank: 1)"
    assert_output --partial "error     : ValueError: boom from rank 1"
    [ -f "$TMP"/logs/rec_*/attempt_0/1/error.json ]
}

@test "a hung collective: every rank that joined fails with the same message naming the missing rank" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    run timeout 60 trun --no-python --nproc-per-node 3 --master-port 0 "$w" hang
    assert_failure 1
    assert_line --partial "[0]:rank 0: allreduce #1 failed: rank 2 never arrived (rank "
    # the same verdict on rank 1, whatever rank 1 itself saw
    local m0 m1
    m0=$(printf '%s\n' "${lines[@]}" | sed -n 's/^\[0\]:rank 0: //p')
    m1=$(printf '%s\n' "${lines[@]}" | sed -n 's/^\[1\]:rank 1: //p')
    [ -n "$m0" ] && [ "$m0" = "$m1" ]
}

# A port that was free on 127.0.0.1 a moment ago.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Two truns with the same ARGS as two nodes of one job on this host; prints
# both outputs, each ending with "exit STATUS".
node_pair() {
    (timeout 60 trun --no-python "$@" >"$TMP/node_a" 2>&1; echo "exit $?" >>"$TMP/node_a") &
    timeout 60 trun --no-python "$@" >"$TMP/node_b" 2>&1
    echo "exit $?" >>"$TMP/node_b"
    wait
    cat "$TMP/node_a" "$TMP/node_b"
}

# Two truns as two nodes of one elastic job on this host.
elastic_pair() {
    local port
    port=$(free_port)
    node_pair --nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" \
        --rdzv-id "job$port" --rdzv-conf last_call_timeout=5 "$@"
}

@test "--nnodes 1:2: two truns on one host meet in the rendezvous and run one world of 2" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    run elastic_pair "$w"
    assert_line "[0]:rank 0 of 2 ok"
    assert_line "[1]:rank 1 of 2 ok"
    assert_line "trun: rendezvous round 0: node 0 of 2"
    assert_line "trun: rendezvous round 0: node 1 of 2"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
}

@test "--nnodes 1:2: a worker that fails on one node starts a new round on both" {
    cat >"$TMP/flaky" <<'SH'
#!/bin/sh
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
    [ "$GROUP_RANK" = 1 ] && { sleep 0.5; exit 3; }
    sleep 20
fi
echo "rank $RANK of $WORLD_SIZE round $TORCHELASTIC_RESTART_COUNT"
SH
    chmod +x "$TMP/flaky"
    run elastic_pair --max-restarts 1 "$TMP/flaky"
    assert_line "[0]:rank 0 of 2 round 1"
    assert_line "[1]:rank 1 of 2 round 1"
    assert_line "trun: a worker on another node failed; restarting the group (1 of 1)"
    assert_line "trun: rendezvous round 1: node 1 of 2"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
}

# elastic_restart PYTHON MAJOR: gloo workers of PYTHON's PyTorch on two
# elastic nodes; node 1's fails after round 0's allreduce, and round 1 (a new
# workers' store) must complete its own.
elastic_restart() {
    run elastic_pair --max-restarts 1 --grace 1 "$1" "$TN_SRCDIR/tests/cli/trun/fail_once.py"
    assert_line "[0]:attempt 1 allreduce 3 torch $2"
    assert_line "[1]:attempt 1 allreduce 3 torch $2"
    assert_line "trun: a worker on another node failed; restarting the group (1 of 1)"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
}

@test "--nnodes 1:2 on loopback: the round's workers' store listens on 127.0.0.1" {
    command -v ss >/dev/null || skip "ss (iproute2) is not installed"
    run elastic_pair sh -c 'echo "store $MASTER_ADDR"; ss -ltnH "sport = :$MASTER_PORT" | awk "{print \"listen \" \$4}"'
    assert_line "[0]:store 127.0.0.1"
    assert_line "[1]:store 127.0.0.1"
    assert_line --regexp '^\[[01]\]:listen 127\.0\.0\.1:[0-9]+$'
    refute_line --regexp '^\[[01]\]:listen (0\.0\.0\.0|\*|\[::\]):'
}

@test "--nnodes 1:2: PyTorch 2.x gloo workers that fail once restart on both nodes" {
    require_torch2
    elastic_restart "$TORCH2" 2
}

@test "--nnodes 1:2: PyTorch 1.13 gloo workers that fail once restart on both nodes" {
    require_torch1
    elastic_restart /usr/bin/python3 1
}

@test "--nnodes 1:2: a node that comes after the round closed waits; the group starts again with it" {
    local port
    port=$(free_port)
    local args=(--nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port"
        --rdzv-id "late$port" --rdzv-conf last_call_timeout=0.3)
    # alone, node a's worker waits for company (a world of 1 never ends)
    (timeout 60 trun --no-python "${args[@]}" sh -c 'echo "rank $RANK of $WORLD_SIZE round $TORCHELASTIC_RESTART_COUNT"
        [ "$WORLD_SIZE" = 2 ] || exec sleep 60' >"$TMP/node_a" 2>&1
     echo "exit $?" >>"$TMP/node_a") &
    for _ in $(seq 100); do grep -q 'rank 0 of 1' "$TMP/node_a" 2>/dev/null && break; sleep 0.1; done
    run timeout 60 trun --no-python "${args[@]}" sh -c 'echo "rank $RANK of $WORLD_SIZE round $TORCHELASTIC_RESTART_COUNT"'
    wait
    assert_success
    assert_line "trun: rendezvous round 0 is closed; waiting for the next round"
    assert_line "trun: rendezvous round 1: node 1 of 2"
    assert_line "[1]:rank 1 of 2 round 1"
    run cat "$TMP/node_a"
    assert_line "[0]:rank 0 of 1 round 0"
    assert_line "trun: a node waits to join; restarting the group with it (a membership change, not a restart)"
    assert_line "[0]:rank 0 of 2 round 1"
    assert_line "exit 0"
}

@test "--nnodes 1:2: a node that comes while the round is full waits, and gives up when the job ends" {
    local port
    port=$(free_port)
    local args=(--nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port"
        --rdzv-id "full$port" --rdzv-conf last_call_timeout=5)
    touch "$TMP/go"
    local w='echo "rank $RANK of $WORLD_SIZE"; while [ -e "$1" ]; do sleep 0.1; done'
    (timeout 60 trun --no-python "${args[@]}" sh -c "$w" sh "$TMP/go" >"$TMP/node_a" 2>&1; echo "exit $?" >>"$TMP/node_a") &
    (timeout 60 trun --no-python "${args[@]}" sh -c "$w" sh "$TMP/go" >"$TMP/node_b" 2>&1; echo "exit $?" >>"$TMP/node_b") &
    for _ in $(seq 100); do grep -q ' of 2' "$TMP/node_a" "$TMP/node_b" 2>/dev/null && break; sleep 0.1; done
    (set +e; timeout 60 trun --no-python "${args[@]}" sh -c "$w" sh "$TMP/go" >"$TMP/node_c" 2>&1; echo "exit $?" >>"$TMP/node_c") &
    for _ in $(seq 100); do grep -q 'waiting for the next round' "$TMP/node_c" 2>/dev/null && break; sleep 0.1; done
    # the group of two is not stopped for a third node; it ends its work
    rm "$TMP/go"
    wait
    run cat "$TMP/node_a" "$TMP/node_b" "$TMP/node_c"
    assert_line "trun: rendezvous round 0 is closed; waiting for the next round"
    assert_line "trun: the job ended before this node could join it"
    refute_line --partial "restarting"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    [ "$(grep -c '^exit 1$' <<<"$output")" = 1 ]
}

@test "--nnodes 1:2 with the endpoint given as one of this host's IP addresses: this node hosts the rendezvous" {
    local ip port
    ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -v '^127\.\|:' || true)
    [ -n "$ip" ] || skip "this host has no non-loopback IPv4 address"
    port=$(free_port)
    run timeout 30 trun --no-python --nnodes 1:2 --rdzv-endpoint "$ip:$port" --rdzv-id byip \
        --rdzv-conf last_call_timeout=0.2,join_timeout=5 sh -c 'echo "$RANK of $WORLD_SIZE"'
    assert_success
    assert_line "[0]:0 of 1"
}

@test "--nnodes 2:3 alone: the rendezvous waits for the minimum and says so when it never comes" {
    local port
    port=$(free_port)
    run timeout 30 trun --no-python --nnodes 2:3 --rdzv-endpoint "127.0.0.1:$port" --rdzv-conf join_timeout=1 true
    assert_failure 1
    assert_output --partial "trun: rendezvous round 0: waiting for the other nodes: wait timeout after 1000ms"
    assert_output --partial "; 1 of at least 2 nodes joined ($(hostname)), 1 never came"
    # one node is enough for 1:2 once the last call is over
    run timeout 30 trun --no-python --nnodes 1:2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id solo \
        --rdzv-conf last_call_timeout=0.2 sh -c 'echo "$RANK of $WORLD_SIZE"'
    assert_success
    assert_line "[0]:0 of 1"
}

# torchrun's usual multi-node command line: --rdzv-backend c10d and no
# --node-rank. Without the rendezvous both truns took node rank 0 (and the
# second could not host the store).
c10d_pair() {
    local port
    port=$(free_port)
    node_pair --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
        --rdzv-id "c10d$port" "$@"
}

@test "--rdzv-backend c10d --nnodes 2 without --node-rank: two truns get node ranks 0 and 1 of one world of 4" {
    run c10d_pair sh -c 'echo "rank $RANK of $WORLD_SIZE node $GROUP_RANK of $GROUP_WORLD_SIZE"'
    assert_line "[0]:rank 0 of 4 node 0 of 2"
    assert_line "[1]:rank 1 of 4 node 0 of 2"
    assert_line "[2]:rank 2 of 4 node 1 of 2"
    assert_line "[3]:rank 3 of 4 node 1 of 2"
    assert_line "trun: rendezvous round 0: node 0 of 2"
    assert_line "trun: rendezvous round 0: node 1 of 2"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
}

@test "--rdzv-backend c10d --nnodes 2: C workers on both nodes form the world and reduce over 4 ranks" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    run c10d_pair "$w"
    local r
    for r in 0 1 2 3; do assert_line "[$r]:rank $r of 4 ok"; done
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
}

@test "--rdzv-backend c10d --nnodes 2 alone: the join timeout fails with 1, naming the node that came and how many never came" {
    local port
    port=$(free_port)
    run timeout 30 trun --no-python --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
        --rdzv-id lone --rdzv-conf join_timeout=1 true
    assert_failure 1
    assert_output --partial "trun: rendezvous round 0: waiting for the other nodes: wait timeout after 1000ms"
    assert_output --partial "; 1 of 2 nodes joined ($(hostname)), 1 never came"
    # PET_ variables as torchrun reads them give the same
    PET_RDZV_BACKEND=c10d PET_RDZV_CONF=join_timeout=1 run timeout 30 trun --no-python --nnodes 2 \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id lone true
    assert_failure 1
    assert_output --partial "; 1 of 2 nodes joined ($(hostname)), 1 never came"
}
