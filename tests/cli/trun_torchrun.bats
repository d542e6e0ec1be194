#!/usr/bin/env bats
# trun as torchrun's users meet it: restarts of real PyTorch (2.x and 1.13)
# gloo workers, Python scripts run with Python, a free port by default, a
# new log folder per run, torchrun's flags, and limits checked up front.

load helper

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

# restart_once PYTHON MAJOR: two gloo workers of PYTHON's PyTorch, rank 1
# fails after attempt 0's allreduce; attempt 1 must complete its own.
restart_once() {
    PYTHON_EXEC=$1 run timeout 300 trun --nproc-per-node 2 --max-restarts 1 --grace 1 \
        "$TN_SRCDIR/tests/cli/trun/fail_once.py"
    assert_success
    assert_output --partial "rank 1 failed (exit code 3); restarting the group (1 of 1)"
    assert_line "[0]:attempt 1 allreduce 3 torch $2"
    assert_line "[1]:attempt 1 allreduce 3 torch $2"
    refute_output --partial "connectFullMesh"
}

@test "PyTorch 2.x gloo workers that fail once restart and complete an allreduce" {
    require_torch2
    restart_once "$TORCH2" 2
}

@test "PyTorch 1.13 gloo workers that fail once restart and complete an allreduce" {
    require_torch1
    restart_once /usr/bin/python3 1
}

@test "trun SCRIPT.py runs it with Python (PYTHON_EXEC, else python3); the summary names the script" {
    printf 'import sys\nprint("py", sys.argv[1:])\n' >"$TMP/hello.py"
    run trun --nproc-per-node 2 "$TMP/hello.py" a b
    assert_success
    assert_line "[0]:py ['a', 'b']"
    assert_line "[1]:py ['a', 'b']"
    # PYTHON_EXEC picks the interpreter, as torchrun's does
    printf '#!/bin/sh\necho "via $0 $*"\n' >"$TMP/py"
    chmod +x "$TMP/py"
    PYTHON_EXEC=$TMP/py run trun "$TMP/hello.py"
    assert_success
    assert_line "[0]:via $TMP/py -u $TMP/hello.py"
    # -m MODULE, as python3 -m
    mkdir "$TMP/m" && printf 'print("module ran")\n' >"$TMP/m/mod1.py"
    PYTHONPATH=$TMP/m run trun -m mod1
    assert_success
    assert_line "[0]:module ran"
    # the summary names the script, not the interpreter
    printf 'raise SystemExit(4)\n' >"$TMP/bad.py"
    run trun "$TMP/bad.py"
    assert_failure 4
    assert_line "trun: $TMP/bad.py failed (attempt 1 of 1)"
    # --no-python (or --no_python) runs the program itself
    run trun --no_python sh -c 'echo plain'
    assert_success
    assert_line "[0]:plain"
    PET_NO_PYTHON=1 run trun sh -c 'echo plain'
    assert_success
    assert_line "[0]:plain"
    run trun --no-python -m mod1
    assert_failure 2
    assert_line --index 0 "trun: --no-python and --module do not go together"
}

@test "without --master-port one node gets a free port, its store on loopback" {
    run trun --no-python --nproc-per-node 2 sh -c 'echo "port $MASTER_PORT"'
    assert_success
    local port
    port=$(sed -n 's/^\[0\]:port //p' <<<"$output")
    [ -n "$port" ] && [ "$port" != 29500 ]
    assert_line "[1]:port $port"
    # the store listens on 127.0.0.1 only
    if command -v ss >/dev/null; then
        run trun --no-python sh -c 'ss -ltnH "sport = :$MASTER_PORT" | awk "{print \$4}"'
        assert_success
        assert_line --regexp '^\[0\]:127\.0\.0\.1:[0-9]+$'
    fi
    # several nodes keep torchrun's 29500
    run trun --no-python --nnodes 2 --node-rank 1 sh -c 'echo "port $MASTER_PORT"'
    assert_line "[1]:port 29500"
}

