# Bats tests of tcompile.
CLI_TESTS += tests/cli/tcompile.bats
