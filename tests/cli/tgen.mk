# Bats tests of tgen.
CLI_TESTS += tests/cli/tgen.bats
CLI_TESTS += tests/cli/ops_torch2.bats
CLI_TESTS += tests/cli/tgen_out.bats
CLI_TESTS += tests/cli/tgen_redispatch.bats
