# Bats tests of tckpt.
CLI_TESTS += tests/cli/tckpt.bats
