# Bats tests of tckpt.
CLI_TESTS += tests/cli/tckpt.bats
CLI_TESTS += tests/cli/tckpt_scan.bats
CLI_TESTS += tests/cli/tckpt_scan_headers.bats
CLI_TESTS += tests/cli/tckpt_scan_output.bats
CLI_TESTS += tests/cli/tckpt_scan_policy.bats
CLI_TESTS += tests/cli/tckpt_scan_benign.bats
CLI_TESTS += tests/cli/tckpt_io.bats
CLI_TESTS += tests/cli/tckpt_values.bats
CLI_TESTS += tests/cli/tckpt_dcp.bats
EXTRA_DIST += tests/cli/tckpt-helper.bash
# tn_dcp_save in processes of their own under trun (issue 19)
CLI_TESTS += tests/cli/tckpt_dcp_trun.bats
check_PROGRAMS += tests/cli/tckpt/dcp_worker
tests_cli_tckpt_dcp_worker_SOURCES = tests/cli/tckpt/dcp_worker.c
tests_cli_tckpt_dcp_worker_LDADD = $(TN_LIB)
