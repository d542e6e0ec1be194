# Bats tests of tgen.
CLI_TESTS += tests/cli/tgen.bats
