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
