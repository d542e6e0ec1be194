#!/usr/bin/env bats
# trun under the schedulers: Slurm's srun and Open MPI's mpirun give the
# node rank, the node count and the endpoint with no flags (the variables set
# as the schedulers set them, a real mpirun where one is installed); on two
# network-namespace hosts (netns.bash) where permitted.

load helper
load netns

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    netns_teardown
}

# sched_env VAR=VALUE... -- TRUN_ARGS...: runs trun as node rank 1 with the
# variables (node 1 hosts nothing) and its one worker printing its rank,
# the world's size, its node's rank and the endpoint.
sched_env() {
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    run env "${vars[@]}" trun --no-python --no-prefix --master-port 5 "$@" \
        sh -c 'echo "$RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR"'
}

@test "Slurm: the first host of SLURM_JOB_NODELIST's hostlist expressions is the endpoint" {
    local list want
    while read -r list want; do
        sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_JOB_NODELIST="$list" --
        assert_success
        assert_line "1 2 1 $want"
    done <<'EOF'
node[01-04,07],gpu5 node01
gpu5,node[01-04,07] gpu5
node[07,01-04] node07
rack[2-3]n[1-8]-ib rack2n1-ib
a-b[009-010] a-b009
single single
EOF
    # the step's list first (srun inside an allocation), then the job's
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_JOB_NODELIST='job[1-9]' SLURM_STEP_NODELIST='step[3-4]' --
    assert_line "1 2 1 step3"
    # the step's node count before the job's
    sched_env SLURM_NODEID=2 SLURM_NNODES=8 SLURM_STEP_NUM_NODES=3 SLURM_JOB_NODELIST='n[1-8]' --
    assert_line "2 3 2 n1"
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_STEP_NODELIST='node[x-y]' --
    assert_failure 2
    assert_line "trun: SLURM_STEP_NODELIST: 'node[x-y]' names no first host"
}

@test "Slurm: more than one trun per node, or node 0 away from the first node, is refused at once" {
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_NTASKS=4 SLURM_JOB_NODELIST='n[1-2]' --
    assert_failure 2
    assert_line "trun: under Slurm, 4 tasks on 2 nodes: trun starts one node's workers, so run one trun per node (srun --ntasks-per-node=1)"
    run env SLURM_NODEID=0 SLURM_NNODES=2 SLURM_JOB_NODELIST='n[1-2]' SLURMD_NODENAME=n2 \
        trun --no-python true
    assert_failure 2
    assert_line "trun: the endpoint n1 is Slurm's first node, but node rank 0 runs on n2: give --master-addr (node rank 0's host)"
}

@test "Slurm and Open MPI: options and PET_ variables win over the schedulers' variables" {
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_JOB_NODELIST='n[1-2]' -- --node-rank 0 --nnodes 3 --master-addr far
    assert_line "0 3 0 far"
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_JOB_NODELIST='n[1-2]' PET_MASTER_ADDR=pet --
    assert_line "1 2 1 pet"
    sched_env OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 OMPI_MCA_orte_hnp_uri='1.0;tcp://10.9.8.7:1' -- --rdzv-endpoint there:5
    assert_line "2 4 2 there"
    # an explicit node rank lifts the check of one trun a node
    sched_env SLURM_NODEID=1 SLURM_NNODES=2 SLURM_NTASKS=4 SLURM_JOB_NODELIST='n[1-2]' -- --node-rank 1
    assert_line "1 2 1 n1"
    sched_env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_orte_hnp_uri='1.0;tcp://10.1.2.3:1' -- --node-rank 1
    assert_line "1 2 1 10.1.2.3"
    # an explicit address also lifts the checks of the scheduler's endpoint
    run env SLURM_NODEID=0 SLURM_NNODES=2 SLURM_NTASKS=2 SLURM_JOB_NODELIST='n[1-2]' SLURMD_NODENAME=n2 \
        trun --no-python --master-addr 127.0.0.1 --nnodes 1 true
    assert_success
}

@test "Open MPI: OMPI_COMM_WORLD_RANK and _SIZE give the node, OMPI_MCA_orte_hnp_uri the launching host as the endpoint" {
    sched_env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_SIZE=1 \
        OMPI_MCA_orte_hnp_uri='2044985344.0;tcp://10.1.2.3,192.168.5.6:52063;tcp6://[fd00::2]:39535' --
    assert_success
    assert_line "1 3 1 10.1.2.3"
    sched_env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_MCA_orte_hnp_uri='7.0;tcp6://[fd00::2]:39535' --
    assert_line "1 2 1 fd00::2"
    # several nodes and no launching host: refused, not 127.0.0.1
    sched_env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 --
    assert_failure 2
    assert_line "trun: under Open MPI with several nodes, give --master-addr (node rank 0's host): OMPI_MCA_orte_hnp_uri names no launching host"
    sched_env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_orte_hnp_uri='1.0;tcp://10.1.2.3:1' --
    assert_failure 2
    assert_line "trun: under Open MPI, 2 truns run on this node (OMPI_COMM_WORLD_LOCAL_SIZE): trun starts one node's workers, so run one per node (mpirun -npernode 1)"
    # node 0 on another host than mpirun's (192.0.2.1 is TEST-NET: no interface has it)
    run env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_MCA_orte_hnp_uri='1.0;tcp://192.0.2.1:1' \
        trun --no-python true
    assert_failure 2
    assert_line "trun: the endpoint 192.0.2.1 is Open MPI's launching host, but node rank 0 runs on $(hostname): give --master-addr (node rank 0's host)"
}