@test "--log-dir: a new ID_XXXXXXXX folder per run; an unusable one fails before any worker" {
    run trun --no-python --rdzv-id job --log-dir "$TMP/logs" sh -c 'echo first'
    assert_success
    run trun --no-python --rdzv-id job --log-dir "$TMP/logs" sh -c 'echo second'
    assert_success
    [ "$(find "$TMP/logs" -mindepth 1 -maxdepth 1 -name 'job_*' | wc -l)" -eq 2 ]
    run sh -c "cat '$TMP'/logs/job_*/attempt_0/0/stdout.log | sort"
    assert_output "first
second"
    : >"$TMP/file"
    run trun --no-python --log-dir "$TMP/file/logs" sh -c "touch '$TMP/ran'"
    assert_failure 2
    assert_output "trun: --log-dir $TMP/file/logs: cannot create it: Not a directory"
    [ ! -e "$TMP/ran" ]
    run trun --no-python --log-dir "$TMP/file" sh -c "touch '$TMP/ran'"
    assert_failure 2
    assert_output "trun: --log-dir $TMP/file: cannot create a folder in it: Not a directory"
    [ ! -e "$TMP/ran" ]
    if [ "$(id -u)" != 0 ]; then # root writes anywhere
        mkdir "$TMP/ro" && chmod 555 "$TMP/ro"
        run trun --no-python --log-dir "$TMP/ro" sh -c "touch '$TMP/ran'"
        assert_failure 2
        assert_output "trun: --log-dir $TMP/ro: cannot create a folder in it: Permission denied"
        [ ! -e "$TMP/ran" ]
    fi
}

@test "torchrun's flags: --start-method, --nproc-per-node cpu|auto|gpu, --no-prefix; one line for an unknown option" {
    run trun --no-python --start-method spawn --start_method fork true
    assert_success
    run trun --no-python --start-method thread true
    assert_failure 2
    assert_line --index 0 "trun: --start-method: 'thread' is not spawn, fork or forkserver"
    local cpus
    cpus=$(getconf _NPROCESSORS_ONLN) # os.cpu_count(), as torchrun; nproc would heed OMP_NUM_THREADS
    run trun --no-python --nproc-per-node cpu sh -c 'echo $LOCAL_WORLD_SIZE'
    assert_line "[0]:$cpus"
    if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
        run trun --no-python --nproc-per-node gpu true
        assert_success
        # as torch.cuda.device_count(): CUDA_VISIBLE_DEVICES narrows them
        CUDA_VISIBLE_DEVICES=0 run trun --no-python --nproc-per-node gpu sh -c 'echo $LOCAL_WORLD_SIZE'
        assert_line "[0]:1"
        CUDA_VISIBLE_DEVICES= run trun --no-python --nproc-per-node gpu true
        assert_failure 2
    else
        run trun --no-python --nproc-per-node auto sh -c 'echo $LOCAL_WORLD_SIZE'
        assert_line "[0]:$cpus"
        run trun --no-python --nproc-per-node gpu true
        assert_failure 2
        assert_line --index 0 "trun: --nproc-per-node gpu: no GPU found (/dev/nvidia0)"
    fi
    run trun --no-python --no-prefix --nproc-per-node 2 sh -c 'echo "r$RANK"'
    assert_success
    assert_line "r0"
    assert_line "r1"
    refute_output --partial "]:"
    run trun --frobnicate true
    assert_failure 2
    assert_output "trun: unknown option '--frobnicate'
Try 'trun --help' for more information."
    run trun --nproc-per-node
    assert_failure 2
    assert_output "trun: option '--nproc-per-node' needs a value
Try 'trun --help' for more information."
}

@test "more workers than the open-file limit allows: exit 2 before any starts" {
    run timeout 60 bash -c "ulimit -n 256; trun --no-python --nproc-per-node 1000 sh -c 'echo ran'"
    assert_failure 2
    assert_output "trun: --nproc-per-node 1000: 1000 workers need 4016 open files; the limit is 256 (ulimit -n)"
    run timeout 60 bash -c "ulimit -n 12; trun --no-python sh -c 'echo ran'"
    assert_failure 2
    assert_output "trun: --nproc-per-node 1: 1 worker needs 20 open files; the limit is 12 (ulimit -n)"
}

@test "a failed write to stdout is exit 2 with a message" {
    run bash -c 'trun --help >/dev/full'
    assert_failure 2
    assert_output "trun: <stdout>: cannot write: No space left on device"
    run bash -c "trun --no-python sh -c 'echo hi' >/dev/full"
    assert_failure 2
    assert_output "trun: <stdout>: cannot write: No space left on device"
    # a worker's own failure keeps its status
    run bash -c "trun --no-python sh -c 'echo hi; exit 3' >/dev/full"
    assert_failure 3
    assert_line "trun: <stdout>: cannot write: No space left on device"
}
