# Bats tests of trun (and through it, lib/dist against real PyTorch).
CLI_TESTS += tests/cli/trun.bats tests/cli/trun_torchrun.bats tests/cli/trun_hosts.bats tests/cli/trun_sched.bats tests/cli/trun_elastic.bats
EXTRA_DIST += tests/cli/netns.bash
EXTRA_DIST += tests/cli/trun/allreduce.py
# A tensorkit worker (tn_dist_init + the tcp process group) for trun.bats and trun_hosts.bats.
check_PROGRAMS += tests/cli/trun/pg_worker
tests_cli_trun_pg_worker_SOURCES = tests/cli/trun/pg_worker.c
tests_cli_trun_pg_worker_LDADD = $(TN_LIB)
EXTRA_DIST += tests/cli/trun/record_fail.py tests/cli/trun/fail_once.py
# A data-parallel training worker (tn_ddp through autograd's hooks).
check_PROGRAMS += tests/cli/trun/ddp_worker
tests_cli_trun_ddp_worker_SOURCES = tests/cli/trun/ddp_worker.c
tests_cli_trun_ddp_worker_LDADD = $(TN_LIB) -lm