# MPIRUN: mpirun with root's consent when root; skips without Open MPI's.
require_mpirun() {
    command -v mpirun >/dev/null || skip "mpirun is not installed"
    mpirun --version 2>/dev/null | grep -q "Open MPI" || skip "mpirun is not Open MPI's"
    MPIRUN=(mpirun)
    [ "$(id -u)" != 0 ] || MPIRUN+=(--allow-run-as-root)
}

@test "a real mpirun on this host: trun takes its node and the endpoint from it; two truns on one node are refused" {
    require_mpirun
    run timeout 60 "${MPIRUN[@]}" -np 1 trun --nproc-per-node 2 --no-python \
        sh -c 'echo "$RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR ${OMPI_MCA_orte_hnp_uri#*tcp://}"'
    assert_success
    # MASTER_ADDR is the address in mpirun's URI
    assert_line --regexp '^\[0\]:0 2 0 ([0-9.]+) \1[,:]'
    assert_line --regexp '^\[1\]:1 2 0 ([0-9.]+) \1[,:]'
    run timeout 60 "${MPIRUN[@]}" --oversubscribe -np 2 trun --no-python true
    assert_failure
    assert_output --partial "trun: under Open MPI, 2 truns run on this node (OMPI_COMM_WORLD_LOCAL_SIZE)"
}

@test "a real mpirun -npernode 1 across two hosts: 2 nodes x 2 tensorkit workers form one world with no trun flag" {
    require_mpirun
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    netns_setup
    # mpirun reaches the other host through its rsh agent: this script
    cat >"$TMP/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case \$1 in 10.77.0.1) ns=$NS_A name=nsa ;; 10.77.0.2) ns=$NS_B name=nsb ;; *) exit 1 ;; esac
shift
exec ip netns exec "\$ns" unshare --uts --mount sh -c 'mount --bind "$TMP/hosts" /etc/hosts && hostname "\$0" && eval "\$1"' "\$name" "\$*"
EOF
    chmod +x "$TMP/agent"
    run on_host "$NS_A" nsa timeout 60 "${MPIRUN[@]}" --mca plm_rsh_agent "$TMP/agent" \
        --host 10.77.0.1,10.77.0.2 -npernode 1 trun --nproc-per-node 2 --no-python \
        sh -c 'echo "node $GROUP_RANK on $(hostname) store $MASTER_ADDR"; exec "$0"' "$w"
    assert_success
    local r
    for r in 0 1 2 3; do assert_line "[$r]:rank $r of 4 ok"; done
    assert_line "[0]:node 0 on nsa store 10.77.0.1"
    assert_line "[3]:node 1 on nsb store 10.77.0.1"
}

# slurm_node NS NAME NODEID TRUN_ARGS...: trun on host NS as srun starts it
# on node NODEID of node[01-02] (one task a node).
slurm_node() {
    local ns=$1 name=$2 id=$3
    shift 3
    SLURM_JOB_NODELIST='node[01-02]' SLURM_STEP_NODELIST='node[01-02]' SLURM_NNODES=2 \
        SLURM_STEP_NUM_NODES=2 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 SLURM_NODEID=$id \
        SLURM_PROCID=$id SLURM_LOCALID=0 SLURMD_NODENAME="node0$((id + 1))" node "$ns" "$name" "$@"
}

@test "srun's variables across two hosts: static and c10d worlds of 2 x 2 tensorkit workers with no trun flag" {
    local w="$TN_BUILDDIR/tests/cli/trun/pg_worker"
    need_built tests/cli/trun/pg_worker
    netns_setup
    local args=(--nproc-per-node 2 sh -c 'echo "node $GROUP_RANK on $(hostname) store $MASTER_ADDR"; exec "$0"' "$w")
    slurm_node "$NS_B" nsb 1 "${args[@]}" &
    slurm_node "$NS_A" nsa 0 "${args[@]}"
    wait
    run cat "$TMP/nsa" "$TMP/nsb"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    local r
    for r in 0 1 2 3; do assert_line "[$r]:rank $r of 4 ok"; done
    assert_line "[0]:node 0 on nsa store node01"
    assert_line "[2]:node 1 on nsb store node01"
    # torchrun's c10d command line under srun: the endpoint is node01 too
    slurm_node "$NS_B" nsb 1 --rdzv-backend c10d --rdzv-conf join_timeout=30 "${args[@]}" &
    slurm_node "$NS_A" nsa 0 --rdzv-backend c10d --rdzv-conf join_timeout=30 "${args[@]}"
    wait
    run cat "$TMP/nsa" "$TMP/nsb"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    for r in 0 1 2 3; do assert_line "[$r]:rank $r of 4 ok"; done
    assert_output --partial "trun: rendezvous round 0: node 1 of 2"
}

@test "trun's store out of file descriptors says so once on trun's stderr, and again when it accepts clients again" {
    command -v prlimit >/dev/null || skip "prlimit (util-linux) is not installed"
    # the worker lowers trun's limit of open files to what it has open and
    # 2 more, holds 20 connections to the store, closes them and connects
    # again until a connection stays open (not shed: read times out, > 128)
    run timeout 60 trun --no-python --master-port 0 bash -c '
        n=$(ls /proc/$PPID/fd | wc -l)
        prlimit --pid $PPID --nofile=$((n + 2)):$((n + 2)) || exit 9
        for i in $(seq 20); do exec {fd}<>"/dev/tcp/127.0.0.1/$MASTER_PORT" || exit 8; done
        sleep 0.5
        for f in /proc/$$/fd/*; do f=${f##*/}; [ "$f" -gt 9 ] && eval "exec $f>&-"; done
        sleep 0.3
        for i in $(seq 100); do
            exec {fd}<>"/dev/tcp/127.0.0.1/$MASTER_PORT" || exit 7
            read -r -t 0.2 -u $fd x
            [ $? -gt 128 ] && echo done && exit 0
            eval "exec $fd>&-"
        done'
    assert_success
    assert_line "[0]:done"
    assert_line --regexp "^trun: store: out of file descriptors \(EMFILE: the process's limit, [0-9]+ clients, ulimit -n [0-9]+\): new clients are shed until some close$"
    assert_line --regexp '^trun: store: accepting clients again \([1-9][0-9]* shed so far\)$'
    [ "$(grep -c 'out of file descriptors' <<<"$output")" = 1 ]
}

# torchrun_node NS NAME ARGS...: torchrun (PyTorch 2.x) on host NS, as node() runs trun.
torchrun_node() {
    local ns=$1 name=$2
    shift 2
    local rc=0
    on_host "$ns" "$name" timeout 90 "$TORCH2" -m torch.distributed.run --no-python "$@" \
        >"$TMP/$name" 2>&1 || rc=$?
    echo "exit $rc" >>"$TMP/$name"
}

# Both sides of a mixed job refused, naming why: trun on $1's output, torchrun on $2's.
mixed_refused() {
    run cat "$TMP/$1"
    assert_line "exit 1"
    assert_line "trun: a torchrun node is in this c10d job: the store holds torchrun's rendezvous state (torch.rendezvous.mixed); trun's rendezvous is not torchrun's, so they cannot form one world: launch every node with trun, or every node with torchrun"
    run cat "$TMP/$2"
    assert_line "exit 1"
    assert_output --partial "ValueError: invalid literal for int() with base 10: \"trun: a trun node is in this c10d job (run id mixed): trun's rendezvous is not torchrun's, so they cannot form one world; launch every node with torchrun, or every node with trun\""
}

@test "a trun node and a torchrun node in one c10d job, either hosting the store: both refuse, naming why" {
    require_torch2
    netns_setup
    local args=(--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 10.77.0.1:29400
        --rdzv-id mixed --rdzv-conf join_timeout=60 true)
    # trun on the endpoint's host hosts the store, torchrun joins it
    node "$NS_A" nsa "${args[@]}" &
    torchrun_node "$NS_B" nsb "${args[@]}"
    wait
    mixed_refused nsa nsb
    # torchrun hosts it, trun joins
    torchrun_node "$NS_A" nsa "${args[@]}" &
    node "$NS_B" nsb "${args[@]}"
    wait
    mixed_refused nsb nsa
}

@test "PyTorch gloo workers across two hosts: 2 nodes x 2 workers allreduce, static and c10d rendezvous" {
    require_torch2
    netns_setup
    local py=("$TORCH2" "$TN_SRCDIR/tests/cli/trun/allreduce.py")
    node "$NS_B" nsb --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.77.0.1 --master-port 29500 "${py[@]}" &
    node "$NS_A" nsa --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.77.0.1 --master-port 29500 "${py[@]}"
    wait
    run cat "$TMP/nsa" "$TMP/nsb"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    local r
    for r in 0 1 2 3; do assert_line "[$r]:allreduce 10 torch 2"; done
    run host_pair --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 10.77.0.1 \
        --rdzv-id gloo --rdzv-conf join_timeout=60 "${py[@]}"
    [ "$(grep -c '^exit 0$' <<<"$output")" = 2 ]
    for r in 0 1 2 3; do assert_line "[$r]:allreduce 10 torch 2"; done
}
